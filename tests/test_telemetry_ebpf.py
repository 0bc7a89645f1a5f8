"""The eBPF telemetry programs against the software twin, on the same frames.

Every frame runs through the JIT-compiled program of its hook with
BPF_PROG_TEST_RUN (``replay.EbpfReplay``, the frame's time in
``skb->tstamp``), and through the twin as the tap copies that hook stands
for (``replay.twin_packets``). Then every register, table, counter and
digest must be *equal*: RTT stages, active-flow table, queuing-delay table,
Count-Min rows, class counters of both taps, qd_last/sum/cnt, the twin's
event counters, the parser's reasons, the flow digests in order, and the
RTT digests' per-class sum and count (which the programs accumulate instead
of sending). The NetworkState per period of the collector on the maps equals
the twin's collector's.

Traffic: regular flows with handshakes, FINs and retransmissions; malformed,
VLAN, IPv6, ARP, fragmented, truncated and unclassified frames; 6,000 short
flows (active-flow collisions and evictions, a full RTT stage, expired RTT
cells, idle timeouts), a 10 MB long flow, a late queue exit; the 32-bit tick
wrapping; both RTT taps.

Non-root: the generated header's constants and its CRC functions (compiled
for the host) against constants.py and zlib.
"""

from __future__ import annotations

import ipaddress
import os
import pathlib
import re
import shutil
import subprocess
import sys
import zlib

import numpy as np
import pytest

from scidmz.telemetry import constants as C
from scidmz.telemetry.collector import Collector
from scidmz.telemetry.ebpf.gen_header import HASHES, int_constants, render
from scidmz.telemetry.ebpf.layout import COUNTER_INDEX, PARSE_REASONS
from scidmz.telemetry.sources.synth import frame
from scidmz.telemetry.twin.dataplane import SoftwareDataPlane
from scidmz.telemetry.twin.layout import STAT_NAMES
from scidmz.telemetry.twin.parse import reason_counts

HAVE_CLANG = shutil.which("clang") is not None
# Both families (t26): the twin's and the programs' class_lpm hold IPv4 and IPv6 prefixes together.
DTN = "10.0.3.2/32,2001:db8:3::2/128"
REMOTE = "10.1.0.0/16,2001:db8:1::/48"
CAPTURES = os.path.join(os.path.dirname(__file__), "data", "captures")
CORPUS = ("fd00:2::2/128,10.9.2.2/32", "10.9.2.0/24,fd00:2::/64")  # tests/data/captures/README.md
needs_clang = pytest.mark.skipif(not HAVE_CLANG and not os.environ.get("CI"), reason="needs clang")
_ORDER = {"lan_in": 0, "wan_in": 1, "wan_out": 2}


# -- traffic ------------------------------------------------------------------------------------

def regular_flows(rng: np.random.Generator, t0: int, n: int = 24, nseg: int = 40,
                  v6: bool = False) -> list[tuple[str, int, bytes]]:
    """DTN and campus TCP flows: SYN, data, retransmissions, delayed ACKs, FIN; plus UDP flows.
    ``v6``: every other flow over IPv6."""
    ev = []
    for f in range(n):
        dtn = f % 4 == 0
        if v6 and f % 2:
            src = f"2001:db8:2::{f + 1:x}" if dtn else f"2001:db8:0:1::{f + 1:x}"
            dst = "2001:db8:3::2" if dtn else f"2001:db8:1::{f % 7 + 1:x}"
        else:
            src = f"10.0.2.{f + 1}" if dtn else f"10.0.1.{f + 1}"
            dst = "10.0.3.2" if dtn else f"10.1.0.{f % 7 + 1}"
        sport, dport = 30000 + f, 5001
        seq = int(rng.integers(0, 2**32))
        rtt, qd = int(rng.integers(10, 200)) * 10**6, int(rng.integers(0, 20)) * 10**6
        t = t0 + int(rng.integers(0, 5 * 10**8))
        ipid = int(rng.integers(0, 65536))
        udp = f % 5 == 4
        for k in range(nseg):
            if udp:
                fr = frame(src, dst, sport, 53, proto=17, payload=500, ip_id=ipid)
                ev += [("lan_in", t, fr), ("wan_out", t + qd, fr)]
            else:
                fl, pl = ("S", 0) if k == 0 else (("FA", 100) if k == nseg - 1 and f % 3 == 0 else ("PA", 1448))
                fr = frame(src, dst, sport, dport, seq=seq, flags=fl, payload=pl, ip_id=ipid)
                ev += [("lan_in", t, fr), ("wan_out", t + qd, fr)]
                seglen = pl + ("S" in fl) + ("F" in fl)
                if k > 2 and rng.random() < 0.06:  # a retransmission of the same segment
                    ev += [("lan_in", t + 1000, fr), ("wan_out", t + qd + 1000, fr)]
                seq = (seq + seglen) & 0xFFFFFFFF
                # a delayed ACK (none for this segment: the next one covers both), or an ACK
                if not (k % 2 == 1 and rng.random() < 0.3 and "F" not in fl):
                    ackfl = "FA" if "F" in fl else ("RA" if k == nseg - 1 and f % 7 == 1 else "A")
                    ev.append(("wan_in", t + rtt, frame(dst, src, dport, sport, ack=seq, flags=ackfl)))
            ipid = (ipid + 1) & 0xFFFF
            t += int(rng.integers(10**6, 5 * 10**7))
    return ev


