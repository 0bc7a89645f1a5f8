"""Does the fluid plant's packet noise hold beyond drop-tail? Link fill and idle, kernel vs fluid.

The fluid plant's packet noise (plant/fluid/kernel.py, ``_packet_noise``) acts in every queue a
policy makes: the trivial TBF's FIFO, a queue policy's HTB leaves (each drained at its own rate,
its idle lent to the other leaves) and the FIFO behind a discipline (ABC: the noise meets the most
active aggregate's threshold and its extra drops are that aggregate's). This measures, on the
``testbed`` scenario at R* = half of B_max, each bottleneck under its trivial-like condition:

- ``trivial``: the trivial TBF (u = B_max - R*) in front of the drop-tail FIFO (the reference,
  where the noise was calibrated, constants.ARRIVAL_IDC);
- ``htb``: the shaper open, the bottleneck an HTB with two leaves as a queue policy makes them in a
  Science DMZ (policies.queue.jenks.serve_target): the DTN's leaf at rate = ceil = R*, the campus
  leaf at B_max - R* borrowing up to B_max, each with the scenario's buffer (ours: a fixed split, so
  the run measures the leaves, not the Jenks separator);
- ``abc``: the shaper open, ABC in front of the FIFO with the ``abc`` policy's configuration and
  reference rates (R*, B_max - R*);
- ``ffs``: the shaper open, FFS-C100 in front of the FIFO with the ``ffs`` policy's configuration
  and fairness-matrix column (R*, B_max - R*).

Per bottleneck: the DTN's fill (its rate / R*), the link's utilisation and idle (1 - utilisation),
after a warm-up, on the netns testbed (real kernel TCP; ``--plant netns`` needs root, run it under
``flock /tmp/scidmz-root.lock`` on a quiet machine) and on the fluid plant with and without the
noise (``--plant fluid``, several seeds). A starved kernel run is marked and its figures are kept
out (``manage.starvation``). Prints one JSON object.

    python benchmarks/noise_footing.py --plant fluid [--seeds 4]
    flock /tmp/scidmz-root.lock python benchmarks/noise_footing.py --plant netns [--measure 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

BOTTLENECKS = ("trivial", "htb", "abc", "ffs")
TARGET_FRAC = 0.5


def _split(sc: Any, target: float) -> tuple[list[float], list[float], list[float]]:
    """The two leaves (DTN, campus): buffers (bytes), rates and ceilings (bit/s)."""
    c = sc.capacity
    return [float(sc.buffer_bytes)] * 2, [target, c - target], [target, c]


def _discipline(sc: Any, bottleneck: str, target: float) -> tuple[Any, np.ndarray]:
    """The discipline policy's configuration and its per-aggregate weights at ``target``."""
    from scidmz.policies import make_policy

    pol = make_policy(bottleneck)
    return pol.configure(sc), pol.weights(sc, np.array([target]))[0]


def _summary(y: np.ndarray, sc: Any, target: float) -> dict[str, float]:
    util = (y[:, 0] + y[:, 1]) / sc.capacity
    return {"fill": float(y[:, 0].mean() / target), "utilization": float(util.mean()),
            "idle": float(1.0 - util.mean()), "campus_bps": float(y[:, 1].mean())}


def run_fluid(sc: Any, bottleneck: str, noise: bool, seeds: int, warmup: int, measure: int) -> dict[str, Any]:
    """One batch of ``seeds`` instances; the per-seed figures and their mean."""
    from scidmz.plant.fluid.plant import FluidPlant

    target = TARGET_FRAC * sc.capacity
    scs = [sc.replace(seed=sc.seed + i) for i in range(seeds)]
    plant = FluidPlant(sc, scenarios=scs, packet_noise=noise)
    u = sc.u_max
    if bottleneck == "trivial":
        u = sc.trivial_rate(target)
    elif bottleneck == "htb":
        buf, rate, ceil = _split(sc, target)
        fq = np.ones(plant.shape.n_flows, dtype=np.int64)
        fq[: plant.shape.n_dtn] = 0
        plant.set_queues(buf, rate, fq, ceil)
    else:
        cfg, w = _discipline(sc, bottleneck, target)
        plant.set_discipline(cfg)
    plant.reset()
    if bottleneck in ("abc", "ffs"):
        plant.set_discipline_weights(w)
    ys = np.array([plant.step(np.full(seeds, u)).y for _ in range(warmup + measure)])[warmup:]
    per = [_summary(ys[:, i], sc, target) for i in range(seeds)]
    return {"plant": "fluid", "bottleneck": bottleneck, "noise": noise, "seeds": seeds,
            **{k: float(np.mean([p[k] for p in per])) for k in per[0]},
            "fill_per_seed": [p["fill"] for p in per]}


