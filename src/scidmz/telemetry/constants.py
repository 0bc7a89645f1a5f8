"""The telemetry data plane's constants: the single source of truth.

The software twin (``dataplane.py``), the P4_16 programs (``telemetry_p4/``,
TNA and v1model) and the control plane (``collector.py``) all take their
table sizes, hash layouts, register widths, thresholds and digest formats
from here. Every value is a plain ``int`` (or a tuple of ints / strings) so
the P4 side can mirror it in its shared header and a test can parse both and
compare. Nothing here is floating point: the data plane never sees a float.

Paper sources
-------------
MLC   Vega et al., "Machine Learning Controller for Data Rate Management in
      Science DMZ Networks", section 3.4 (Algorithms 2-8).
JENKS Gomez et al., "Improving Flow Fairness in Non-programmable Networks
      using P4-programmable Data Planes" (extended), section 3.1.

Where a paper names a mechanism but no number (timeouts, table sizes, C_TH,
T_TH, CMS shape) the value below is ours; the comment says so and why.

Tap points and direction (MLC section 3.4, Fig. 6; Algorithm 5)
---------------------------------------------------------------
Two passive taps feed the switch: ``TAP_INGRESS`` sees packets entering the
bottleneck router BR1 from the campus/DTN side (before its queue);
``TAP_EGRESS`` is the bottleneck interface itself and sees outgoing packets
after the queue plus the incoming packets (ACKs) from the WAN. A packet is
*outgoing* when its destination address (IPv4 or IPv6) hits the class LPM
table, *incoming* when its source does (then the class is the source's). Per-class counters
(Alg. 2), RTT (section 3.4.2 / JENKS 3.1), active flows (Alg. 7) and the
Count-Min sketch run on ``TAP_EGRESS``; queuing delay (Alg. 5) pairs the same
packet's ``TAP_INGRESS`` and ``TAP_EGRESS`` timestamps.

Class LPM table (MLC Algorithms 2 and 5)
----------------------------------------
One LPM table ``class_lpm`` on the 128-bit destination address (IPv4 as
``::ffff:a``, see "addresses"; and, for the reverse direction, a second
lookup of the same entries on the source address) whose
action ``set_class(class_id)`` returns ``CLASS_DTN`` or ``CLASS_CAMPUS``;
a miss is ``CLASS_NONE`` (packet is not measured). The control plane installs
the DTN-r host as a /32 (or /128) -> ``CLASS_DTN`` and the remote network
(e.g. 10.1.0.0/16, several prefixes of both families allowed) ->
``CLASS_CAMPUS``: longest prefix match gives the DTN-r host
precedence when it sits inside the remote network, exactly Algorithm 2's
``if dst = LPM(DTN-r) ... else if dst = LPM(IP_RN)``. Each entry carries a
direct byte+packet counter in P4; the twin keeps them per (tap, class).

Timestamps and register widths
------------------------------
Timestamps in registers are 32-bit ticks. v1model's
``standard_metadata.ingress_global_timestamp`` is microseconds (bit<48>): the
P4 program keeps bits [31:0] (tick = ``TS_TICK_NS_V1MODEL`` = 1000 ns). TNA's
``ingress_mac_tstamp`` is nanoseconds (bit<48>): the program keeps bits
[41:10] (tick = ``TS_TICK_NS_TNA`` = 1024 ns), a shift instead of a division.
The twin uses ``TS_TICK_NS`` (= v1model's). Differences are taken modulo 2^32
(``(now - then) & TS_MASK``), correct while the true gap is below
2^32 ticks (71.6 min at 1 us); entries older than their timeout are reused
lazily, long before that.

RTT (MLC 3.4.2; JENKS 3.1, steps 1-3)
-------------------------------------
Outgoing TCP segment: FID = 5-tuple, eACK = SEQ + payload length, +1 for SYN
and +1 for FIN (they consume one sequence number), mod 2^32. Segments with no
payload and neither SYN nor FIN (pure ACKs) are not stored. The pair
(FID, eACK) is stored with the timestamp in a multi-stage hash table of
``RTT_STAGES`` register arrays of ``RTT_STAGE_SIZE`` entries each. Each entry
is one 64-bit register cell read and written by one RegisterAction per stage:
``sig`` (bit<32>) and ``ts`` (bit<32>).

* ``sig`` = low ``SIG_BITS`` (31) bits of CRC-32 over ``RTT_SIG_FIELDS``,
  forced to 1 if 0, so 0 means "empty"; bit 31 (``SIG_POISON``) marks an
  entry poisoned by a retransmission.
* index in stage i = low ``RTT_INDEX_BITS`` bits of CRC-32 over
  ``RTT_STAGE_FIELDS[i]``.
* Insert (new data, eACK beyond the flow's highest eACK seen): stages in
  order, the first whose cell is empty, or expired (age > ``RTT_TIMEOUT_US``,
  lazy expiry: nothing ever scans the table), takes the entry; all stages
  busy -> not stored (counted).
* Retransmission (eACK not beyond the highest eACK already seen for the
  flow, serial arithmetic): the matching cell, if any, is poisoned, and the
  flow enters recovery until the ACK passes the highest eACK sent so far
  (Karn's rule: an ACK that may answer a retransmission gives no sample).
* Incoming ACK: stages in order, the first cell whose sig matches
  (FID reversed, ACK) is cleared; it yields a sample ``now - ts`` only if not
  poisoned, not expired, and the flow is not in recovery at that ACK. A
  delayed ACK covering two segments matches the second segment's eACK, so
  its sample is measured from the segment it acknowledges; the first
  segment's cell ages out lazily.

Hash family: all hashes are the standard CRC-32 (IEEE 802.3: reflected
polynomial 0x04C11DB7, init 0xFFFFFFFF, xor-out 0xFFFFFFFF; Python's
``zlib.crc32``; v1model ``HashAlgorithm.crc32``; TNA
``Hash<bit<32>>(HashAlgorithm_t.CRC32)``) over the listed header fields
serialised big-endian and concatenated in the listed order. The stages
differ by *field order*, not by a prepended salt: CRC is affine in its input,
so prepending a constant salt only XORs every index with a constant and two
keys colliding in one stage would collide in all; reordering the fields
gives a different linear map. Indexes and the 31-bit signature take the low
bits (v1model: ``hash(idx, crc32, 0, {...}, SIZE)`` with SIZE a power of 2).

Active flows (MLC Algorithm 7, from [87] Kfoury et al.)
-------------------------------------------------------
One flow table of ``AF_TABLE_SIZE`` slots indexed by the low bits of CRC-32
over ``FLOW_FIELDS``; per slot: ``af_sig`` (flow signature, CRC-32 over
``FLOW_SIG_FIELDS``, low 31 bits, nonzero), ``af_count`` (bit<16>),
``af_ts`` (bit<32> last packet), ``af_active`` (bit<8>), ``af_bytes``
(bit<32>, wraps; the collector takes deltas mod 2^32), ``flow_rtt`` (bit<32>,
last RTT sample in ticks, kept for the Jenks policy), ``af_max_eack``,
``af_recover`` / ``af_recover_flag`` (RTT bookkeeping above). A packet of a known flow arriving
less than ``T_TH_US`` after the previous one increments ``af_count``; when it
reaches ``C_TH`` the flow becomes active and a ``DIGEST_NEW_FLOW`` is sent
(once). A gap of ``T_TH_US`` or more resets the count; if the flow was
active a ``DIGEST_TIMEOUT`` is sent (the flow went idle). FIN or RST (either
direction) removes the flow: ``DIGEST_TIMEOUT`` if it was active, and the
slot is freed. A new flow whose slot holds another flow idle for
``T_TH_US`` or more evicts it (timeout digest if it was active); a live
occupant keeps the slot and the newcomer is not tracked (counted as a
collision). Because the data plane only sees idleness when a packet comes,
the collector also drops flows whose ``af_ts`` register is older than
``T_TH_US`` (MLC Algorithm 4's "deleting inactive flows using a timeout").

Neither paper gives C_TH or T_TH numerically. We take C_TH = 10 packets and
T_TH = 1 s: a flow that cannot keep ten packets in flight within a second
(less than about 120 kbit/s with 1500-byte packets) is too light to count
against the bottleneck, and 1 s equals the control period T so a flow idle
for a whole period leaves the count at the next period.

Queuing delay (MLC Algorithms 5, 6)
-----------------------------------
At ``TAP_INGRESS`` every outgoing packet writes (sig, ts) into ``qd_table``
(``QD_TABLE_SIZE`` cells, index and sig from CRC-32 over ``QD_INDEX_FIELDS``
/ ``QD_SIG_FIELDS``: addresses, protocol, IP ID, ports and TCP SEQ identify
one packet, and the IP ID differs between a segment and its
retransmission). At ``TAP_EGRESS`` the same packet reads and clears its cell;
on a sig match with an age below ``QD_TIMEOUT_US`` it writes the sample to
``qd_last[class]`` (Algorithm 5's QD_Reg) and adds it to ``qd_sum[class]`` /
``qd_cnt[class]`` (bit<64> / bit<32>) so the collector can also report the
period mean (Algorithm 6 polls; a single last value is a noisy estimator).

Long flows (JENKS 3.1, Count-Min sketch [13])
---------------------------------------------
``CMS_ROWS`` x ``CMS_COLS`` bit<32> byte counters, row r indexed by CRC-32
over ``CMS_ROW_FIELDS[r]``. Every outgoing packet adds its frame length to
one cell per row; the estimate is the row minimum. A flow is long once the
estimate exceeds ``LONG_FLOW_BYTES`` (10 MB); the crossing packet (estimate
before < threshold <= estimate after) sends ``DIGEST_LONG_FLOW`` once. Counters
saturate at 2^32 - 1 and are reset by the control plane (``cms_reset``).

Byte counts are L2 frame lengths without FCS (pcap ``orig_len``; P4
``packet_length``/``pkt_length`` minus 4 on TNA where the MAC count includes
the FCS) of the measured frame: inside a tunnel the inner frame, the switch's
counter less ``REG_CLASS_STRIP``.

Digests
-------
``DIGEST_RTT_FIELDS`` and ``DIGEST_FLOW_FIELDS`` list (name, bit width) in
wire order; ``DIGEST_FLOW_FIELDS``' ``kind`` is one of ``DIGEST_NEW_FLOW``,
``DIGEST_TIMEOUT``, ``DIGEST_LONG_FLOW``. The collector consumes them as NumPy
structured arrays with ``DIGEST_RTT_DTYPE`` / ``DIGEST_FLOW_DTYPE``.
"""

