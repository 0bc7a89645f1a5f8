"""``scidmz leaderboard`` speed: prints one JSON object.

1. ``--fluid``: the fluid leaderboard at paper scale (``--executor processes:2``: both cores), every
   registered policy of
   ``trivial,pi,pacing,mlc,jenks,abc,ffs`` x ``paper-cubic``/``paper-bbr2`` x ``--trials``
   (default 50) trials (goal <= 600 s in all). ``pi`` runs with the gains shipped for each
   scenario and ``mlc`` with the model shipped for it (else the files shipped for ``testbed``:
   speed only, its numbers then mean nothing); policies not registered yet are listed as missing.
2. ``--quick``: ``scidmz leaderboard paper-cubic --quick`` with the same policies, and the CI
   test's run (``small-cubic --quick --trials 3 --policies trivial,none,abc``) (goal <= 180 s).
3. ``--netns`` (root, under ``flock /tmp/scidmz-root.lock``, on a quiet machine): a tiny real-time
   leaderboard on ``testbed`` (``--policies trivial,jenks,abc``, 2 trials of ``--episode`` s) and
   every trial's set-up/tear-down overhead: its wall time beyond its periods x T, as a share of
   its episode time (goal <= 10 %), and the run's whole overhead (testbed build and teardown
   included) over the sum of episode times.
4. ``--ledger PATH`` (no run): the same per-trial overhead read off the ledger of a finished or
   interrupted real-kernel leaderboard (e.g. reports/leaderboard/netns-testbed-cubic), i.e. at the
   full episode lengths of a quiet, planned run, every unit of every policy and experiment; the
   units that opened a run (or a resume) also built the testbed and are reported apart.

Each part runs the command in a process of its own, in a temporary directory (or ``--keep``).

Usage: PYTHONPATH=src python3 benchmarks/leaderboard_speed.py [--fluid] [--quick] [--netns]
       [--trials 50] [--episode 30] [--keep DIR] [--ledger PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

POLICIES = ("trivial", "pi", "pacing", "mlc", "jenks", "abc", "ffs")


def _available() -> tuple[list[str], list[str]]:
    from scidmz.policies.registry import policy_names

    have = set(policy_names())
    return [p for p in POLICIES if p in have], [p for p in POLICIES if p not in have]


def _files(policies: list[str], scenario: str) -> list[str]:
    """mlc's and pi's files: those shipped for ``scenario``, else those shipped for testbed (speed only)."""
    from scidmz.datasets import shipped_model, shipped_pi_gains
    from scidmz.scenario import load_scenario

    sc = load_scenario(scenario)
    found = shipped_model(load_scenario("testbed"))
    argv = []
    if "mlc" in policies and shipped_model(sc) is None and found is not None:
        argv += ["--mlc-model", str(found[0]), "--mlc-gains", str(found[1])]
    if "pi" in policies and shipped_pi_gains(sc) is None and found is not None:
        argv += ["--pi-gains", str(found[1])]
    return argv


def _run(argv: list[str]) -> tuple[float, dict[str, Any]]:
    """One ``scidmz leaderboard`` in its own process, as a user runs it (a process pool forked from a
    process that already ran the numba kernels in threads may not survive)."""
    cmd = [sys.executable, "-c", "import sys; from scidmz.cli import main; sys.exit(main())", "leaderboard", *argv,
           "--json"]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"scidmz leaderboard {' '.join(argv)} exited {res.returncode}: {res.stderr.strip()[-300:]}")
    return wall, json.loads(res.stdout.strip().splitlines()[-1])


def _per_policy(out: Path) -> dict[str, float]:
    """Wall seconds per policy from the ledger (a batch's time shared by its trials)."""
    per: dict[str, float] = {}
    for s in (out / "ledger.jsonl").read_text().splitlines()[1:]:
        u = json.loads(s)
        per[u["policy"]] = per.get(u["policy"], 0.0) + u["wall_s"]
    return {k: round(v, 1) for k, v in per.items()}


def bench_fluid(tmp: Path, trials: int, executor: str) -> dict[str, Any]:
    pols, missing = _available()
    runs = {}
    for sc in ("paper-cubic", "paper-bbr2"):
        out = tmp / f"fluid-{sc}"
        wall, res = _run([sc, "--policies", ",".join(pols), "--trials", str(trials), *_files(pols, sc),
                          "--executor", executor, "--out", str(out)])
        runs[sc] = {"wall_s": round(wall, 1), "units": res["units"], "per_policy_s": _per_policy(out)}
    total = sum(r["wall_s"] for r in runs.values())
    return {"policies": pols, "missing_policies": missing, "trials": trials, "executor": executor, "runs": runs,
            "total_s": round(total, 1), "goal_s": 600, "meets_goal": total <= 600,
            "load_avg": list(os.getloadavg())}


def bench_quick(tmp: Path) -> dict[str, Any]:
    pols, missing = _available()
    wall, res = _run(["paper-cubic", "--quick", "--policies", ",".join(pols), *_files(pols, "paper-cubic"),
                      "--out", str(tmp / "quick")])
    ci, _ = _run(["small-cubic", "--quick", "--trials", "3", "--policies", "trivial,none,abc",
                  "--out", str(tmp / "ci")])
    return {"policies": pols, "missing_policies": missing, "paper_cubic_quick_s": round(wall, 1),
            "units": res["units"], "ci_test_run_s": round(ci, 1), "goal_s": 180,
            "meets_goal": max(wall, ci) <= 180}


PERIOD_S = 1.0  # the testbed scenario's control period T; a unit's episode is its periods x T


def _overhead(units: list[dict[str, Any]], first_builds: bool = False) -> dict[str, Any]:
    """Each unit's wall time beyond its episode (periods x T), in seconds and as a share of the episode,
    the validity rule's calibration probe before it included (``validity.probe_wall_s``, where the ledger
    records one); ``first_builds``: the first unit also built the testbed, so the median leaves it out."""
    secs = [u["wall_s"] + float((u.get("validity") or {}).get("probe_wall_s") or 0.0) - u["periods"] * PERIOD_S
            for u in units]
    over = [x / (u["periods"] * PERIOD_S) for x, u in zip(secs, units, strict=True)]
    later = sorted(secs[1:] if first_builds and len(secs) > 1 else secs)
    return {"units": len(units), "per_trial_overhead_s": [round(x, 2) for x in secs],
            "per_trial_overhead_share": [round(x, 4) for x in over],
            "max_trial_overhead_share": round(max(over), 4),
            "median_later_trial_overhead_s": round(later[len(later) // 2], 2),
            "goal_share": 0.10, "meets_goal": max(over) <= 0.10}


def _units(ledger: Path) -> list[dict[str, Any]]:
    rows = [json.loads(s) for s in ledger.read_text().splitlines() if s.strip()]
    return [r for r in rows if r.get("kind", "unit") == "unit"]


def bench_netns(tmp: Path, episode: float) -> dict[str, Any]:
    out = tmp / "netns"
    wall, res = _run(["testbed", "--plant", "netns", "--policies", "trivial,jenks,abc", "--trials", "2",
                      "--experiments", "mrae", "--set", f"plan.duration={episode:g}", "--out", str(out)])
    units = _units(out / "ledger.jsonl")
    episodes = sum(u["periods"] * PERIOD_S for u in units)
    res = _overhead(units, first_builds=True)
    return {**res, "episode_s": episode,
            "median_later_share_at_120s": round(res["median_later_trial_overhead_s"] / 120.0, 4),
            "run_overhead_share": round((wall - episodes) / episodes, 4), "run_wall_s": round(wall, 1),
            "load_avg": list(os.getloadavg())}


def _run_starts(units: list[dict[str, Any]]) -> list[bool]:
    """Which units opened a (resumed) run: they began more than 5 s after the previous unit ended,
    so their wall time also holds the testbed's build, which a run pays once, not per trial."""
    from datetime import datetime, timedelta

    out, prev = [], None
    for u in units:
        end = datetime.fromisoformat(u["finished_at"].replace("Z", "+00:00"))
        start = end - timedelta(seconds=u["wall_s"])
        out.append(prev is None or (start - prev).total_seconds() > 5.0)
        prev = end
    return out


def bench_ledger(ledger: Path) -> dict[str, Any]:
    """The overhead of a real run, read off its ledger: per (experiment, policy) and over all units
    except those that opened a run (their build is reported apart)."""
    units = _units(ledger)
    starts = _run_starts(units)
    trials = [u for u, s in zip(units, starts, strict=True) if not s]
    if not trials:
        raise SystemExit(f"{ledger}: no trial unit that did not open a run")
    groups: dict[str, list[dict[str, Any]]] = {}
    for u in trials:
        groups.setdefault(f"{u['unit']}/{u['policy']}", []).append(u)
    per = {k: {"units": len(v), "max_share": _overhead(v)["max_trial_overhead_share"],
               "median_s": _overhead(v)["median_later_trial_overhead_s"]} for k, v in sorted(groups.items())}
    res = _overhead(trials)
    del res["per_trial_overhead_s"], res["per_trial_overhead_share"]
    opening = _overhead([u for u, s in zip(units, starts, strict=True) if s])
    return {"ledger": str(ledger), **res, "per_group": per,
            "run_openings": {"units": opening["units"], "overhead_s": opening["per_trial_overhead_s"]}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fluid", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--netns", action="store_true")
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--episode", type=float, default=30.0, help="netns trial length, s (default 30)")
    ap.add_argument("--keep", default=None, help="keep the runs' directories here")
    ap.add_argument("--ledger", default=None, help="read the overhead off this real run's ledger.jsonl (no run)")
    ap.add_argument("--executor", default="processes:2", help="the fluid runs' --executor (default processes:2)")
    a = ap.parse_args()
    if a.ledger:
        print(json.dumps({"ledger": bench_ledger(Path(a.ledger))}))
        return
    if not (a.fluid or a.quick or a.netns):
        a.quick = True
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(a.keep) if a.keep else Path(td)
        tmp.mkdir(parents=True, exist_ok=True)
        if a.quick:
            out["quick"] = bench_quick(tmp)
        if a.fluid:
            out["fluid"] = bench_fluid(tmp, a.trials, a.executor)
        if a.netns:
            out["netns"] = bench_netns(tmp, a.episode)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