def odd_frames(rng: np.random.Generator, times: list[int], n: int = 1500) -> list[tuple[str, int, bytes]]:
    """Malformed, VLAN (1, 2, 3 tags), IPv6, ARP, fragments, options, ICMP, unclassified; mutated."""
    base = [
        frame("10.0.1.1", "10.1.0.1", 1, 2, seq=5, flags="PA", payload=100),
        frame("10.0.1.1", "10.1.0.1", 1, 2, proto=17, payload=50),
        frame("10.1.0.1", "10.0.1.1", 2, 1, ack=105, flags="A"),
        frame("10.0.1.1", "10.1.0.1", 1, 2, seq=5, flags="PA", payload=100, vlans=(5,)),
        frame("10.0.1.1", "10.1.0.1", 1, 2, seq=5, flags="PA", payload=100, vlans=(5, 6)),
        frame("10.0.1.1", "10.1.0.1", 1, 2, seq=5, flags="PA", payload=100, vlans=(5, 6, 7)),
        frame("10.0.1.1", "10.1.0.1", 1, 2, seq=5, flags="PA", payload=100, frag=0x2000),
        frame("10.0.1.1", "10.1.0.1", 1, 2, seq=5, flags="PA", payload=100, ip_options=b"\x01" * 8,
              tcp_options=b"\x01" * 12),
        frame("10.0.1.1", "10.1.0.1", proto=1, payload=30),
        frame("10.0.9.1", "10.9.0.1", 1, 2, seq=5, flags="PA", payload=100),
        bytes.fromhex("ffffffffffff0200000000010806") + b"\0" * 28,
        bytes.fromhex("02000000000202000000000186dd") + b"\x60" + b"\0" * 60,
    ]
    ev = []
    hooks = list(_ORDER)
    for _ in range(n):
        b = bytearray(base[int(rng.integers(len(base)))])
        k = int(rng.integers(6))
        if k == 1:
            b = b[: int(rng.integers(14, len(b)))]
        elif k in (2, 3):
            j = int(rng.integers(12, min(len(b), 80)))
            b[j] = int(rng.integers(256)) if k == 2 else b[j] ^ (1 << int(rng.integers(8)))
        ev.append((hooks[int(rng.integers(3))], int(rng.choice(times)), bytes(b)))
    return ev


def _gre(inner: bytes, proto: int = 0x6558, flags: int = 0x2000) -> bytes:
    return flags.to_bytes(2, "big") + proto.to_bytes(2, "big") + (b"\0\0\0\x07" if flags & 0x2000 else b"") + inner


