#!/usr/bin/env python3
"""Recompute every committed leaderboard run's results.json from its ledger (and re-render its report).

    python3 scripts/recompute_leaderboard.py            # rewrite reports/leaderboard*/*/results.json + report.md
    python3 scripts/recompute_leaderboard.py --check    # exit 1 naming the first run whose file differs
    python3 scripts/recompute_leaderboard.py --rejudge  # also re-ask each run's plant which rows are comparable

Only the statistics (rows, the Holm family, the target hashes) are rebuilt
(``evaluation.leaderboard.results.recompute``); what describes the run (command, machine,
load, commit, generated) is kept. Merge the runs again afterwards with
``scidmz leaderboard --merge --out reports/leaderboard``; tests/test_leaderboard_recompute.py
runs the check in CI.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 naming the first run that differs")
    p.add_argument("--rejudge", action="store_true",
                   help="take each run's comparability from today's plant rule, not from its results.json")
    p.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this script's)")
    a = p.parse_args(argv)
    from scidmz.evaluation.leaderboard.ledger import first_difference
    from scidmz.evaluation.leaderboard.results import recompute, render_outputs, write_results

    try:
        for run in sorted(q.parent for q in a.root.glob("reports/leaderboard*/*/ledger.jsonl")):
            old, new = recompute(run, rejudge=a.rejudge)
            diff = first_difference(old, new)
            if a.check and diff is not None:
                print(f"recompute_leaderboard: {run}: {diff}", file=sys.stderr)
                return 1
            if not a.check and diff is not None:
                write_results(new, run)
                render_outputs(run, new)
                print(f"recomputed {run}")
    except (ValueError, OSError) as exc:
        print(f"recompute_leaderboard: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
