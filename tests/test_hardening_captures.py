"""Captures that were read wrong without a word: each class over a generated family of
crafted captures (mirror tunnels fragmented by the mirror's MTU, pcapng interface
options, unreadable minorities, messages that match their trigger, integer-ns periods),
with tshark as the reference where it reads the same thing."""

from __future__ import annotations

import itertools
import json
import shutil
import struct
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from scidmz.cli import main
from scidmz.telemetry.sources.fragments import FRAG_TIMEOUT_NS, Reassembler
from scidmz.telemetry.sources.pcap import CaptureInputError, read_capture, write_pcap
from scidmz.telemetry.sources.synth import encapsulate, frame
from scidmz.telemetry.twin.parse import KIND_TCP

S = 1_000_000_000
T0 = 1_700_000_000 * S
TSHARK = shutil.which("tshark")
GRE_KINDS = ("gre-ip", "gre-teb", "gre-key-seq", "erspan1", "erspan2", "erspan3", "erspan3-platform")
FIELDS = ("kind", "frame_len", "payload", "seq", "ack", "sport", "dport", "src_lo", "dst_lo", "flags", "proto")


# -- crafted captures ---------------------------------------------------------------------------------

def _inner(j: int, payload: int = 1400) -> bytes:
    return frame("10.1.0.2", "10.0.3.2", 5001, 40000 + j % 7, seq=1000 + j * payload, ack=5, flags="PA",
                 payload=payload)