def odd_frames_v6(rng: np.random.Generator, times: list[int], n: int = 1500) -> list[tuple[str, int, bytes]]:
    """IPv6 with extension headers and fragments, MPLS, VLAN + MPLS, tunnels (GRE, ERSPAN II,
    VXLAN, IP in GRE, an MPLS pseudowire), BIG TCP lengths; mutated and truncated."""
    a, b = "2001:db8:0:1::5", "2001:db8:1::9"
    inner = frame("10.0.1.1", "10.1.0.1", 1, 2, seq=5, flags="PA", payload=100)
    big4 = bytearray(frame("10.0.1.1", "10.1.0.1", 1, 2, seq=5, flags="PA", payload=200))
    big4[16:18] = b"\0\0"  # IPv4 total length 0 (BIG TCP / TSO on the sender)
    big6 = bytearray(frame(a, b, 1, 2, seq=5, flags="PA", payload=200))
    big6[18:20] = b"\0\0"  # IPv6 payload length 0
    base = [
        frame(a, b, 1, 2, seq=5, flags="PA", payload=100),
        frame(b, a, 2, 1, ack=105, flags="A"),
        frame(a, b, 1, 2, proto=17, payload=50),
        frame(a, b, 1, 2, seq=5, flags="PA", payload=100, ipv6_ext=((0, 8), (60, 16))),
        frame(a, b, 1, 2, seq=5, flags="PA", payload=100, ipv6_ext=((43, 24),)),
        frame(a, b, 1, 2, seq=5, flags="PA", payload=100, frag=0x0001),
        frame(a, b, 1, 2, seq=5, flags="PA", payload=100, vlans=(5, 6)),
        frame(a, b, 1, 2, seq=5, flags="PA", payload=100, mpls=(100, 200)),
        frame("10.0.1.1", "10.1.0.1", 1, 2, seq=5, flags="PA", payload=100, vlans=(7,), mpls=(16,)),
        frame(a, b, proto=58, payload=40),
        frame("2001:db8:9::1", "2001:db8:8::1", 1, 2, seq=5, flags="PA", payload=100),
        frame("2001:db8:3::2", "2001:db8:1::1", 1, 2, seq=5, flags="PA", payload=100),  # both classified
        bytes(big4), bytes(big6),
        frame("10.0.1.1", "10.1.0.1", proto=47, payload=_gre(inner)),
        frame("10.0.1.1", "10.1.0.1", proto=47, payload=_gre(inner[14:], 0x0800, 0)),
        frame("10.0.1.1", "10.1.0.1", proto=47, payload=_gre(b"\x10" + b"\0" * 7 + inner, 0x88BE, 0x1000)),
        frame("10.0.1.1", "10.1.0.1", 1000, 4789, proto=17, payload=b"\x08" + b"\0" * 7 + inner),
        frame("10.0.1.1", "10.1.0.1", proto=47, payload=_gre(inner, 0x6558, 0x4000)),  # routing bit: no tunnel
    ]
    mpls_pw = bytearray(frame("10.0.1.1", "10.1.0.1", 1, 2, mpls=(77,), payload=0))
    base.append(bytes(mpls_pw[:18]) + b"\0\0\0\0" + inner)  # label, control word, Ethernet
    ev = []
    hooks = list(_ORDER)
    for _ in range(n):
        fr = bytearray(base[int(rng.integers(len(base)))])
        k = int(rng.integers(6))
        if k == 1:
            fr = fr[: int(rng.integers(14, len(fr)))]
        elif k in (2, 3):
            j = int(rng.integers(12, min(len(fr), 100)))
            fr[j] = int(rng.integers(256)) if k == 2 else fr[j] ^ (1 << int(rng.integers(8)))
        ev.append((hooks[int(rng.integers(3))], int(rng.choice(times)), bytes(fr)))
    return ev


