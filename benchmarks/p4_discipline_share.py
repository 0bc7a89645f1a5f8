"""The DTN's share through ABC and FFS on BMv2 beside the netns stage: the root rehearsal, run N times, recorded.

``tests/test_realgear_discipline_p4.py``'s rehearsal drives ``control run --plant hardware --policy
abc|ffs --discipline p4:...`` against a real ``simple_switch_grpc`` (a DTN's and a campus host's
two CUBIC connections each through a 10 Mbit/s TBF, target 7 Mbit/s), then sends the same flows
through the NFQUEUE stage (the netns plant's discipline) with the same link, buffer and weights,
and prints one JSON line per discipline: the DTN's share of the goodput on each, the gap, and the
goodputs. This script runs that test ``--runs`` times (pytest, reruns off) and keeps every line
with the test's outcome in that run, so the table in docs/deployment.md is exactly what the test
measures and no run is dropped for its numbers (a failed run stays, marked).

Needs root and the P4 toolchain on PATH (scripts/install_p4tc.sh).

    sudo python benchmarks/p4_discipline_share.py --runs 3 --out reports/p4disc/share.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TEST = HERE.parent / "tests" / "test_realgear_discipline_p4.py"
SELECT = "rehearsal_discipline_on_bmv2"


def _outcomes(junit: Path) -> dict[str, bool]:
    """Parametrised test id (``abc``/``ffs``) -> passed, from pytest's JUnit XML."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        if SELECT in name and "[" in name:
            out[name.split("[", 1)[1].rstrip("]")] = not any(c.tag in ("failure", "error", "skipped") for c in case)
    return out


def one_run(k: int) -> list[dict[str, Any]]:
    """The rehearsal once: the lines it printed, each with ``passed`` and the run's index, and a line with
    ``measured`` false for a discipline whose test failed before it printed one."""
    with tempfile.TemporaryDirectory(prefix="scidmz-p4share-") as d:
        junit = Path(d) / "junit.xml"
        r = subprocess.run([sys.executable, "-m", "pytest", str(TEST), "-k", SELECT, "-s", "-q", "-p", "no:cacheprovider",
                            "-p", "no:rerunfailures", f"--junitxml={junit}"],
                           capture_output=True, text=True, timeout=900, cwd=HERE.parent)
        if not junit.is_file():
            raise RuntimeError(f"run {k}: pytest wrote no report (exit {r.returncode}): {r.stderr.strip()[-300:]}")
        passed = _outcomes(junit)
    # -q writes a test's progress mark on the line the next test's print starts on
    rows = [json.loads(x[x.index('{"policy"'):]) for x in r.stdout.splitlines() if '{"policy"' in x]
    if not passed or not rows:
        raise RuntimeError(f"run {k}: the rehearsal did not run (exit {r.returncode}): {r.stdout.strip()[-300:]}")
    seen = {row["policy"] for row in rows}
    # a run that failed before it measured has no line; it is kept, marked, never silently left out
    lost = [{"policy": p, "run": k, "passed": False, "measured": False} for p in sorted(passed) if p not in seen]
    return [{**row, "run": k, "passed": passed.get(row["policy"], False), "measured": True} for row in rows] + lost


def _bmv2_version() -> str | None:
    try:
        return subprocess.run(["simple_switch_grpc", "--version"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the results file to write (e.g. reports/p4disc/share.json)")
    ap.add_argument("--runs", type=int, default=3, help="rehearsals (default 3)")
    a = ap.parse_args()
    if a.runs < 1:
        print("p4_discipline_share: --runs must be >= 1", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("p4_discipline_share: needs root (network namespaces, tc, BMv2)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(HERE.parent / "src"))
    from scidmz.evaluation.results import Provenance
    from scidmz.fileio import DestinationError, atomic_write_text, check_output_file

    try:
        check_output_file(a.out, "--out", parents=True)  # before minutes of runs, not after
    except DestinationError as exc:
        print(f"p4_discipline_share: {exc}", file=sys.stderr)
        return 2
    prov = Provenance("python benchmarks/p4_discipline_share.py " + " ".join(sys.argv[1:]))
    try:
        rows = [row for k in range(a.runs) for row in one_run(k)]
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"p4_discipline_share: {exc}", file=sys.stderr)
        return 1
    doc = {"benchmark": "p4_discipline_share", "meta": prov.meta(kernel=platform.release(), bmv2=_bmv2_version()),
           "runs": a.runs, "rows": rows}
    atomic_write_text(a.out, json.dumps(doc, indent=1) + "\n", parents=True)
    print(json.dumps({"benchmark": "p4_discipline_share", "out": a.out,
                      "gap": {p: [r.get("gap") for r in rows if r["policy"] == p] for p in ("abc", "ffs")}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
