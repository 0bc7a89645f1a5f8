"""Header parsing for the software data plane: raw frames -> per-packet columns.

One numba kernel walks every frame once and fills a ``PACKET_DTYPE`` array.
It never raises on bad input: a frame it cannot use gets a reason code
(``REASONS``) and is counted, so a malformed packet can neither stop a replay
nor produce a sample.

What it reads (decided per packet):

* link types: Ethernet, Linux cooked SLL and SLL2 (``tcpdump -i any``), raw
  IP (101, 12, 14, 228, 229), BSD/macOS loopback (DLT_NULL 0, DLT_LOOP 108),
  PPP (9, 50);
* any number of VLAN tags (0x8100, 0x88A8, 0x9100) and MPLS labels (to the
  bottom of the stack; then IPv4 or IPv6 by the version nibble, or a
  pseudowire control word and Ethernet);
* IPv4 with options, IPv6 with hop-by-hop / routing / destination-options
  extension headers;
* one tunnel, the way a remote mirror session or an overlay delivers a copy:
  GRE (checksum, key, sequence) carrying IPv4/IPv6, Ethernet (0x6558) or
  ERSPAN type I/II/III, and VXLAN (UDP port 4789); inside it the same again
  (Ethernet, VLAN, MPLS, IP), but not a second tunnel;
* TCP and UDP.

``kind`` per packet: ``KIND_DROP`` (not used at all), ``KIND_L3`` (valid IP
whose L4 is unusable, e.g. a fragment or ICMP: its bytes count in the class
counters, Algorithm 2 matches on addresses only, but it takes no part in RTT
/ flows / sketch), ``KIND_TCP``, ``KIND_UDP``.

Addresses: ``src_hi/src_lo`` and ``dst_hi/dst_lo`` hold the 128-bit address
(IPv4 as ``::ffff:a``, constants.py "addresses"); ``src``/``dst`` hold the
32-bit hash-key address (the IPv4 address, or the CRC-32 fold of the IPv6
address); ``fam`` is 4 or 6. ``ip_id`` is the IPv4 identification, or for
IPv6 (which has none) the TCP/UDP checksum when captured: the queuing-delay
match needs something that tells a segment from its retransmission.

Lengths: ``frame_len`` is the Ethernet frame the measured IP packet travelled
in: the record's wire length on an Ethernet link (VLAN tags, MPLS labels and
padding included); inside a tunnel the inner Ethernet frame (wire length
minus the outer headers); with no Ethernet header (SLL, raw, loopback, PPP,
IP in GRE) 14 + the IP packet's bytes on the wire. Captures cut by a snap
length count bytes correctly: lengths come from the wire length and the IP
header, so only the headers up to the TCP flags (or UDP length) must be
captured. An IPv4 total length of 0 or an IPv6 payload length of 0 in a TCP/
UDP packet (captured on the sender with TSO / BIG TCP) is taken from the wire
length. IP/TCP checksums are not verified (offloads leave them wrong in
captures taken at the sender).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .layout import CRC_TABLE

__all__ = [
    "REASONS", "KIND_DROP", "KIND_L3", "KIND_TCP", "KIND_UDP", "PACKET_DTYPE", "LINKTYPES",
    "LINKTYPE_ETHERNET", "LINKTYPE_RAW", "LINKTYPE_LINUX_SLL", "LINKTYPE_LINUX_SLL2", "LINKTYPE_IPV4",
    "LINKTYPE_IPV6", "LINKTYPE_NULL", "LINKTYPE_LOOP", "LINKTYPE_PPP",
    "parse_frames", "Packets", "reason_counts", "reason_bytes", "addr_text", "min_snaplen",
]

# Reason codes (index into REASONS). 0 is "ok"; L3-only kinds carry fragment/other_protocol.
REASONS: tuple[str, ...] = (
    "ok",
    "truncated",  # captured bytes end inside a header that is needed
    "non_ip",  # ARP, LLDP, 802.3/LLC, ... (neither IPv4 nor IPv6)
    "bad_ip_version",  # ethertype (or link type) says IPv4/IPv6, the version nibble does not
    "bad_ihl",  # IPv4 IHL < 5
    "bad_ip_length",  # IP length below the header, or beyond the frame on the wire
    "fragment",  # counted in class bytes, not used for L4 algorithms
    "other_protocol",  # ICMP etc.: counted in class bytes only
    "bad_tcp_offset",  # data offset < 5 or beyond the IP payload
    "bad_udp_length",
    "unknown_linktype",  # a link type this parser does not read
    "mpls_payload",  # after the bottom MPLS label: neither IP nor a pseudowire control word
    "corrupt_record",  # pcap/pcapng record or block header is impossible (the reader resynchronises)
    "truncated_file",  # file ends inside a record
    "no_timestamp",  # pcapng simple packet block
    "unclassified",  # valid, but neither address hits the class LPM table
    "outside_window",  # before --start or after --end
    "outlier",  # far from the rest of the capture in time (--skip-outliers)
    "tunnel_fragment",  # an outer IP fragment of a mirror tunnel, read as part of its reassembled packet
    "fragment_lost",  # an outer IP fragment of a mirror tunnel whose packet could not be reassembled
)
(R_OK, R_TRUNC, R_NONIP, R_VER, R_IHL, R_IPLEN, R_FRAG, R_OTHER, R_DOFF, R_UDPLEN, R_LINK,
 R_MPLS) = range(12)

KIND_DROP, KIND_L3, KIND_TCP, KIND_UDP = 0, 1, 2, 3

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_PPP = 9
LINKTYPE_PPP_HDLC = 50
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276
#: Raw IP under the DLT value some writers put in the file instead of LINKTYPE_RAW: 12 on most
#: systems, 14 on OpenBSD.
DLT_RAW = 12
DLT_RAW_OPENBSD = 14
#: The link types read, with their tcpdump names (for messages and docs).
LINKTYPES: dict[int, str] = {
    LINKTYPE_NULL: "NULL (BSD loopback)", LINKTYPE_ETHERNET: "EN10MB (Ethernet)", LINKTYPE_PPP: "PPP",
    DLT_RAW: "RAW (IP)", DLT_RAW_OPENBSD: "RAW (IP, OpenBSD)", LINKTYPE_PPP_HDLC: "PPP_HDLC", LINKTYPE_RAW: "RAW (IP)",
    LINKTYPE_LOOP: "LOOP (OpenBSD loopback)", LINKTYPE_LINUX_SLL: "LINUX_SLL (Linux cooked v1)",
    LINKTYPE_IPV4: "IPV4", LINKTYPE_IPV6: "IPV6", LINKTYPE_LINUX_SLL2: "LINUX_SLL2 (Linux cooked v2)",
}

PACKET_DTYPE = np.dtype([
    ("ts_ns", "i8"), ("src_hi", "u8"), ("src_lo", "u8"), ("dst_hi", "u8"), ("dst_lo", "u8"),
    ("src", "u4"), ("dst", "u4"), ("seq", "u4"), ("ack", "u4"), ("payload", "u4"), ("frame_len", "u4"),
    ("ip_id", "u2"), ("sport", "u2"), ("dport", "u2"),
    ("tap", "u1"), ("kind", "u1"), ("reason", "u1"), ("flags", "u1"), ("proto", "u1"), ("fam", "u1"),
])

Packets = np.ndarray  # a 1-D array of PACKET_DTYPE


def reason_counts(reason: np.ndarray) -> dict[str, int]:
    """Histogram of reason codes as {name: count}, only nonzero entries except 'ok'."""
    c = np.bincount(np.asarray(reason, dtype=np.int64), minlength=len(REASONS))
    return {REASONS[i]: int(c[i]) for i in range(1, len(REASONS)) if c[i]}


def reason_bytes(reason: np.ndarray, wire_len: np.ndarray) -> dict[str, int]:
    """Wire bytes per reason code, like ``reason_counts``."""
    c = np.bincount(np.asarray(reason, dtype=np.int64), weights=np.asarray(wire_len, dtype=np.float64),
                    minlength=len(REASONS))
    return {REASONS[i]: int(c[i]) for i in range(1, len(REASONS)) if c[i]}


def addr_text(hi: int, lo: int) -> str:
    """The 128-bit address (hi, lo) as text: dotted quad for IPv4-mapped, IPv6 otherwise."""
    import ipaddress

    hi, lo = int(hi), int(lo)
    if hi == 0 and lo >> 32 == 0xFFFF:
        return str(ipaddress.IPv4Address(lo & 0xFFFFFFFF))
    return str(ipaddress.IPv6Address((hi << 64) | lo))


def min_snaplen(linktype: int = LINKTYPE_ETHERNET, *, vlans: int = 0, mpls: int = 0, ipv6: bool = False,
                ip_options: int = 0, udp: bool = False, outer: int = 0) -> int:
    """The shortest snap length this parser measures a TCP (or UDP) packet from, in bytes.

    TCP needs its first 14 bytes (ports, SEQ, ACK, data offset, flags), UDP its first 6
    (ports, length); lengths come from the IP header and the record's wire length.
    ``outer``: the bytes of a tunnel's headers before the inner Ethernet header.
    """
    link = {LINKTYPE_ETHERNET: 14, LINKTYPE_LINUX_SLL: 16, LINKTYPE_LINUX_SLL2: 20, LINKTYPE_NULL: 4,
            LINKTYPE_LOOP: 4, LINKTYPE_PPP: 4, LINKTYPE_PPP_HDLC: 4}.get(linktype, 0)
    return outer + link + 4 * vlans + 4 * mpls + (40 if ipv6 else 20 + ip_options) + (6 if udp else 14)


_KERNEL: Any = None
# The kernel's helpers, jitted with it (numba resolves a jitted function's globals when it compiles
# it, so each helper is replaced by its compiled self first), inlined into the one loop.
# ``_nrt=False`` (numba's switch for its reference-counting runtime): the kernel allocates nothing,
# and without it every inlined helper that is handed ``buf`` increfs and decrefs it, atomically,
# per frame -- measured, a third of the parser's throughput (1.7 vs 3.0 M frames/s).
_HELPERS = ("_be16", "_be32", "_be64", "_fold", "_link", "_link_loopback", "_link_ppp", "_vlan_tags",
            "_mpls", "_ip_version", "_ipv4", "_ipv6", "_gre", "_vxlan", "_tunnel", "_network", "_tcp", "_udp",
            "_transport")


def _kernel() -> Any:
    global _KERNEL
    if _KERNEL is None:
        import numba

        g = globals()
        for name in _HELPERS:
            g[name] = numba.njit(inline="always", cache=True, nogil=True, _nrt=False)(g[name])
        _KERNEL = numba.njit(cache=True, nogil=True, _nrt=False)(_parse_py)
    return _KERNEL


def _be16(buf, o):
    return (np.int64(buf[o]) << 8) | np.int64(buf[o + 1])


def _be32(buf, o):
    return ((np.int64(buf[o]) << 24) | (np.int64(buf[o + 1]) << 16) | (np.int64(buf[o + 2]) << 8)
            | np.int64(buf[o + 3]))


def _be64(buf, o):
    return (np.uint64(_be32(buf, o)) << np.uint64(32)) | np.uint64(_be32(buf, o + 4))


def _fold(buf, o):
    """zlib.crc32 of the 16 address bytes at ``o`` (the IPv6 address in the hash key)."""
    t = CRC_TABLE
    c = np.int64(0xFFFFFFFF)
    for w in range(4):
        p = o + 4 * w
        c ^= np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8) | (np.int64(buf[p + 2]) << 16) | (
            np.int64(buf[p + 3]) << 24)
        c = t[3, c & 0xFF] ^ t[2, (c >> 8) & 0xFF] ^ t[1, (c >> 16) & 0xFF] ^ t[0, (c >> 24) & 0xFF]
    return c ^ 0xFFFFFFFF


# -- link layer ------------------------------------------------------------------------------------

def _link(buf, o, cl, lt):
    """(reason, et, p, eth): the ethertype ``et`` (0: decide by the IP version nibble), its payload's
    offset ``p``, and the offset of the Ethernet header whose frame is counted (-1: none)."""
    et = np.int64(0)
    p = np.int64(0)
    eth = np.int64(-1)
    reason = R_OK
    if lt == LINKTYPE_ETHERNET:
        if cl < 14:
            reason = R_TRUNC
        else:
            et = _be16(buf, o + 12)
            p = 14
            eth = 0
    elif lt == LINKTYPE_LINUX_SLL:
        if cl < 16:
            reason = R_TRUNC
        else:
            et = _be16(buf, o + 14)
            p = 16
    elif lt == LINKTYPE_LINUX_SLL2:
        if cl < 20:
            reason = R_TRUNC
        else:
            et = _be16(buf, o)
            p = 20
    elif lt == LINKTYPE_RAW or lt == DLT_RAW or lt == DLT_RAW_OPENBSD:
        et = 0
    elif lt == LINKTYPE_IPV4:
        et = 0x0800
    elif lt == LINKTYPE_IPV6:
        et = 0x86DD
    elif lt == LINKTYPE_NULL or lt == LINKTYPE_LOOP:
        reason, et, p = _link_loopback(buf, o, cl, lt)
    elif lt == LINKTYPE_PPP or lt == LINKTYPE_PPP_HDLC:
        reason, et, p = _link_ppp(buf, o, cl)
    else:
        reason = R_LINK
    return reason, et, p, eth


def _link_loopback(buf, o, cl, lt):
    """(reason, et, p) of a BSD loopback header: the address family, 4 bytes."""
    if cl < 4:
        return R_TRUNC, np.int64(0), np.int64(0)
    # AF_INET is 2 everywhere; AF_INET6 is 10 (Linux), 24, 28 or 30 (the BSDs,
    # macOS). DLT_NULL is in the capturing host's byte order: try both.
    fam_be = _be32(buf, o)
    fam_le = (np.int64(buf[o]) | (np.int64(buf[o + 1]) << 8) | (np.int64(buf[o + 2]) << 16)
              | (np.int64(buf[o + 3]) << 24))
    fam = fam_be if (lt == LINKTYPE_LOOP or fam_be < 256) else fam_le
    if fam == 2:
        return R_OK, np.int64(0x0800), np.int64(4)
    if fam == 10 or fam == 24 or fam == 28 or fam == 30:
        return R_OK, np.int64(0x86DD), np.int64(4)
    return R_NONIP, np.int64(0), np.int64(4)


def _link_ppp(buf, o, cl):
    """(reason, et, p) of a PPP header: optional address/control bytes, a 1- or 2-byte protocol."""
    p = np.int64(0)
    if cl >= 2 and buf[o] == 0xFF and buf[o + 1] == 0x03:
        p = 2
    if cl < p + 1:
        return R_TRUNC, np.int64(0), p
    if buf[o + p] & 1:  # a compressed 1-byte protocol field
        proto_ppp = np.int64(buf[o + p])
        p += 1
    elif cl < p + 2:
        return R_TRUNC, np.int64(0), p
    else:
        proto_ppp = _be16(buf, o + p)
        p += 2
    if proto_ppp == 0x21:
        return R_OK, np.int64(0x0800), p
    if proto_ppp == 0x57:
        return R_OK, np.int64(0x86DD), p
    return R_NONIP, np.int64(0), p


# -- L2.5: VLAN tags and MPLS labels -----------------------------------------------------------------

def _vlan_tags(buf, o, cl, et, p):
    """(reason, et, p) after any number of VLAN tags."""
    while et == 0x8100 or et == 0x88A8 or et == 0x9100:
        if cl < p + 4:
            return R_TRUNC, et, p
        et = _be16(buf, o + p + 2)
        p += 4
    return R_OK, et, p


def _mpls(buf, o, cl, p, decaps):
    """(reason, et, p, pw_eth) after the label stack: IPv4 or IPv6 by the version nibble, or (the one
    tunnel, ``decaps`` 0) a pseudowire control word (RFC 4385) and Ethernet, whose header is at
    ``pw_eth`` (-1: no pseudowire)."""
    while True:
        if cl < p + 4:
            return R_TRUNC, np.int64(0), p, np.int64(-1)
        bos = buf[o + p + 2] & 1
        p += 4
        if bos:
            break
    if cl < p + 1:
        return R_TRUNC, np.int64(0), p, np.int64(-1)
    nib = buf[o + p] >> 4
    if nib == 4:
        return R_OK, np.int64(0x0800), p, np.int64(-1)
    if nib == 6:
        return R_OK, np.int64(0x86DD), p, np.int64(-1)
    if nib == 0 and decaps == 0:
        if cl < p + 18:
            return R_TRUNC, np.int64(0), p, np.int64(-1)
        return R_OK, _be16(buf, o + p + 16), p + 18, p + 4
    return R_MPLS, np.int64(0), p, np.int64(-1)


# -- IP ----------------------------------------------------------------------------------------------

def _ip_version(buf, o, cl, p):
    """(reason, et) of a link that does not say IPv4 or IPv6: the version nibble does."""
    if cl < p + 1:
        return R_TRUNC, np.int64(0)
    v = buf[o + p] >> 4
    if v == 4:
        return R_OK, np.int64(0x0800)
    if v == 6:
        return R_OK, np.int64(0x86DD)
    return R_VER, np.int64(-1)


def _ipv4(buf, o, cl, p, avail, r):
    """(reason, proto, q, l4len, frag) of the IPv4 header at ``p``; its fields go into ``r``."""
    mapped = np.uint64(0xFFFF00000000)
    if cl < p + 20:
        return R_TRUNC, np.int64(0), np.int64(0), np.int64(0), False
    b0 = buf[o + p]
    if (b0 >> 4) != 4:
        return R_VER, np.int64(0), np.int64(0), np.int64(0), False
    ihl = np.int64(b0 & 0x0F) * 4
    if ihl < 20:
        return R_IHL, np.int64(0), np.int64(0), np.int64(0), False
    tot = _be16(buf, o + p + 2)
    if tot == 0:  # TSO / BIG TCP on the capturing sender: the wire length is the truth
        tot = avail
    if tot < ihl or tot > avail:
        return R_IPLEN, np.int64(0), np.int64(0), np.int64(0), False
    proto = np.int64(buf[o + p + 9])
    frag = (_be16(buf, o + p + 6) & 0x3FFF) != 0  # MF or an offset
    r.proto = proto
    r.fam = 4
    r.ip_id = _be16(buf, o + p + 4)
    s4 = _be32(buf, o + p + 12)
    d4 = _be32(buf, o + p + 16)
    r.src = s4
    r.dst = d4
    r.src_hi = 0
    r.dst_hi = 0
    r.src_lo = mapped | np.uint64(s4)
    r.dst_lo = mapped | np.uint64(d4)
    return R_OK, proto, p + ihl, tot - ihl, frag


def _ipv6(buf, o, cl, p, avail, r):
    """(reason, proto, q, l4len, frag) of the IPv6 header at ``p`` and its extension headers
    (hop-by-hop, routing, destination options; at most 16); its fields go into ``r``."""
    if cl < p + 40:
        return R_TRUNC, np.int64(0), np.int64(0), np.int64(0), False
    if (buf[o + p] >> 4) != 6:
        return R_VER, np.int64(0), np.int64(0), np.int64(0), False
    plen = _be16(buf, o + p + 4)
    nh = np.int64(buf[o + p + 6])
    if plen == 0 and (nh == 0 or nh == 6 or nh == 17):  # jumbogram / BIG TCP
        plen = avail - 40
    if plen < 0 or 40 + plen > avail:
        return R_IPLEN, np.int64(0), np.int64(0), np.int64(0), False
    r.fam = 6
    r.ip_id = 0
    r.src = _fold(buf, o + p + 8)
    r.dst = _fold(buf, o + p + 24)
    r.src_hi = _be64(buf, o + p + 8)
    r.src_lo = _be64(buf, o + p + 16)
    r.dst_hi = _be64(buf, o + p + 24)
    r.dst_lo = _be64(buf, o + p + 32)
    end = p + 40 + plen
    q = p + 40
    n_ext = 0
    while (nh == 0 or nh == 43 or nh == 60) and n_ext < 16:
        if cl < q + 2:
            return R_TRUNC, np.int64(0), np.int64(0), np.int64(0), False
        hl = (np.int64(buf[o + q + 1]) + 1) * 8
        nh = np.int64(buf[o + q])
        q += hl
        n_ext += 1
    if q > end:
        return R_IPLEN, np.int64(0), np.int64(0), np.int64(0), False
    r.proto = nh
    return R_OK, nh, q, end - q, nh == 44


# -- the one tunnel ----------------------------------------------------------------------------------

def _gre(buf, o, cl, q):
    """(status, et, p, eth) of a GRE header at ``q``: status 1 decapsulated (IPv4/IPv6 at ``p``, or
    Ethernet at ``eth``, ERSPAN I/II/III included), 0 not a GRE this parser reads, -1 truncated."""
    g0 = buf[o + q]
    gp = _be16(buf, o + q + 2)
    if (buf[o + q + 1] & 0x07) != 0 or (g0 & 0x40) != 0 or not (
            gp == 0x0800 or gp == 0x86DD or gp == 0x6558 or gp == 0x88BE or gp == 0x22EB):
        return 0, np.int64(0), np.int64(0), np.int64(-1)
    x = q + 4 + (4 if g0 & 0x80 else 0) + (4 if g0 & 0x20 else 0) + (4 if g0 & 0x10 else 0)
    if gp == 0x88BE and (g0 & 0x10):
        x += 8  # ERSPAN type II header (type I has none, and no GRE sequence)
    if gp == 0x22EB:
        if cl < x + 12:
            return -1, np.int64(0), np.int64(0), np.int64(-1)
        if ((buf[o + x + 10] >> 2) & 0x1F) != 0:  # frame type 0: Ethernet
            return 0, np.int64(0), np.int64(0), np.int64(-1)
        x += 12 + (8 if buf[o + x + 11] & 1 else 0)  # O bit: platform subheader
    if gp == 0x0800 or gp == 0x86DD:
        return 1, gp, x, np.int64(-1)
    if cl < x + 14:
        return -1, np.int64(0), np.int64(0), np.int64(-1)
    return 1, _be16(buf, o + x + 12), x + 14, x


def _vxlan(buf, o, cl, q):
    """(status, et, p, eth) of VXLAN in the UDP datagram at ``q``: 1 decapsulated, -1 truncated."""
    x = q + 16  # UDP, then the 8-byte VXLAN header
    if cl < x + 14:
        return -1, np.int64(0), np.int64(0), np.int64(-1)
    return 1, _be16(buf, o + x + 12), x + 14, x


def _tunnel(buf, o, cl, q, l4len, proto):
    """(status, et, p, eth): the one tunnel (GRE or VXLAN) at the L4 header ``q``, see ``_gre``."""
    if proto == 47 and l4len >= 4 and cl >= q + 4:
        return _gre(buf, o, cl, q)
    if proto == 17 and l4len >= 16 and cl >= q + 4 and _be16(buf, o + q + 2) == 4789:
        return _vxlan(buf, o, cl, q)
    return 0, np.int64(0), np.int64(0), np.int64(-1)


# -- L2.5, IP and one tunnel, together ------------------------------------------------------------------

def _network(buf, o, cl, wl, et, p, eth, r):
    """(reason, kind, ip, eth, q, l4len, proto): tags, labels, the IP header (and, inside one tunnel,
    the same again) of the frame whose link layer left ``et`` at ``p``."""
    decaps = 0
    ip = np.int64(0)  # offset of the measured IP header
    q = np.int64(0)  # its L4 header
    l4len = np.int64(0)
    proto = np.int64(0)
    while True:
        reason, et, p = _vlan_tags(buf, o, cl, et, p)
        if reason:
            break
        if et == 0x8847 or et == 0x8848:
            reason, et, p, pw_eth = _mpls(buf, o, cl, p, decaps)
            if reason:
                break
            if pw_eth >= 0:
                decaps = 1  # the one tunnel, as on the switch
                eth = pw_eth
                continue
        if et == 0:
            reason, et = _ip_version(buf, o, cl, p)
            if reason:
                break
        ip = p
        frag = False
        if et == 0x0800:
            reason, proto, q, l4len, frag = _ipv4(buf, o, cl, p, wl - p, r)
        elif et == 0x86DD:
            reason, proto, q, l4len, frag = _ipv6(buf, o, cl, p, wl - p, r)
        else:
            reason = R_NONIP
        if reason:
            break
        if frag:
            return R_FRAG, KIND_L3, ip, eth, q, l4len, proto
        if decaps == 0:
            status, t_et, t_p, t_eth = _tunnel(buf, o, cl, q, l4len, proto)
            if status < 0:
                reason = R_TRUNC
                break
            if status > 0:
                decaps = 1
                et = t_et
                p = t_p
                eth = t_eth
                continue
        break
    return reason, KIND_DROP, ip, eth, q, l4len, proto


# -- L4 ------------------------------------------------------------------------------------------------

def _tcp(buf, o, cl, q, l4len, r):
    if l4len < 20:
        r.reason = R_DOFF
        r.kind = KIND_L3
        return
    if cl < q + 14:
        r.reason = R_TRUNC
        return
    doff = np.int64(buf[o + q + 12] >> 4) * 4
    if doff < 20 or doff > l4len:
        r.reason = R_DOFF
        r.kind = KIND_L3
        return
    r.sport = _be16(buf, o + q)
    r.dport = _be16(buf, o + q + 2)
    r.seq = _be32(buf, o + q + 4)
    r.ack = _be32(buf, o + q + 8)
    r.flags = buf[o + q + 13]
    r.payload = l4len - doff
    if r.fam == 6 and cl >= q + 18:
        r.ip_id = _be16(buf, o + q + 16)
    r.kind = KIND_TCP


def _udp(buf, o, cl, q, l4len, r):
    if l4len < 8:
        r.reason = R_UDPLEN
        r.kind = KIND_L3
        return
    if cl < q + 6:
        r.reason = R_TRUNC
        return
    ulen = _be16(buf, o + q + 4)
    if ulen < 8 or ulen > l4len:
        r.reason = R_UDPLEN
        r.kind = KIND_L3
        return
    r.sport = _be16(buf, o + q)
    r.dport = _be16(buf, o + q + 2)
    r.payload = ulen - 8
    if r.fam == 6 and cl >= q + 8:
        r.ip_id = _be16(buf, o + q + 6)
    r.kind = KIND_UDP


def _transport(buf, o, cl, q, l4len, proto, r):
    if proto == 6:
        _tcp(buf, o, cl, q, l4len, r)
    elif proto == 17:
        _udp(buf, o, cl, q, l4len, r)
    else:
        r.kind = KIND_L3
        r.reason = R_OTHER


def _parse_py(buf, off, caplen, origlen, linktype, out):
    for i in range(off.shape[0]):
        r = out[i]
        o = off[i]
        cl = caplen[i]
        wl = origlen[i]
        reason, et, p, eth = _link(buf, o, cl, linktype[i])
        if reason:
            r.reason = reason
            continue
        reason, kind, ip, eth, q, l4len, proto = _network(buf, o, cl, wl, et, p, eth, r)
        r.frame_len = (wl - eth) if eth >= 0 else 14 + wl - ip
        if reason:
            r.kind = kind
            r.reason = reason
            continue
        _transport(buf, o, cl, q, l4len, proto, r)


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
    lt = np.broadcast_to(np.asarray(linktype, dtype=np.int32), (n,))
    if not lt.flags.c_contiguous or lt.strides[0] == 0:
        lt = np.ascontiguousarray(lt)
    _kernel()(np.asarray(buf, dtype=np.uint8), np.asarray(off, dtype=np.int64),
              np.asarray(caplen, dtype=np.int64), np.asarray(origlen, dtype=np.int64), lt, out)
    out["ts_ns"] = ts_ns
    out["tap"] = tap
    return out
