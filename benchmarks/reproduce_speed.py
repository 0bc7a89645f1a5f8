"""Wall time of ``scidmz reproduce mlc`` per stage; prints one JSON object.

Target: the full chain (28,800 s identification, training, the full
GA of Table 2, 100-trial evaluations, the N_s sweep) in under 15 minutes on a
2-core machine, and the GA alone under 5 minutes per controller.

    python benchmarks/reproduce_speed.py             # the paper's sizes (long)
    python benchmarks/reproduce_speed.py --quick     # the CI sizes
    python benchmarks/reproduce_speed.py --generations 10 --trials 30 ...   # scaled down
    python benchmarks/reproduce_speed.py --before /tmp/old-src    # before/after in one run

``--before SRC``: the same plan first with the package in ``SRC`` (another checkout's ``src``,
e.g. ``git archive main src | tar -x -C /tmp/old``), then with this one, each in a fresh
process, so both meet the same machine load; prints {"before": ..., "after": ..., "speedup"}.
The load average before and after is reported because the machine may be shared.

``--executor SPEC`` (e.g. ``processes:2``): where this package's GA and fluid trials run
(``reproduce mlc --executor``). With ``--before`` only the "after" run gets it (an older package
may not know it), so ``--before src --executor processes:2`` times one package in-process and
pooled. ``max_rss_mb`` is this process's alone; a pool's workers come on top.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time

FULL_TARGET_S = 15 * 60.0
GA_TARGET_S = 5 * 60.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None, help="keep the report here (default: a temporary directory)")
    ap.add_argument("--identify-duration", type=float, default=None)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--cv-folds", type=int, default=None)
    ap.add_argument("--generations", type=int, default=None)
    ap.add_argument("--population", type=int, default=None)
    ap.add_argument("--episode", type=float, default=None)
    ap.add_argument("--trials", type=int, default=None)
    ap.add_argument("--ns", default=None)
    ap.add_argument("--ns-trials", type=int, default=None)
    ap.add_argument("--short-trials", type=int, default=None)
    ap.add_argument("--experiments", default=None)
    ap.add_argument("--executor", default=None, metavar="SPEC", help="local | processes[:N] | dask://HOST:PORT")
    ap.add_argument("--before", default=None, metavar="SRC",
                    help="run the same plan with the package in SRC first, then this one (module docstring)")
    a = ap.parse_args()
    if a.before:
        compare(a.before)
        return

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from scidmz.evaluation.mlc.reproduce import ReproducePlan, reproduce_mlc

    plan = (ReproducePlan.quick() if a.quick else ReproducePlan()).scaled(
        identify_duration=a.identify_duration, epochs=a.epochs, cv_folds=a.cv_folds, generations=a.generations,
        population=a.population, episode=a.episode, trials=a.trials, ns_values=a.ns, ns_trials=a.ns_trials,
        short_trials=a.short_trials, which=a.experiments,
    )
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="scidmz-bench-") as tmp:
        out = a.out or os.path.join(tmp, "report")
        t0 = time.perf_counter()
        result, _ = reproduce_mlc(out=out, plan=plan, tracking_uri=os.path.join(tmp, "mlruns"),
                                  command="benchmarks/reproduce_speed.py",
                                  **({"executor": a.executor} if a.executor else {}))
        wall = time.perf_counter() - t0
    stages = result["stages"]
    ga = {k: v for k, v in stages.items() if k.endswith("/tune")}
    print(json.dumps({
        "benchmark": "reproduce_mlc",
        "mode": plan.mode,
        "sizes": plan.sizes(),
        "wall_s": round(wall, 2),
        "stages_s": {k: round(v, 2) for k, v in stages.items()},
        "target_full_s": FULL_TARGET_S,
        "meets_full_target": bool(plan.mode == "full" and wall < FULL_TARGET_S),
        "ga_target_s": GA_TARGET_S,
        "ga_max_s": round(max(ga.values()), 2) if ga else None,
        "cpus": os.cpu_count(),
        "executor": a.executor or "local",
        "loadavg_before": [round(x, 2) for x in load0],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "headline": result["headline"],
    }))


def compare(before_src: str) -> None:
    """The same command line (without --before) with ``before_src``'s package, then with ours."""
    import subprocess
    import sys
    from pathlib import Path

    args = _without(sys.argv[1:], "--before")
    here = str(Path(__file__).resolve().parents[1] / "src")
    docs = {}
    for name, src in (("before", before_src), ("after", here)):
        env = {**os.environ, "PYTHONPATH": src}
        argv = _without(args, "--executor") if name == "before" else args
        out = subprocess.run([sys.executable, __file__, *argv], env=env, capture_output=True, text=True, check=True)
        docs[name] = json.loads(out.stdout.strip().splitlines()[-1])
        docs[name]["src"] = src
    b, f = docs["before"]["wall_s"], docs["after"]["wall_s"]
    print(json.dumps({"benchmark": "reproduce_mlc_before_after", **docs, "speedup": round(b / f, 3) if f else None}))


def _without(argv: list[str], flag: str) -> list[str]:
    """``argv`` without ``flag`` and its value (``--flag V`` or ``--flag=V``)."""
    out, skip = [], False
    for x in argv:
        if not skip and x != flag and not x.startswith(flag + "="):
            out.append(x)
        skip = x == flag
    return out


if __name__ == "__main__":
    main()
