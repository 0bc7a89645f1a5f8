"""Nothing left behind: a SIGKILLed shaper's TBF or HTB tree is reclaimed by the next start, a live one refused.

A child process installs the root qdisc (``TbfActuator``, or ``HtbQueueActuator``
with its leaves and u32 filters) on a veth in a namespace of its own, then is
SIGKILLed; the root stays. A second actuator on the same device, started while
the child lives, is refused with one line; after the SIGKILL it removes the
leftover (its owner record names a dead process) and installs its own. The
owner record is gone after a clean close. (Set-up 3's controller, TBF and switch
entries, is SIGKILLed in tests/test_realgear_setup3.py.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

ROOT = Path(__file__).resolve().parents[1]
NS = f"rgk{os.getpid() % 10000}"

CHILD = {
    "tbf": "from scidmz.actuators.tbf import TbfActuator\na = TbfActuator('k0', netns=NS)\na.set_rate(20e6)\n",
    "htb": ("from scidmz.actuators.htb import HtbQueueActuator\n"
            "from scidmz.queueconfig import FlowMatch, FlowRule, QueueConfig, QueueSpec\n"
            "q = (QueueSpec(1, 4e6, 4e6, 15000, None, 'default'), QueueSpec(10, 20e6, 20e6, 30000, 3000, 'a'))\n"
            "r = (FlowRule(FlowMatch('10.71.1.2', '10.71.2.2', None, 5301, 6), 10),)\n"
            "a = HtbQueueActuator('k0', netns=NS)\na.apply(QueueConfig(40e6, q, 1, r))\n"),
}


def _sh(*cmd: str) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def veth(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, tc)")
    monkeypatch.setenv("SCIDMZ_RUN_DIR", str(tmp_path / "run"))
    _sh("ip", "netns", "add", NS)
    try:
        _sh("ip", "-n", NS, "link", "add", "k0", "type", "veth", "peer", "name", "k1")
        _sh("ip", "-n", NS, "link", "set", "k0", "up")
        _sh("ip", "-n", NS, "link", "set", "k1", "up")
        yield tmp_path / "run" / "claims"
    finally:
        subprocess.run(["ip", "netns", "del", NS], check=False)


def _root(kind_handle: str) -> bool:
    return kind_handle in _sh("tc", "-n", NS, "qdisc", "show", "dev", "k0")


def _child(kind: str) -> subprocess.Popen[str]:
    code = f"import time\nNS = {NS!r}\n{CHILD[kind]}print('ready', flush=True)\ntime.sleep(120)\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)


@pytest.mark.parametrize("kind", ["tbf", "htb"])
def test_sigkilled_root_qdisc_is_reclaimed_and_a_live_one_refused(veth, kind):
    from scidmz.actuators.htb import HtbQueueActuator
    from scidmz.actuators.tbf import TbfActuator

    make = (lambda: TbfActuator("k0", netns=NS)) if kind == "tbf" else (lambda: HtbQueueActuator("k0", netns=NS))
    mark = "tbf 5c1d:" if kind == "tbf" else "htb 5c1e:"
    proc = _child(kind)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert _root(mark)
        if kind == "htb":  # the tree has its u32 rule
            assert "u32" in _sh("tc", "-n", NS, "filter", "show", "dev", "k0")
        with pytest.raises(ValueError, match=f"held by a running scidmz \\(pid {proc.pid}") as ei:
            make()
        assert "\n" not in str(ei.value)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert _root(mark)  # SIGKILL left it behind, with its owner record
    assert len(list(veth.iterdir())) == 1
    act = make()  # the record names a dead process: the leftover goes (with the HTB's filters)
    try:
        assert not _root(mark) and "u32" not in _sh("tc", "-n", NS, "filter", "show", "dev", "k0")
        if kind == "tbf":
            act.set_rate(30e6)
            assert act.current_rate() == 30e6
    finally:
        act.close()
    assert not _root(mark)
    assert list(veth.iterdir()) == []


def test_unrecorded_root_under_our_handle_is_refused(veth):
    from scidmz.actuators.tbf import TbfActuator

    subprocess.run(["tc", "-n", NS, "qdisc", "replace", "dev", "k0", "root", "handle", "5c1d:", "tbf",
                    "rate", "1mbit", "burst", "10k", "latency", "50ms"], check=True)
    with pytest.raises(ValueError, match="no live or dead scidmz record accounts for") as ei:
        TbfActuator("k0", netns=NS)
    assert "tc qdisc del dev k0 root" in str(ei.value)
    assert _root("tbf 5c1d:")  # untouched
