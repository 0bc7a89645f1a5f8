"""Does a kernel DTN follow its pacing rate when the target moves? (root)

On the netns testbed (``testbed``: 100 Mbit/s, 8 CUBIC DTN streams at 100 ms,
10 campus hosts at 10 ms, shallow buffer) the ``pacing`` policy paces the DTN
at R*_DTN (``SO_MAX_PACING_RATE`` = R*/8 streams on its live sockets,
``actuators.pacing``) with the campus TBF at B_max - R*, while R* ramps up and
down in holds of --hold seconds. Per hold it reports the DTN's mean measured
rate over the hold's second half (frame bytes, ARCHITECTURE.md's y1) against
R*, the same for the trivial TBF on the same targets and seed, the sockets
found paced, and the periods the machine starved. Then it resets the plant and
reads the new sender's sockets back: the next episode must start unpaced.
Periods the machine starved are left out of the means (and counted). Prints
one JSON object; exit 1 when more than 10 % of the periods starved.

    sudo python benchmarks/pacing_follow.py [--hold 20] [--levels 0.3,0.5,0.7,0.5,0.3] [--out F.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Any

import numpy as np


def _holds(tr: Any, targets: np.ndarray, hold: int) -> list[dict[str, Any]]:
    df = tr.df
    rd = df["rate_dtn"].to_numpy()
    starved = df["starved"].to_numpy(dtype=bool) if "starved" in df else np.zeros(len(df), bool)
    out = []
    for k in range(len(targets) // hold):
        sl = slice(k * hold + hold // 2, (k + 1) * hold)
        ok = ~starved[sl]
        mean = float(rd[sl][ok].mean()) if ok.any() else float("nan")
        row = {"target": float(targets[k * hold]), "rate_dtn": mean, "fill": mean / float(targets[k * hold]),
               "starved_periods": int((~ok).sum())}
        if "dtn_paced_sockets" in df:
            row["paced_sockets_min"] = int(np.nanmin(df["dtn_paced_sockets"].to_numpy()[sl]))
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hold", type=int, default=20, help="periods per target level (default 20)")
    ap.add_argument("--levels", default="0.3,0.5,0.7,0.5,0.3", help="R* levels, fractions of B_max")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    try:
        levels = [float(x) for x in a.levels.split(",")]
    except ValueError:
        print(f"pacing_follow: --levels must be comma-separated fractions, got {a.levels!r}", file=sys.stderr)
        return 2
    if a.hold < 4 or not levels or not all(0 < v < 1 for v in levels):
        print("pacing_follow: --hold must be >= 4 and every level in (0, 1)", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("pacing_follow: needs root (network namespaces)", file=sys.stderr)
        return 2
    from scidmz.actuators.pacing import UNLIMITED
    from scidmz.plant.base import make_plant
    from scidmz.policies.registry import make_policy
    from scidmz.runner import run_episode
    from scidmz.scenario import load_scenario

    sc = load_scenario("testbed")
    targets = np.repeat(np.array(levels) * sc.capacity, a.hold)
    t0 = time.perf_counter()
    load0 = list(os.getloadavg())
    res: dict[str, Any] = {}
    with make_plant("netns", sc, telemetry="kernel") as pl:
        for name in ("pacing", "trivial"):
            tr = run_episode(pl, make_policy(name), targets, seed=a.seed)[0]
            res[name] = _holds(tr, targets, a.hold)
            res[f"{name}_starved_periods"] = int(np.nansum(tr.df["starved"].to_numpy(dtype=float)))
            if name == "pacing":
                rates = pl.pacing_readback()
                res["pacing_socket_option_end"] = rates
        # The trivial episode's reset started a new sender: its sockets must carry no cap.
        after = pl.pacing_readback()
        res["after_reset_sockets"] = len(after)
        res["after_reset_unpaced"] = bool(after) and all(v == UNLIMITED for v in after)
    n = len(targets)
    starved = res["pacing_starved_periods"] + res["trivial_starved_periods"]
    doc = {"benchmark": "pacing_follow", "scenario": sc.name, "kernel": platform.release(), "hold": a.hold,
           "levels": levels, "seed": a.seed, "periods_per_episode": n, **res,
           "pacing_mean_abs_fill_error": float(np.nanmean([abs(h["fill"] - 1) for h in res["pacing"]])),
           "trivial_mean_abs_fill_error": float(np.nanmean([abs(h["fill"] - 1) for h in res["trivial"]])),
           "load_start": load0, "load_end": list(os.getloadavg()), "wall_s": round(time.perf_counter() - t0, 1)}
    text = json.dumps(doc)
    if a.out:
        with open(a.out, "w") as f:
            f.write(json.dumps(doc, indent=2) + "\n")
    print(text)
    return 1 if starved > 0.1 * 2 * n else 0


if __name__ == "__main__":
    sys.exit(main())
