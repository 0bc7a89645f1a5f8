"""HtbQueueActuator on a real kernel: sender ns -> router ns (HTB on its egress) -> receiver ns, iperf3.

Root only (skipped otherwise). Traffic is forwarded by the router namespace,
as on the testbed's BR1 (HTB shares spare bandwidth differently for locally
generated traffic). Tolerances are wide: the machine is shared and loaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from scidmz.actuators.base import ActuatorError, QueueActuator
from scidmz.actuators.htb import HtbQueueActuator, u32_keys
from scidmz.queueconfig import FlowMatch, FlowRule, QueueConfig, QueueConfigError, QueueSpec

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("iperf3") is None, reason="needs root and iperf3"
)

TAG = f"jk{os.getpid() % 100000}"
S, R, D = f"{TAG}s", f"{TAG}r", f"{TAG}d"


def sh(cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, shell=True, check=check, capture_output=True, text=True)


@pytest.fixture
def topo():
    """10.71.1.2 (S) -- 10.71.1.1 [R] 10.71.2.1 -- 10.71.2.2 (D); HTB goes on R's 'rd' device."""
    try:
        for ns in (S, R, D):
            sh(f"ip netns add {ns}")
        sh(f"ip link add {TAG}a netns {S} type veth peer name rs netns {R}")
        sh(f"ip link add {TAG}b netns {D} type veth peer name rd netns {R}")
        sh(f"ip -n {S} link set {TAG}a name eth0")
        sh(f"ip -n {D} link set {TAG}b name eth0")
        for ns, dev, addr in ((S, "eth0", "10.71.1.2/24"), (R, "rs", "10.71.1.1/24"),
                              (R, "rd", "10.71.2.1/24"), (D, "eth0", "10.71.2.2/24")):
            sh(f"ip -n {ns} addr add {addr} dev {dev}")
            sh(f"ip -n {ns} link set {dev} up")
            sh(f"ip netns exec {ns} ethtool -K {dev} tso off gso off gro off", check=False)
        for ns in (S, R, D):
            sh(f"ip -n {ns} link set lo up")
        sh(f"ip -n {S} route add default via 10.71.1.1")
        sh(f"ip -n {D} route add default via 10.71.2.1")
        sh(f"ip netns exec {R} sysctl -qw net.ipv4.ip_forward=1")
        yield
    finally:
        sh(f"ip netns pids {D} | xargs -r kill", check=False)
        sh(f"ip netns pids {S} | xargs -r kill", check=False)
        for ns in (S, R, D):
            sh(f"ip netns del {ns}", check=False)


def _ipr():
    from pyroute2 import IPRoute

    return IPRoute(netns=R)


def class_bytes(dev: str) -> dict[int, int]:
    """Bytes each of our HTB classes sent (kernel counters)."""
    with _ipr() as ipr:
        idx = ipr.link_lookup(ifname=dev)[0]
        return {c["handle"] & 0xFFFF: int(c.get_attr("TCA_STATS")["bytes"])
                for c in ipr.get_classes(index=idx) if c["handle"] >> 16 == 0x5C1E}


def fifo_stats(dev: str) -> dict[int, dict]:
    """Per bfifo (by its parent class minor): limit (bytes) and drops."""
    with _ipr() as ipr:
        idx = ipr.link_lookup(ifname=dev)[0]
        return {q["parent"] & 0xFFFF: {"limit": int(q.get_attr("TCA_OPTIONS")["limit"]),
                                       "drops": int(q.get_attr("TCA_STATS")["drop"])}
                for q in ipr.get_qdiscs(index=idx) if q.get_attr("TCA_KIND") == "bfifo"}


def config(c=40e6, r1=20e6, r2=10e6, rules=None) -> QueueConfig:
    queues = (
        QueueSpec(1, 4e6, 4e6, 15000, None, "default"),
        QueueSpec(10, r1, r1, 30000, 3000, "a"),
        QueueSpec(11, r2, r2, 30000, 3000, "b"),
    )
    if rules is None:
        rules = (
            FlowRule(FlowMatch("10.71.1.2", "10.71.2.2", None, 5301, 6), 10),
            FlowRule(FlowMatch("10.71.1.2", "10.71.2.2", None, 5302, 6), 11),
        )
    return QueueConfig(c, queues, 1, rules)


def test_u32_keys_layout():
    keys = u32_keys(FlowMatch("10.0.0.1", "10.0.1.0/24", 1000, 2000, 6))
    assert keys == [
        "0x0a000001/0xffffffff+12",
        "0x0a000100/0xffffff00+16",
        "0x00060000/0x00ff0000+8",
        "0x03e807d0/0xffffffff+20",
    ]
    assert u32_keys(FlowMatch(src="10.0.0.9")) == ["0x0a000009/0xffffffff+12"]