def corpus_events() -> list[tuple[str, int, bytes]]:
    """t26's real-kernel captures of BR1 (IPv6 DTN and IPv4 campus transfers through an 8 Mbit/s
    queue) as the hooks would see them: the campus side's outgoing frames at lan_in, the
    bottleneck's outgoing frames at wan_out and its incoming ones at wan_in. Snap length 96:
    each frame is padded with zeros to its wire length (headers intact, payload zero)."""
    import struct as st

    from scidmz.telemetry.twin.parse import addr_text, parse_frames

    ev = []
    for name, where in (("netns-ingress.pcap", "lan"), ("netns-egress.pcap", "wan")):
        data = open(os.path.join(CAPTURES, name), "rb").read()
        assert st.unpack("<I", data[:4])[0] in (0xA1B2C3D4, 0xA1B23C4D) and st.unpack("<I", data[20:24])[0] == 1
        nano = st.unpack("<I", data[:4])[0] == 0xA1B23C4D
        o, frames = 24, []
        while o + 16 <= len(data):
            sec, frac, cap, orig = st.unpack("<IIII", data[o:o + 16])
            frames.append((sec * 10**9 + (frac if nano else frac * 1000), data[o + 16:o + 16 + cap] + b"\0" * (orig - cap)))
            o += 16 + cap
        buf = np.frombuffer(b"".join(f for _, f in frames), np.uint8)
        lens = np.array([len(f) for _, f in frames], np.int64)
        pk = parse_frames(buf, np.concatenate([[0], np.cumsum(lens)[:-1]]), lens, lens, 1, np.zeros(len(frames)))
        nets = [ipaddress.ip_network(x) for x in ",".join(CORPUS).split(",")]
        for (t, fr), r in zip(frames, pk, strict=True):
            dst = ipaddress.ip_address(addr_text(r["dst_hi"], r["dst_lo"]))
            out = any(dst in n for n in nets if n.version == dst.version)
            if where == "lan" and out:
                ev.append(("lan_in", t, fr))
            elif where == "wan":
                ev.append(("wan_out" if out else "wan_in", t, fr))
    return ev


def many_short_flows(rng: np.random.Generator, t0: int, n: int = 6000) -> list[tuple[str, int, bytes]]:
    """Short flows over 3 s: slot collisions and evictions, idle gaps > T_TH, ACKs after the RTT timeout."""
    ev = []
    for f in range(n):
        src, dst = f"10.0.{1 + (f >> 8) % 200}.{f & 255}", f"10.1.{(f >> 4) % 250}.{1 + f % 250}"
        sport = 1024 + f
        seq, t = int(rng.integers(0, 2**32)), t0 + int(rng.integers(0, 3 * 10**9))
        for k in range(int(rng.integers(1, 14))):
            fr = frame(src, dst, sport, 443, seq=seq, flags="PA", payload=100, ip_id=k)
            ev += [("lan_in", t, fr), ("wan_out", t + 3 * 10**6, fr)]
            if rng.random() < 0.7:
                ack = frame(dst, src, 443, sport, ack=(seq + 100) & 0xFFFFFFFF, flags="A")
                ev.append(("wan_in", t + int(rng.integers(5, 1500)) * 10**6, ack))
            seq = (seq + 100) & 0xFFFFFFFF
            t += int(rng.integers(1, 4 * 10**8)) if rng.random() < 0.9 else 15 * 10**8
    return ev


def long_flow(t0: int, n: int = 7000) -> list[tuple[str, int, bytes]]:
    """A DTN flow over 10 MB (the Count-Min long-flow digest); one packet leaves the queue after 2.5 s."""
    ev, seq = [], 1
    for k in range(n):
        fr = frame("10.0.2.9", "10.0.3.2", 5555, 5001, seq=seq, flags="PA", payload=1448, ip_id=k)
        ev += [("lan_in", t0 + k * 10**6, fr), ("wan_out", t0 + k * 10**6 + (25 * 10**8 if k == 10 else 10**6), fr)]
        ev.append(("wan_in", t0 + k * 10**6 + 10**8, frame("10.0.3.2", "10.0.2.9", 5001, 5555, ack=seq + 1448,
                                                           flags="A")))
        seq += 1448
    return ev


def _sorted(ev: list[tuple[str, int, bytes]]) -> list[tuple[str, int, bytes]]:
    return sorted(ev, key=lambda e: (e[1], _ORDER[e[0]]))


# -- the comparison ------------------------------------------------------------------------------

