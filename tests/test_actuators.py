"""The real rate actuators: tc TBF through pyroute2 and OVS QoS, measured with iperf3.

Root tests build their own minimal namespace pair (two namespaces joined by
a veth, or by an OVS userspace bridge) and tear it down in fixtures. The
rate check compares iperf3's receiver goodput with the goodput the set
rate allows: the shapers count Ethernet frames (1514 bytes for a 1448-byte
TCP payload with timestamps at MTU 1500), iperf3 counts payload, so the
expected goodput is rate x 1448/1514; it must hold within 5% from 5% to
100% of B_max.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from scidmz.actuators.base import MIN_RATE, QueueActuator, RateActuator
from scidmz.actuators.tbf import MAX_RATE, TbfActuator, derive_burst, kernel_hz

B_MAX = 100e6  # the testbed's default bottleneck
FRACTIONS = (0.05, 0.25, 0.5, 1.0)
GOODPUT_PER_WIRE = 1448 / 1514  # TCP payload per Ethernet frame at MTU 1500 with timestamps
TOL = 0.05


# -- pure helpers (no root) --------------------------------------------------------


def test_derive_burst_follows_rate_and_mtu() -> None:
    hz = kernel_hz()
    assert hz in (100, 250, 300, 1000)
    # Low rates: two full frames; high rates: one timer tick of tokens.
    assert derive_burst(1e6, 1500, hz=250) == 2 * 1514
    assert derive_burst(1e9, 1500, hz=250) == math.ceil(1e9 / 8 / 250)
    assert derive_burst(1e9, 1500, hz=1000) < derive_burst(1e9, 1500, hz=250)


def test_protocols_are_runtime_checkable() -> None:
    assert isinstance(TbfActuator.__new__(TbfActuator), RateActuator)
    assert not isinstance(object(), QueueActuator)


# -- namespace pair ------------------------------------------------------------------


@dataclass
class Pair:
    a: str  # sender namespace, device "a0"
    b: str  # receiver namespace, device "b0"
    dst: str = "10.77.0.2"


def _ns_names(tag: str) -> tuple[str, str]:
    base = f"sdzact{tag}{os.getpid() % 100000}"
    return base + "a", base + "b"


def _up_lo_and_addr(ns: str, dev: str, addr: str) -> None:
    from pyroute2 import IPRoute

    with IPRoute(netns=ns) as ip:
        lo = ip.link_lookup(ifname="lo")[0]
        ip.link("set", index=lo, state="up")
        i = ip.link_lookup(ifname=dev)[0]
        ip.addr("add", index=i, address=addr, prefixlen=24)
        ip.link("set", index=i, state="up")


@pytest.fixture
def veth_pair() -> Iterator[Pair]:
    from pyroute2 import IPRoute, netns

    a, b = _ns_names("v")
    made: list[str] = []
    try:
        for n in (a, b):
            netns.create(n)
            made.append(n)
        with IPRoute(netns=a) as ip:
            ip.link("add", ifname="a0", kind="veth", peer={"ifname": "b0", "net_ns_fd": b})
        _up_lo_and_addr(a, "a0", "10.77.0.1")
        _up_lo_and_addr(b, "b0", "10.77.0.2")
        yield Pair(a, b)
    finally:
        for n in made:
            netns.remove(n)  # deleting a namespace deletes its veth end, and so the pair
        assert not {a, b} & set(netns.listnetns())


def iperf3_goodput(pair: Pair, seconds: int = 5) -> float:
    """Receiver-side goodput (bit/s) of one TCP stream a -> b over its steady intervals."""
    port = "5299"
    srv = subprocess.Popen(
        ["ip", "netns", "exec", pair.b, "iperf3", "-s", "-1", "-J", "-B", pair.dst, "-p", port],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        for _ in range(50):  # wait until the server listens
            ss = subprocess.run(["ip", "netns", "exec", pair.b, "ss", "-ltnH", f"sport = :{port}"],
                                capture_output=True, text=True)
            if ss.stdout.strip():
                break
            time.sleep(0.05)
        cli = subprocess.run(
            ["ip", "netns", "exec", pair.a, "iperf3", "-c", pair.dst, "-p", port, "-t", str(seconds), "-J"],
            capture_output=True, text=True, timeout=seconds + 20,
        )
        assert cli.returncode == 0, cli.stdout[-500:] + cli.stderr[-500:]
        out, _ = srv.communicate(timeout=10)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    # The first two receiver intervals hold slow start and the offset between the server's
    # interval clock and the first data (bytes shift from interval 1 to 2); the last is partial.
    iv = [x["sum"] for x in json.loads(out)["intervals"]][2:-1]
    return sum(x["bytes"] for x in iv) * 8 / sum(x["seconds"] for x in iv)


def _root_qdisc(ns: str, dev: str) -> tuple[str, int]:
    from pyroute2 import IPRoute

    with IPRoute(netns=ns) as ip:
        idx = ip.link_lookup(ifname=dev)[0]
        for q in ip.get_qdiscs(index=idx):
            if q["parent"] == 0xFFFFFFFF:
                return q.get_attr("TCA_KIND"), q["handle"]
    return "", 0


# -- TBF -----------------------------------------------------------------------------------


@pytest.mark.root
def test_tbf_iperf3_rate_within_5_percent(veth_pair: Pair) -> None:
    results = {}
    with TbfActuator("a0", netns=veth_pair.a) as tbf:
        for frac in FRACTIONS:
            rate = frac * B_MAX
            tbf.set_rate(rate)
            assert tbf.current_rate() == pytest.approx(rate, abs=8)
            results[frac] = iperf3_goodput(veth_pair) / (rate * GOODPUT_PER_WIRE)
    print("tbf achieved/expected:", results)
    bad = {f: r for f, r in results.items() if abs(r - 1) > TOL}
    assert not bad, f"TBF rate off by more than 5%: {bad}"


@pytest.mark.root
def test_tbf_readback_close_restores_and_bad_rates(veth_pair: Pair) -> None:
    ns = veth_pair.a
    before = _root_qdisc(ns, "a0")
    assert before == ("noqueue", 0)
    tbf = TbfActuator("a0", netns=ns, latency=0.02)
    assert tbf.previous_root == "noqueue"
    tbf.set_rate(37e6)
    assert _root_qdisc(ns, "a0")[0] == "tbf"
    assert tbf.current_rate() == pytest.approx(37e6, abs=8)
    p = tbf.kernel_parameters()
    assert p["limit"] == int(37e6 / 8 * 0.02 + derive_burst(37e6, 1500))

    # Read-back is from the kernel: a change made behind the actuator's back shows up.
    from pyroute2 import IPRoute

    with IPRoute(netns=ns) as ip:
        ip.tc("change", "tbf", tbf.index, handle=0x5C1D0000, rate="12000000bit", burst=4000, limit=50000)
    assert tbf.current_rate() == pytest.approx(12e6)

    for bad in (float("nan"), float("inf"), -1.0, MAX_RATE * 2, "fast"):
        with pytest.raises(ValueError):
            tbf.set_rate(bad)  # type: ignore[arg-type]
    assert tbf.current_rate() == pytest.approx(12e6)  # a rejected command changes nothing
    tbf.set_rate(0)
    assert tbf.current_rate() == pytest.approx(MIN_RATE)

    tbf.close()
    assert _root_qdisc(ns, "a0") == before
    tbf.close()  # idempotent
    with pytest.raises(RuntimeError):
        tbf.set_rate(1e6)


@pytest.mark.root
def test_tbf_refuses_foreign_root_and_missing_device(veth_pair: Pair) -> None:
    from pyroute2 import IPRoute

    with pytest.raises(ValueError, match="no network device"):
        TbfActuator("nosuch0", netns=veth_pair.a)
    with pytest.raises(ValueError, match="does not exist"):
        TbfActuator("a0", netns="sdz-no-such-ns")
    with IPRoute(netns=veth_pair.a) as ip:
        idx = ip.link_lookup(ifname="a0")[0]
        ip.tc("add", "bfifo", idx, handle=0x10000, limit=100000)
    with pytest.raises(ValueError, match="refusing"):
        TbfActuator("a0", netns=veth_pair.a)
    assert _root_qdisc(veth_pair.a, "a0") == ("bfifo", 0x10000)  # untouched


def test_tbf_rejects_bad_construction() -> None:
    with pytest.raises(ValueError):
        TbfActuator("", netns=None)
    with pytest.raises(ValueError):
        TbfActuator("lo", burst=-5)
    with pytest.raises(ValueError):
        TbfActuator("lo", latency=float("nan"))



# -- OVS (userspace datapath) ---------------------------------------------------------------

from scidmz.actuators.ovs import OvsQosActuator, kernel_has_police  # noqa: E402
from scidmz.plant.netns.ovsd import OvsUserspace  # noqa: E402


@dataclass
class OvsPair(Pair):
    sw: str = ""
    ovs: OvsUserspace | None = None


@pytest.fixture
def ovs_pair() -> Iterator[OvsPair]:
    """a0 (ns a) -- sa [br0, userspace OVS in ns sw] sb -- b0 (ns b)."""
    from pyroute2 import IPRoute, netns

    a, b = _ns_names("o")
    sw = a[:-1] + "s"
    made: list[str] = []
    ovs = OvsUserspace(netns=sw)
    try:
        for n in (a, b, sw):
            netns.create(n)
            made.append(n)
        for ns, dev, port, addr in ((a, "a0", "sa", "10.77.0.1"), (b, "b0", "sb", "10.77.0.2")):
            with IPRoute(netns=ns) as ip:
                ip.link("add", ifname=dev, kind="veth", peer={"ifname": port, "net_ns_fd": sw})
            _up_lo_and_addr(ns, dev, addr)
            with IPRoute(netns=sw) as ip:
                ip.link("set", index=ip.link_lookup(ifname=port)[0], state="up")
        ovs.start()
        ovs.add_bridge("br0")
        ovs.add_port("br0", "sa", peer="a0", peer_netns=a)
        ovs.add_port("br0", "sb", peer="b0", peer_netns=b)
        yield OvsPair(a, b, sw=sw, ovs=ovs)
    finally:
        pids = [p.pid for p in (ovs._db, ovs._vs) if p is not None]
        ovs.stop()
        for n in made:
            netns.remove(n)
        assert not {a, b, sw} & set(netns.listnetns())
        for pid in pids:  # both daemons are gone, not just detached
            assert not os.path.exists(f"/proc/{pid}"), f"OVS daemon {pid} survived stop()"


def _measure(act: RateActuator, pair: Pair, fractions: tuple[float, ...]) -> dict[float, float]:
    out = {}
    for frac in fractions:
        rate = frac * B_MAX
        act.set_rate(rate)
        assert act.current_rate() == pytest.approx(rate, rel=1e-3)
        out[frac] = iperf3_goodput(pair) / (rate * GOODPUT_PER_WIRE)
    return out


@pytest.mark.root
def test_ovs_htb_iperf3_rate_within_5_percent(ovs_pair: OvsPair) -> None:
    # linux-htb on a userspace-datapath port: OVS installs a kernel HTB on the port's veth and
    # sends through AF_PACKET, which passes the qdisc; it shapes the switch's egress to b.
    assert ovs_pair.ovs is not None
    with OvsQosActuator(ovs_pair.ovs.db_remote, "sb", mode="htb") as act:
        results = _measure(act, ovs_pair, FRACTIONS)
    print("ovs htb achieved/expected:", results)
    bad = {f: r for f, r in results.items() if abs(r - 1) > TOL}
    assert not bad, f"OVS linux-htb rate off by more than 5%: {bad}"


@pytest.mark.root
def test_ovs_meter_iperf3_rate_enforced(ovs_pair: OvsPair) -> None:
    # An OpenFlow meter is enforced by the userspace datapath itself on packets from a. It is a
    # policer (drops, no queue): one TCP flow saws around the rate and refills of the 0.5 s
    # bucket show up in a 2 s window, so runs land 0.9-1.2x the rate here. The tolerance is
    # 25% (an unenforced meter would give Gbit/s); the 5% shaper on OVS is linux-htb (above).
    ovs = ovs_pair.ovs
    assert ovs is not None
    with OvsQosActuator(ovs.db_remote, "sa", mode="meter", bridge="br0", ofctl_target=ovs.mgmt("br0")) as act:
        results = _measure(act, ovs_pair, (0.05, 0.25, 1.0))
    print("ovs meter achieved/expected:", results)
    bad = {f: r for f, r in results.items() if abs(r - 1) > 0.25}
    assert not bad, f"OVS meter rate off by more than 25%: {bad}"


@pytest.mark.root
def test_ovs_policing_only_where_the_kernel_can_police(ovs_pair: OvsPair) -> None:
    ovs = ovs_pair.ovs
    assert ovs is not None
    if not kernel_has_police():
        # OVS would accept the column and silently not police: the actuator must refuse.
        with pytest.raises(RuntimeError, match="police"):
            OvsQosActuator(ovs.db_remote, "sa", mode="policing")
        assert ovs.vsctl("get", "Interface", "sa", "ingress_policing_rate").strip() == "0"
        return
    with OvsQosActuator(ovs.db_remote, "sa", mode="policing") as act:
        results = _measure(act, ovs_pair, (0.25, 1.0))
    assert all(abs(r - 1) <= TOL for r in results.values()), results


@pytest.mark.root
def test_ovs_htb_reclaims_a_killed_runs_qos_only(ovs_pair: OvsPair) -> None:
    """A QoS left by a scidmz killed with SIGKILL is removed at the next start; a live scidmz's QoS
    and a QoS scidmz did not make are refused with one line each."""
    import signal
    import sys

    ovs = ovs_pair.ovs
    assert ovs is not None
    code = ("import sys, time; from scidmz.actuators.ovs import OvsQosActuator; "
            f"a = OvsQosActuator({ovs.db_remote!r}, 'sb', mode='htb'); a.set_rate(20e6); "
            "print('ready', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        with pytest.raises(ValueError, match=f"made by scidmz process {proc.pid} on"):
            OvsQosActuator(ovs.db_remote, "sb", mode="htb")  # that run is alive
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    qos = ovs.vsctl("get", "Port", "sb", "qos").strip()
    assert qos != "[]"  # SIGKILL left its QoS behind
    with OvsQosActuator(ovs.db_remote, "sb", mode="htb") as act:
        act.set_rate(30e6)
        assert act.current_rate() == 30e6
        assert ovs.vsctl("get", "Port", "sb", "qos").strip() != qos  # the leftover went, ours replaced it
    assert ovs.vsctl("get", "Port", "sb", "qos").strip() == "[]"
    assert ovs.vsctl("list", "QoS").strip() == "" and ovs.vsctl("list", "Queue").strip() == ""

    ovs.vsctl("set", "Port", "sb", "qos=@q", "--", "--id=@q", "create", "QoS", "type=linux-htb",
              "other-config:max-rate=10000000")
    with pytest.raises(ValueError, match="already has a QoS; refusing to replace it"):
        OvsQosActuator(ovs.db_remote, "sb", mode="htb")  # someone else's
    assert ovs.vsctl("get", "Port", "sb", "qos").strip() != "[]"


@pytest.mark.root
def test_ovs_meter_reclaims_a_killed_runs_meter_only(ovs_pair: OvsPair) -> None:
    """Meter mode: a meter left by a scidmz killed with SIGKILL is removed at the next start (its
    flow too); a live scidmz's meter and a meter with our id that scidmz did not record are refused."""
    import signal
    import sys

    ovs = ovs_pair.ovs
    assert ovs is not None
    target = ovs.mgmt("br0")
    args = f"{ovs.db_remote!r}, 'sa', mode='meter', bridge='br0', ofctl_target={target!r}"
    code = ("import time; from scidmz.actuators.ovs import OvsQosActuator; "
            f"a = OvsQosActuator({args}); a.set_rate(20e6); print('ready', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)

    def ofctl(command: str, *args: str) -> str:
        return ovs.ofctl(command, "br0", *args)

    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        with pytest.raises(ValueError, match=f"meter made by scidmz process {proc.pid} on"):
            OvsQosActuator(ovs.db_remote, "sa", mode="meter", bridge="br0", ofctl_target=target)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert "rate=20000" in ofctl("dump-meters") and "meter:" in ofctl("dump-flows")  # left behind
    with OvsQosActuator(ovs.db_remote, "sa", mode="meter", bridge="br0", ofctl_target=target) as act:
        act.set_rate(30e6)
        assert act.current_rate() == 30e6
        assert ofctl("dump-flows").count("meter:") == 1  # the leftover's flow went
        assert re.search(rf'scidmz-meter-pid="?{os.getpid()}\b', ovs.vsctl("get", "Bridge", "br0", "external_ids"))
    assert "rate=" not in ofctl("dump-meters") and "meter:" not in ofctl("dump-flows")
    assert "scidmz-meter" not in ovs.vsctl("get", "Bridge", "br0", "external_ids")

    ofctl("add-meter", "meter=23581,kbps,band=type=drop,rate=5000")  # our id, not made by scidmz
    with pytest.raises(ValueError, match="scidmz did not record making it; refusing"):
        OvsQosActuator(ovs.db_remote, "sa", mode="meter", bridge="br0", ofctl_target=target)
    assert "rate=5000" in ofctl("dump-meters")


@pytest.mark.root
def test_ovs_readback_close_restores_and_bad_rates(ovs_pair: OvsPair) -> None:
    ovs = ovs_pair.ovs
    assert ovs is not None
    act = OvsQosActuator(ovs.db_remote, "sb", mode="htb")
    act.set_rate(30e6)
    assert act.current_rate() == 30e6
    # What the kernel got from OVS: an HTB root on the port's veth.
    tc = subprocess.run(["ip", "netns", "exec", ovs_pair.sw, "tc", "qdisc", "show", "dev", "sb"],
                        capture_output=True, text=True).stdout
    assert "htb" in tc
    qos = ovs.vsctl("get", "Port", "sb", "qos").strip()
    ovs.vsctl("set", "QoS", qos, "other-config:max-rate=12000000")  # behind the actuator's back
    deadline = time.monotonic() + 5
    while act.current_rate() != 12e6 and time.monotonic() < deadline:
        time.sleep(0.05)  # the IDL learns of the change asynchronously
    assert act.current_rate() == 12e6
    for bad in (float("nan"), float("inf"), -1.0, "fast"):
        with pytest.raises(ValueError):
            act.set_rate(bad)  # type: ignore[arg-type]
    assert act.current_rate() == 12e6
    act.set_rate(0)
    assert act.current_rate() == MIN_RATE
    act.close()
    act.close()
    assert ovs.vsctl("get", "Port", "sb", "qos").strip() == "[]"
    assert ovs.vsctl("list", "QoS").strip() == "" and ovs.vsctl("list", "Queue").strip() == ""

    meter = OvsQosActuator(ovs.db_remote, "sa", mode="meter", bridge="br0",
                           ofctl_target=ovs.mgmt("br0"))
    meter.set_rate(40e6)
    assert meter.current_rate() == 40e6
    assert "meter:" in ovs.ofctl("dump-flows", "br0")
    meter.close()
    assert "meter:" not in ovs.ofctl("dump-flows", "br0")
    assert "rate=" not in ovs.ofctl("dump-meters", "br0")

    with pytest.raises(ValueError, match="no OVS port"):
        OvsQosActuator(ovs.db_remote, "nosuch", mode="htb")
    with pytest.raises(ValueError, match="mode"):
        OvsQosActuator(ovs.db_remote, "sa", mode="fast")
