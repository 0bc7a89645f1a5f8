"""Synthetic tap traffic with known ground truth, for tests and the speed benchmark.

``frame`` builds one Ethernet/IPv4/TCP-or-UDP frame with ``struct`` (fast,
exact, any option length); ``bulk_pcap`` writes millions of fixed-layout
TCP frames straight from NumPy arrays (snap length 54: headers only, wire
length carries the payload), the way a header-only capture of a real link
looks.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from ..fileio import atomic_write_bytes

__all__ = ["frame", "ip2int", "bulk_pcap", "Taps"]

_SRC_MAC = bytes.fromhex("020000000001")
_DST_MAC = bytes.fromhex("020000000002")


def ip2int(a: str) -> int:
    p = [int(x) for x in a.split(".")]
    return (p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3]


def _csum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(src: str, dst: str, sport: int = 1000, dport: int = 80, *, seq: int = 0, ack: int = 0,
          flags: str = "A", payload: int | bytes = 0, proto: int = 6, ip_id: int = 0,
          ip_options: bytes = b"", tcp_options: bytes = b"", vlans: tuple[int, ...] = (),
          frag: int = 0, window: int = 65535) -> bytes:
    """One Ethernet frame. ``flags`` letters: F S R P A U. ``payload``: length or bytes."""
    data = payload if isinstance(payload, bytes) else b"\0" * int(payload)
    if proto == 6:
        fl = sum(v for k, v in zip("FSRPAU", (1, 2, 4, 8, 16, 32), strict=True) if k in flags)
        opt = tcp_options + b"\0" * (-len(tcp_options) % 4)
        doff = (20 + len(opt)) // 4
        l4 = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, doff << 4, fl,
                         window, 0, 0) + opt + data
    elif proto == 17:
        l4 = struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data
    else:
        l4 = data
    iopt = ip_options + b"\0" * (-len(ip_options) % 4)
    ihl = (20 + len(iopt)) // 4
    hdr = struct.pack("!BBHHHBBH4s4s", (4 << 4) | ihl, 0, ihl * 4 + len(l4), ip_id & 0xFFFF, frag, 64, proto,
                      0, ip2int(src).to_bytes(4, "big"), ip2int(dst).to_bytes(4, "big")) + iopt
    hdr = hdr[:10] + struct.pack("!H", _csum(hdr)) + hdr[12:]
    eth = _DST_MAC + _SRC_MAC
    for v in vlans:
        eth += struct.pack("!HH", 0x8100, v)
    return eth + struct.pack("!H", 0x0800) + hdr + l4


def bulk_pcap(path: str | os.PathLike[str], ts_ns: np.ndarray, src: np.ndarray, dst: np.ndarray,
              sport: np.ndarray, dport: np.ndarray, seq: np.ndarray, ack: np.ndarray, flags: np.ndarray,
              payload: np.ndarray, ip_id: np.ndarray | None = None) -> Path:
    """Write a nanosecond pcap of header-only TCP frames (caplen 54) from arrays, atomically."""
    n = len(ts_ns)
    rec = np.zeros((n, 16 + 54), dtype=np.uint8)
    sec, ns = np.divmod(np.asarray(ts_ns, dtype=np.int64), 1_000_000_000)
    hdr = np.zeros(n, dtype=[("s", "<u4"), ("f", "<u4"), ("c", "<u4"), ("o", "<u4")])
    hdr["s"], hdr["f"], hdr["c"] = sec, ns, 54
    pl = np.asarray(payload, dtype=np.int64)
    hdr["o"] = 54 + pl
    rec[:, :16] = hdr.view(np.uint8).reshape(n, 16)
    rec[:, 16:28] = np.frombuffer(_DST_MAC + _SRC_MAC, dtype=np.uint8)
    rec[:, 28:30] = (8, 0)

    def put(col: int, values: np.ndarray, width: int) -> None:
        v = np.asarray(values, dtype=np.uint64)
        for b in range(width):
            rec[:, col + b] = ((v >> np.uint64(8 * (width - 1 - b))) & np.uint64(0xFF)).astype(np.uint8)

    ip = 30
    rec[:, ip] = 0x45
    put(ip + 2, 40 + pl, 2)
    put(ip + 4, np.arange(n) if ip_id is None else ip_id, 2)
    rec[:, ip + 8] = 64
    rec[:, ip + 9] = 6
    put(ip + 12, src, 4)
    put(ip + 16, dst, 4)
    tcp = ip + 20
    put(tcp, sport, 2)
    put(tcp + 2, dport, 2)
    put(tcp + 4, seq, 4)
    put(tcp + 8, ack, 4)
    rec[:, tcp + 12] = 5 << 4
    rec[:, tcp + 13] = np.asarray(flags, dtype=np.uint8)
    put(tcp + 14, np.full(n, 65535), 2)
    p = Path(path)
    return atomic_write_bytes(p, struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1) + rec.tobytes())


class Taps:
    """Collects (time, frame) per tap and writes one pcap per tap (sorted by time)."""

    def __init__(self) -> None:
        self.frames: dict[int, list[tuple[int, int, bytes]]] = {0: [], 1: []}
        self._n = 0

    def add(self, tap: int, ts_ns: int, fr: bytes) -> None:
        self.frames[tap].append((int(ts_ns), self._n, fr))
        self._n += 1

    def write(self, directory: str | os.PathLike[str], name: str = "tap") -> tuple[Path, Path | None]:
        """Write ``<name>-egress.pcap`` and, if the ingress tap has frames, ``<name>-ingress.pcap``."""
        from .pcap import write_pcap

        d = Path(directory)
        out: list[Path | None] = []
        for tap, label in ((1, "egress"), (0, "ingress")):
            rows = sorted(self.frames[tap])
            if not rows and tap == 0:
                out.append(None)
                continue
            out.append(write_pcap(d / f"{name}-{label}.pcap", [r[2] for r in rows], [r[0] for r in rows]))
        return out[0], out[1]  # type: ignore[return-value]