def run_both(ev: list[tuple[str, int, bytes]], rtt_tap: int = C.TAP_INGRESS, period_ns: int | None = None,
             prefixes: tuple[str, str] = (DTN, REMOTE)):
    """Run the events through the programs and the twin; compare everything; return the two y series.

    Frames the twin decapsulates run through the programs (which count them as ``tunnel``
    and measure nothing) but not through the twin: the one documented difference."""
    from scidmz.telemetry.ebpf.replay import EbpfReplay, split_tunnelled, twin_packets

    _, tunnelled = split_tunnelled(ev)
    skip = {id(e) for e in tunnelled}
    tw = SoftwareDataPlane(prefixes[0], prefixes[1], rtt_tap=rtt_tap)
    ys_e, ys_t = [], []
    with EbpfReplay(prefixes[0], prefixes[1], rtt_tap=rtt_tap) as rp:
        accepted = []
        n_tunnel = 0
        col_e = col_t = None
        boundary = None
        pending: list[tuple[str, int, bytes]] = []
        seen_e: list[np.ndarray] = []  # digests the collectors drained, per period
        seen_t: list[tuple[np.ndarray, np.ndarray]] = []
        for e in ev:
            if period_ns is not None:
                if col_e is None:
                    boundary = e[1] + period_ns
                    rp.advance_clock(e[1] / 1e9)
                    tw.advance_clock(e[1] / 1e9)
                    col_e, col_t = rp.collector(t0=e[1] / 1e9), Collector(tw, t0=e[1] / 1e9)
                while e[1] >= boundary:
                    tw.process(twin_packets(pending))
                    pending = []
                    rp.advance_clock(boundary / 1e9)
                    tw.advance_clock(boundary / 1e9)
                    ys_e.append(col_e.sample())
                    ys_t.append(col_t.sample())
                    seen_e.append(col_e.last_flow_digests)
                    seen_t.append((col_t.last_rtt_digests, col_t.last_flow_digests))
                    boundary += period_ns
            try:
                rp.run(e[0], e[2], e[1])
            except OSError as exc:
                # BPF_PROG_TEST_RUN refuses a frame whose IPv4/IPv6 header is incomplete (the
                # kernel's check, before the program): such frames go through the veth test.
                assert exc.errno == 22 and len(e[2]) < 54, (exc, len(e[2]))
                continue
            if id(e) in skip:
                n_tunnel += 1
                continue
            accepted.append(e)
            pending.append(e)
        tw.process(twin_packets(pending))
        assert rp.retvals == {-1}  # TC_ACT_UNSPEC: every frame passed on untouched
        rtt_d, flow_d = tw.drain_digests()
        rtt_d = np.concatenate([*(r for r, _ in seen_t), rtt_d])
        flow_d = np.concatenate([*(f for _, f in seen_t), flow_d])
        flow_e = np.concatenate([*seen_e, rp.obj.drain_events()])
        _compare_state(rp, tw, accepted, rtt_d, flow_d, flow_e)
        assert rp.view.ctr[COUNTER_INDEX["parse_tunnel"]] == n_tunnel
        assert rp.view.ctr[COUNTER_INDEX["parse_too_deep"]] == 0
    return ys_e, ys_t