def fragment(eth: bytes, size: int, ident: int) -> list[bytes]:
    """The outer IP packet of Ethernet frame ``eth`` split into fragments of ``size`` payload bytes
    (a multiple of 8), as a router on a smaller MTU does (IPv4) or the mirror's host (IPv6)."""
    et = struct.unpack("!H", eth[12:14])[0]
    l2, ip = eth[:14], eth[14:]
    out = []
    if et == 0x0800:
        ihl = (ip[0] & 0x0F) * 4
        hdr, data = ip[:ihl], ip[ihl:]
        for at in range(0, len(data), size):
            piece = data[at:at + size]
            more = at + size < len(data)
            h = bytearray(hdr)
            h[2:4] = struct.pack("!H", ihl + len(piece))
            h[4:6] = struct.pack("!H", ident & 0xFFFF)
            h[6:8] = struct.pack("!H", (0x2000 if more else 0) | (at // 8))
            out.append(l2 + bytes(h) + piece)
        return out
    nh, data = ip[6], ip[40:]
    for at in range(0, len(data), size):
        piece = data[at:at + size]
        more = at + size < len(data)
        fh = struct.pack("!BBHI", nh, 0, at | (1 if more else 0), ident)
        h = bytearray(ip[:40])
        h[4:6] = struct.pack("!H", 8 + len(piece))
        h[6] = 44
        out.append(l2 + bytes(h) + fh + piece)
    return out


def _mirror(kind: str, outer: str, n: int) -> list[bytes]:
    dst = "2001:db8:ffff::2" if ":" in outer else "192.0.2.2"
    return [encapsulate(_inner(j), kind, outer, dst) for j in range(n)]


def _rows(pk: np.ndarray) -> list[tuple[int, ...]]:
    return [tuple(int(r[f]) for f in FIELDS) for r in pk if r["kind"] == KIND_TCP]


# -- 1. tunnel packets fragmented by the mirror's MTU ----------------------------------------------------

FAMILY = list(itertools.product(GRE_KINDS, ("192.0.2.1", "2001:db8:ffff::1"), (512, 1200), ("inorder", "reversed",
                                                                                             "interleaved")))


@pytest.mark.parametrize(("kind", "outer", "size", "order"), FAMILY,
                         ids=[f"{k}-{'v6' if ':' in o else 'v4'}-{s}-{r}" for k, o, s, r in FAMILY])
def test_fragmented_mirror_packets_read_as_unfragmented(tmp_path, kind, outer, size, order):
    """Every GRE/ERSPAN kind, outer IPv4 and IPv6, two MTUs, fragments in order, reversed and
    interleaved across packets, read through small chunks: the inner frames are read exactly
    as from the unfragmented capture, and no fragment is counted lost."""
    whole = _mirror(kind, outer, 6)
    groups = [fragment(f, size, 100 + j) for j, f in enumerate(whole)]
    if order == "reversed":
        groups = [g[::-1] for g in groups]
    frames = [f for g in groups for f in g] if order != "interleaved" else [
        f for tier in itertools.zip_longest(*groups) for f in tier if f is not None]
    assert len(frames) > len(whole)
    ref = read_capture(write_pcap(tmp_path / "whole.pcap", whole, T0 + np.arange(len(whole)) * 1000))
    got_parts = list(_iter(write_pcap(tmp_path / "frag.pcap", frames, T0 + np.arange(len(frames)) * 1000), chunk=3))
    got = np.concatenate([c.packets for c in got_parts])
    assert sorted(_rows(got)) == sorted(_rows(ref.packets))
    drops = _sum(c.drops for c in got_parts)
    assert drops.get("fragment_lost", 0) == 0 and "fragment" not in drops
    assert drops["tunnel_fragment"] == len(frames) - len(whole)


def _iter(path: Path, chunk: int):
    from scidmz.telemetry.sources.pcap import iter_capture

    return iter_capture(path, chunk=chunk)


def _sum(dicts) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


@pytest.mark.parametrize("missing", ["first", "middle", "last"])
@pytest.mark.parametrize("outer", ["192.0.2.1", "2001:db8:ffff::1"])
def test_a_group_missing_a_fragment_is_counted_lost_in_packets_and_bytes(tmp_path, missing, outer):
    whole = _mirror("erspan2", outer, 4)
    groups = [fragment(f, 512, 7 + j) for j, f in enumerate(whole)]
    gone = groups[1].pop({"first": 0, "middle": 1, "last": -1}[missing])
    assert gone
    frames = [f for g in groups for f in g]
    cap = read_capture(write_pcap(tmp_path / "f.pcap", frames, T0 + np.arange(len(frames)) * 1000))
    assert len(_rows(cap.packets)) == 3
    assert cap.drops["fragment_lost"] == len(groups[1])
    assert cap.drop_bytes["fragment_lost"] == sum(len(f) for f in groups[1])


def test_reassembly_is_bounded_in_time_and_memory():
    r = Reassembler(timeout_ns=FRAG_TIMEOUT_NS, max_bytes=4000)
    frames = [f for j, fr in enumerate(_mirror("gre-teb", "192.0.2.1", 12)) for f in fragment(fr, 512, j)[:2]]
    buf = np.frombuffer(b"".join(frames), np.uint8)
    lens = np.array([len(f) for f in frames], np.int64)
    off = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    ts = T0 + np.arange(len(frames), dtype=np.int64)
    from scidmz.telemetry.twin.parse import parse_frames

    pk = parse_frames(buf, off, lens, lens, 1, ts)
    lost = r.feed(buf, off, lens, lens, np.ones(len(frames), np.int64), ts, pk)
    assert r.buffered <= 4000 and lost[0] > 0  # the oldest groups went first, counted
    later = np.array([ts[-1] + FRAG_TIMEOUT_NS + 1], np.int64)
    more = r.feed(buf[:1], off[:0], lens[:0], lens[:0], np.ones(0, np.int64), later, pk[:0])
    assert not r.groups and lost[0] + more[0] == len(frames)


@pytest.mark.skipif(TSHARK is None, reason="tshark not installed")
@pytest.mark.parametrize("outer", ["192.0.2.1", "2001:db8:ffff::1"])
@pytest.mark.parametrize("kind", ["gre-teb", "erspan2", "erspan3"])
def test_reassembled_inner_frames_match_tshark(tmp_path, kind, outer):
    whole = _mirror(kind, outer, 5)
    frames = [f for j, fr in enumerate(whole) for f in fragment(fr, 600, 300 + j)]
    path = write_pcap(tmp_path / "t.pcap", frames, T0 + np.arange(len(frames)) * 1000)
    out = subprocess.run([TSHARK, "-r", str(path), "-Y", "tcp", "-T", "fields", "-e", "tcp.seq_raw",
                          "-e", "tcp.len"], capture_output=True, text=True, check=True).stdout.split("\n")
    theirs = sorted(tuple(int(x) for x in ln.split("\t")) for ln in out if ln.strip())
    cap = read_capture(path)
    ours = sorted((int(r["seq"]), int(r["payload"])) for r in cap.packets if r["kind"] == KIND_TCP)
    assert ours == theirs and len(ours) == 5


@pytest.mark.parametrize("outer", ["192.0.2.1", "2001:db8:ffff::1"])
def test_a_fragmented_mirror_replays_as_the_unfragmented_one(tmp_path, capsys, outer):
    """End to end: rates, RTT and flows of a mirror capture whose every data copy was fragmented
    equal those of the same capture unfragmented (unreassembled, a public ERSPAN capture lost 86 % of a DTN's bytes)."""
    whole, frags, t_whole, t_frag = [], [], [], []
    for j in range(300):
        t = T0 + j * 2 * 1_000_000
        data = frame("10.0.0.1", DTN, 5001, 40000 + j % 7, seq=1000 + j * 1400, ack=5, flags="PA", payload=1400)
        ack = frame(DTN, "10.0.0.1", 40000 + j % 7, 5001, seq=5, ack=1000 + (j + 1) * 1400, flags="A")
        for fr, dt in ((data, 0), (ack, 800_000)):
            m = encapsulate(fr, "erspan2", outer, "2001:db8:ffff::2" if ":" in outer else "192.0.2.2")
            whole.append(m)
            t_whole.append(t + dt)
            pieces = fragment(m, 512, j * 2 + (dt > 0)) if len(m) > 600 else [m]
            frags += pieces
            t_frag += [t + dt] * len(pieces)  # the copy's fragments leave the mirror together
    a = write_pcap(tmp_path / "whole.pcap", whole, t_whole)
    b = write_pcap(tmp_path / "frag.pcap", frags, t_frag)
    out = []
    for p in (a, b):
        assert main(["telemetry", "replay", str(p), "--period", "100ms", "--json"]) == 0
        out.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))
    assert len(frags) > len(whole) and out[1]["series"] == out[0]["series"]
    assert out[1]["drops"]["tunnel_fragment"] == len(frags) - len(whole) and "fragment_lost" not in out[1]["drops"]
    assert out[0]["series"][1]["rate_dtn"] > 0 and out[0]["series"][1]["rtt_dtn"] == pytest.approx(0.8e-3, rel=0.01)