def test_rates_and_buffers_on_forwarded_traffic(topo):
    act = HtbQueueActuator("rd", netns=R, scope=["10.71.0.0/16"])
    assert isinstance(act, QueueActuator)
    try:
        cfg = config()
        act.apply(cfg)
        cur = act.current()
        assert [(q.qid, q.rate, q.ceil, q.buffer, q.quantum) for q in cur.queues] == [
            (1, 4e6, 4e6, 15000, 50000),  # derived: 4 Mbit/s / 8 / r2q
            (10, 20e6, 20e6, 30000, 3000),
            (11, 10e6, 10e6, 30000, 3000),
        ]
        assert cur.default == 1 and len(cur.rules) == 2
        servers = [subprocess.Popen(["ip", "netns", "exec", D, "iperf3", "-s", "-1", "-p", str(p)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for p in (5301, 5302, 5303)]
        time.sleep(0.5)
        before = class_bytes("rd")
        t0 = time.monotonic()
        dur = 6
        clients = [subprocess.Popen(["ip", "netns", "exec", S, "iperf3", "-c", "10.71.2.2", "-p", str(p), "-t", str(dur),
                                     "-J"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) for p in (5301, 5302, 5303)]
        for c in clients:
            c.wait(timeout=60)
        elapsed = time.monotonic() - t0
        after = class_bytes("rd")
        fifo = fifo_stats("rd")
        for s in servers:
            s.wait(timeout=10)
        rate = {q: 8 * (after[q] - before.get(q, 0)) / elapsed for q in (1, 10, 11)}
        # Each queue is held at (not above) its rate; ceil = rate, so no borrowing.
        # Lower bounds are loose: a loaded 2-core machine may not fill a queue.
        assert rate[10] <= 20e6 * 1.10 and rate[10] >= 20e6 * 0.5, rate
        assert rate[11] <= 10e6 * 1.10 and rate[11] >= 10e6 * 0.5, rate
        assert rate[1] <= 4e6 * 1.10 and rate[1] >= 4e6 * 0.4, rate  # the unmatched flow: default queue
        assert rate[10] > 1.4 * rate[11]
        # The buffers are the configured bfifos and they overflowed (TCP filled them).
        for q, lim in ((1, 15000), (10, 30000), (11, 30000)):
            assert fifo[q]["limit"] == lim
            assert fifo[q]["drops"] > 0, fifo[q]
    finally:
        act.close()
    assert "5c1e" not in sh(f"ip netns exec {R} tc qdisc show dev rd").stdout


def test_reconfigure_bad_input_failure_and_teardown(topo):
    # Someone else's qdisc on another device must survive our teardown.
    sh(f"ip netns exec {R} tc qdisc add dev rs root handle 77: tbf rate 1mbit burst 5k latency 50ms")
    act = HtbQueueActuator("rd", netns=R, scope=["10.71.0.0/16"])
    try:
        act.apply(config())
        # Move flow 5302 to queue 10 and drop queue 11: one batch.
        rules = (FlowRule(FlowMatch("10.71.1.2", "10.71.2.2", None, 5302, 6), 10),)
        new = QueueConfig(40e6, config().queues[:2], 1, rules)
        act.apply(new)
        cur = act.current()
        assert [q.qid for q in cur.queues] == [1, 10] and len(cur.rules) == 1
        filt = sh(f"ip netns exec {R} tc filter show dev rd").stdout
        assert filt.count("flowid 5c1e:a") == 1 and "5c1e:b" not in filt
        # Bad input: nothing changes.
        for bad, msg in (
            (config(r1=30e6, r2=20e6), "above the link capacity"),
            (QueueConfig(40e6, (QueueSpec(1, 4e6, 4e6, 100),), 1), "below one MTU"),
            (config(rules=(FlowRule(FlowMatch(src="192.168.1.1"), 10),)), "outside the scenario"),
        ):
            with pytest.raises(QueueConfigError, match=msg):
                act.apply(bad)
            assert act.current() == cur
        # The kernel refuses a step half-way: the previous configuration is back in force.
        # (a) a class change (fault injected on the 2nd tc request of the batch);
        from pyroute2.netlink.exceptions import NetlinkError

        from scidmz.actuators.u32batch import BatchError

        real, calls = act._tc, []

        def failing(*a, **k):
            calls.append(a)
            if len(calls) == 2:
                raise NetlinkError(22, "injected")
            return real(*a, **k)

        act._tc = failing
        with pytest.raises(ActuatorError, match="kernel refused"):
            act.apply(config())
        act._tc = real
        assert act.current() == cur
        filt = sh(f"ip netns exec {R} tc filter show dev rd").stdout
        assert filt.count("flowid 5c1e:a") == 1 and "5c1e:b" not in filt
        # (b) a rule of the u32 batch: the first ones are in the kernel when it refuses.
        real_send = act._nlb.send

        def half(requests):
            act._nlb.send = real_send  # the restore that follows goes through
            real_send(requests[: len(requests) // 2])
            raise BatchError(22, len(requests) // 2)

        act._nlb.send = half
        with pytest.raises(ActuatorError, match="kernel refused"):
            act.apply(config())
        assert act.current() == cur
        filt = sh(f"ip netns exec {R} tc filter show dev rd").stdout
        assert filt.count("flowid 5c1e:a") == 1 and "5c1e:b" not in filt
    finally:
        act.close()
    assert "5c1e" not in sh(f"ip netns exec {R} tc qdisc show dev rd").stdout
    assert "tbf 77:" in sh(f"ip netns exec {R} tc qdisc show dev rs").stdout


def test_refuses_foreign_root(topo):
    sh(f"ip netns exec {R} tc qdisc add dev rd root handle 77: tbf rate 1mbit burst 5k latency 50ms")
    with pytest.raises(ValueError, match="already has a configured root qdisc"):
        HtbQueueActuator("rd", netns=R)
    assert "tbf 77:" in sh(f"ip netns exec {R} tc qdisc show dev rd").stdout