from __future__ import annotations

from ..units import ETH_HLEN as ETH_HLEN  # the wire fact is defined once, in units

# -- taps, classes, directions -------------------------------------------------
TAP_INGRESS: int = 0  # BR1 input side (before the queue)
TAP_EGRESS: int = 1  # bottleneck interface (after the queue, plus WAN -> campus)
N_TAPS: int = 2

CLASS_NONE: int = 0
CLASS_DTN: int = 1
CLASS_CAMPUS: int = 2
N_CLASSES: int = 3
CLASS_NAMES: tuple[str, ...] = ("none", "dtn", "campus")
CLASS_LPM_SIZE: int = 64  # entries of class_lpm (a handful are used)

DIR_NONE: int = 0
DIR_OUT: int = 1  # dst hits class_lpm: campus/DTN-s -> remote
DIR_IN: int = 2  # src hits class_lpm: remote -> campus/DTN-s (carries the ACKs)

# Default prefixes (the emulated testbed's addressing; CLI --dtn-prefix/--remote-prefix).
DEFAULT_DTN_PREFIX: str = "10.0.3.2/32"
DEFAULT_REMOTE_PREFIX: str = "10.1.0.0/16"

# -- time ----------------------------------------------------------------------
TS_BITS: int = 32
TS_MASK: int = (1 << TS_BITS) - 1
TS_TICK_NS_V1MODEL: int = 1000  # ingress_global_timestamp[31:0], microseconds
TS_TICK_NS_TNA: int = 1024  # ingress_mac_tstamp[41:10]
TS_TICK_NS_TNA_SHIFT: int = 10
TS_TICK_NS: int = TS_TICK_NS_V1MODEL  # the twin's tick