def test_ipv6_atomic_fragments_are_read_as_unfragmented(tmp_path):
    plain = [frame("2001:db8:1::2", "2001:db8::1", 5001, 80, seq=j, flags="PA", payload=100) for j in range(4)]
    atomic = [fragment(f, 4096, j)[0] for j, f in enumerate(plain)]
    assert all(len(a) == len(f) + 8 for a, f in zip(atomic, plain, strict=True))
    ref = read_capture(write_pcap(tmp_path / "p.pcap", plain, T0 + np.arange(4)))
    got = read_capture(write_pcap(tmp_path / "a.pcap", atomic, T0 + np.arange(4)))
    cols = ("kind", "payload", "seq", "sport", "dport", "src_hi", "src_lo", "proto")
    assert [tuple(int(r[c]) for c in cols) for r in got.packets] == [tuple(int(r[c]) for c in cols)
                                                                      for r in ref.packets]


def test_all_fragments_lost_is_named_not_blamed_on_the_prefixes(tmp_path, capsys):
    frames = [fragment(f, 512, j)[1] for j, f in enumerate(_mirror("erspan2", "192.0.2.1", 30))]
    path = write_pcap(tmp_path / "lost.pcap", frames, T0 + np.arange(len(frames)) * 1000)
    assert main(["telemetry", "replay", str(path)]) == 1
    err = capsys.readouterr().err
    assert "fragment" in err and "bytes" in err and "prefix" not in err


