"""The eBPF telemetry attached to real interfaces: a router namespace between two hosts.

Namespaces ``<P>a`` -- ``<P>r`` -- ``<P>b``; the router ``r`` has ``lan0``
(to a) and ``wan0`` (to b). Checked here:

* frames replayed through the veths (AF_PACKET: from a into lan0's ingress,
  from r out of wan0 through its egress hooks, from b into wan0's ingress),
  malformed and runt frames included (BPF_PROG_TEST_RUN refuses those), give
  the twin's registers and counters on the same frames, with both egress
  hooks (the transmit tracepoint and tc egress); the time stamps are the
  kernel's here, so the comparison covers everything but them;
* real TCP through a TBF on wan0: the transmit hook (after the qdisc) sees
  the queue, tc egress (before it) does not;
* safety: a missing or non-Ethernet interface is one line and makes nothing;
  a second instance on the same interface is refused; filters and a clsact
  qdisc that were there before are left alone and ours are gone after
  ``close``; SIGTERM cleans up; after SIGKILL ``down_stale`` removes exactly
  what the record lists; a stray scidmz filter without a record is refused.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from scidmz.telemetry import constants as C

pytestmark = [pytest.mark.root]

P = f"e27{os.getpid() % 10000}"
NS_A, NS_R, NS_B = f"{P}a", f"{P}r", f"{P}b"


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=60)


@pytest.fixture
def router(tmp_path, monkeypatch):
    """Three namespaces, two veth links, IPv6 off (no neighbour discovery noise); torn down after."""
    monkeypatch.setenv("SCIDMZ_RUN_DIR", str(tmp_path / "run"))
    for ns in (NS_A, NS_R, NS_B):
        sh("ip", "netns", "del", ns, check=False)
        sh("ip", "netns", "add", ns)
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
           "net.ipv6.conf.default.disable_ipv6=1")
    sh("ip", "-n", NS_R, "link", "add", "lan0", "type", "veth", "peer", "name", "a0", "netns", NS_A)
    sh("ip", "-n", NS_R, "link", "add", "wan0", "type", "veth", "peer", "name", "b0", "netns", NS_B)
    for ns, dev in ((NS_R, "lan0"), (NS_R, "wan0"), (NS_A, "a0"), (NS_B, "b0")):
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1")
        sh("ip", "-n", ns, "link", "set", dev, "up")
    yield tmp_path / "run"
    for ns in (NS_A, NS_R, NS_B):
        sh("ip", "netns", "del", ns, check=False)


DTN6 = "10.0.3.2/32,2001:db8:3::2/128"
REMOTE6 = "10.1.0.0/16,2001:db8:1::/48"


def _tc(*args: str) -> str:
    return sh("tc", "-n", NS_R, *args).stdout


def _raw_socket(ns: str, dev: str) -> socket.socket:
    from scidmz.telemetry.ebpf.attach import in_netns

    with in_netns(f"/run/netns/{ns}"):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        s.bind((dev, 0))
    return s


# -- replay through the veths against the twin ---------------------------------------------------

def _replay_events(seed: int) -> list[tuple[str, bytes]]:
    from scidmz.telemetry.sources.synth import frame

    rng = np.random.default_rng(seed)
    ev: list[tuple[str, bytes]] = []
    seqs = [int(rng.integers(0, 2**32)) for _ in range(12)]
    for k in range(14):
        for f in range(12):
            dtn = f < 3
            src, dst = (f"10.0.2.{f + 1}", "10.0.3.2") if dtn else (f"10.0.1.{f + 1}", f"10.1.0.{f + 1}")
            if f in (2, 5, 9):  # over IPv6 (t26): raw frames, the namespaces' own IPv6 stays off
                src, dst = (f"2001:db8:2::{f + 1:x}", "2001:db8:3::2") if dtn else \
                    (f"2001:db8:0:1::{f + 1:x}", f"2001:db8:1::{f + 1:x}")
            fl = "S" if k == 0 else ("FA" if k == 13 and f % 4 == 0 else "PA")
            pl = 0 if k == 0 else 1000
            fr = frame(src, dst, 4000 + f, 5001, seq=seqs[f], flags=fl, payload=pl, ip_id=k)
            ev += [("lan_in", fr), ("wan_out", fr)]
            if k == 5 and f == 7:
                ev += [("lan_in", fr), ("wan_out", fr)]  # a retransmission
            seqs[f] = (seqs[f] + pl + ("S" in fl) + ("F" in fl)) & 0xFFFFFFFF
            if k % 3 != 1:
                ev.append(("wan_in", frame(dst, src, 5001, 4000 + f, ack=seqs[f], flags="FA" if "F" in fl else "A")))
    odd = [frame("10.0.1.1", "10.1.0.1", 1, 2, seq=5, flags="PA", payload=100, vlans=(5, 6, 7)),
           frame("10.0.1.1", "10.1.0.1", 1, 2, seq=5, flags="PA", payload=100, frag=0x2000),
           frame("2001:db8:0:1::1", "2001:db8:1::1", 1, 2, seq=5, flags="PA", payload=100, ipv6_ext=((0, 8),),
                 mpls=(300,)),
           frame("10.0.1.1", "10.1.0.1", proto=1, payload=30),
           bytes.fromhex("02000000000202000000000186dd") + b"\x60" + b"\0" * 60]
    good = frame("10.0.1.1", "10.1.0.1", 1, 2, seq=5, flags="PA", payload=100)
    odd += [good[:n] for n in (14, 20, 33, 40)]  # runts: cut inside Ethernet, IPv4 and TCP headers
    for fr in odd:
        for hook in ("lan_in", "wan_in", "wan_out"):
            ev.append((hook, fr))
    return ev


@pytest.mark.parametrize("egress_hook", ["xmit", "tc"])
def test_veth_replay_equals_twin(router, egress_hook):
    from scidmz.telemetry.ebpf.layout import COUNTER_INDEX, PARSE_REASONS
    from scidmz.telemetry.ebpf.replay import twin_packets
    from scidmz.telemetry.ebpf.source import EbpfTelemetry
    from scidmz.telemetry.twin.dataplane import SoftwareDataPlane
    from scidmz.telemetry.twin.layout import STAT_NAMES

    ev = _replay_events(1)
    socks = {"lan_in": _raw_socket(NS_A, "a0"), "wan_out": _raw_socket(NS_R, "wan0"),
             "wan_in": _raw_socket(NS_B, "b0")}
    with EbpfTelemetry("lan0", "wan0", netns=NS_R, egress_hook=egress_hook, dtn_prefix=DTN6,
                       remote_prefix=REMOTE6) as tel:
        for hook, fr in ev:
            socks[hook].send(fr)  # each send runs its hook before it returns (softirq on bh enable)
        time.sleep(0.1)
        tel.sample()
        view, obj = tel.view, tel.obj
        tw = SoftwareDataPlane(DTN6, REMOTE6, rtt_tap=tel.rtt_tap)
        tw.process(twin_packets([(h, 10**9 + 1000 * k, fr) for k, (h, fr) in enumerate(ev)]))
        ctr = view.ctr
        assert [int(ctr[COUNTER_INDEX[f"hook_{h}"]]) for h in ("lan_in", "wan_in", "wan_out")] == \
            [sum(h == x for h, _ in ev) for x in ("lan_in", "wan_in", "wan_out")]
        r = tw.regs
        af = obj.table("af_table")
        for name in (C.REG_AF_SIG, C.REG_AF_BYTES, C.REG_AF_MAX_EACK, C.REG_AF_RECOVER, C.REG_AF_COUNT,
                     C.REG_AF_ACTIVE, C.REG_AF_RECOVER_FLAG):
            np.testing.assert_array_equal(af[name], r[name], err_msg=name)
        np.testing.assert_array_equal(af[C.REG_FLOW_RTT] > 0, r[C.REG_FLOW_RTT] > 0)
        rtt = obj.table("rtt_table").reshape(C.RTT_STAGES, C.RTT_STAGE_SIZE)
        np.testing.assert_array_equal(rtt["sig"], tw.rtt[:, :, 0])
        np.testing.assert_array_equal(obj.table("qd_table")["sig"], tw.qtab[:, 0])
        for row, name in enumerate(C.REG_CMS):
            np.testing.assert_array_equal(view.read_register(name), tw.cms[row])
        for tap in (0, 1):
            np.testing.assert_array_equal(view.class_counters(tap), tw.cls_ctr[tap])
        assert {s: int(ctr[COUNTER_INDEX["stat_" + s]]) for s in STAT_NAMES} == tw.stats_dict()
        from scidmz.telemetry.twin.parse import reason_counts

        hook_level = twin_packets([("lan_in", 0, fr) for _, fr in ev])
        want = {k: v for k, v in reason_counts(hook_level["reason"]).items() if k in PARSE_REASONS}
        got = {k: int(ctr[COUNTER_INDEX["parse_" + k]]) for k in PARSE_REASONS if ctr[COUNTER_INDEX["parse_" + k]]}
        assert got == want and got["truncated"] >= 3
        rtt_d, flow_d = tw.drain_digests()
        got_d = tel.collector.last_flow_digests
        fields = [n for n, _ in C.DIGEST_FLOW_DTYPE if n != "ts"]
        np.testing.assert_array_equal(got_d[fields], flow_d[fields])
        assert [int(x) for x in view.rtt_aggregate()[1]] == [int((rtt_d["cls"] == c).sum()) for c in range(3)]
        assert tel.flows is not None and len(tel.flows) == 12 - 3  # three flows closed by a FIN
    assert "bpf" not in _tc("filter", "show", "dev", "lan0", "ingress")
    assert "clsact" not in _tc("qdisc", "show", "dev", "wan0")
    assert not list(router.glob("ebpf/*.json"))


# -- the queue is seen only after the qdisc ----------------------------------------------------

# UDP at 30 Mbit/s into a 20 Mbit/s TBF with a 100 kB FIFO: the queue stays full (~41 ms)
SEND_UDP = ("import socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); b=b'x'*1400; t=time.time(); n=0\n"
            "while time.time()-t<3.0:\n"
            "    for _ in range(26): s.sendto(b,('10.9.2.2',5201))\n"
            "    n+=1; time.sleep(max(0.0,t+n*0.01-time.time()))\n")
TBF_RATE, TBF_LIMIT = 20e6, 102400


def _cbr_through_tbf(egress_hook: str) -> list:
    from scidmz.telemetry.ebpf.source import EbpfTelemetry

    with EbpfTelemetry("lan0", "wan0", netns=NS_R, egress_hook=egress_hook, period=0.5,
                       dtn_prefix="10.9.2.2/32", remote_prefix="10.9.2.0/24", duration=2.5) as tel:
        send = subprocess.Popen(["ip", "netns", "exec", NS_A, sys.executable, "-c", SEND_UDP])
        try:
            ys = list(tel)
        finally:
            send.wait(timeout=10)
    return ys[1:]  # the first period holds the sender's start and the queue filling


def test_transmit_hook_sees_the_queue_tc_egress_does_not(router):
    sh("ip", "-n", NS_A, "addr", "add", "10.9.1.2/24", "dev", "a0")
    sh("ip", "-n", NS_R, "addr", "add", "10.9.1.1/24", "dev", "lan0")
    sh("ip", "-n", NS_R, "addr", "add", "10.9.2.1/24", "dev", "wan0")
    sh("ip", "-n", NS_B, "addr", "add", "10.9.2.2/24", "dev", "b0")
    sh("ip", "-n", NS_A, "route", "add", "default", "via", "10.9.1.1")
    sh("ip", "-n", NS_R, "neigh", "add", "10.9.2.2", "lladdr", "02:00:00:00:00:09", "dev", "wan0")
    sh("ip", "netns", "exec", NS_R, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    sh("tc", "-n", NS_R, "qdisc", "add", "dev", "wan0", "root", "tbf", "rate", "20mbit", "burst", "5kb",
       "limit", str(TBF_LIMIT))
    after = _cbr_through_tbf("xmit")
    before = _cbr_through_tbf("tc")
    full = TBF_LIMIT * 8 / TBF_RATE  # a full FIFO's delay, ~41 ms
    for y in after:  # after the qdisc: what left it, and its queue
        assert 0.9 * TBF_RATE < y.rate_dtn < 1.08 * TBF_RATE, after
        assert 0.6 * full < y.qdelay_dtn < 1.3 * full, after
        assert y.active_flows == 1
    for y in before:  # before it: what was offered (30 Mbit/s), and the forwarding time only
        assert y.rate_dtn > 1.1 * TBF_RATE, before
        assert y.qdelay_dtn < 0.5e-3, before
    assert "tbf" in _tc("qdisc", "show", "dev", "wan0")  # the qdisc we did not make is untouched


# -- safety -----------------------------------------------------------------------------------

def test_missing_and_non_ethernet_interfaces_are_one_line(router):
    from scidmz.telemetry.ebpf.source import EbpfTelemetry

    with pytest.raises(ValueError) as ei:
        EbpfTelemetry("lan0", "nosuch0", netns=NS_R).open()
    assert str(ei.value) == f"interface nosuch0 does not exist in network namespace {NS_R}"
    with pytest.raises(ValueError) as ei:
        EbpfTelemetry("lo", "wan0", netns=NS_R).open()
    assert "is not an Ethernet interface" in str(ei.value) and "\n" not in str(ei.value)
    with pytest.raises(ValueError):
        EbpfTelemetry("lan0", "lan0", netns=NS_R)
    with pytest.raises(ValueError):
        EbpfTelemetry("lan0", "wan0", netns=NS_R, egress_hook="after")
    assert "clsact" not in _tc("qdisc", "show", "dev", "lan0")
    assert not list(router.glob("ebpf/*.json"))


def test_foreign_filters_and_qdisc_are_left_alone(router):
    from scidmz.telemetry.ebpf.source import EbpfTelemetry

    sh("tc", "-n", NS_R, "qdisc", "add", "dev", "lan0", "clsact")
    sh("tc", "-n", NS_R, "filter", "add", "dev", "lan0", "ingress", "protocol", "all", "pref", "7", "u32",
       "match", "u32", "0", "0")
    before = _tc("filter", "show", "dev", "lan0", "ingress")
    with EbpfTelemetry("lan0", "wan0", netns=NS_R, egress_hook="tc"):
        during = _tc("filter", "show", "dev", "lan0", "ingress")
        assert "scidmz_lan_in" in during and "u32" in during
        assert "scidmz_wan_out" in _tc("filter", "show", "dev", "wan0", "egress")
        # a second instance on the same interfaces is refused, the first keeps running
        with pytest.raises(ValueError) as ei:
            EbpfTelemetry("lan0", "wan0", netns=NS_R).open()
        assert f"already used by the scidmz eBPF telemetry of pid {os.getpid()}" in str(ei.value)
        assert "scidmz_lan_in" in _tc("filter", "show", "dev", "lan0", "ingress")
    assert _tc("filter", "show", "dev", "lan0", "ingress") == before  # our filter gone, theirs intact
    assert "clsact" in _tc("qdisc", "show", "dev", "lan0")  # theirs: kept
    assert "clsact" not in _tc("qdisc", "show", "dev", "wan0")  # ours: removed


CHILD = textwrap.dedent("""
    import sys, time
    from scidmz.telemetry.ebpf.source import EbpfTelemetry
    tel = EbpfTelemetry("lan0", "wan0", netns=sys.argv[1], egress_hook="tc").open()
    print("ready", flush=True)
    time.sleep(60)
