"""Bad input never raises and never samples: parser and capture-file readers,
per-reason drop counters, a hypothesis fuzz of both, and the CRC-32 layouts."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scidmz.telemetry import constants as C
from scidmz.telemetry.sources.pcap import read_capture, write_pcap
from scidmz.telemetry.sources.synth import frame
from scidmz.telemetry.twin.dataplane import SoftwareDataPlane, crc32_fields
from scidmz.telemetry.twin.parse import (
    KIND_DROP,
    KIND_L3,
    KIND_TCP,
    KIND_UDP,
    REASONS,
    parse_frames,
)

T0 = 1_700_000_000 * 1_000_000_000


def parse(frames: list[bytes], linktype: int = 1, orig: list[int] | None = None) -> np.ndarray:
    buf = np.frombuffer(b"".join(frames) or b"\0", dtype=np.uint8)
    lens = np.array([len(f) for f in frames], dtype=np.int64)
    off = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64) if frames else np.zeros(0, np.int64)
    wl = lens if orig is None else np.array(orig, dtype=np.int64)
    return parse_frames(buf, off, lens, wl, linktype, np.arange(len(frames), dtype=np.int64))


def reason(pk: np.ndarray) -> list[str]:
    return [REASONS[r] for r in pk["reason"]]


def test_good_tcp_and_udp_fields():
    pk = parse([frame("10.0.0.1", "10.1.2.3", 1234, 80, seq=0xFFFFFFF0, ack=77, flags="FPA", payload=300,
                      ip_id=4242),
                frame("10.0.0.1", "10.1.2.3", 53, 5353, proto=17, payload=12)])
    t, u = pk
    assert (t["kind"], t["src"], t["dst"], t["sport"], t["dport"]) == (KIND_TCP, 0x0A000001, 0x0A010203, 1234, 80)
    assert (t["seq"], t["ack"], t["flags"], t["payload"], t["ip_id"]) == (0xFFFFFFF0, 77, 0x19, 300, 4242)
    assert (u["kind"], u["sport"], u["dport"], u["payload"]) == (KIND_UDP, 53, 5353, 12)


@pytest.mark.parametrize("optlen", range(0, 41))
def test_tcp_options_of_every_length(optlen):
    opts = bytes([1]) * optlen  # NOPs, padded to 4 by the builder
    pk = parse([frame("10.0.0.1", "10.1.0.1", seq=5, flags="PA", payload=100, tcp_options=opts),
                frame("10.0.0.1", "10.1.0.1", seq=5, flags="A", payload=0, tcp_options=opts)])
    assert list(pk["kind"]) == [KIND_TCP, KIND_TCP]
    assert list(pk["payload"]) == [100, 0]
    assert list(pk["seq"]) == [5, 5]


@pytest.mark.parametrize("optlen", range(0, 41, 4))
def test_ip_options(optlen):
    pk = parse([frame("10.0.0.1", "10.1.0.1", 9, 10, seq=123, flags="A", payload=50, ip_options=b"\x01" * optlen)])
    assert pk["kind"][0] == KIND_TCP and pk["sport"][0] == 9 and pk["payload"][0] == 50 and pk["seq"][0] == 123


def test_any_number_of_vlan_tags():
    frames = [frame("10.0.0.1", "10.1.0.1", 1, 2, payload=10, vlans=tuple(range(5, 5 + n))) for n in range(8)]
    pk = parse(frames)
    assert list(pk["kind"]) == [KIND_TCP] * 8 and list(pk["payload"]) == [10] * 8
    # the frame on the wire, tags included, is what the class counters count
    assert list(pk["frame_len"]) == [len(f) for f in frames]


def test_every_truncation_is_counted_not_raised():
    full = frame("10.0.0.1", "10.1.0.1", 1, 2, seq=1, flags="PA", payload=100, ip_options=b"\x01" * 8,
                 tcp_options=b"\x01" * 12, vlans=(3,))
    cuts = [full[:n] for n in range(len(full))]
    pk = parse(cuts, orig=[len(full)] * len(cuts))
    hdr = 14 + 4 + 28 + 14  # TCP up to its flags is all the parser needs; the rest may be cut
    for n, p in enumerate(pk):
        if n >= hdr:
            assert p["kind"] == KIND_TCP and p["payload"] == 100
        else:
            assert p["kind"] == KIND_DROP and REASONS[p["reason"]] == "truncated", n


def test_reasons_for_malformed_headers():
    good = frame("10.0.0.1", "10.1.0.1", 1, 2, seq=1, flags="PA", payload=20)
    ipv6 = bytes(12) + b"\x86\xdd" + bytes(60)  # version nibble 0
    arp = bytes(12) + b"\x08\x06" + bytes(28)
    badver = good[:14] + bytes([0x65]) + good[15:]
    badihl = good[:14] + bytes([0x43]) + good[15:]
    longtot = good[:16] + struct.pack("!H", 2000) + good[18:]
    shorttot = good[:16] + struct.pack("!H", 10) + good[18:]
    doff = bytearray(good)
    doff[14 + 20 + 12] = 0x30
    doff_big = bytearray(good)
    doff_big[14 + 20 + 12] = 0xF0
    frag_mf = frame("10.0.0.1", "10.1.0.1", payload=20, frag=0x2000)
    frag_off = frame("10.0.0.1", "10.1.0.1", payload=20, frag=0x0010)
    icmp = frame("10.0.0.1", "10.1.0.1", proto=1, payload=8)
    badudp = bytearray(frame("10.0.0.1", "10.1.0.1", proto=17, payload=8))
    badudp[14 + 20 + 4: 14 + 20 + 6] = struct.pack("!H", 4)
    zero_payload = frame("10.0.0.1", "10.1.0.1", flags="A", payload=0)
    pk = parse([ipv6, arp, badver, badihl, longtot, shorttot, bytes(doff), bytes(doff_big), frag_mf, frag_off,
                icmp, bytes(badudp), zero_payload])
    assert reason(pk) == ["bad_ip_version", "non_ip", "bad_ip_version", "bad_ihl", "bad_ip_length", "bad_ip_length",
                          "bad_tcp_offset", "bad_tcp_offset", "fragment", "fragment", "other_protocol",
                          "bad_udp_length", "ok"]
    # fragments/ICMP still count as IPv4 bytes for the class counters, nothing else
    assert list(pk["kind"][8:11]) == [KIND_L3] * 3
    assert pk["kind"][12] == KIND_TCP and pk["payload"][12] == 0


def test_linktypes_raw_sll_and_unknown():
    ipv4 = frame("10.0.0.1", "10.1.0.1", 1, 2, payload=10)[14:]
    sll = bytes(14) + b"\x08\x00" + ipv4
    assert parse([ipv4], linktype=101)["kind"][0] == KIND_TCP
    assert parse([sll], linktype=113)["kind"][0] == KIND_TCP
    assert reason(parse([ipv4], linktype=999)) == ["unknown_linktype"]
    # DLT_NULL: the address family in either byte order; an unknown family is not IP
    assert reason(parse([struct.pack("<I", 2) + ipv4, struct.pack(">I", 2) + ipv4, struct.pack("<I", 99) + ipv4],
                        linktype=0)) == ["ok", "ok", "non_ip"]


def _pcap(frames: list[bytes], tmp_path, name="x.pcap") -> bytes:
    p = write_pcap(tmp_path / name, frames, [T0 + i for i in range(len(frames))])
    return p.read_bytes()


def test_corrupt_pcap_records(tmp_path):
    frames = [frame("10.0.0.1", "10.1.0.1", 1, 2, seq=i, payload=10) for i in range(5)]
    raw = _pcap(frames, tmp_path)
    rec = 16 + len(frames[0])
    # impossible incl_len in record 3: the reader skips to the next plausible header and reads on
    bad = bytearray(raw)
    struct.pack_into("<I", bad, 24 + 3 * rec + 8, 10_000_000)
    (tmp_path / "bad.pcap").write_bytes(bytes(bad))
    cap = read_capture(tmp_path / "bad.pcap")
    assert list(cap.packets["seq"]) == [0, 1, 2, 4] and cap.drops == {"corrupt_record": 1}
    assert cap.drop_bytes == {"corrupt_record": rec}
    # incl_len > orig_len, and a microsecond field of a second or more: read on, as tshark does
    bad = bytearray(raw)
    struct.pack_into("<I", bad, 24 + 1 * rec + 12, 5)
    struct.pack_into("<I", bad, 24 + 2 * rec + 4, 1_000_000_000)
    (tmp_path / "bad2.pcap").write_bytes(bytes(bad))
    cap = read_capture(tmp_path / "bad2.pcap")
    assert len(cap.packets) == 5 and cap.drops == {"record_fixed": 2}
    assert cap.packets["frame_len"][1] == len(frames[1])
    # file cut inside the last record
    (tmp_path / "cut.pcap").write_bytes(raw[:-7])
    cap = read_capture(tmp_path / "cut.pcap")
    assert len(cap.packets) == 4 and cap.drops == {"truncated_file": 1}
    # not a capture at all / too short: one clear ValueError
    (tmp_path / "junk.pcap").write_bytes(b"hello world, this is not a pcap file")
    with pytest.raises(ValueError, match="not a pcap or pcapng"):
        read_capture(tmp_path / "junk.pcap")
    (tmp_path / "short.pcap").write_bytes(raw[:10])
    with pytest.raises(ValueError, match="too short"):
        read_capture(tmp_path / "short.pcap")
    # big-endian microsecond pcap
    be = struct.pack(">IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for i, f in enumerate(frames):
        be += struct.pack(">IIII", 1_700_000_000, i * 10, len(f), len(f)) + f
    (tmp_path / "be.pcap").write_bytes(be)
    cap = read_capture(tmp_path / "be.pcap")
    assert len(cap.packets) == 5 and cap.drops == {}
    assert list(cap.packets["ts_ns"] - cap.packets["ts_ns"][0]) == [0, 10_000, 20_000, 30_000, 40_000]


def _pcapng(frames: list[bytes], tsresol: int | None = None) -> bytes:
    def block(btype: int, body: bytes) -> bytes:
        body += b"\0" * (-len(body) % 4)
        n = len(body) + 12
        return struct.pack("<II", btype, n) + body + struct.pack("<I", n)

    out = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    opts = b""
    if tsresol is not None:
        opts = struct.pack("<HHB3x", 9, 1, tsresol) + struct.pack("<HH", 0, 0)
    out += block(1, struct.pack("<HHI", 1, 0, 65535) + opts)
    for i, f in enumerate(frames):
        t = 1_700_000_000 * 10**9 // (1000 if tsresol is None else 1) + i
        out += block(6, struct.pack("<IIIII", 0, t >> 32, t & 0xFFFFFFFF, len(f), len(f)) + f)
    out += block(3, struct.pack("<I", len(frames[0])) + frames[0])  # simple packet block
    return out


def test_pcapng_resolution_and_corrupt_block(tmp_path):
    frames = [frame("10.0.0.1", "10.1.0.1", 1, 2, seq=i, payload=10) for i in range(4)]
    (tmp_path / "a.pcapng").write_bytes(_pcapng(frames))
    cap = read_capture(tmp_path / "a.pcapng")
    assert len(cap.packets) == 4 and cap.drops == {"no_timestamp": 1}
    assert cap.packets["ts_ns"][1] - cap.packets["ts_ns"][0] == 1000  # default resolution: us
    (tmp_path / "n.pcapng").write_bytes(_pcapng(frames, tsresol=9))
    cap = read_capture(tmp_path / "n.pcapng")
    assert cap.packets["ts_ns"][1] - cap.packets["ts_ns"][0] == 1
    raw = bytearray(_pcapng(frames))
    struct.pack_into("<I", raw, len(raw) - 4, 12345)  # trailing length of the last block disagrees
    (tmp_path / "c.pcapng").write_bytes(bytes(raw))
    cap = read_capture(tmp_path / "c.pcapng")
    assert len(cap.packets) == 4 and cap.drops == {"corrupt_record": 1}


_FRAME_STRATEGY = st.one_of(
    st.binary(min_size=0, max_size=120),
    st.builds(lambda f, cut, flips: _mutate(f, cut, flips),
              st.sampled_from([frame("10.0.0.1", "10.1.0.1", 1, 2, seq=9, flags="PA", payload=30,
                                     tcp_options=b"\x01" * 8),
                               frame("10.0.0.1", "10.0.3.2", proto=17, payload=16, vlans=(7,)),
                               frame("10.1.0.1", "10.0.0.1", 2, 1, ack=39, flags="A", ip_options=b"\x01" * 4)]),
              st.integers(0, 120), st.lists(st.tuples(st.integers(0, 119), st.integers(0, 255)), max_size=4)),
)


def _mutate(f: bytes, cut: int, flips: list[tuple[int, int]]) -> bytes:
    b = bytearray(f[:cut] if cut else f)
    for pos, val in flips:
        if pos < len(b):
            b[pos] = val
    return bytes(b)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_FRAME_STRATEGY, min_size=1, max_size=20), st.sampled_from([1, 101, 113, 7]))
def test_fuzz_parser_and_dataplane(frames, linktype):
    orig = [len(f) for f in frames]
    pk = parse(frames, linktype=linktype, orig=orig)
    assert len(pk) == len(frames)
    drop = pk["kind"] == KIND_DROP
    assert np.all(pk["reason"][drop] != 0) or not drop.any()
    tcp = pk["kind"] == KIND_TCP
    # a parsed TCP payload always fits inside the frame on the wire
    assert np.all(pk["payload"][tcp] + 40 <= pk["frame_len"][tcp])
    dp = SoftwareDataPlane(["10.0.3.0/24"], ["10.1.0.0/16", "10.0.0.0/16"])
    pk["tap"] = np.arange(len(pk)) % 2
    dp.process(pk)
    rtt, _ = dp.drain_digests()
    assert np.all(rtt["rtt"] <= C.RTT_TIMEOUT_TICKS)


@settings(max_examples=150, deadline=None)
@given(st.binary(min_size=0, max_size=400), st.booleans())
def test_fuzz_capture_files(tail, pcapng):
    import os
    import tempfile

    head = (_pcapng([frame("10.0.0.1", "10.1.0.1")])[:28 + 20] if pcapng
            else struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
    fd, path = tempfile.mkstemp(suffix=".pcap")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(head + tail)
        try:
            cap = read_capture(path)
        except ValueError as exc:  # only the one-line header complaint is allowed
            assert "pcap" in str(exc)
            return
        assert all(isinstance(v, int) and v > 0 for v in cap.drops.values())
        assert set(cap.drops) <= set(REASONS) | {"record_fixed"}
    finally:
        os.unlink(path)


def test_crc_layouts_match_zlib():
    """The data plane's CRC-32 over each constants.py layout equals zlib.crc32 of the big-endian fields."""
    from scidmz.telemetry.twin import algorithms as A
    from scidmz.telemetry.twin import layout as LY

    rng = np.random.default_rng(3)
    for _ in range(50):
        vals = {name: int(rng.integers(0, 1 << bits)) for name, bits in C.HASH_FIELD_BITS.items()}
        arr = np.array([vals[n] for n in C.HASH_FIELD_BITS], dtype=np.int64)
        vs = np.array([A.swap(int(v), int(w)) for v, w in zip(arr, LY.FIELD_WIDTHS, strict=True)])
        for row, fields in enumerate(LY.LAYOUT_FIELDS):
            want = crc32_fields(vals, fields)
            assert int(A.crc32(vs, row)) == want, fields


