"""deploy/systemd/: the unit verifies, and its example configuration is one ``control run`` reads.

``systemd-analyze verify`` (Debian's systemd package; no running systemd is
needed) checks the unit's syntax, its directives and that the commands it
runs exist: the unit names ``/usr/local/bin/scidmz``, so the check runs on
a copy naming the ``scidmz`` this environment installed. An unknown
directive is only a warning for systemd, so any output fails the test.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from scidmz.cli import build_parser
from scidmz.commands import control
from scidmz.commands.runconfig import read_config

UNIT_DIR = Path(__file__).resolve().parents[1] / "deploy" / "systemd"
UNIT = UNIT_DIR / "scidmz-control.service"


def _verify(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("scidmz")
    assert exe, "the scidmz console script is not installed"
    copy = tmp_path / UNIT.name
    copy.write_text(text.replace("/usr/local/bin/scidmz", exe))
    return subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze missing (scripts/test.sh installs Debian's systemd)")
def test_the_unit_verifies(tmp_path: Path) -> None:
    r = _verify(tmp_path, UNIT.read_text())
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), r.stdout + r.stderr
    # the check can fail: a misspelt directive is reported
    bad = _verify(tmp_path, UNIT.read_text().replace("NoNewPrivileges=yes", "NoNewPrivilege=yes"))
    assert "Unknown key" in bad.stderr, bad.stderr


def test_the_unit_grants_what_loading_needs_and_is_hardened() -> None:
    text = UNIT.read_text()
    kv = dict(re.findall(r"^(\w+)=(.*)$", text, re.M))
    caps = {"CAP_BPF", "CAP_PERFMON", "CAP_NET_ADMIN"}  # reports/ebpf/capabilities.json
    assert set(kv["CapabilityBoundingSet"].split()) == caps == set(kv["AmbientCapabilities"].split())
    for key, value in (("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("StateDirectory", "scidmz"),
                       ("Restart", "on-failure"), ("RuntimeDirectory", "scidmz")):
        assert kv[key] == value, key
    assert "PrivateUsers" not in kv  # the capabilities must hold in the host's user namespace
    start = kv["ExecStart"].split()
    assert start[1:4] == ["control", "run", "--config"] and "%S/scidmz/control.token" in start
    assert kv["ExecStopPost"].endswith("scidmz telemetry down")


def test_the_example_config_is_control_runs() -> None:
    build_parser()  # fills control run's option table
    opts = read_config(str(UNIT_DIR / "control.toml"), control._RUN_OPTIONS)
    assert opts["plant"] == "hardware" and opts["telemetry"].startswith("ebpf:") and opts["shadow"] is True
