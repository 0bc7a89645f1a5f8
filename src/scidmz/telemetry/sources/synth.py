"""Synthetic tap traffic with known ground truth, for tests and the speed benchmark.

``frame`` builds one Ethernet/IPv4-or-IPv6/TCP-or-UDP frame with ``struct``
(fast, exact, any option length, VLAN tags, MPLS labels); ``encapsulate``
wraps a frame the way a remote mirror session or an overlay delivers it (GRE,
ERSPAN I/II/III, VXLAN, an MPLS pseudowire); ``relink`` rewrites its link
layer as another capture link type (SLL, SLL2, raw IP, loopback, PPP);
``bulk_pcap`` writes millions of fixed-layout TCP frames straight from NumPy
arrays (snap length 54: headers only, wire length carries the payload), the
way a header-only capture of a real link looks.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from ...fileio import atomic_write_bytes
from ..twin.parse import (
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP,
    LINKTYPE_NULL,
    LINKTYPE_PPP,
    LINKTYPE_RAW,
)

__all__ = ["frame", "ip2int", "encapsulate", "relink", "bulk_pcap", "Taps", "ENCAPSULATIONS", "LINK_HEADERS"]

_SRC_MAC = bytes.fromhex("020000000001")
_DST_MAC = bytes.fromhex("020000000002")


def ip2int(a: str) -> int:
    p = [int(x) for x in a.split(".")]
    return (p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3]


def _addr(a: str) -> bytes:
    import ipaddress

    return ipaddress.ip_address(a).packed


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
          frag: int = 0, window: int = 65535, mpls: tuple[int, ...] = (),
          ipv6_ext: tuple[tuple[int, int], ...] = ()) -> bytes:
    """One Ethernet frame, IPv4 or IPv6 by the address text. ``flags`` letters: F S R P A U.
    ``payload``: length or bytes. ``mpls``: labels (outermost first) after the VLAN tags.
    ``ipv6_ext``: (next-header type, length in bytes) extension headers before L4; a
    fragment header (44) is written by ``frag`` (its offset/M field) on IPv6 too."""
    data = payload if isinstance(payload, bytes) else b"\0" * int(payload)
    v6 = ":" in src
    if proto == 6:
        fl = sum(v for k, v in zip("FSRPAU", (1, 2, 4, 8, 16, 32), strict=True) if k in flags)
        opt = tcp_options + b"\0" * (-len(tcp_options) % 4)
        doff = (20 + len(opt)) // 4
        l4 = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, doff << 4, fl,
                         window, 0, 0) + opt + data
        l4 = l4[:16] + struct.pack("!H", _csum(l4)) + l4[18:]  # any content-dependent value will do
    elif proto == 17:
        l4 = struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data
        l4 = l4[:6] + struct.pack("!H", _csum(l4) or 0xFFFF) + l4[8:]
    else:
        l4 = data
    if v6:
        ext = b""
        chain = [*ipv6_ext, *(((44, 8),) if frag else ())]
        nxt = [t for t, _ in chain[1:]] + [proto]
        for (t, ln), nh in zip(chain, nxt[: len(chain)], strict=True):
            if t == 44:
                ext += struct.pack("!BBHI", nh, 0, frag & 0xFFFF, ip_id)
            else:
                assert ln >= 8 and ln % 8 == 0, "IPv6 extension headers are multiples of 8 bytes"
                ext += struct.pack("!BB", nh, ln // 8 - 1) + b"\x01\x00" + b"\0" * (ln - 4)
        first = chain[0][0] if chain else proto
        ip = struct.pack("!IHBB16s16s", 6 << 28, len(ext) + len(l4), first, 64, _addr(src), _addr(dst)) + ext
        etype = 0x86DD
    else:
        iopt = ip_options + b"\0" * (-len(ip_options) % 4)
        ihl = (20 + len(iopt)) // 4
        ip = struct.pack("!BBHHHBBH4s4s", (4 << 4) | ihl, 0, ihl * 4 + len(l4), ip_id & 0xFFFF, frag, 64, proto,
                         0, _addr(src), _addr(dst)) + iopt
        ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
        etype = 0x0800
    return _eth(ip + l4, etype, vlans, mpls)


def _eth(l3: bytes, etype: int, vlans: tuple[int, ...] = (), mpls: tuple[int, ...] = ()) -> bytes:
    eth = _DST_MAC + _SRC_MAC
    for v in vlans:
        eth += struct.pack("!HH", 0x8100, v)
    if mpls:
        eth += struct.pack("!H", 0x8847)
        for j, label in enumerate(mpls):
            eth += struct.pack("!I", (label << 12) | (1 << 8 if j == len(mpls) - 1 else 0) | 64)
        return eth + l3
    return eth + struct.pack("!H", etype) + l3


#: ``encapsulate`` kinds: how a mirror copy or an overlay carries the original frame.
ENCAPSULATIONS: tuple[str, ...] = (
    "gre-ip", "gre-teb", "gre-key-seq", "erspan1", "erspan2", "erspan3", "erspan3-platform", "vxlan", "mpls-pw",
)


def encapsulate(inner: bytes, kind: str, outer_src: str = "192.0.2.1", outer_dst: str = "192.0.2.2", *,
                vlans: tuple[int, ...] = ()) -> bytes:
    """``inner`` (an Ethernet frame) inside one tunnel of ``kind`` (``ENCAPSULATIONS``),
    on an outer Ethernet frame (IPv4 or IPv6 by ``outer_src``). ``gre-ip`` carries the
    inner IP packet without its Ethernet header."""
    if kind == "mpls-pw":  # Ethernet over MPLS with the RFC 4385 control word
        return _eth(b"\0\0\0\0" + inner, 0, vlans, (1000, 2000))
    if kind == "vxlan":
        l4 = struct.pack("!HHHH", 49152, 4789, 16 + len(inner), 0) + struct.pack("!BxxxI", 0x08, 5001 << 8) + inner
        proto = 17
    else:
        body = inner
        if kind == "gre-ip":  # the IP packet alone: skip the Ethernet header and its tags
            at = 12
            while struct.unpack("!H", inner[at:at + 2])[0] in (0x8100, 0x88A8, 0x9100):
                at += 4
            gre, body = struct.pack("!BBH", 0, 0, struct.unpack("!H", inner[at:at + 2])[0]), inner[at + 2:]
        elif kind == "gre-teb":
            gre = struct.pack("!BBH", 0, 0, 0x6558)
        elif kind == "gre-key-seq":
            # C, K, S: checksum word, key, sequence
            gre = struct.pack("!BBH", 0xB0, 0, 0x6558) + struct.pack("!HH", 0, 0) + struct.pack("!II", 0xAABBCCDD, 7)
        elif kind == "erspan1":
            gre = struct.pack("!BBH", 0, 0, 0x88BE)
        elif kind == "erspan2":
            gre = struct.pack("!BBHI", 0x10, 0, 0x88BE, 42) + struct.pack("!II", (1 << 28) | 17, 3)
        elif kind in ("erspan3", "erspan3-platform"):
            plat = kind == "erspan3-platform"
            gre = struct.pack("!BBHI", 0x10, 0, 0x22EB, 42) + struct.pack(
                "!IIHBB", (2 << 28) | 17, 123456, 0, 0, 1 if plat else 0)
            if plat:
                gre += struct.pack("!II", 3 << 26, 0)
        else:
            raise ValueError(f"unknown encapsulation {kind!r} (one of {', '.join(ENCAPSULATIONS)})")
        l4 = gre + body
        proto = 47
    if ":" in outer_src:
        ip = struct.pack("!IHBB16s16s", 6 << 28, len(l4), proto, 64, _addr(outer_src), _addr(outer_dst))
        etype = 0x86DD
    else:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, 0x4000, 64, proto, 0,
                         _addr(outer_src), _addr(outer_dst))
        ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
        etype = 0x0800
    return _eth(ip + l4, etype, vlans)


#: ``relink`` link types -> (pcap LINKTYPE, header builder from the ethertype).
LINK_HEADERS: dict[str, int] = {"sll": LINKTYPE_LINUX_SLL, "sll2": LINKTYPE_LINUX_SLL2, "raw": LINKTYPE_RAW,
                                "ipv4": LINKTYPE_IPV4, "ipv6": LINKTYPE_IPV6, "null": LINKTYPE_NULL,
                                "loop": LINKTYPE_LOOP, "ppp": LINKTYPE_PPP}


def relink(eth_frame: bytes, link: str) -> bytes:
    """The IP packet of an (untagged) Ethernet frame under another capture link layer."""
    etype = struct.unpack("!H", eth_frame[12:14])[0]
    ip = eth_frame[14:]
    v6 = etype == 0x86DD
    if link == "sll":
        return struct.pack("!HHH8sH", 0, 1, 6, _SRC_MAC + b"\0\0", etype) + ip
    if link == "sll2":
        return struct.pack("!HHIHBB8s", etype, 0, 2, 1, 0, 6, _SRC_MAC + b"\0\0") + ip
    if link in ("raw", "ipv4", "ipv6"):
        return ip
    if link == "null":
        return struct.pack("<I", 30 if v6 else 2) + ip  # a little-endian macOS host
    if link == "loop":
        return struct.pack("!I", 24 if v6 else 2) + ip
    if link == "ppp":
        return struct.pack("!BBH", 0xFF, 0x03, 0x57 if v6 else 0x21) + ip
    raise ValueError(f"unknown link {link!r} (one of {', '.join(LINK_HEADERS)})")


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
