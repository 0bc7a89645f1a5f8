"""`scidmz leaderboard --plant netns`: Ctrl-C mid-trial leaves no ledger line and no testbed; --resume
finishes the run. Root, under the lock (``flock /tmp/scidmz-root.lock``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

_ARGV = ["leaderboard", "testbed", "--plant", "netns", "--policies", "trivial,none", "--trials", "2",
         "--experiments", "mrae", "--set", "plan.duration=10", "--set", "plan.target_hold=5",
         "--set", "campus.hosts=2", "--set", "plan.max_reruns=0", "--json"]
# (no re-runs: this test is about interruption; a loaded CI box's trials would be re-run, and the
# counts below would depend on the load; test_leaderboard_validity*.py test the re-runs)


def _scidmz(*argv: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from scidmz.cli import main; sys.exit(main())", *argv]


def _namespaces(pid: int) -> set[str]:
    """The namespaces of testbeds made by process ``pid`` (default prefix ``n<pid % 100000>NN``)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {ln.split()[0] for ln in out.splitlines() if ln.startswith(f"n{pid % 100000:05d}")}


def _units(out: Path) -> list[dict]:
    text = (out / "ledger.jsonl").read_text()
    assert text.endswith("\n")  # never a partial line
    return [json.loads(s) for s in text.splitlines()[1:]]


def test_sigint_mid_trial_leaves_no_line_and_no_testbed_then_resume_finishes(tmp_path) -> None:
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.Popen(_scidmz(*_ARGV, "--out", str(out)), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if (out / "ledger.jsonl").is_file() and len(_units(out)) >= 1:
                break
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()
        time.sleep(6)  # well inside the second 10 s trial
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    done = _units(out)
    assert len(done) == 1 and done[0]["periods"] == 10  # the interrupted trial wrote nothing
    assert not _namespaces(proc.pid)  # the testbed went down with the Ctrl-C

    again = subprocess.Popen(_scidmz(*_ARGV, "--out", str(out), "--resume"), env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    stdout, err = again.communicate(timeout=600)
    assert again.returncode == 0, err
    doc = json.loads(stdout.strip().splitlines()[-1])
    assert doc["units_run"] == 3 and doc["units"] == 4
    units = _units(out)
    assert sorted((u["policy"], u["trial"]) for u in units) == [("none", 0), ("none", 1), ("trivial", 0),
                                                                ("trivial", 1)]
    # each starved period carries at least one symptom, and a clean trial none
    for u in units:
        assert isinstance(u["starved_by"], dict) and (sum(u["starved_by"].values()) >= u["starved_periods"])
        assert bool(u["starved_by"]) == (u["starved_periods"] > 0), u
    # trial-major, the policies in a Williams design's order (for two, a rotation): trivial,none then none,trivial
    assert [(u["policy"], u["trial"]) for u in units][0] == ("trivial", 0)
    rows = json.loads((out / "results.json").read_text())["rows"]
    # a trial the machine starved (a loaded CI box) is left out of the statistics, but counted
    assert {r["policy"]: r["trials"] + r["excluded_trials"] for r in rows} == {"trivial": 2, "none": 2}
    assert all(r["comparable"] for r in rows) and rows[0]["plant"] == "netns"
    assert not _namespaces(again.pid)
