"""``scripts/kernel_campaign.sh``: where each kernel run stands, where a run in progress lives, and
what happens when one completes.

The script runs hours of kernel trials; here only its bookkeeping runs, on a copy of it in a scratch
checkout, with a stand-in ``scidmz.cli`` (``--code DIR``) that writes what an interrupted or a finished
leaderboard run leaves in its ``--out``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "kernel_campaign.sh"
LB = "reports/leaderboard"
CAMP = "campaign"


def _checkout(tmp: Path) -> Path:
    (tmp / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, tmp / "scripts" / SCRIPT.name)
    return tmp


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(root / "scripts" / SCRIPT.name), *args], capture_output=True, text=True,
                          timeout=60)


def _results(root: Path, name: str, doc: dict, top: str = LB) -> None:
    d = root / top / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "results.json").write_text(json.dumps(doc))


def test_each_step_says_where_it_stands(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    rule = {"validity": {"max_cpu_pressure": 0.3}}
    _results(root, "netns-testbed-cubic", {"plan": rule, "complete": True})
    _results(root, "netns-testbed-bbr", {"plan": {"trials": 20, "max_starved": 0.05}})  # before the rule: redone
    _results(root, "netns-testbed-bbr", {"plan": rule, "complete": False, "units_left": 9}, top=CAMP)
    (root / CAMP / "netns-testbed-bbr" / "ledger.jsonl").write_text('{"kind": "header"}\n')
    _results(root, "netns-testbed-cubic-short", {"plan": rule, "complete": False})  # no ledger in campaign/
    out = _run(root, "--list")
    assert out.returncode == 0, out.stderr
    state = {line.split()[-1].rsplit("/", 1)[1]: line.split()[0] for line in out.stdout.splitlines()}
    assert state == {"netns-testbed-cubic": "done", "netns-testbed-bbr": "resume", "netns-testbed-cubic-short": "new",
                     "netns-testbed-bbr-short": "new", "netns-testbed-cubic-floor": "new",
                     "netns-testbed-bbr-floor": "new"}
    assert "--out reports/leaderboard/netns-testbed-cubic\n" in out.stdout
    assert ("--set dtn.cca=bbr --set plan.max_stage_late=0.3ms --set plan.max_cpu_pressure=0.6 --experiments short "
            "--trials 10 --out campaign/netns-testbed-bbr-short") in out.stdout
    for bound in ("plan.max_stage_late=0.3ms", "plan.max_cpu_pressure=0.6"):
        assert out.stdout.count(bound) == 5  # every run after the kernel CUBIC one


# A stand-in for ``python3 -m scidmz.cli``: records its argv, and leaves in --out what the leaderboard
# would: a ledger, and results.json complete, or interrupted (exit 130) when $FAKE_STOP is set. Every
# resume finds another kernel build, as on this project's fresh machines: refused without --allow-drift.
_FAKE_CLI = """
import json, os, sys
from pathlib import Path
argv = sys.argv[1:]
out = Path(argv[argv.index("--out") + 1])
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(" ".join(argv) + "\\n")
if "--resume" not in argv and out.exists():
    sys.exit("an --out that holds a ledger is refused")
if "--resume" in argv and "--allow-drift" not in argv:
    print("--resume: another kernel build; --allow-drift to resume across it", file=sys.stderr)
    sys.exit(2)
out.mkdir(exist_ok=True)
with open(out / "ledger.jsonl", "a") as f:
    f.write('{"kind": "unit"}\\n')
stop = bool(os.environ.get("FAKE_STOP"))
(out / "results.json").write_text(json.dumps({"plan": {"validity": {}}, "complete": not stop, "rows": []}))
sys.exit(130 if stop else 0)
"""


def _fake_code(tmp: Path, probe: bool = True) -> Path:
    code = tmp / "code"
    pkg = code / "src" / "scidmz"
    (pkg / "plant" / "netns").mkdir(parents=True)
    for d in (pkg, pkg / "plant", pkg / "plant" / "netns"):
        (d / "__init__.py").write_text("")
    (pkg / "cli.py").write_text(_FAKE_CLI)
    (pkg / "plant" / "netns" / "spec.py").write_text("PROBE_OCTET = 9\n" if probe else "CAMPUS_NET = '10.1.0.0/16'\n")
    return code


def _campaign(root: Path, code: Path, *args: str, stop: bool = False) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "FAKE_LOG": str(root / "argv.log"), **({"FAKE_STOP": "1"} if stop else {})}
    return subprocess.run(["bash", str(root / "scripts" / SCRIPT.name), "--code", str(code), *args],
                          capture_output=True, text=True, timeout=60, env=env)


def test_a_run_lives_in_campaign_until_complete_then_replaces_the_run_it_redoes(tmp_path: Path) -> None:
    root = _checkout(tmp_path / "repo")
    code = _fake_code(tmp_path)
    rule = {"validity": {}}
    _results(root, "netns-testbed-cubic", {"plan": rule, "complete": True})
    _results(root, "netns-testbed-bbr", {"plan": {"trials": 20, "max_starved": 0.05}, "legacy": True})
    out = _campaign(root, code, stop=True)  # Ctrl-C in the kernel BBR run
    assert out.returncode == 130, out.stderr
    assert json.loads((root / CAMP / "netns-testbed-bbr" / "results.json").read_text())["complete"] is False
    assert json.loads((root / LB / "netns-testbed-bbr" / "results.json").read_text())["legacy"]  # untouched
    out = _campaign(root, code)  # without --allow-drift: the run's refusal stops the campaign
    assert out.returncode == 2 and "--allow-drift" in out.stderr
    out = _campaign(root, code, "--allow-drift")
    assert out.returncode == 0, out.stderr
    calls = (root / "argv.log").read_text().splitlines()
    assert calls[0].endswith("--out campaign/netns-testbed-bbr") and "--resume" not in calls[0]
    assert calls[1].endswith("--out campaign/netns-testbed-bbr --resume")
    assert calls[2].endswith("--out campaign/netns-testbed-bbr --resume --allow-drift")
    assert len(calls) == 3 + 4  # the BBR run thrice, then each later step once; CUBIC was done
    bbr = json.loads((root / LB / "netns-testbed-bbr" / "results.json").read_text())
    assert bbr["complete"] is True and "legacy" not in bbr
    assert (root / LB / "netns-testbed-bbr" / "ledger.jsonl").read_text().count("unit") == 2  # appended on resume
    assert not any((root / CAMP).iterdir())
    assert "netns-testbed-bbr is complete" in out.stderr


def test_bad_options_are_one_line(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    for args, needle in ((["--bogus"], "unknown option --bogus"), (["--code"], "--code needs"),
                         (["--code", "no-such-commit"], "neither a checkout nor a commit")):
        out = _run(root, *args)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and needle in out.stderr, out.stderr


def test_a_floor_stops_on_code_without_the_probe_host(tmp_path: Path) -> None:
    root = _checkout(tmp_path / "repo")
    for name in ("netns-testbed-cubic", "netns-testbed-bbr", "netns-testbed-cubic-short", "netns-testbed-bbr-short"):
        _results(root, name, {"plan": {"validity": {}}, "complete": True})
    code = _fake_code(tmp_path, probe=False)
    out = _campaign(root, code)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        f"kernel_campaign: campaign/netns-testbed-cubic-floor needs the probe host, which the code in {code} "
        "predates; run the floors with newer code (--code)"]
    assert not (root / CAMP).exists() and not (root / "argv.log").exists()
