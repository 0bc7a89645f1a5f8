"""What an admin owns on a live router: a qdisc, QoS or meter put in scidmz's place mid-run is left alone (root).

The class: whatever an admin does to the place scidmz shapes while it runs --
puts their own root qdisc there (another kind, or a TBF under another handle),
deletes ours, hangs their own qdisc below ours, or puts a root there between
start and the first rate -- scidmz never replaces or deletes it. The actuator
raises ``ForeignConfigError`` at its next command and from then on changes
nothing there; ``close`` leaves the admin's qdisc (and ours, when theirs hangs
below it) as it is. Told by the handle and kind scidmz installed, never by a
guess. The daemon (``control run --plant hardware``, eBPF telemetry, a real
TBF) that finds an admin's root mid-run falls back with the cause ``foreign``,
says so in the log, ``/status`` and ``/metrics``, and leaves the admin's qdisc
through its exit. OVS: a QoS an admin puts on our port and a meter an admin
takes over are left alone the same way.

Namespaces are named ``own<pid>...``; run under ``flock /tmp/scidmz-root.lock``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.root

ROOT = Path(__file__).resolve().parents[1]
NS = f"own{os.getpid() % 100000}"


def sh(*argv: str, check: bool = True) -> str:
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=60).stdout


def qdiscs(dev: str = "k0") -> str:
    # HTB's direct_packets_stat counts packets (IPv6 neighbour discovery on the veth): not configuration.
    return re.sub(r"direct_packets_stat \d+", "direct_packets_stat N", sh("tc", "-n", NS, "qdisc", "show", "dev", dev))


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.fixture
def veth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """k0 -- k1 in namespace NS; yields the owner records' folder."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, tc)")
    monkeypatch.setenv("SCIDMZ_RUN_DIR", str(tmp_path / "run"))
    sh("ip", "netns", "del", NS, check=False)
    sh("ip", "netns", "add", NS)
    try:
        sh("ip", "-n", NS, "link", "add", "k0", "type", "veth", "peer", "name", "k1")
        sh("ip", "-n", NS, "link", "set", "k0", "up")
        sh("ip", "-n", NS, "link", "set", "k1", "up")
        yield tmp_path / "run" / "claims"
    finally:
        sh("ip", "netns", "del", NS, check=False)


def _tc(*args: str) -> None:
    sh("tc", "-n", NS, "qdisc", *args)


#: What an admin does mid-run: (tc arguments, what must be on k0 afterwards, through the actuator's
#: close; whether scidmz's own root stays too, because the admin's qdisc hangs below it).
ADMIN: dict[str, tuple[tuple[str, ...], str, bool]] = {
    "htb_root": (("replace", "dev", "k0", "root", "handle", "1:", "htb", "default", "1"), "qdisc htb 1: root", False),
    "tbf_other_handle": (("replace", "dev", "k0", "root", "handle", "9:", "tbf", "rate", "1mbit", "burst", "10k",
                          "latency", "50ms"), "qdisc tbf 9: root", False),
    "pfifo_root": (("replace", "dev", "k0", "root", "handle", "7:", "pfifo", "limit", "33"), "limit 33p", False),
    "ours_deleted": (("del", "dev", "k0", "root"), "qdisc noqueue 0: root", False),
}
BELOW = {  # an admin qdisc hung below ours: ours must stay too, or deleting it would delete theirs
    "tbf": ("add", "dev", "k0", "parent", "5c1d:1", "handle", "77:", "pfifo", "limit", "11"),
    "htb": ("replace", "dev", "k0", "parent", "5c1e:1", "handle", "77:", "pfifo", "limit", "11"),
}