def run_netns(sc: Any, bottleneck: str, warmup: int, measure: int) -> dict[str, Any]:
    """One episode on the netns testbed (torn down on every exit path by the plant)."""
    from scidmz.plant.base import make_plant
    from scidmz.plant.netns.manage.starvation import run_verdict
    from scidmz.plant.netns.spec import DTN_NET
    from scidmz.queueconfig import FlowMatch, FlowRule, QueueConfig, QueueSpec

    target = TARGET_FRAC * sc.capacity
    u = sc.trivial_rate(target) if bottleneck == "trivial" else sc.u_max
    ys, flags = [], []
    with make_plant("netns", sc, telemetry="kernel") as plant:
        if bottleneck in ("abc", "ffs"):
            cfg, w = _discipline(sc, bottleneck, target)
            plant.set_discipline(cfg)
        plant.reset(sc.seed)
        if bottleneck == "htb":
            buf, rate, ceil = _split(sc, target)
            queues = tuple(QueueSpec(qid=i + 1, rate=rate[i], ceil=ceil[i], buffer=int(buf[i]),
                                     label=("dtn", "campus")[i]) for i in range(2))
            plant.apply_queues(QueueConfig(capacity=sc.capacity, queues=queues, default=2,
                                           rules=(FlowRule(FlowMatch(src=DTN_NET), 1),)).validate())
        elif bottleneck in ("abc", "ffs"):
            plant.set_discipline_weights(w)
        for k in range(warmup + measure):
            ys.append(plant.step(u).y[0])
            if k >= warmup:
                flags.append(bool(plant.info.get("starved")))
    refused, n_starved = run_verdict(flags)
    row: dict[str, Any] = {"plant": "netns", "bottleneck": bottleneck, "noise": None, "periods": len(flags),
                           "starved_periods": n_starved, "starved": bool(refused)}
    if not refused:
        row.update(_summary(np.array(ys)[warmup:], sc, target))
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plant", choices=("fluid", "netns"), required=True)
    ap.add_argument("--bottlenecks", default=",".join(BOTTLENECKS), help="comma-separated: trivial,htb,abc,ffs")
    ap.add_argument("--seeds", type=int, default=4, help="fluid instances per bottleneck and noise setting")
    ap.add_argument("--warmup", type=int, default=15, help="periods (s) before the measurement")
    ap.add_argument("--measure", type=int, default=20, help="periods (s) measured")
    a = ap.parse_args()
    chosen = [b for b in a.bottlenecks.split(",") if b]
    bad = [b for b in chosen if b not in BOTTLENECKS]
    if bad or not chosen:
        print(f"noise_footing: unknown bottleneck {bad[0] if bad else '(none)'!r} (choose from "
              f"{', '.join(BOTTLENECKS)})", file=sys.stderr)
        return 2
    if a.seeds < 1 or a.warmup < 0 or a.measure < 1:
        print("noise_footing: --seeds and --measure must be >= 1, --warmup >= 0", file=sys.stderr)
        return 2
    from scidmz.scenario import load_scenario

    sc = load_scenario("testbed")
    t0 = time.time()
    if a.plant == "fluid":
        rows = [run_fluid(sc, b, n, a.seeds, a.warmup, a.measure) for b in chosen for n in (True, False)]
    else:
        rows = [run_netns(sc, b, a.warmup, a.measure) for b in chosen]
    print(json.dumps({"benchmark": "noise_footing", "scenario": "testbed", "plant": a.plant,
                      "target_frac": TARGET_FRAC, "warmup_s": a.warmup, "measure_s": a.measure,
                      "results": rows, "wall_s": time.time() - t0}))
    return 1 if any(r.get("starved") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