""")


def _child() -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", CHILD, NS_R], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=os.environ.copy())
    assert p.stdout is not None and p.stdout.readline().strip() == "ready", p.stderr.read() if p.stderr else ""
    return p


def test_sigterm_cleans_up(router):
    p = _child()
    assert "scidmz_lan_in" in _tc("filter", "show", "dev", "lan0", "ingress")
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=20) == 128 + signal.SIGTERM
    assert "bpf" not in _tc("filter", "show", "dev", "lan0", "ingress")
    assert "clsact" not in _tc("qdisc", "show", "dev", "lan0") + _tc("qdisc", "show", "dev", "wan0")
    assert not list(router.glob("ebpf/*.json"))


def test_sigkill_then_down_stale_removes_exactly_the_record(router):
    from scidmz.telemetry.ebpf.attach import down_stale

    sh("tc", "-n", NS_R, "qdisc", "add", "dev", "wan0", "clsact")
    p = _child()
    rec = json.loads(next(router.glob("ebpf/*.json")).read_text())
    assert {f["prog_name"] for f in rec["filters"]} == {"scidmz_lan_in", "scidmz_wan_in", "scidmz_wan_out"}
    assert [c["ifname"] for c in rec["clsact"]] == ["lan0"]  # wan0's clsact was there before
    p.kill()
    p.wait(timeout=10)
    assert "scidmz_lan_in" in _tc("filter", "show", "dev", "lan0", "ingress")  # a SIGKILL leaves them
    got = down_stale()
    assert got == {"records": 1, "filters": 3, "clsact": 1, "skipped_records": []}
    assert "bpf" not in _tc("filter", "show", "dev", "lan0", "ingress") + _tc("filter", "show", "dev", "wan0",
                                                                               "egress")
    assert "clsact" not in _tc("qdisc", "show", "dev", "lan0")
    assert "clsact" in _tc("qdisc", "show", "dev", "wan0")  # not ours
    assert not list(router.glob("ebpf/*.json"))


def test_stray_scidmz_filter_without_a_record_is_refused(router):
    from scidmz.telemetry.ebpf.source import EbpfTelemetry

    p = _child()
    p.kill()
    p.wait(timeout=10)
    for f in router.glob("ebpf/*.json"):
        f.unlink()  # the record is lost: nothing says whose the filters are
    with pytest.raises(RuntimeError) as ei:
        EbpfTelemetry("lan0", "wan0", netns=NS_R, egress_hook="tc").open()
    msg = str(ei.value)
    assert "that no running scidmz owns; remove it with: tc filter del dev" in msg and "\n" not in msg
    assert "scidmz_lan_in" in _tc("filter", "show", "dev", "lan0", "ingress")  # still not touched
