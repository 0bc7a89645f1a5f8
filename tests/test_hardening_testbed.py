"""``testbed down --all`` removes only leftovers (owner dead by pid + start time) and their log folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scidmz.plant.netns.manage.registry import proc_start_time

pytestmark = pytest.mark.root

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _netns_list() -> set[str]:
    return set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()


def _record(run_dir: Path, prefix: str, pid: int, start: int | None, ns: str) -> None:
    (run_dir / f"{prefix}.json").write_text(json.dumps({
        "prefix": prefix, "owner_pid": pid, "owner_start": start, "created": time.time(),
        "namespaces": [ns], "root_links": [], "processes": [], "ovs": [], "info": {"scenario": "t"},
    }))
    log = run_dir / prefix
    log.mkdir()
    (log / "delaystage.json").write_text("{}")


def test_down_all_spares_live_owners_and_removes_leftovers_with_their_logs(tmp_path):
    tag = f"{os.getpid() % 10000:04d}"
    live, dead, recycled = f"hl{tag}", f"hd{tag}", f"hr{tag}"
    owner = subprocess.Popen(["sleep", "120"])
    gone = subprocess.Popen(["true"])
    gone_start = proc_start_time(gone.pid)
    gone.wait()
    names = [f"{p}-x" for p in (live, dead, recycled)]
    try:
        for n in names:
            subprocess.run(["ip", "netns", "add", n], check=True)
        _record(tmp_path, live, owner.pid, proc_start_time(owner.pid), names[0])
        _record(tmp_path, dead, gone.pid, gone_start, names[1])
        # The owner pid exists (our sleep) but started at another time: a recycled pid, not the owner.
        _record(tmp_path, recycled, owner.pid, (proc_start_time(owner.pid) or 0) - 1, names[2])
        env = {**os.environ, "SCIDMZ_RUN_DIR": str(tmp_path),
               "PYTHONPATH": os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")]))}
        r = subprocess.run([sys.executable, "-m", "scidmz.cli", "testbed", "down", "--all", "--json"],
                           capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout.strip().splitlines()[-1])
        assert set(res["removed"]) == {dead, recycled}
        assert res["skipped_live"] == {live: owner.pid}
        assert owner.poll() is None  # the live owner was not signalled
        now = _netns_list()
        assert names[0] in now and names[1] not in now and names[2] not in now
        assert sorted(p.name for p in tmp_path.iterdir()) == [live, f"{live}.json"]
        assert (tmp_path / live / "delaystage.json").exists()
    finally:
        owner.kill()
        owner.wait()
        for n in names:
            if n in _netns_list():
                subprocess.run(["ip", "netns", "del", n], check=False)