# -- hashing -------------------------------------------------------------------
CRC32_POLY_REFLECTED: int = 0xEDB88320  # = bit-reverse of 0x04C11DB7
CRC32_POLY: int = 0x04C11DB7
CRC32_INIT: int = 0xFFFFFFFF
CRC32_XOROUT: int = 0xFFFFFFFF
SIG_BITS: int = 31
SIG_MASK: int = (1 << SIG_BITS) - 1
SIG_POISON: int = 1 << 31  # RTT cell poisoned by a retransmission
SIG_EMPTY: int = 0

# Field names and widths usable in hash field lists (big-endian on the wire).
HASH_FIELD_BITS: dict[str, int] = {
    "src_addr": 32,
    "dst_addr": 32,
    "src_port": 16,
    "dst_port": 16,
    "protocol": 8,
    "eack": 32,  # RTT key: eACK for outgoing data, ACK number for incoming ACKs
    "identification": 16,  # IPv4 ID
    "seq_no": 32,  # TCP SEQ (0 for non-TCP)
}
# The 5-tuple is always in the *outgoing* orientation (src = campus/DTN-s side):
# an incoming ACK's addresses and ports are swapped before hashing.
FLOW_FIELDS: tuple[str, ...] = ("src_addr", "dst_addr", "src_port", "dst_port", "protocol")
FLOW_SIG_FIELDS: tuple[str, ...] = ("protocol", "dst_port", "src_port", "dst_addr", "src_addr")