def _actuator(kind: str) -> tuple[Any, Callable[[float], None]]:
    if kind == "tbf":
        from scidmz.actuators.tbf import TbfActuator

        a = TbfActuator("k0", netns=NS)
        return a, a.set_rate
    from scidmz.actuators.htb import HtbQueueActuator
    from scidmz.queueconfig import FlowMatch, FlowRule, QueueConfig, QueueSpec

    h = HtbQueueActuator("k0", netns=NS)

    def apply(rate: float) -> None:
        # A rule that changes with the rate: each apply moves our u32 rules to a new priority.
        rule = FlowRule(FlowMatch("10.71.1.2", "10.71.2.2", None, int(rate / 1e6), 6), 1)
        h.apply(QueueConfig(100e6, (QueueSpec(1, rate, rate, 30000, None, "default"),), 1, (rule,)))

    return h, apply


@pytest.mark.parametrize("kind,admin", [(k, a) for k in ("tbf", "htb") for a in (*ADMIN, "below", "before_first_rate")]
                         + [("htb", "filter")])
def test_an_admins_qdisc_is_never_replaced_or_deleted(veth: Path, kind: str, admin: str) -> None:
    from scidmz.actuators.base import ForeignConfigError

    mark = "tbf 5c1d:" if kind == "tbf" else "htb 5c1e:"
    act, set_rate = _actuator(kind)
    try:
        if admin == "before_first_rate":
            args, after, ours_stays = ADMIN["htb_root"]
            _tc(*args)
        else:
            set_rate(20e6)
            set_rate(30e6)  # a second period changes ours in place
            assert mark in qdiscs()
            if admin == "filter":  # the admin's filter on our HTB: deleting ours would delete it
                sh("tc", "-n", NS, "filter", "add", "dev", "k0", "parent", "5c1e:", "prio", "7", "protocol", "ip",
                   "u32", "match", "ip", "dst", "10.9.9.9/32", "flowid", "5c1e:1")
                after, ours_stays = "qdisc htb 5c1e: root", True
            elif admin == "below":
                args, after, ours_stays = BELOW[kind], "qdisc pfifo 77:", True
                _tc(*args)
            else:
                args, after, ours_stays = ADMIN[admin]
                _tc(*args)
        before = qdiscs()
        for rate in (40e6, 10e6):  # every later period: refused, nothing touched
            with pytest.raises(ForeignConfigError, match="leaves it as it is") as ei:
                set_rate(rate)
            assert "\n" not in str(ei.value)
            assert qdiscs() == before
        if admin == "below":
            assert "limit 11p" in before  # a change of ours would have set its limit to ours
    finally:
        act.close()
    now = qdiscs()
    assert after in now, now
    assert (mark in now) == ours_stays, now
    if admin == "filter":
        assert "10.9.9.9" in sh("tc", "-n", NS, "filter", "show", "dev", "k0", "parent", "5c1e:") or \
            "0a090909" in sh("tc", "-n", NS, "filter", "show", "dev", "k0", "parent", "5c1e:")
    assert not veth.exists() or list(veth.iterdir()) == []  # the owner record is given up


def test_an_admins_change_of_our_own_tbf_is_ours_to_set_again(veth: Path) -> None:
    """The control group of the class: a qdisc that is still ours (our handle and kind) is changed in
    place, even when someone changed its rate; the class above is about *their* qdiscs."""
    from scidmz.actuators.tbf import TbfActuator

    with TbfActuator("k0", netns=NS) as a:
        a.set_rate(20e6)
        _tc("change", "dev", "k0", "root", "handle", "5c1d:", "tbf", "rate", "5mbit", "burst", "10k", "latency",
            "50ms")
        a.set_rate(30e6)
        assert a.current_rate() == 30e6
    assert "tbf" not in qdiscs()


# -- the daemon: control run --plant hardware on a router namespace ----------------------------------------

def _status(token_file: Path) -> dict[str, Any]:
    from scidmz.controller.client import ControlClient

    return ControlClient(token_file=str(token_file)).status()


