"""The DTN host agent's cost, both mechanisms, into one results file (docs/deployment.md's "Measured").

Runs ``agent_period.py`` (per-period CPU, 64 connections) ``--runs`` times per mechanism,
alternating pidfd and bpf so slow drift in the machine falls on both, then ``agent_newconn.py``
(new-connection delay, idle RSS) once per mechanism, each in a fresh process, and writes what
they printed with the machine's facts (kernel, cores, load average before and after, the
commit) to ``--out`` atomically. ``scripts/render_results.py`` renders the docs' table from it.

A quiet machine only (nothing else running): the per-period figure is CPU time, and a busy
machine's cache and scheduler noise lands in it. Needs root (the agent's rights); about 3 min.

    sudo python benchmarks/agent_report.py --out reports/agent/benchmark.json [--runs 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MECHANISMS = ("pidfd", "bpf")


def _run(script: str, *args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, str(HERE / script), *args], capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{script} {' '.join(args)} failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def collect(runs: int) -> dict[str, Any]:
    """Every run's JSON, in the order it ran, and the machine around them."""
    load0 = os.getloadavg()
    period = [_run("agent_period.py", "--mechanism", m) for _ in range(runs) for m in MECHANISMS]
    newconn = [_run("agent_newconn.py", "--mechanism", m) for m in MECHANISMS]
    return {"benchmark": "agent_report", "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"),
            "commit": _commit(), "kernel": platform.release(), "cpus": os.cpu_count(),
            "loadavg_before": [round(x, 2) for x in load0], "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            "runs": runs, "mechanisms": list(MECHANISMS), "period": period, "newconn": newconn}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the results file to write (e.g. reports/agent/benchmark.json)")
    ap.add_argument("--runs", type=int, default=2, help="agent_period.py runs per mechanism (default 2)")
    a = ap.parse_args()
    if a.runs < 1:
        print("agent_report: --runs must be >= 1", file=sys.stderr)
        return 2
    sys.path.insert(0, str(HERE.parent / "src"))
    from scidmz.fileio import atomic_write_text

    try:
        doc = collect(a.runs)
    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
        print(f"agent_report: {exc}", file=sys.stderr)
        return 1
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(doc, indent=1) + "\n")
    print(json.dumps({"benchmark": "agent_report", "out": str(out),
                      "step_median_ms": {m: [r["step"]["median_ms"] for r in doc["period"] if r["mechanism"] == m]
                                         for m in MECHANISMS}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