# -- RTT table (multi-stage hashing) -----------------------------------------
RTT_STAGES: int = 4
RTT_INDEX_BITS: int = 15
RTT_STAGE_SIZE: int = 1 << RTT_INDEX_BITS  # 32768 cells x 4 stages x 64 bit = 1 MiB
RTT_STAGE_FIELDS: tuple[tuple[str, ...], ...] = (
    ("src_addr", "dst_addr", "src_port", "dst_port", "protocol", "eack"),
    ("eack", "src_addr", "dst_addr", "src_port", "dst_port", "protocol"),
    ("dst_port", "src_port", "eack", "protocol", "dst_addr", "src_addr"),
    ("protocol", "eack", "dst_addr", "src_port", "src_addr", "dst_port"),
)
RTT_SIG_FIELDS: tuple[str, ...] = ("dst_addr", "eack", "protocol", "src_addr", "dst_port", "src_port")
# Cells older than this are free (lazy expiry) and never give a sample. Ours:
# above any RTT the testbed produces (100 ms base + bufferbloat) yet short
# enough that stale cells left by delayed ACKs recycle (JENKS 3.1: "records
# that exceed this threshold are removed").
RTT_TIMEOUT_US: int = 1_000_000
RTT_TIMEOUT_TICKS: int = RTT_TIMEOUT_US * 1000 // TS_TICK_NS

# -- active flows (Algorithm 7) ----------------------------------------------
AF_INDEX_BITS: int = 16
AF_TABLE_SIZE: int = 1 << AF_INDEX_BITS
C_TH: int = 10  # packets (ours; see module docstring)
T_TH_US: int = 1_000_000  # 1 s (ours; see module docstring)
T_TH_TICKS: int = T_TH_US * 1000 // TS_TICK_NS
AF_COUNT_BITS: int = 16
AF_BYTES_BITS: int = 32

# -- queuing delay (Algorithm 5) ----------------------------------------------
QD_INDEX_BITS: int = 16
QD_TABLE_SIZE: int = 1 << QD_INDEX_BITS
QD_INDEX_FIELDS: tuple[str, ...] = (
    "src_addr", "dst_addr", "protocol", "identification", "src_port", "dst_port", "seq_no",
)
QD_SIG_FIELDS: tuple[str, ...] = (
    "seq_no", "identification", "dst_port", "src_port", "protocol", "dst_addr", "src_addr",
)
QD_TIMEOUT_US: int = 2_000_000  # a packet held longer than this is not a queuing sample
QD_TIMEOUT_TICKS: int = QD_TIMEOUT_US * 1000 // TS_TICK_NS
QD_SUM_BITS: int = 64
QD_CNT_BITS: int = 32

