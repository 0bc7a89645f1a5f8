"""Sim-to-real: the same scenarios on the fluid plant and on the netns testbed, side by side.

1. Two flows of different RTT sharing the bottleneck with no shaping
   (u = B_max): one DTN stream at 100 ms and one campus flow at 10 ms, both
   CUBIC, then both BBR. Reported: each flow's mean rate over the steady
   part and the DTN's share of the delivered bytes.
2. The static map R_DTN(u): the ``testbed`` scenario (10 campus hosts, 8 DTN
   streams, 100 Mbit/s) held at u for a few periods each, u from 5 % to
   100 % of B_max; the DTN's mean rate over the last periods of each hold.

The gap (testbed - fluid) is the measure of how far tuning on the simulator
can be trusted. Needs root for the testbed part. Prints one JSON object.

    python benchmarks/sim_vs_testbed.py [--quick] [--hold 12] [--two-flow-duration 40]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from scidmz.plant.base import make_plant
from scidmz.scenario import Scenario, load_scenario


def _two_flow_scenario(cca: str) -> Scenario:
    return load_scenario("testbed").replace(
        dtn={"streams": 1, "rtt": 0.100, "cca": cca, "transfer": None},
        campus={"hosts": 1, "rtt": 0.010, "cca": cca, "traffic": "long", "flows_per_host": 1},
    )


def _run_constant(kind: str, sc: Scenario, u: float, steps: int, **kw) -> np.ndarray:
    with make_plant(kind, sc, **kw) as plant:
        plant.reset(sc.seed)
        return np.array([plant.step(u).y[0] for _ in range(steps)])


def two_flows(kind: str, cca: str, duration: float, warmup: float) -> dict:
    sc = _two_flow_scenario(cca)
    steps = int(duration / sc.period)
    skip = int(warmup / sc.period)
    kw = {"telemetry": "kernel"} if kind == "netns" else {}
    y = _run_constant(kind, sc, sc.u_max, steps, **kw)[skip:]
    r_dtn, r_campus = float(y[:, 0].mean()), float(y[:, 1].mean())
    return {
        "rate_dtn": r_dtn,
        "rate_campus": r_campus,
        "share_dtn": r_dtn / (r_dtn + r_campus) if r_dtn + r_campus > 0 else None,
        "utilization": (r_dtn + r_campus) / sc.capacity,
        "rtt_dtn": float(y[:, 2].mean()),
        "rtt_campus": float(y[:, 3].mean()),
    }


def static_map_fluid(sc: Scenario, fracs: list[float], hold: int, avg: int) -> list[float]:
    us = np.array(fracs) * sc.u_max
    with make_plant("fluid", sc, batch=len(us)) as plant:
        plant.reset(sc.seed)
        ys = np.array([plant.step(us).y for _ in range(hold)])  # (hold, B, 7)
    return [float(v) for v in ys[-avg:, :, 0].mean(axis=0)]


def static_map_testbed(sc: Scenario, fracs: list[float], hold: int, avg: int) -> list[float]:
    """One episode, u held for ``hold`` periods at each value (a staircase, high to low)."""
    out: dict[float, float] = {}
    order = sorted(fracs, reverse=True)
    with make_plant("netns", sc, telemetry="kernel") as plant:
        plant.reset(sc.seed)
        for _ in range(3):  # let the DTN's 100 ms-RTT streams leave slow start first
            plant.step(sc.u_max)
        for f in order:
            ys = np.array([plant.step(f * sc.u_max).y[0] for _ in range(hold)])
            out[f] = float(ys[-avg:, 0].mean())
    return [out[f] for f in fracs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short holds (a smoke run, noisier)")
    ap.add_argument("--hold", type=int, default=12, help="periods per u value of the static map")
    ap.add_argument("--two-flow-duration", type=float, default=40.0, help="s per two-flow run")
    ap.add_argument("--no-testbed", action="store_true", help="fluid only (no root needed)")
    a = ap.parse_args()
    hold = 6 if a.quick else a.hold
    avg = max(hold // 2, 2)
    dur = 20.0 if a.quick else a.two_flow_duration
    warm = dur / 2
    fracs = [0.05, 0.2, 0.4, 0.6, 0.8, 1.0]
    testbed = not a.no_testbed and os.geteuid() == 0
    t0 = time.time()
    res: dict = {"benchmark": "sim_vs_testbed", "testbed": testbed, "two_flows": {}, "static_map": {}}
    for cca in ("cubic", "bbr"):
        row = {"fluid": two_flows("fluid", cca, dur, warm)}
        if testbed:
            row["testbed"] = two_flows("netns", cca, dur, warm)
            row["gap_share_dtn"] = row["testbed"]["share_dtn"] - row["fluid"]["share_dtn"]
        res["two_flows"][cca] = row
    sc = load_scenario("testbed")
    fl = static_map_fluid(sc, fracs, hold, avg)
    sm: dict = {"u": [f * sc.u_max for f in fracs], "u_frac": fracs, "fluid_rate_dtn": fl}
    if testbed:
        tb = static_map_testbed(sc, fracs, hold, avg)
        gap = np.array(tb) - np.array(fl)
        sm["testbed_rate_dtn"] = tb
        sm["gap_rate_dtn"] = gap.tolist()
        sm["mean_abs_gap_frac_of_bmax"] = float(np.mean(np.abs(gap)) / sc.capacity)
        sm["max_abs_gap_frac_of_bmax"] = float(np.max(np.abs(gap)) / sc.capacity)
    res["static_map"] = sm
    res["scenario"] = {"name": sc.name, "capacity": sc.capacity, "campus_hosts": sc.campus.hosts,
                       "dtn_streams": sc.dtn.streams, "hold_periods": hold, "avg_periods": avg}
    res["wall_s"] = time.time() - t0
    res["load_avg"] = os.getloadavg()
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