def _compare_state(rp, tw: SoftwareDataPlane, accepted: list[tuple[str, int, bytes]], rtt_d: np.ndarray,
                   flow_d: np.ndarray, flow_e: np.ndarray) -> None:
    """Every register, table and counter equal; the digests of the whole run (twin: rtt_d, flow_d)."""
    from scidmz.telemetry.ebpf.replay import twin_packets

    obj, view = rp.obj, rp.view
    view.snapshot()
    r = tw.regs
    rtt = obj.table("rtt_table").reshape(C.RTT_STAGES, C.RTT_STAGE_SIZE)
    np.testing.assert_array_equal(rtt["sig"], tw.rtt[:, :, 0])
    np.testing.assert_array_equal(rtt["ts"], tw.rtt[:, :, 1])
    af = obj.table("af_table")
    for name in (C.REG_AF_SIG, C.REG_AF_TS, C.REG_AF_BYTES, C.REG_FLOW_RTT, C.REG_AF_MAX_EACK, C.REG_AF_RECOVER,
                 C.REG_AF_COUNT, C.REG_AF_ACTIVE, C.REG_AF_RECOVER_FLAG):
        np.testing.assert_array_equal(af[name], r[name], err_msg=name)
    qd = obj.table("qd_table")
    np.testing.assert_array_equal(qd["sig"], tw.qtab[:, 0])
    np.testing.assert_array_equal(qd["ts"], tw.qtab[:, 1])
    for name in (C.REG_QD_LAST, C.REG_QD_SUM, C.REG_QD_CNT, *C.REG_CMS, *C.REG_RTT_STAGE, C.REG_QD_TABLE):
        np.testing.assert_array_equal(view.read_register(name), tw.read_register(name), err_msg=name)
    for tap in (C.TAP_INGRESS, C.TAP_EGRESS):
        np.testing.assert_array_equal(view.class_counters(tap), tw.cls_ctr[tap])
    ctr = view.ctr
    assert {s: int(ctr[COUNTER_INDEX["stat_" + s]]) for s in STAT_NAMES} == tw.stats_dict()
    # the parser's reasons: one parse per frame a hook saw (the twin parses each tap copy)
    hook_level = twin_packets([(("lan_in" if h == "wan_in" else h), t, f) for h, t, f in accepted])
    want = {k: v for k, v in reason_counts(hook_level["reason"]).items() if k in PARSE_REASONS}
    assert {k: int(ctr[COUNTER_INDEX["parse_" + k]]) for k in PARSE_REASONS if ctr[COUNTER_INDEX["parse_" + k]]} == want
    np.testing.assert_array_equal(flow_e, flow_d)
    rsum, rcnt = view.rtt_aggregate()
    for c in range(C.N_CLASSES):
        m = rtt_d["cls"] == c
        assert (int(rsum[c]), int(rcnt[c])) == (int(rtt_d["rtt"][m].astype(np.int64).sum()), int(m.sum()))
    assert ctr[COUNTER_INDEX["events_lost"]] == 0


def _assert_series_equal(ys_e, ys_t) -> None:
    assert len(ys_e) == len(ys_t) > 2
    for a, b in zip(ys_e, ys_t, strict=True):
        va, vb = a.as_vector(), b.as_vector()
        # rtt_dtn: the twin averages its digests, the programs divide a sum: float rounding only
        np.testing.assert_allclose(va, vb, rtol=1e-12, atol=0)
        assert a.t == b.t


# -- tests ------------------------------------------------------------------------------------------

def test_header_has_every_constant_of_constants_py():
    text = render()
    defined = dict(re.findall(r"^#define SCIDMZ_(\w+) (\S+)$", text, re.M))
    for name, v in int_constants().items():
        assert int(defined[name].rstrip("UL").strip("()"), 0) == v, name
    # the same names and values as the P4 header generator (its int_constants, copied: a script)
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "gen_constants", Path(__file__).resolve().parents[1] / "telemetry_p4" / "gen_constants.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.int_constants(C) == int_constants()


def test_header_has_the_parsers_kinds_and_the_program_no_copy_of_them():
    """KIND_* come from twin/parse.py through the header; the program defines no number of its own for them."""
    from scidmz.telemetry.twin import parse

    defined = dict(re.findall(r"^#define SCIDMZ_KIND_(\w+) (\S+)$", render(), re.M))
    assert {n: int(v) for n, v in defined.items()} == {n[len("KIND_"):]: getattr(parse, n)
                                                       for n in parse.__all__ if n.startswith("KIND_")}
    src = (pathlib.Path(parse.__file__).resolve().parents[1] / "ebpf" / "scidmz_telemetry.bpf.c").read_text()
    assert not re.findall(r"(?<![A-Z_])KIND_\w+", src), "the program uses kinds not from scidmz_ebpf.h"
    assert set(re.findall(r"SCIDMZ_KIND_(\w+)", src)) <= set(defined)