# -- Count-Min sketch (JENKS 3.1) ---------------------------------------------
CMS_ROWS: int = 3
CMS_INDEX_BITS: int = 16
CMS_COLS: int = 1 << CMS_INDEX_BITS
CMS_ROW_FIELDS: tuple[tuple[str, ...], ...] = (
    ("src_addr", "dst_addr", "src_port", "dst_port", "protocol"),
    ("dst_port", "protocol", "src_addr", "src_port", "dst_addr"),
    ("protocol", "src_port", "dst_addr", "dst_port", "src_addr"),
)
CMS_COUNTER_BITS: int = 32
LONG_FLOW_BYTES: int = 10_000_000  # "a flow is considered long if its size is greater than 10MB"

# -- register / counter names (P4 programs use the same names) ------------------
REG_RTT_STAGE: tuple[str, ...] = tuple(f"rtt_stage{i}" for i in range(RTT_STAGES))
REG_AF_SIG: str = "af_sig"
REG_AF_COUNT: str = "af_count"
REG_AF_TS: str = "af_ts"
REG_AF_ACTIVE: str = "af_active"
REG_AF_BYTES: str = "af_bytes"
REG_FLOW_RTT: str = "flow_rtt"
REG_AF_MAX_EACK: str = "af_max_eack"
REG_AF_RECOVER: str = "af_recover"  # recovery point (highest eACK when a retransmission was seen)
REG_AF_RECOVER_FLAG: str = "af_recover_flag"  # bit<8>: 1 while ACKs up to af_recover are ambiguous
REG_QD_TABLE: str = "qd_table"
REG_QD_LAST: str = "qd_last"  # indexed by class
REG_QD_SUM: str = "qd_sum"
REG_QD_CNT: str = "qd_cnt"
REG_CMS: tuple[str, ...] = tuple(f"cms_row{r}" for r in range(CMS_ROWS))
# Per class at the egress tap: the tunnel-header bytes (outer Ethernet ... ERSPAN/VXLAN) of
# the classified packets. A switch's counters add each packet's whole length; the measured
# frame is the inner one, so the control plane subtracts this from class_bytes. The twin
# counts the measured frames directly (it stays 0 there).
REG_CLASS_STRIP: str = "class_strip"
CLASS_STRIP_BITS: int = 64
COUNTER_CLASS_BYTES: str = "class_bytes"  # direct counter of class_lpm (bytes+packets)

# -- digests -----------------------------------------------------------------
DIGEST_NEW_FLOW: int = 1
DIGEST_TIMEOUT: int = 2
DIGEST_LONG_FLOW: int = 3
# Addresses are 128-bit (IPv4-mapped for IPv4, see "addresses"); NumPy holds each as
# two uint64 words, ``<name>_hi`` and ``<name>_lo`` (``DIGEST_*_DTYPE``).
DIGEST_RTT_FIELDS: tuple[tuple[str, int], ...] = (
    ("src_addr", 128), ("dst_addr", 128), ("src_port", 16), ("dst_port", 16), ("protocol", 8),
    ("cls", 8), ("rtt", 32), ("ts", 32),
)
DIGEST_FLOW_FIELDS: tuple[tuple[str, int], ...] = (
    ("kind", 8), ("src_addr", 128), ("dst_addr", 128), ("src_port", 16), ("dst_port", 16),
    ("protocol", 8), ("cls", 8), ("slot", 32), ("ts", 32),
)