# -- 2. pcapng interface options -------------------------------------------------------------------------

def _opt(code: int, val: bytes) -> bytes:
    return struct.pack("<HH", code, len(val)) + val + b"\0" * ((-len(val)) % 4)


def _block(bt: int, body: bytes) -> bytes:
    return struct.pack("<II", bt, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))


def pcapng(ifaces: list[tuple[int, int | None]], packets: list[tuple[int, int]]) -> bytes:
    """A pcapng file: one IDB per (if_tsresol byte, if_tsoffset s or None), EPBs of (iface, ticks)."""
    shb = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    idbs = b"".join(_block(1, struct.pack("<HHI", 1, 0, 0) + _opt(9, bytes([res]))
                           + (_opt(14, struct.pack("<q", off)) if off is not None else b"") + _opt(0, b""))
                    for res, off in ifaces)
    fr = frame("10.1.0.2", "10.0.3.2", 1, 2, seq=1, flags="PA", payload=10)
    fr += b"\0" * ((-len(fr)) % 4)
    epbs = b"".join(_block(6, struct.pack("<IIIII", i, t >> 32, t & 0xFFFFFFFF, len(fr), len(fr)) + fr)
                    for i, t in packets)
    return shb + idbs + epbs


def _exact_ns(res: int, off: int | None, ticks: int) -> int:
    unit = Fraction(1, 2 ** (res & 0x7F)) if res & 0x80 else Fraction(1, 10 ** res)
    return int((ticks * unit + (off or 0)) * S // 1)


RESOLUTIONS = [0, 3, 6, 9, 12, 18, 0x80 | 0, 0x80 | 10, 0x80 | 20, 0x80 | 30, 0x80 | 33, 0x80 | 40, 0x80 | 50,
               0x80 | 62, 0x80 | 63]


@pytest.mark.parametrize("res", RESOLUTIONS, ids=[f"{'bin' if r & 0x80 else 'dec'}{r & 0x7F}" for r in RESOLUTIONS])
@pytest.mark.parametrize("off", [None, 0, 1_700_000_000, -3600])
def test_pcapng_timestamps_are_exact_for_every_resolution_and_offset(tmp_path, res, off):
    """The timestamp is the exact ticks x resolution + if_tsoffset, floored to the ns (Fraction
    reference), for decimal and binary exponents up to the largest read, with ticks near the
    top of what each resolution's 64 bits hold."""
    e = res & 0x7F
    unit = Fraction(1, 2 ** e) if res & 0x80 else Fraction(1, 10 ** e)
    top = min((1 << 63) - 1, int(Fraction(2 ** 32) / unit))  # at most 2^32 s: inside int64 ns
    rng = np.random.default_rng(res * 7 + (off or 0) % 97)
    ticks = sorted({1, top, top // 3, *(int(x) for x in rng.integers(0, max(top, 2), 5, dtype=np.uint64))})
    path = tmp_path / "t.pcapng"
    path.write_bytes(pcapng([(res, off)], [(0, t) for t in ticks]))
    got = read_capture(path).packets["ts_ns"].tolist()
    assert got == [_exact_ns(res, off, t) for t in ticks]


@pytest.mark.skipif(TSHARK is None, reason="tshark not installed")
@pytest.mark.parametrize(("res", "off"), [(6, None), (9, 100), (0x80 | 20, 1_700_000_000), (3, -7)])
def test_pcapng_timestamps_match_tshark(tmp_path, res, off):
    """Where tshark's own arithmetic is exact (it overflows above 2^-32 binary), it agrees to the ns."""
    unit = Fraction(1, 2 ** (res & 0x7F)) if res & 0x80 else Fraction(1, 10 ** res)
    ticks = [int(Fraction(1_700_000_000 if off is None else 12, 1) / unit) + k * 977 for k in range(3)]
    path = tmp_path / "t.pcapng"
    path.write_bytes(pcapng([(res, off)], [(0, t) for t in ticks]))
    out = subprocess.run([TSHARK, "-r", str(path), "-T", "fields", "-e", "frame.time_epoch"], capture_output=True,
                         text=True, check=True).stdout.split()
    theirs = [int(Fraction(x) * S) for x in out]
    assert read_capture(path).packets["ts_ns"].tolist() == theirs


@pytest.mark.parametrize("res", [0, 6, 0x80 | 0, 0x80 | 30])
def test_a_timestamp_beyond_int64_ns_is_a_corrupt_record_not_a_wrap(tmp_path, res):
    unit = Fraction(1, 2 ** (res & 0x7F)) if res & 0x80 else Fraction(1, 10 ** res)
    good = int(Fraction(1_700_000_000) / unit)
    huge = [min((1 << 64) - 1, int(Fraction(2 ** 40) / unit)), (1 << 64) - 1]
    path = tmp_path / "h.pcapng"
    path.write_bytes(pcapng([(res, None)], [(0, good), (0, huge[0]), (0, good + 1), (0, huge[1])]))
    cap = read_capture(path)
    assert cap.packets.size == 2 and cap.drops["corrupt_record"] == 2
    assert cap.packets["ts_ns"].tolist() == [_exact_ns(res, None, good), _exact_ns(res, None, good + 1)]


@pytest.mark.parametrize(("res", "off", "word"), [(19, None, "if_tsresol"), (0x80 | 64, None, "if_tsresol"),
                                                  (0x80 | 127, None, "if_tsresol"), (6, 1 << 40, "if_tsoffset"),
                                                  (6, -(1 << 33), "if_tsoffset")])
def test_absurd_interface_options_are_refused_with_one_line(tmp_path, capsys, res, off, word):
    path = tmp_path / "bad.pcapng"
    path.write_bytes(pcapng([(6, None), (res, off)], [(0, 5), (1, 5)]))
    with pytest.raises(CaptureInputError, match=word):
        read_capture(path)
    assert main(["telemetry", "replay", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and word in err[0] and "interface 1" in err[0]


# -- 3. what cannot be read, below the refusal threshold, is named with its amount ------------------------

DTN, REMOTE = "10.0.3.2", "10.1.0.2"
MS = 1_000_000


def _data(j: int, payload: int = 1000) -> bytes:
    return frame(REMOTE, DTN, 5001, 40000, seq=j * payload, ack=1, flags="PA", payload=payload)


def _ack(j: int) -> bytes:
    return frame(DTN, REMOTE, 40000, 5001, seq=1, ack=j * 1000, flags="A")


def _flow(n: int) -> list[bytes]:
    return [f for j in range(n) for f in (_data(j), _ack(j))]


def _replay(path: Path, capsys, *extra: str) -> tuple[int, list[str], str]:
    rc = main(["telemetry", "replay", str(path), *extra])
    cap = capsys.readouterr()
    return rc, [ln for ln in cap.err.splitlines() if ln.strip()], cap.out


UNREAD = {
    "ah": (lambda j: frame(REMOTE, DTN, proto=51, payload=b"\x06\x04" + bytes(22) + _data(j)[34:]), "IPsec AH"),
    "esp": (lambda j: frame(REMOTE, DTN, proto=50, payload=bytes(1000)), "IPsec ESP"),
    "ext17": (lambda j: frame("2001:db8:1::2", "2001:db8::1", 5001, 40000, seq=j, flags="PA", payload=1000,
                              ipv6_ext=((60, 8),) * 17), "more than 16 IPv6 extension headers"),
    "fragment": (lambda j: frame(REMOTE, DTN, 5001, 40000, seq=j, flags="PA", payload=1000, frag=0x2000 | j),
                 "IP fragments (not of a mirror tunnel)"),
}


@pytest.mark.parametrize("kind", sorted(UNREAD))
@pytest.mark.parametrize("share", [2, 10, 30])
def test_traffic_without_a_readable_l4_warns_naming_what_and_how_much(tmp_path, capsys, kind, share):
    """AH, ESP, an extension-header chain beyond 16, plain fragments: each at 2-30 % of a capture
    that is otherwise measured warns once, naming the kind, its packets and its bytes."""
    make, words = UNREAD[kind]
    frames = _flow(100)
    odd = [make(j) for j in range(share * 2)]
    frames = frames[:100] + odd + frames[100:]
    path = write_pcap(tmp_path / "u.pcap", frames, T0 + np.arange(len(frames)) * MS)
    rc, err, _ = _replay(path, capsys, "--dtn-prefix", "10.0.3.2/32,2001:db8::1/128",
                         "--remote-prefix", "10.1.0.0/16,2001:db8:1::/48")
    hits = [ln for ln in err if words in ln]
    assert rc == 0 and len(hits) == 1, err
    nbytes = sum(len(f) for f in odd)
    assert f"{nbytes} of " in hits[0] and f"({len(odd)} of {len(frames)} packets)" in hits[0]


def test_a_minority_link_type_warns_naming_it(tmp_path, capsys):
    fr = [f + b"\0" * ((-len(f)) % 4) for f in _flow(50)]
    shb = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    idbs = _block(1, struct.pack("<HHI", 1, 0, 0)) + _block(1, struct.pack("<HHI", 147, 0, 0))
    t = T0 // 1000
    epbs = b"".join(_block(6, struct.pack("<IIIII", 1 if j % 10 == 9 else 0, (t + j) >> 32, (t + j) & 0xFFFFFFFF,
                                           len(f), len(f)) + f) for j, f in enumerate(fr))
    path = tmp_path / "lt.pcapng"
    path.write_bytes(shb + idbs + epbs)
    rc, err, _ = _replay(path, capsys)
    assert rc == 0 and len([ln for ln in err if "link type 147" in ln and "(10 of 100 packets)" in ln]) == 1, err


@pytest.mark.parametrize("step_s", [0.05, 2, 3600])
def test_a_clock_stepped_back_warns_with_the_step(tmp_path, capsys, step_s):
    frames = _flow(100)
    ts = T0 + np.arange(len(frames)) * MS
    ts[100:] -= int(step_s * S) + 100 * MS
    path = write_pcap(tmp_path / "c.pcap", frames, ts)
    rc, err, _ = _replay(path, capsys, "--period", "100ms")
    hits = [ln for ln in err if "stepped back 1 time(s)" in ln]
    assert rc == 0 and len(hits) == 1 and f"{step_s + 0.099:.6g} s" in hits[0], err
    # reordering below CLOCK_STEP_NS (two capture queues) is no step
    ts2 = T0 + np.arange(len(frames)) * MS
    ts2[1::2] -= 2 * MS
    rc, err, _ = _replay(write_pcap(tmp_path / "r.pcap", frames, ts2), capsys)
    assert rc == 0 and not [ln for ln in err if "stepped back" in ln]


# -- 4. messages that match their trigger -------------------------------------------------------------------

def _geneve(j: int) -> bytes:
    return frame("192.0.2.1", "192.0.2.2", 49152, 6081, proto=17, payload=bytes(8) + _data(j))


def _gre_udp(j: int) -> bytes:
    return frame("192.0.2.1", "192.0.2.2", 49152, 4754, proto=17, payload=struct.pack("!HH", 0, 0x0800) + _data(j)[14:])


def _wccp(j: int) -> bytes:
    return frame("192.0.2.1", "192.0.2.2", proto=47, payload=struct.pack("!HHI", 0, 0x883E, 0) + _data(j)[14:])


TUNNELS = {"Geneve": _geneve, "GRE in UDP": _gre_udp, "WCCP": _wccp}


@pytest.mark.parametrize("name", sorted(TUNNELS))
def test_unsupported_tunnels_are_named_not_blamed_on_the_prefixes(tmp_path, capsys, name):
    frames = [TUNNELS[name](j) for j in range(40)]
    path = write_pcap(tmp_path / "t.pcap", frames, T0 + np.arange(40) * MS)
    rc, err, _ = _replay(path, capsys)
    assert rc == 1 and len(err) == 1 and name in err[0] and "40 packets" in err[0], err
    assert "check the prefixes" not in err[0] and "--allow-drops" not in err[0]
    # a minority of them beside measured traffic: a warning naming them
    mixed = _flow(50) + frames[:10]
    rc, err, _ = _replay(write_pcap(tmp_path / "m.pcap", mixed, T0 + np.arange(len(mixed)) * MS), capsys)
    assert rc == 0 and len([ln for ln in err if name in ln and "10 packets" in ln]) == 1, err
    assert not [ln for ln in err if "matched neither" in ln]


REFUSALS = {  # name: (frames, orig lengths or None, words in the line, --allow-drops offered)
    "by-packets": ([_data(0)] * 4 + [_data(0)[:30]] * 10, None, "10 of 14 packets were cut", True),
    "by-bytes": ([_data(0)] * 10 + [_data(0)[:30]] * 4, [len(_data(0))] * 10 + [60000] * 4,
                 f"240000 of {10 * len(_data(0)) + 240000} bytes (4 of 14 packets) were cut", True),
    "nothing-left": ([_data(0)[:30]] * 10, None, "10 of 10 packets were cut", False),
    "no-match": ([frame("192.0.2.1", "192.0.2.9", payload=100)] * 10, None, "check the prefixes", False),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_a_refusal_is_worded_by_its_trigger_and_offers_allow_drops_only_where_it_measures(tmp_path, capsys, name):
    frames, orig, words, offered = REFUSALS[name]
    path = write_pcap(tmp_path / "r.pcap", frames, T0 + np.arange(len(frames)) * MS, orig_len=orig)
    rc, err, _ = _replay(path, capsys)
    assert rc == 1 and len(err) == 1 and words in err[0], err
    assert ("--allow-drops measures the rest" in err[0]) == offered


def test_the_drops_line_lists_only_drops(tmp_path, capsys):
    frames = _flow(50) + [frame(REMOTE, DTN, proto=1, payload=56)] * 5 + [UNREAD["fragment"][0](1)] * 3 + [
        bytes(12) + b"\x08\x06" + bytes(28)] * 2
    path = write_pcap(tmp_path / "d.pcap", frames, T0 + np.arange(len(frames)) * MS)
    rc, _, out = _replay(path, capsys)
    assert rc == 0 and out.strip().splitlines()[-1] == "drops: non_ip=2"
    rc, _, out = _replay(write_pcap(tmp_path / "c.pcap", _flow(50), T0 + np.arange(100) * MS), capsys)
    assert out.strip().splitlines()[-1] == "drops: none"


def test_the_sender_check_weighs_bytes(tmp_path, capsys):
    """The DTN prefix names the sender: it sends 1000-byte segments and gets ACKs, a third of
    which carry a few bytes of their own (a control channel); by packets the ACKs looked
    like data, by bytes they are 0.3 % of what flows the other way."""
    sender, receiver = "10.0.0.10", DTN
    frames = []
    for j in range(60):
        frames.append(frame(sender, receiver, 40000, 5001, seq=j * 1000, ack=1, flags="PA", payload=1000))
        frames.append(frame(receiver, sender, 5001, 40000, seq=1 + j, ack=j * 1000, flags="PA" if j % 3 == 0 else "A",
                            payload=3 if j % 3 == 0 else 0))
    path = write_pcap(tmp_path / "s.pcap", frames, T0 + np.arange(len(frames)) * MS)
    rc, err, _ = _replay(path, capsys, "--dtn-prefix", sender + "/32")
    assert rc == 0 and len([ln for ln in err if "is it the DTN sender?" in ln and "60000 bytes" in ln]) == 1, err
    # the receiving DTN given: no such warning
    rc, err, _ = _replay(path, capsys, "--dtn-prefix", receiver + "/32")
    assert rc == 0 and not [ln for ln in err if "DTN sender" in ln]


@pytest.mark.parametrize("extra", [[], ["--ingress-pcap"]])
def test_a_span_refusal_exits_1_as_the_other_capture_refusals(tmp_path, capsys, extra):
    ts = T0 + np.arange(100) * MS
    ts[-1] += 10 * 365 * 86400 * S
    path = write_pcap(tmp_path / "s.pcap", _flow(50), ts)
    args = [*extra, str(path)] if extra else []
    rc, err, _ = _replay(path, capsys, "--period", "1ms", *args)
    assert rc == 1 and len(err) == 1 and "periods" in err[0] and "--skip-outliers" in err[0]


# -- 5. periods in integer ns ----------------------------------------------------------------------------

@pytest.mark.parametrize("period_ms", [100, 10, 1000])
@pytest.mark.parametrize("t0_s", [1_700_000_000, 1_700_000_000.123456789, 4_000_000_000])
def test_rates_are_exact_at_epoch_timestamps(tmp_path, capsys, period_ms, t0_s):
    """A constant 10 frames of 1000 bytes per period, at epoch-scale timestamps: every full
    period's DTN rate is exactly 8 * 10000 / T (float64 epoch seconds were 1.4 ppm off)."""
    per = 10
    n = per * 30
    step = period_ms * MS // per
    t0 = int(Fraction(str(t0_s)) * S)
    frames = [frame(REMOTE, DTN, 5001, 40000, seq=j * 946, flags="PA", payload=946) for j in range(n)]
    assert len(frames[0]) == 1000
    path = write_pcap(tmp_path / "r.pcap", frames, t0 + np.arange(n, dtype=np.int64) * step)
    rc, _, out = _replay(path, capsys, "--period", f"{period_ms}ms", "--json")
    series = json.loads(out.strip().splitlines()[-1])["series"]
    rates = [p["rate_dtn"] for p in series[:-1]]
    assert rc == 0 and len(rates) >= 25
    assert rates == [8.0 * per * 1000 / (period_ms / 1000)] * len(rates)
    assert [p["t"] for p in series[:3]] == [period_ms * k / 1000 for k in (1, 2, 3)]


@pytest.mark.root
def test_the_live_ring_reassembles_fragmented_mirror_packets():
    """A live mirror interface (a veth pair of this test's own) receiving fragmented ERSPAN
    copies: the ring reads the inner frames, as the file reader does."""
    import socket

    from scidmz.telemetry.sources.capture import RingCapture

    a, b = "capfrag0a", "capfrag0b"
    subprocess.run(["ip", "link", "del", a], check=False, capture_output=True)  # a crashed run's leftover
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
    try:
        for dev in (a, b):
            subprocess.run(["ip", "link", "set", dev, "up"], check=True)
        whole = _mirror("erspan2", "192.0.2.1", 5)
        frames = [f for j, fr in enumerate(whole) for f in fragment(fr, 512, 900 + j)]
        got = []
        with RingCapture(b, retire_ms=5) as ring, socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
            s.bind((a, 0))
            for f in frames:
                s.send(f)
            for _ in range(100):
                got.append(ring.poll(timeout=0.02))
                if sum(int((g["kind"] == KIND_TCP).sum()) for g in got) >= 5:
                    break
            lost = ring.drops().get("fragment_lost", 0)
        pk = np.concatenate(got)
        assert sorted(_rows(pk)) == sorted(_rows(read_capture_frames(whole))) and lost == 0
    finally:
        subprocess.run(["ip", "link", "del", a], check=False)


def read_capture_frames(frames: list[bytes]) -> np.ndarray:
    from scidmz.telemetry.twin.parse import parse_frames

    buf = np.frombuffer(b"".join(frames), np.uint8)
    lens = np.array([len(f) for f in frames], np.int64)
    off = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    return parse_frames(buf, off, lens, lens, 1, np.zeros(len(frames), np.int64))
