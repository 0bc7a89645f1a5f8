"""``scripts/kernel_campaign.sh``: where each kernel run stands, and a legacy run is never resumed or overwritten.

The script runs hours of kernel trials; here only its bookkeeping runs (``--list``, and the stop at a
folder holding a run made before the validity rule), on a copy of it in a scratch checkout.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "kernel_campaign.sh"
LB = "reports/leaderboard"


def _checkout(tmp: Path) -> Path:
    (tmp / "scripts").mkdir()
    shutil.copy(SCRIPT, tmp / "scripts" / SCRIPT.name)
    return tmp


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(root / "scripts" / SCRIPT.name), *args], capture_output=True, text=True,
                          timeout=60)


def _results(root: Path, name: str, doc: dict) -> None:
    d = root / LB / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "results.json").write_text(json.dumps(doc))


def test_each_step_says_where_it_stands(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    rule = {"validity": {"max_cpu_pressure": 0.3}}
    _results(root, "netns-testbed-cubic", {"plan": rule, "complete": True})
    _results(root, "netns-testbed-bbr", {"plan": rule, "complete": False, "units_left": 9})
    (root / LB / "netns-testbed-bbr-short").mkdir(parents=True)
    (root / LB / "netns-testbed-bbr-short" / "ledger.jsonl").write_text('{"kind": "header"}\n')
    _results(root, "netns-testbed-cubic-short", {"plan": {"trials": 20}, "complete": True})  # before the rule
    out = _run(root, "--list")
    assert out.returncode == 0, out.stderr
    state = {line.split()[-1].rsplit("/", 1)[1]: line.split()[0] for line in out.stdout.splitlines()}
    assert state == {"netns-testbed-cubic": "done", "netns-testbed-bbr": "resume", "netns-testbed-cubic-short": "legacy",
                     "netns-testbed-bbr-short": "resume", "netns-testbed-cubic-floor": "new",
                     "netns-testbed-bbr-floor": "new"}
    assert "--set dtn.cca=bbr --experiments short --trials 10 --out reports/leaderboard/netns-testbed-bbr-short" in out.stdout


def test_a_legacy_run_stops_the_campaign_before_any_trial(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    _results(root, "netns-testbed-cubic", {"plan": {"trials": 20, "max_starved": 0.05}})
    out = _run(root)
    assert out.returncode == 2 and "made before the validity rule; move it away" in out.stderr
    assert json.loads((root / LB / "netns-testbed-cubic" / "results.json").read_text())["plan"]["trials"] == 20


def test_a_floor_stops_on_a_checkout_without_the_probe_host(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    for name in ("netns-testbed-cubic", "netns-testbed-bbr", "netns-testbed-cubic-short", "netns-testbed-bbr-short"):
        _results(root, name, {"plan": {"validity": {}}, "complete": True})
    netns = root / "src" / "scidmz" / "plant" / "netns"  # this checkout's code: a spec.py from before the probe host
    netns.mkdir(parents=True)
    for d in (root / "src" / "scidmz", root / "src" / "scidmz" / "plant", netns):
        (d / "__init__.py").write_text("")
    (netns / "spec.py").write_text("CAMPUS_NET = '10.1.0.0/16'\n")
    out = _run(root)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "kernel_campaign: reports/leaderboard/netns-testbed-cubic-floor needs the probe host, which this checkout's "
        "code predates; run the floors from a newer checkout"]
    assert not (root / LB / "netns-testbed-cubic-floor").exists()
