#!/usr/bin/env python3
"""Render every figure in README.md and docs/*.md from the committed results files.

    python scripts/render_results.py           # rewrite the stale <!-- render:NAME --> regions
    python scripts/render_results.py --check   # exit 1 naming the first stale region or missing figure

The figures, their templates and their sources: ``scidmz.evaluation.docfigures``.
A figure whose results file is absent is skipped with a message (never invented).
The plots (the trade-off per regime, ``docs/figures/``) are a separate pass after the text;
``--check`` checks they exist, not their pixels.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 naming the first stale region")
    p.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this script's)")
    a = p.parse_args(argv)
    from scidmz.evaluation.docfigures import check, plot_figures, write

    def say(msg: str) -> None:
        print(msg, file=sys.stderr)

    try:
        if a.check:
            stale = check(a.root, say)
            if stale:
                print(f"render_results: {stale} differs from its results file; run scripts/render_results.py",
                      file=sys.stderr)
                return 1
            missing = plot_figures(a.root, check_only=True)
            if missing:
                print(f"render_results: {missing[0]} is missing; run scripts/render_results.py", file=sys.stderr)
                return 1
            return 0
        for done in write(a.root, say):
            print(f"rendered {done}")
        for done in plot_figures(a.root):
            print(f"plotted {done}")
    except (ValueError, OSError) as exc:
        print(f"render_results: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
