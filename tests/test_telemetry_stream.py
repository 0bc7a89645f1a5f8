"""Streaming replay: chunked capture reading and the windowed tap merge give the
same y(t), counters and drops as reading whole files, with memory set by the chunk."""

from __future__ import annotations

import struct
import tracemalloc

import numpy as np
import pytest

from scidmz.telemetry import constants as C
from scidmz.telemetry.sources.pcap import iter_capture, read_capture
from scidmz.telemetry.sources.synth import Taps, bulk_pcap, frame, ip2int
from scidmz.telemetry.twin.parse import PACKET_DTYPE
from scidmz.telemetry.twin.source import TelemetrySource

MS = 1_000_000
S = 1_000_000_000
T0 = 1_700_000_000 * S


def _taps(seed: int = 3, n: int = 3000) -> Taps:
    """Both taps, queuing delays 0-4 ms, equal timestamps across taps, TCP data and ACKs, FINs."""
    rng = np.random.default_rng(seed)
    taps = Taps()
    seq = {}
    for k in range(n):
        t = T0 + int(rng.integers(0, 4 * S))
        dst = "10.0.3.2" if k % 3 == 0 else f"10.1.0.{1 + k % 40}"
        sport = 40000 + k % 25
        s = seq.get((dst, sport), 1)
        seq[(dst, sport)] = s + 1000
        fin = "F" if rng.random() < 0.01 else ""
        fr = frame("10.0.0.10", dst, sport, 5201, seq=s, ack=1, flags="PA" + fin, payload=1000, ip_id=k)
        q = 0 if k % 7 == 0 else int(rng.integers(0, 4 * MS))  # some ties across taps
        taps.add(C.TAP_INGRESS, t, fr)
        taps.add(C.TAP_EGRESS, t + q, fr)
        ackf = frame(dst, "10.0.0.10", 5201, sport, seq=1, ack=s + 1000, flags="A", ip_id=k)
        taps.add(C.TAP_EGRESS, t + q + int(rng.integers(1, 60)) * MS, ackf)
    return taps


def _run(eg, ing, chunk, period=0.5):
    src = TelemetrySource.from_pcaps(str(eg), None if ing is None else str(ing), period=period, chunk=chunk)
    ys = [y.as_dict() for y in src]
    return ys, src.stats(), src.drops, src.packets_in


@pytest.mark.parametrize("chunk", [1, 7, 500])
def test_streaming_replay_matches_whole_file(tmp_path, chunk):
    eg, ing = _taps().write(tmp_path)
    whole = _run(eg, ing, chunk=1 << 20)
    assert len(whole[0]) >= 8 and whole[1]["qd_samples"] > 0 and whole[1]["rtt_samples"] > 0
    assert _run(eg, ing, chunk=chunk) == whole
    # egress only, too
    assert _run(eg, None, chunk=chunk) == _run(eg, None, chunk=1 << 20)


def _pcapng_two_sections(frames: list[bytes]) -> bytes:
    def block(btype: int, body: bytes, fmt: str = "<") -> bytes:
        body += b"\0" * (-len(body) % 4)
        n = len(body) + 12
        return struct.pack(f"{fmt}II", btype, n) + body + struct.pack(f"{fmt}I", n)

    out = b""
    for sec, fmt in enumerate(("<", ">")):  # a little- then a big-endian section
        out += block(0x0A0D0D0A, struct.pack(f"{fmt}IHHq", 0x1A2B3C4D, 1, 0, -1), fmt)
        out += block(1, struct.pack(f"{fmt}HHI", 1, 0, 65535), fmt)  # interface 0: us
        out += block(1, struct.pack(f"{fmt}HHI", 1, 0, 65535) + struct.pack(f"{fmt}HHB3x", 9, 1, 9)
                     + struct.pack(f"{fmt}HH", 0, 0), fmt)  # interface 1: ns
        for i, f in enumerate(frames):
            iface = i % 2
            t = (T0 // (1000 if iface == 0 else 1)) + 10 * i + 100_000 * sec
            out += block(6, struct.pack(f"{fmt}IIIII", iface, t >> 32, t & 0xFFFFFFFF, len(f), len(f)) + f, fmt)
    return out


def test_chunked_pcapng_keeps_sections_and_interfaces(tmp_path):
    frames = [frame("10.0.0.1", "10.1.0.1", 1, 2, seq=i, payload=10) for i in range(9)]
    p = tmp_path / "two.pcapng"
    p.write_bytes(_pcapng_two_sections(frames))
    whole = read_capture(p)
    assert len(whole.packets) == 18 and not whole.drops
    for chunk in (1, 2, 5):
        parts = list(iter_capture(p, chunk=chunk))
        assert all(len(c.packets) <= chunk for c in parts)
        got = np.concatenate([c.packets for c in parts])
        assert np.array_equal(got, whole.packets)


def test_chunked_pcap_counts_a_cut_file_once(tmp_path):
    taps = Taps()
    for i in range(10):
        taps.add(C.TAP_EGRESS, T0 + i * MS, frame("10.0.0.1", "10.1.0.1", 1, 2, seq=i, payload=100))
    eg, _ = taps.write(tmp_path)
    raw = eg.read_bytes()
    eg.write_bytes(raw[:-20])  # the last record is cut short
    parts = list(iter_capture(eg, chunk=3))
    assert sum(len(c.packets) for c in parts) == 9
    assert sum(c.drops.get("truncated_file", 0) for c in parts) == 1
    assert read_capture(eg).drops == {"truncated_file": 1}


def _peak_replay(path, chunk: int) -> tuple[int, int]:
    tracemalloc.start()
    try:
        ys = list(TelemetrySource.from_pcaps(str(path), chunk=chunk))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sum(y.rate_campus for y in ys) > 0
    return peak, len(ys)


def _big(path, n: int) -> None:
    rng = np.random.default_rng(0)
    t = T0 + np.sort(rng.integers(0, 20 * S, n))
    bulk_pcap(path, t, src=np.full(n, ip2int("10.0.0.10")), dst=np.full(n, ip2int("10.1.0.1")),
              sport=np.full(n, 40000), dport=np.full(n, 5201), seq=np.arange(n) * 1448 % (1 << 32),
              ack=np.ones(n, np.int64), flags=np.full(n, 0x18), payload=np.full(n, 1448))


def test_replay_memory_follows_the_chunk_not_the_file(tmp_path):
    small, big = tmp_path / "small.pcap", tmp_path / "big.pcap"
    _big(small, 50_000)
    _big(big, 400_000)
    _peak_replay(small, 2048)  # numba kernels loaded outside the measurement
    p_small, n_small = _peak_replay(small, 2048)
    p_big, n_big = _peak_replay(big, 2048)
    assert n_small == n_big == 20
    # 350,000 more packets would take ~15 MB parsed; streamed, the peak (the data plane's
    # fixed tables and digest buffers plus one window) must not follow the file.
    grown = p_big - p_small
    assert grown < 0.1 * 350_000 * np.dtype(PACKET_DTYPE).itemsize, (p_small, p_big)
