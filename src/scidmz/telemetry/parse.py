"""Header parsing for the software data plane: raw frames -> per-packet columns.

One numba kernel walks every frame once (Ethernet with up to two VLAN tags,
Linux cooked SLL, or raw IPv4; IPv4 with options; TCP with options; UDP)
and fills NumPy columns. It never raises on bad input: a frame it cannot use
gets a reason code (``REASONS``) and is counted, so a malformed packet can
neither stop a replay nor produce a sample.

``kind`` per packet: ``KIND_DROP`` (not used at all), ``KIND_L3`` (valid IPv4
whose L4 is unusable, e.g. a fragment or ICMP: its bytes count in the class
counters, Algorithm 2 matches on the IPv4 destination only, but it takes no
part in RTT / flows / sketch), ``KIND_TCP``, ``KIND_UDP``.

Lengths: ``frame_len`` is the wire length (pcap ``orig_len``), so captures
cut by a snap length still count bytes correctly; the TCP payload length
comes from the IPv4 total length, not from the captured bytes, so only the
fixed headers need to be captured. IP/TCP checksums are not verified
(offloads leave them wrong in captures taken at the sender).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "REASONS", "KIND_DROP", "KIND_L3", "KIND_TCP", "KIND_UDP",
    "LINKTYPE_ETHERNET", "LINKTYPE_RAW", "LINKTYPE_LINUX_SLL", "LINKTYPE_IPV4",
    "parse_frames", "Packets", "reason_counts",
]

# Reason codes (index into REASONS). 0 is "ok"; L3-only kinds carry 8/9.
REASONS: tuple[str, ...] = (
    "ok",
    "truncated",  # captured bytes end inside a header that is needed
    "non_ipv4",  # ARP, LLDP, ... (not IPv4, not IPv6)
    "ipv6",
    "vlan_depth",  # more than two VLAN tags
    "bad_ip_version",  # ethertype says IPv4, version nibble does not
    "bad_ihl",  # IHL < 5
    "bad_ip_length",  # total length < header, or beyond the frame on the wire
    "fragment",  # counted in class bytes, not used for L4 algorithms
    "other_protocol",  # ICMP etc.: counted in class bytes only
    "bad_tcp_offset",  # data offset < 5 or beyond the IP payload
    "bad_udp_length",
    "unknown_linktype",
    "corrupt_record",  # pcap/pcapng record or block header is impossible
    "truncated_file",  # file ends inside a record
    "no_timestamp",  # pcapng simple packet block
    "unclassified",  # valid, but neither address hits the class LPM table
)
R_OK, R_TRUNC, R_NONV4, R_V6, R_VLAN, R_VER, R_IHL, R_IPLEN, R_FRAG, R_OTHER, R_DOFF, R_UDPLEN, R_LINK = range(13)

KIND_DROP, KIND_L3, KIND_TCP, KIND_UDP = 0, 1, 2, 3

LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_IPV4 = 228
LINKTYPE_LINUX_SLL = 113

PACKET_DTYPE = np.dtype([
    ("ts_ns", "i8"), ("tap", "u1"), ("kind", "u1"), ("reason", "u1"), ("flags", "u1"),
    ("src", "u4"), ("dst", "u4"), ("proto", "u1"), ("ip_id", "u2"),
    ("sport", "u2"), ("dport", "u2"), ("seq", "u4"), ("ack", "u4"),
    ("payload", "u4"), ("frame_len", "u4"),
])

Packets = np.ndarray  # a 1-D array of PACKET_DTYPE


def reason_counts(reason: np.ndarray) -> dict[str, int]:
    """Histogram of reason codes as {name: count}, only nonzero entries except 'ok'."""
    c = np.bincount(np.asarray(reason, dtype=np.int64), minlength=len(REASONS))
    return {REASONS[i]: int(c[i]) for i in range(1, len(REASONS)) if c[i]}


_KERNEL: Any = None


def _kernel() -> Any:
    global _KERNEL
    if _KERNEL is None:
        import numba

        _KERNEL = numba.njit(cache=True, nogil=True)(_parse_py)
    return _KERNEL


def _parse_py(buf, off, caplen, origlen, linktype, out_kind, out_reason, out_flags, out_src,
              out_dst, out_proto, out_ipid, out_sport, out_dport, out_seq, out_ack, out_payload):
    n = off.shape[0]
    for i in range(n):
        out_kind[i] = 0
        out_reason[i] = 0
        o = off[i]
        cl = caplen[i]
        wl = origlen[i]
        lt = linktype[i]
        # -- link layer ----------------------------------------------------
        if lt == 1:
            if cl < 14:
                out_reason[i] = 1
                continue
            et = (np.int64(buf[o + 12]) << 8) | buf[o + 13]
            p = 14
            tags = 0
            bad = False
            while et == 0x8100 or et == 0x88A8 or et == 0x9100:
                tags += 1
                if tags > 2:
                    out_reason[i] = 4
                    bad = True
                    break
                if cl < p + 4:
                    out_reason[i] = 1
                    bad = True
                    break
                et = (np.int64(buf[o + p + 2]) << 8) | buf[o + p + 3]
                p += 4
            if bad:
                continue
        elif lt == 113:
            if cl < 16:
                out_reason[i] = 1
                continue
            et = (np.int64(buf[o + 14]) << 8) | buf[o + 15]
            p = 16
        elif lt == 101 or lt == 228 or lt == 12 or lt == 14:
            if cl < 1:
                out_reason[i] = 1
                continue
            v = buf[o] >> 4
            et = 0x0800 if v == 4 else (0x86DD if v == 6 else 0)
            p = 0
        else:
            out_reason[i] = 12
            continue
        if et == 0x86DD:
            out_reason[i] = 3
            continue
        if et != 0x0800:
            out_reason[i] = 2
            continue
        # -- IPv4 --------------------------------------------------------------
        if cl < p + 20:
            out_reason[i] = 1
            continue
        b0 = buf[o + p]
        if (b0 >> 4) != 4:
            out_reason[i] = 5
            continue
        ihl = np.int64(b0 & 0x0F) * 4
        if ihl < 20:
            out_reason[i] = 6
            continue
        tot = (np.int64(buf[o + p + 2]) << 8) | buf[o + p + 3]
        if tot < ihl or p + tot > wl:
            out_reason[i] = 7
            continue
        if cl < p + ihl:
            out_reason[i] = 1
            continue
        out_ipid[i] = (np.uint16(buf[o + p + 4]) << 8) | buf[o + p + 5]
        frag = ((np.int64(buf[o + p + 6]) << 8) | buf[o + p + 7]) & 0x3FFF  # MF + offset
        proto = buf[o + p + 9]
        out_proto[i] = proto
        out_src[i] = ((np.uint32(buf[o + p + 12]) << 24) | (np.uint32(buf[o + p + 13]) << 16)
                      | (np.uint32(buf[o + p + 14]) << 8) | np.uint32(buf[o + p + 15]))
        out_dst[i] = ((np.uint32(buf[o + p + 16]) << 24) | (np.uint32(buf[o + p + 17]) << 16)
                      | (np.uint32(buf[o + p + 18]) << 8) | np.uint32(buf[o + p + 19]))
        if frag != 0:
            out_kind[i] = 1
            out_reason[i] = 8
            continue
        q = p + ihl
        l4len = tot - ihl
        if proto == 6:
            if l4len < 20:
                out_reason[i] = 10
                out_kind[i] = 1
                continue
            if cl < q + 20:
                out_reason[i] = 1
                continue
            doff = np.int64(buf[o + q + 12] >> 4) * 4
            if doff < 20 or doff > l4len:
                out_reason[i] = 10
                out_kind[i] = 1
                continue
            out_sport[i] = (np.uint16(buf[o + q]) << 8) | buf[o + q + 1]
            out_dport[i] = (np.uint16(buf[o + q + 2]) << 8) | buf[o + q + 3]
            out_seq[i] = ((np.uint32(buf[o + q + 4]) << 24) | (np.uint32(buf[o + q + 5]) << 16)
                          | (np.uint32(buf[o + q + 6]) << 8) | np.uint32(buf[o + q + 7]))
            out_ack[i] = ((np.uint32(buf[o + q + 8]) << 24) | (np.uint32(buf[o + q + 9]) << 16)
                          | (np.uint32(buf[o + q + 10]) << 8) | np.uint32(buf[o + q + 11]))
            out_flags[i] = buf[o + q + 13]
            out_payload[i] = l4len - doff
            out_kind[i] = 2
        elif proto == 17:
            if l4len < 8:
                out_reason[i] = 11
                out_kind[i] = 1
                continue
            if cl < q + 8:
                out_reason[i] = 1
                continue
            ulen = (np.int64(buf[o + q + 4]) << 8) | buf[o + q + 5]
            if ulen < 8 or ulen > l4len:
                out_reason[i] = 11
                out_kind[i] = 1
                continue
            out_sport[i] = (np.uint16(buf[o + q]) << 8) | buf[o + q + 1]
            out_dport[i] = (np.uint16(buf[o + q + 2]) << 8) | buf[o + q + 3]
            out_payload[i] = ulen - 8
            out_kind[i] = 3
        else:
            out_kind[i] = 1
            out_reason[i] = 9


def parse_frames(buf: np.ndarray, off: np.ndarray, caplen: np.ndarray, origlen: np.ndarray,
                 linktype: np.ndarray | int, ts_ns: np.ndarray, tap: int = 0) -> np.ndarray:
    """Parse the frames at ``buf[off[i] : off[i] + caplen[i]]`` into a ``PACKET_DTYPE`` array.

    ``buf`` is a uint8 array (a memory map of a capture file or a copied
    ring block); offsets and lengths must lie inside it (the readers
    guarantee that). Never raises on frame content.
    """
    n = int(off.shape[0])
    out = np.zeros(n, dtype=PACKET_DTYPE)
    if n == 0:
        return out
    lt = np.broadcast_to(np.asarray(linktype, dtype=np.int32), (n,)).copy()
    # The kernel writes straight into the structured array's (strided) field views.
    _kernel()(np.asarray(buf, dtype=np.uint8), np.asarray(off, dtype=np.int64),
              np.asarray(caplen, dtype=np.int64), np.asarray(origlen, dtype=np.int64), lt,
              out["kind"], out["reason"], out["flags"], out["src"], out["dst"], out["proto"],
              out["ip_id"], out["sport"], out["dport"], out["seq"], out["ack"], out["payload"])
    out["ts_ns"] = ts_ns
    out["tap"] = tap
    out["frame_len"] = np.minimum(np.asarray(origlen, dtype=np.int64), 0xFFFFFFFF)
    return out