def _metrics(token_file: Path) -> str:
    import urllib.request

    data = json.loads(token_file.read_text())
    req = urllib.request.Request(f"http://{data['api']}/metrics", headers={"Authorization": f"Bearer {data['token']}"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.read().decode()


def _log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


@pytest.fixture
def router(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """lan0 -- a0 and wan0 -- b0, all in namespace NS (the eBPF telemetry needs a LAN and a WAN side)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, tc, eBPF)")
    run = tmp_path / "run"
    monkeypatch.setenv("SCIDMZ_RUN_DIR", str(run))
    sh("ip", "netns", "del", NS, check=False)
    sh("ip", "netns", "add", NS)
    try:
        for dev, peer in (("lan0", "a0"), ("wan0", "b0")):
            sh("ip", "-n", NS, "link", "add", dev, "type", "veth", "peer", "name", peer)
            for d in (dev, peer):
                sh("ip", "-n", NS, "link", "set", d, "up")
        yield run
    finally:
        sh("ip", "netns", "del", NS, check=False)


def test_control_run_leaves_an_admins_root_qdisc_put_on_mid_run(router: Path, tmp_path: Path) -> None:
    log, tok = tmp_path / "control.jsonl", tmp_path / "control.token"
    p = subprocess.Popen(
        [sys.executable, "-m", "scidmz.cli", "control", "run", "testbed", "--plant", "hardware",
         "--telemetry", "ebpf:lan0,wan0", "--dev", "wan0", "--netns", NS, "--target", "40M", "--duration", "10",
         "--api", "127.0.0.1:0", "--token-file", str(tok), "--log", str(log)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "SCIDMZ_RUN_DIR": str(router)})
    try:
        wait_until(lambda: sum("k" in x for x in _log(log)) >= 2 or p.poll() is not None, 90, "two periods")
        assert p.poll() is None, p.communicate()[1][-2000:]
        assert "tbf 5c1d:" in qdiscs("wan0")
        _tc("replace", "dev", "wan0", "root", "handle", "1:", "htb", "default", "1")  # the admin's own
        wait_until(lambda: _status(tok)["fallback_cause"] == "foreign", 20, "the foreign fallback")
        time.sleep(2.5)  # two more periods: the admin's qdisc is still there
        st, metrics = _status(tok), _metrics(tok)
        assert "qdisc htb 1: root" in qdiscs("wan0")
    finally:
        try:
            _, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
    assert p.returncode == 0, err[-2000:]
    assert st["fallback"] is True and "htb 1:" in st["fallback_reason"], st
    assert "leaves it as it is" in st["fallback_reason"] and st["errors"].get("foreign", 0) >= 2, st
    assert 'scidmz_faults_total{cause="foreign"}' in metrics
    faults = next(line for line in metrics.splitlines() if line.startswith('scidmz_faults_total{cause="foreign"}'))
    assert float(faults.split()[-1]) >= 2
    assert "scidmz_fallback_active 1.0" in metrics
    events = _log(log)
    fb = [e for e in events if e.get("event") == "fallback" and e.get("cause") == "foreign"]
    assert len(fb) == 1 and "htb 1:" in fb[0]["reason"], events[-3:]
    assert any(e.get("event") == "stop" for e in events)
    assert "htb 1:" in err  # the log line on stderr says so too
    after = qdiscs("wan0")
    assert "qdisc htb 1: root" in after and "tbf" not in after, after  # survived the exit
    assert not list((router / "claims").glob("*.json"))  # the owner record went with the run


# -- Open vSwitch: the same rule for a QoS row and a meter ------------------------------------------------

@pytest.fixture
def ovs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A private userspace OVS in namespace NS with bridge br0 and ports sa, sb (veths to a0, b0)."""
    from scidmz.plant.netns.ovsd import OvsUserspace, ovs_available

    if os.geteuid() != 0 or not ovs_available():
        pytest.skip("needs root and Open vSwitch")
    sh("ip", "netns", "del", NS, check=False)
    sh("ip", "netns", "add", NS)
    sw = OvsUserspace(netns=NS)
    try:
        for port, peer in (("sa", "a0"), ("sb", "b0")):
            sh("ip", "-n", NS, "link", "add", port, "type", "veth", "peer", "name", peer)
            for d in (port, peer):
                sh("ip", "-n", NS, "link", "set", d, "up")
        sw.start()
        sw.add_bridge("br0")
        for port, peer in (("sa", "a0"), ("sb", "b0")):
            sw.add_port("br0", port, peer=peer, peer_netns=NS)
        yield sw
    finally:
        sw.stop()
        sh("ip", "netns", "del", NS, check=False)


def _settle(cond: Callable[[], bool]) -> None:
    wait_until(cond, 5, "the OVSDB change to reach the actuator's IDL")  # the IDL learns asynchronously


def test_ovs_an_admins_qos_in_our_place_is_left_and_our_rows_go(ovs: Any) -> None:
    from scidmz.actuators.base import ForeignConfigError
    from scidmz.actuators.ovs import OvsQosActuator

    act = OvsQosActuator(ovs.db_remote, "sb", mode="htb")
    try:
        act.set_rate(20e6)
        act.set_rate(30e6)
        ovs.vsctl("set", "Port", "sb", "qos=@q", "--", "--id=@q", "create", "QoS", "type=linux-htb",
                  "other-config:max-rate=7000000", "external_ids:admin=yes")
        _settle(lambda: act._foreign() is not None)
        for rate in (40e6, 10e6):
            with pytest.raises(ForeignConfigError, match="leaves it as it is"):
                act.set_rate(rate)
        assert "7000000" in ovs.vsctl("get", "QoS", ovs.vsctl("get", "Port", "sb", "qos").strip(), "other_config")
    finally:
        act.close()
    qos = ovs.vsctl("get", "Port", "sb", "qos").strip()
    assert "admin" in ovs.vsctl("get", "QoS", qos, "external_ids")  # the admin's QoS stays on the port
    rows = ovs.vsctl("--columns=external_ids", "list", "QoS")
    assert rows.count("external_ids") == 1 and "scidmz" not in rows, rows  # our orphaned rows went
    assert ovs.vsctl("list", "Queue").strip() == ""


def test_ovs_a_meter_taken_from_us_is_left_alone(ovs: Any) -> None:
    from scidmz.actuators.base import ForeignConfigError
    from scidmz.actuators.ovs import OvsQosActuator

    target = ovs.mgmt("br0")
    act = OvsQosActuator(ovs.db_remote, "sa", mode="meter", bridge="br0", ofctl_target=target)
    try:
        act.set_rate(20e6)
        # The admin deletes our meter and makes their own under the same id, with their own flow.
        ovs.ofctl("del-meter", "br0", "meter=23581")
        ovs.ofctl("add-meter", "br0", "meter=23581,kbps,band=type=drop,rate=4000")
        ovs.ofctl("add-flow", "br0", "priority=50,in_port=2,actions=meter:23581,NORMAL")
        ovs.vsctl("br-set-external-id", "br0", "scidmz-meter-pid", "1")  # and rewrites our record
        _settle(lambda: act._foreign() is not None)
        with pytest.raises(ForeignConfigError, match="leaves it as it is"):
            act.set_rate(30e6)
        assert "rate=4000" in ovs.ofctl("dump-meters", "br0")
    finally:
        act.close()
    assert "rate=4000" in ovs.ofctl("dump-meters", "br0")  # the admin's meter stays
    flows = ovs.ofctl("dump-flows", "br0")
    assert "priority=50" in flows and "cookie=0x5c1d" not in flows, flows  # their flow stays, ours went
    ext = ovs.vsctl("get", "Bridge", "br0", "external_ids")
    assert re.search(r'scidmz-meter-pid="?1"?[,}]', ext), ext  # a record that is not ours: left