@needs_clang
def test_header_crc_functions_equal_zlib(tmp_path):
    """Compile the generated header for this host and hash a key with every field list."""
    (tmp_path / "scidmz_ebpf.h").write_text(render())
    vals = {"src_addr": 0x0A000105, "dst_addr": 0x0A010009, "src_port": 40000, "dst_port": 5001,
            "protocol": 6, "eack": 0xFFFFFFF0, "identification": 0xBEEF, "seq_no": 0x12345678}
    le = {f: int.from_bytes(v.to_bytes(C.HASH_FIELD_BITS[f] // 8, "big"), "little") for f, v in vals.items()}
    init = ", ".join(f".{f} = {v}u" for f, v in le.items())
    # every hash from scratch, and from the 5-tuple's CRC state (the programs' shortcut)
    calls = "\n".join(f'    printf("%u %u\\n", scidmz_crc_{s}(&k), scidmz_crc_{s}_f(&k, scidmz_crcraw_flow(&k)));'
                      for s, _ in HASHES)
    (tmp_path / "t.c").write_text(
        "#include <stdio.h>\n#include <linux/types.h>\n#define __always_inline inline __attribute__((always_inline))\n"
        f'#include "scidmz_ebpf.h"\nint main(void) {{ struct scidmz_hkey k = {{ {init} }};\n{calls}\n return 0; }}\n')
    subprocess.run(["clang", "-O1", "-I/usr/include/x86_64-linux-gnu", "-o", str(tmp_path / "t"),
                    str(tmp_path / "t.c")], check=True, capture_output=True)
    got = [int(x) for x in subprocess.run([str(tmp_path / "t")], capture_output=True, text=True).stdout.split()]
    want = [zlib.crc32(b"".join(vals[f].to_bytes(C.HASH_FIELD_BITS[f] // 8, "big") for f in fields))
            for _, fields in HASHES for _copy in (0, 1)]
    assert got == want


def test_build_without_clang_is_one_line(monkeypatch):
    from scidmz.telemetry.ebpf.build import EbpfBuildError, build

    monkeypatch.setenv("SCIDMZ_CLANG", "/nonexistent/clang")
    with pytest.raises(EbpfBuildError) as ei:
        build()
    msg = str(ei.value)
    assert "\n" not in msg and "clang not found" in msg and "apt-get install clang libbpf-dev" in msg


@pytest.mark.root
@needs_clang
def test_equal_to_twin_regular_and_odd_frames():
    rng = np.random.default_rng(3)
    ev = regular_flows(rng, t0=10**9)
    ev += odd_frames(rng, [e[1] for e in ev])
    ys_e, ys_t = run_both(_sorted(ev), period_ns=250 * 10**6)
    _assert_series_equal(ys_e, ys_t)
    assert any(y.rtt_dtn > 0 for y in ys_e) and any(y.qdelay_campus > 0 for y in ys_e)
    assert max(y.active_flows for y in ys_e) >= 10


@pytest.mark.root
@needs_clang
def test_equal_to_twin_ipv6_flows_encapsulations_and_odd_frames():
    """IPv6 (t26): half the flows over IPv6, extension headers, fragments, MPLS, VLAN, BIG TCP
    lengths; tunnels run through the programs (counted as ``tunnel``) but not the twin."""
    rng = np.random.default_rng(6)
    ev = regular_flows(rng, t0=10**9, v6=True)
    times = [e[1] for e in ev]
    ev += odd_frames_v6(rng, times) + odd_frames(rng, times, n=300)
    from scidmz.telemetry.ebpf.replay import split_tunnelled

    assert len(split_tunnelled(ev)[1]) > 50
    ys_e, ys_t = run_both(_sorted(ev), period_ns=250 * 10**6)
    _assert_series_equal(ys_e, ys_t)
    assert any(y.rtt_dtn > 0 for y in ys_e) and any(y.qdelay_campus > 0 for y in ys_e)


@pytest.mark.root
@needs_clang
def test_equal_to_twin_on_the_real_capture_corpus():
    """t26's netns captures (real kernel TCP: an IPv6 DTN and an IPv4 campus transfer through BR1)."""
    ev = _sorted(corpus_events())
    ys_e, ys_t = run_both(ev, period_ns=250 * 10**6, prefixes=CORPUS)
    _assert_series_equal(ys_e, ys_t)
    assert max(y.rtt_dtn for y in ys_e) > 0 and max(y.rtt_campus for y in ys_e) > 0
    assert max(y.qdelay_dtn for y in ys_e) > 0 and max(y.rate_dtn for y in ys_e) > 0


@pytest.mark.root
@needs_clang
def test_equal_to_twin_rtt_on_the_egress_tap():
    rng = np.random.default_rng(4)
    ys_e, ys_t = run_both(_sorted(regular_flows(rng, t0=10**9)), rtt_tap=C.TAP_EGRESS, period_ns=250 * 10**6)
    _assert_series_equal(ys_e, ys_t)


@pytest.mark.root
@needs_clang
def test_equal_to_twin_many_flows_long_flow_and_timeouts():
    rng = np.random.default_rng(11)
    ev = _sorted(many_short_flows(rng, t0=5 * 10**9) + long_flow(t0=5 * 10**9))
    ys_e, ys_t = run_both(ev, period_ns=10**9)
    _assert_series_equal(ys_e, ys_t)
    # the cases this traffic exists for did happen
    tw = SoftwareDataPlane()
    from scidmz.telemetry.ebpf.replay import twin_packets

    tw.process(twin_packets(ev))
    s = tw.stats_dict()
    for k in ("af_collisions", "af_evictions", "rtt_rejected_expired", "long_flows", "qd_too_old"):
        assert s[k] > 0, k


@pytest.mark.root
@needs_clang
def test_equal_to_twin_across_the_32_bit_tick_wrap():
    rng = np.random.default_rng(5)
    t0 = ((1 << 32) - 1_000_000) * 1000  # 1 s before the microsecond tick wraps
    ys_e, ys_t = run_both(_sorted(regular_flows(rng, t0=t0, n=8, nseg=60)), period_ns=250 * 10**6)
    _assert_series_equal(ys_e, ys_t)


@pytest.mark.root
@needs_clang
def test_verifier_rejection_is_one_line(tmp_path):
    from scidmz.telemetry.ebpf.objects import EbpfObject, EbpfUnavailable, cfg_bytes, class_entries

    cfg = cfg_bytes(class_entries("10.0.3.2/32", "10.1.0.0/16"), 0, True, 0, 0)
    bad = tmp_path / "bad.bpf.c"
    bad.write_text(
        "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n"
        'char LICENSE[] SEC("license") = "Dual BSD/GPL";\n'
        f'const volatile char cfg[{len(cfg)}] SEC(".rodata.cfg") = {{}};\n'
        "struct { __uint(type, BPF_MAP_TYPE_RINGBUF); __uint(max_entries, 4096); } flow_events SEC(\".maps\");\n"
        'SEC("tc") int scidmz_lan_in(struct __sk_buff *skb) { return *(int *)(long)skb->data; }\n'
        'SEC("tc") int scidmz_wan_in(struct __sk_buff *skb) { return 0; }\n'
        'SEC("tc") int scidmz_wan_out(struct __sk_buff *skb) { return 0; }\n'
        'SEC("tc") int scidmz_wan_xmit(struct __sk_buff *skb) { return 0; }\n')
    obj = tmp_path / "bad.o"
    subprocess.run(["clang", "-O2", "-g", "-target", "bpf", "-I/usr/include/x86_64-linux-gnu", "-c", str(bad),
                    "-o", str(obj)], check=True, capture_output=True)
    with pytest.raises(EbpfUnavailable) as ei:
        EbpfObject(obj, cfg, ("scidmz_lan_in",))
    msg = str(ei.value)
    assert msg.startswith("the kernel's verifier rejected scidmz_lan_in: ") and "\n" not in msg
    assert "invalid" in msg or "R" in msg.split(": ", 1)[1]
    assert ei.value.log  # the whole verifier log is kept for whoever wants it


@pytest.mark.root
@needs_clang
def test_no_permission_is_one_line():
    """Without the capabilities (root with an empty bounding set): one line naming the fix, no traceback."""
    code = ("from scidmz.telemetry.ebpf.replay import EbpfReplay\n"
            "try:\n    EbpfReplay()\nexcept RuntimeError as e:\n    print('ERR', e)\n")
    r = subprocess.run(["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", sys.executable,
                        "-c", code], capture_output=True, text=True, timeout=120)
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERR no permission to load BPF programs"), r.stdout + r.stderr