# -- parser --------------------------------------------------------------------
VLAN_TPIDS: tuple[int, ...] = (0x8100, 0x88A8, 0x9100)
ETHERTYPE_IPV4: int = 0x0800
ETHERTYPE_IPV6: int = 0x86DD
ETHERTYPE_MPLS: tuple[int, ...] = (0x8847, 0x8848)  # unicast, multicast
ETHERTYPE_TEB: int = 0x6558  # transparent Ethernet bridging (Ethernet inside GRE)
ETHERTYPE_ERSPAN2: int = 0x88BE  # ERSPAN type I (GRE without sequence number) and II
ETHERTYPE_ERSPAN3: int = 0x22EB
IPPROTO_TCP: int = 6
IPPROTO_UDP: int = 17
IPPROTO_GRE: int = 47
UDP_PORT_VXLAN: int = 4789
IPV6_HLEN: int = 40
# IPv6 extension headers read through (hop-by-hop, routing, destination options); a
# fragment header makes the packet L3-only, as an IPv4 fragment.
IPV6_EXT_HEADERS: tuple[int, ...] = (0, 43, 60)
IPV6_EXT_FRAGMENT: int = 44
# What the P4 parsers hold (a switch's parser is a fixed graph; the twin reads any number
# of tags, labels and extension headers). Ours: QinQ plus two more tags; four labels cover
# an L3VPN with a transport label and entropy labels; two 8-64-byte extension headers.
P4_VLAN_TAGS: int = 4
P4_INNER_VLAN_TAGS: int = 2
P4_MPLS_LABELS: int = 4
P4_IPV6_EXT_HEADERS: int = 2
P4_IPV6_EXT_MAX_UNITS: int = 7  # hdr_ext_len (8-byte units beyond the first 8 bytes)
TCP_FIN: int = 0x01
TCP_SYN: int = 0x02
TCP_RST: int = 0x04
TCP_ACK: int = 0x10

# -- addresses ---------------------------------------------------------------------
# Both families share one 128-bit address space (class LPM keys, digests, the flow table):
# an IPv4 address a is the IPv4-mapped IPv6 address ::ffff:a (RFC 4291 2.5.5.2), so an
# IPv4 prefix a/n is ::ffff:a/(96 + n). The hash key's 32-bit address fields hold the
# IPv4 address itself (IPv4 hashes are the same as before IPv6 was added) or, for IPv6,
# ``ADDR_FOLD``: the standard CRC-32 of the 16 address bytes (ours: one hash unit per
# address on the switch, and the key stays 13 bytes; an XOR fold would make
# 2001:db8:0:1::2 and 2001:db8:0:2::1 collide).
IPV4_MAPPED_HI: int = 0
IPV4_MAPPED_LO: int = 0xFFFF_0000_0000  # lo 64 bits of ::ffff:0.0.0.0
IPV4_MAPPED_PREFIXLEN: int = 96
ADDR_BITS: int = 128


def _np_dtype(fields: tuple[tuple[str, int], ...]) -> list[tuple[str, str]]:
    width = {8: "u1", 16: "u2", 32: "u4", 64: "u8"}
    out: list[tuple[str, str]] = []
    for n, b in fields:
        out += [(f"{n}_hi", "u8"), (f"{n}_lo", "u8")] if b == 128 else [(n, width[b])]
    return out


DIGEST_RTT_DTYPE: list[tuple[str, str]] = _np_dtype(DIGEST_RTT_FIELDS)
DIGEST_FLOW_DTYPE: list[tuple[str, str]] = _np_dtype(DIGEST_FLOW_FIELDS)


def _check() -> None:
    for size in (RTT_STAGE_SIZE, AF_TABLE_SIZE, QD_TABLE_SIZE, CMS_COLS):
        assert size & (size - 1) == 0, "table sizes must be powers of two"
    assert len(RTT_STAGE_FIELDS) == RTT_STAGES and len(CMS_ROW_FIELDS) == CMS_ROWS
    for fl in (*RTT_STAGE_FIELDS, RTT_SIG_FIELDS, FLOW_FIELDS, FLOW_SIG_FIELDS,
               QD_INDEX_FIELDS, QD_SIG_FIELDS, *CMS_ROW_FIELDS):
        assert all(f in HASH_FIELD_BITS for f in fl)
    assert len(set(RTT_STAGE_FIELDS)) == RTT_STAGES and len(set(CMS_ROW_FIELDS)) == CMS_ROWS


_check()
__all__ = sorted(name for name in globals() if name.isupper() and not name.startswith("_"))
