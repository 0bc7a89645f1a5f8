"""Sim-to-real: the same scenarios on the fluid plant and on the netns testbed, side by side.

1. Two flows of different RTT sharing the bottleneck with no shaping
   (u = B_max): one DTN stream at 100 ms and one campus flow at 10 ms, both
   CUBIC, then both BBR. Reported: each flow's mean rate over the steady
   part and the DTN's share of the delivered bytes.
2. The static map R_DTN(u): the ``testbed`` scenario (10 campus hosts, 8 DTN
   streams, 100 Mbit/s) held at u for a few periods each, u from 5 % to
   100 % of B_max; the DTN's mean rate over the last periods of each hold.

Both parts compare all seven Table 3 columns (ARCHITECTURE.md's meaning on
both plants: frame-byte rates, RTT including the bottleneck queue, per-packet
queuing delay, active flows), not only the rates.

The gap (testbed - fluid) is the measure of how far tuning on the simulator
can be trusted. Needs root for the testbed part. A testbed period that the
machine's CPU limited (``info["starved"]``) is not used; a figure with more
than 10 % of its periods starved is recorded as null with the evidence, and
the script then exits 1 (``--allow-starved`` only marks them). Prints one
JSON object.

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
from scidmz.plant.netns.manage.starvation import run_verdict
from scidmz.scenario import Scenario, load_scenario
from scidmz.state import STATE_FIELDS

_STARVED: list[dict] = []


def _two_flow_scenario(cca: str) -> Scenario:
    return load_scenario("testbed").replace(
        dtn={"streams": 1, "rtt": 0.100, "cca": cca, "transfer": None},
        campus={"hosts": 1, "rtt": 0.010, "cca": cca, "traffic": "long", "flows_per_host": 1},
    )


def _columns(y: np.ndarray) -> dict[str, float]:
    """Mean of each of the seven y columns over the rows of ``y`` (periods, 7)."""
    return {f: float(y[:, i].mean()) for i, f in enumerate(STATE_FIELDS)}


def _starved(info: dict, what: str, t: float) -> bool:
    if info.get("starved"):
        _STARVED.append({"what": what, "t": t, "reasons": info.get("starvation", {}).get("reasons", [])})
        return True
    return False


def _run_constant(kind: str, sc: Scenario, u: float, steps: int, what: str, **kw) -> tuple[np.ndarray, np.ndarray]:
    """(y rows, usable mask): a testbed period the CPU limited is not usable."""
    ys, ok = [], []
    with make_plant(kind, sc, **kw) as plant:
        plant.reset(sc.seed)
        for k in range(steps):
            ys.append(plant.step(u).y[0])
            ok.append(not _starved(plant.info, what, (k + 1) * sc.period))
    return np.array(ys), np.array(ok)


def two_flows(kind: str, cca: str, duration: float, warmup: float, telemetry: str = "kernel") -> dict | None:
    sc = _two_flow_scenario(cca)
    steps = int(duration / sc.period)
    skip = int(warmup / sc.period)
    kw = {"telemetry": telemetry} if kind == "netns" else {}
    y, ok = _run_constant(kind, sc, sc.u_max, steps, f"two_flows/{cca}", **kw)
    y, ok = y[skip:], ok[skip:]
    if run_verdict(list(~ok))[0]:
        return None  # the machine, not TCP, limited this run: no figure
    out = _columns(y[ok])
    r_dtn, r_campus = out["rate_dtn"], out["rate_campus"]
    out["share_dtn"] = r_dtn / (r_dtn + r_campus) if r_dtn + r_campus > 0 else None
    out["utilization"] = (r_dtn + r_campus) / sc.capacity
    return out


def _gaps(tb: dict | None, fl: dict) -> dict | None:
    if tb is None:
        return None
    return {k: (tb[k] - fl[k]) if tb.get(k) is not None and fl.get(k) is not None else None for k in fl}


def static_map_fluid(sc: Scenario, fracs: list[float], hold: int, avg: int) -> list[dict[str, float]]:
    us = np.array(fracs) * sc.u_max
    with make_plant("fluid", sc, batch=len(us)) as plant:
        plant.reset(sc.seed)
        ys = np.array([plant.step(us).y for _ in range(hold)])  # (hold, B, 7)
    return [_columns(ys[-avg:, i, :]) for i in range(len(fracs))]


def static_map_testbed(sc: Scenario, fracs: list[float], hold: int, avg: int,
                       telemetry: str = "kernel") -> list[dict[str, float] | None]:
    """One episode, u held for ``hold`` periods at each value (a staircase, high to low)."""
    out: dict[float, dict[str, float] | None] = {}
    order = sorted(fracs, reverse=True)
    with make_plant("netns", sc, telemetry=telemetry) as plant:
        plant.reset(sc.seed)
        for _ in range(3):  # let the DTN's 100 ms-RTT streams leave slow start first
            plant.step(sc.u_max)
        for f in order:
            ys, ok = [], []
            for _ in range(hold):
                ys.append(plant.step(f * sc.u_max).y[0])
                ok.append(not _starved(plant.info, f"static_map/{f}", 0.0))
            y, ok_a = np.array(ys)[-avg:], np.array(ok)[-avg:]
            out[f] = None if run_verdict(list(~ok_a))[0] else _columns(y[ok_a])
    return [out[f] for f in fracs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short holds (a smoke run, noisier)")
    ap.add_argument("--hold", type=int, default=12, help="periods per u value of the static map")
    ap.add_argument("--two-flow-duration", type=float, default=40.0, help="s per two-flow run")
    ap.add_argument("--no-testbed", action="store_true", help="fluid only (no root needed)")
    ap.add_argument("--telemetry", default="kernel", choices=("kernel", "dataplane"),
                    help="the testbed's telemetry source")
    ap.add_argument("--scenario", default="testbed", help="static-map scenario (default testbed)")
    ap.add_argument("--allow-starved", action="store_true", help="mark CPU-starved figures instead of exiting 1")
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
        fl2 = two_flows("fluid", cca, dur, warm)
        row: dict = {"fluid": fl2}
        if testbed:
            tb2 = two_flows("netns", cca, dur, warm, a.telemetry)
            row["testbed"] = tb2
            row["gap"] = _gaps(tb2, fl2)
            row["gap_share_dtn"] = None if tb2 is None else tb2["share_dtn"] - fl2["share_dtn"]
        res["two_flows"][cca] = row
    sc = load_scenario(a.scenario)
    fl = static_map_fluid(sc, fracs, hold, avg)
    sm: dict = {"u": [f * sc.u_max for f in fracs], "u_frac": fracs, "fluid": fl,
                "fluid_rate_dtn": [r["rate_dtn"] for r in fl]}
    if testbed:
        tb = static_map_testbed(sc, fracs, hold, avg, a.telemetry)
        sm["testbed"] = tb
        sm["gap"] = [_gaps(t, f) for t, f in zip(tb, fl, strict=True)]
        sm["testbed_rate_dtn"] = [None if t is None else t["rate_dtn"] for t in tb]
        rate_gap = np.array([g["rate_dtn"] for g in sm["gap"] if g is not None])
        sm["gap_rate_dtn"] = [None if g is None else g["rate_dtn"] for g in sm["gap"]]
        if rate_gap.size:
            sm["mean_abs_gap_frac_of_bmax"] = float(np.mean(np.abs(rate_gap)) / sc.capacity)
            sm["max_abs_gap_frac_of_bmax"] = float(np.max(np.abs(rate_gap)) / sc.capacity)
        # Every column: mean absolute gap over the u values (rates as a fraction of B_max, times in s).
        cols = {}
        for f in STATE_FIELDS:
            g = np.array([gg[f] for gg in sm["gap"] if gg is not None])
            if g.size:
                cols[f] = float(np.mean(np.abs(g)) / (sc.capacity if f.startswith("rate") else 1.0))
        sm["mean_abs_gap_by_column"] = cols
    res["static_map"] = sm
    res["starved"] = _STARVED
    res["scenario"] = {"name": sc.name, "capacity": sc.capacity, "campus_hosts": sc.campus.hosts,
                       "dtn_streams": sc.dtn.streams, "hold_periods": hold, "avg_periods": avg}
    res["wall_s"] = time.time() - t0
    res["load_avg"] = os.getloadavg()
    print(json.dumps(res))
    refused = any("testbed" in r and r["testbed"] is None for r in res["two_flows"].values()) or any(
        t is None for t in res["static_map"].get("testbed", []))
    if refused and not a.allow_starved:
        print(f"sim_vs_testbed: CPU-starved testbed figures were not recorded ({len(_STARVED)} starved periods)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