def test_reader_agrees_with_dpkt(tmp_path):
    """Cross-check of the vectorised reader and parser against dpkt on a mixed capture."""
    import dpkt

    rng = np.random.default_rng(11)
    frames, ts = [], []
    for i in range(300):
        kind = i % 3
        if kind == 0:
            f = frame(f"10.0.0.{i % 200 + 1}", "10.1.0.9", 1000 + i, 80, seq=int(rng.integers(0, 2**32)),
                      ack=int(rng.integers(0, 2**32)), flags="PA", payload=int(rng.integers(0, 1400)),
                      tcp_options=b"\x01" * int(rng.integers(0, 41)))
        elif kind == 1:
            f = frame("10.0.3.7", "10.0.3.2", 53, 4000 + i, proto=17, payload=int(rng.integers(0, 500)),
                      vlans=(int(rng.integers(1, 4000)),))
        else:
            f = frame("10.2.0.1", "10.1.0.1", 7, 8, flags="A", ip_options=b"\x01" * 4 * int(rng.integers(0, 11)))
        frames.append(f)
        ts.append(T0 + i * 1234567)
    path = write_pcap(tmp_path / "mix.pcap", frames, ts)
    cap = read_capture(path)
    assert cap.drops == {}
    with open(path, "rb") as fh:
        ref = list(dpkt.pcap.Reader(fh))
    assert len(ref) == len(cap.packets)
    for (t_ref, buf), p in zip(ref, cap.packets, strict=True):
        assert abs(int(round(float(t_ref) * 1e9)) - int(p["ts_ns"])) < 1000
        eth = dpkt.ethernet.Ethernet(buf)
        ip = eth.data
        assert int.from_bytes(ip.src, "big") == p["src"] and int.from_bytes(ip.dst, "big") == p["dst"]
        l4 = ip.data
        assert (l4.sport, l4.dport) == (p["sport"], p["dport"])
        if isinstance(l4, dpkt.tcp.TCP):
            assert (l4.seq, l4.ack, l4.flags, len(l4.data)) == (p["seq"], p["ack"], p["flags"], p["payload"])
        else:
            assert len(l4.data) == p["payload"]
