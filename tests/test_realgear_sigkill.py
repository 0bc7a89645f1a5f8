"""SIGKILL rehearsals from the CLI: ``control run --plant hardware`` killed, then started again as an admin would.

Each set-up's controller is started with ``python3 -m scidmz.cli control run`` (token file, HTTP API,
log file), checked to have made its state, and then:

1. a second ``control run`` on the same port or interface while the first lives is refused with one
   line naming the live process, exit 2, and the first's state is untouched;
2. the first is SIGKILLed: its state stays behind (nothing ran to remove it);
3. a fresh start on the same port or interface reclaims it (its owner record names a dead process),
   runs its periods and, stopped cleanly, leaves nothing.

Set-ups: set-up 1's TBF on a router's WAN interface (``--dev``); set-up 2's rate place on Open
vSwitch (``--ovs-port``, QoS + Queue rows in ``htb`` mode, an OpenFlow meter in ``meter`` mode) on a
private userspace OVS; the Jenks queue place on a router (``--queues-dev``: the HTB tree, its bfifo
leaves and the u32 filters of real iperf3 flows), each with the eBPF telemetry.
Set-up 3 (the TBF and the P4 switch's entries) is SIGKILLed in tests/test_realgear_setup3.py, the
bare TBF/HTB actuators in tests/test_realgear_reclaim.py. Names hold ``jk``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "scidmz.cli"]
TAG = f"jk{os.getpid() % 10000}"


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=60)


def _wait(cond: Callable[[], bool], timeout: float, what: str, p: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if p.poll() is not None:
            raise AssertionError(f"control run exited ({p.returncode}) before {what}: {p.communicate()[1][-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _periods(log: Path) -> list[dict]:
    return [json.loads(x) for x in log.read_text().splitlines() if '"k"' in x] if log.exists() else []


def _control(tmp_path: Path, name: str, args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / f"{name}.jsonl"
    p = subprocess.Popen([*CLI, "control", "run", "testbed", "--plant", "hardware", "--target", "40M", *args,
                          "--api", "127.0.0.1:0", "--token-file", str(tmp_path / f"{name}.token"),
                          "--log", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **env})
    return p, log


def _kill(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.kill()
    p.communicate()


def _rehearse(tmp_path: Path, args: list[str], env: dict[str, str], made: Callable[[], bool],
              ready: float = 60) -> None:
    """Steps 1-3 of the module doc for one set-up; ``made()`` tells whether its state is in place."""
    p, log = _control(tmp_path, "first", args, env)
    try:
        _wait(lambda: len(_periods(log)) >= 2 and made(), ready, "two periods with its state made", p)
        second, _ = _control(tmp_path, "second", [*args, "--duration", "3"], env)
        _, err = second.communicate(timeout=60)
        lines = [x for x in err.splitlines() if x.strip()]
        assert second.returncode == 2 and len(lines) == 1 and str(p.pid) in lines[0], (second.returncode, err[-2000:])
        assert p.poll() is None and made()
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
        _kill(p)
    assert made(), "SIGKILL should leave the state behind"
    p, log = _control(tmp_path, "third", [*args, "--duration", "5"], env)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err[-2000:]
    periods = _periods(log)
    assert len(periods) >= 3 and not any(x.get("fallback") for x in periods[2:]), periods
    assert not made(), "a clean stop leaves nothing"
    assert not list((tmp_path / "run" / "claims").glob("*.json"))


# -- the rate place on Open vSwitch ----------------------------------------------------------------


@pytest.fixture
def ovs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[object, str]]:
    """a0 (ns a) -- sa [br0, private userspace OVS in ns s] sb -- b0 (ns b)."""
    from scidmz.plant.netns.ovsd import OvsUserspace, ovs_available

    if not ovs_available():
        pytest.skip("Open vSwitch is not installed")
    monkeypatch.setenv("SCIDMZ_RUN_DIR", str(tmp_path / "run"))
    a, b, s = f"{TAG}oa", f"{TAG}ob", f"{TAG}os"
    sw = OvsUserspace(netns=s)
    try:
        for n in (a, b, s):
            sh("ip", "netns", "add", n)
        for ns, dev, port, addr in ((a, "a0", "sa", "10.77.0.1/24"), (b, "b0", "sb", "10.1.0.2/16")):
            sh("ip", "-n", ns, "link", "add", dev, "type", "veth", "peer", "name", port, "netns", s)
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", s, "link", "set", port, "up")
        sw.start()
        sw.add_bridge("br0")
        sw.add_port("br0", "sa", peer="a0", peer_netns=a)
        sw.add_port("br0", "sb", peer="b0", peer_netns=b)
        yield sw, s
    finally:
        sw.stop()
        for n in (a, b, s):
            sh("ip", "netns", "del", n, check=False)


@pytest.mark.parametrize("mode", ["htb", "meter"])
def test_ovs_rate_place_sigkilled_then_reclaimed(ovs: tuple, tmp_path: Path, mode: str) -> None:
    sw, ns = ovs
    args = ["--telemetry", "ebpf:sa,sb", "--netns", ns, "--ovs-db", sw.db_remote, "--ovs-mode", mode]
    if mode == "htb":
        args += ["--ovs-port", "sb"]

        def made() -> bool:
            return (sw.vsctl("get", "Port", "sb", "qos").strip() != "[]"
                    or sw.vsctl("--columns=_uuid", "list", "QoS").strip() != ""
                    or sw.vsctl("--columns=_uuid", "list", "Queue").strip() != "")
    else:
        # the meter's bridge; ovs-ofctl finds its management socket under OVS_RUNDIR (the private OVS's)
        args += ["--ovs-port", "sa", "--plant-opt", "ovs_bridge=br0"]

        def made() -> bool:
            return "rate=" in sw.ofctl("dump-meters", "br0") or "meter:" in sw.ofctl("dump-flows", "br0")
    _rehearse(tmp_path, args, {"OVS_RUNDIR": str(sw.dir)}, made)


# -- the Jenks queue place on a router -------------------------------------------------------------


@pytest.fixture
def router(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str, str]]:
    """a0 (ns a, 10.9.0.2) -- lan0 [router r] wan0 -- b0 (ns b, 10.1.0.2)."""
    monkeypatch.setenv("SCIDMZ_RUN_DIR", str(tmp_path / "run"))
    a, r, b = f"{TAG}ja", f"{TAG}jr", f"{TAG}jb"
    try:
        for n in (a, r, b):
            sh("ip", "netns", "add", n)
        sh("ip", "-n", r, "link", "add", "lan0", "type", "veth", "peer", "name", "a0", "netns", a)
        sh("ip", "-n", r, "link", "add", "wan0", "type", "veth", "peer", "name", "b0", "netns", b)
        for n, dev, addr in ((r, "lan0", "10.9.0.1/24"), (r, "wan0", "10.1.0.1/16"), (a, "a0", "10.9.0.2/24"),
                             (b, "b0", "10.1.0.2/16")):
            sh("ip", "-n", n, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", n, "link", "set", dev, "up")
            sh("ip", "netns", "exec", n, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", check=False)
        sh("ip", "-n", a, "route", "add", "default", "via", "10.9.0.1")
        sh("ip", "-n", b, "route", "add", "default", "via", "10.1.0.1")
        sh("ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        yield a, r, b
    finally:
        for n in (a, r, b):
            sh("ip", "netns", "del", n, check=False)


def test_jenks_queue_place_sigkilled_then_reclaimed(router: tuple[str, str, str], tmp_path: Path) -> None:
    a, r, b = router
    srv = subprocess.Popen(["ip", "netns", "exec", b, "iperf3", "-s", "-p", "5411", "-B", "10.1.0.2"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    cli = subprocess.Popen(["ip", "netns", "exec", a, "iperf3", "-c", "10.1.0.2", "-p", "5411", "-t", "120", "-b",
                            "8M", "-P", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    args = ["--policy", "jenks", "--set", "policy.queues=2", "--telemetry", "ebpf:lan0,wan0", "--queues-dev",
            "wan0", "--netns", r]

    def made() -> bool:
        qd = sh("tc", "-n", r, "qdisc", "show", "dev", "wan0").stdout
        return "htb 5c1e:" in qd or "u32" in sh("tc", "-n", r, "filter", "show", "dev", "wan0").stdout

    def with_rules() -> bool:
        return made() and "flowid 5c1e:" in sh("tc", "-n", r, "filter", "show", "dev", "wan0").stdout

    try:
        first, log = _control(tmp_path, "probe", args, {})
        try:  # the u32 filters of the flows must be in place before the kill, not only the tree
            _wait(with_rules, 60, "u32 rules for the iperf3 flows", first)
        finally:
            first.send_signal(signal.SIGKILL)
            _kill(first)
        assert with_rules(), "SIGKILL left the tree and its filters"
        _rehearse(tmp_path, args, {}, made)
    finally:
        for p in (cli, srv):
            _kill(p)


def test_tbf_rate_place_sigkilled_then_reclaimed(router: tuple[str, str, str], tmp_path: Path) -> None:
    """Set-up 1's shaper: the TBF on the router's WAN interface, with the eBPF telemetry."""
    _a, r, _b = router

    def made() -> bool:
        return "tbf 5c1d:" in sh("tc", "-n", r, "qdisc", "show", "dev", "wan0").stdout

    _rehearse(tmp_path, ["--telemetry", "ebpf:lan0,wan0", "--dev", "wan0", "--netns", r], {}, made)
