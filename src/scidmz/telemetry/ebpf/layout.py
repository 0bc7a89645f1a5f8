"""The memory layout the eBPF programs and their Python reader share (one spec, two renderings).

``gen_header.py`` renders these tuples as C structs and ``#define``s for the
programs; the reader (``view.py``) builds NumPy dtypes from the same tuples,
so a field moved here moves on both sides. Widths of the per-flow fields come
from ``constants.py`` (the twin's and the P4 programs' register widths).

Maps (names as in ``scidmz_telemetry.bpf.c``):

=============== ========================== =====================================================
map             type, entries              value
=============== ========================== =====================================================
``rtt_table``   array, stages x cells      ``CELL`` (sig, ts): the RTT stages, stage-major
``af_table``    array, ``AF_TABLE_SIZE``    ``AF_SLOT``: Algorithm 7's per-flow registers
``qd_table``    array, ``QD_TABLE_SIZE``    ``CELL``: Algorithm 5's ingress stamps
``cms``         array, rows x cols / 2     2 x u32: the Count-Min rows, row-major, two per value
``qd_last``     array, ``N_CLASSES``        u32: Algorithm 5's QD_Reg per class
``counters``    per-CPU array, 1           u64 x ``N_COUNTERS`` (``COUNTER_NAMES``)
``flow_events`` ring buffer                ``FLOW_EVENT``: the flow digests (new, ended, long)
=============== ========================== =====================================================

The three tables the collector reads each period are ``BPF_F_MMAPABLE``
(read through a shared mapping, no system call per value). An mmap'd array
lays its values out every ``round_up(value_size, 8)`` bytes, so every
mmap'd value here is a multiple of 8 bytes (``AF_SLOT`` is padded to 32).
"""

from __future__ import annotations

import numpy as np

from .. import constants as C
from ..twin.layout import STAT_NAMES
from ..twin.parse import REASONS

__all__ = [
    "HOOKS", "HOOK_LAN_IN", "HOOK_WAN_IN", "HOOK_WAN_OUT", "CELL", "AF_SLOT", "FLOW_EVENT", "PREFIX", "CFG_HEAD",
    "COUNTER_NAMES", "COUNTER_INDEX", "PARSE_REASONS", "EBPF_REASONS", "EBPF_ONLY", "dtype", "ctr_cls", "words",
]

# Where a program runs (what the mirrored taps of the twin see there, constants.py "Tap points"):
# LAN_IF ingress = TAP_INGRESS (frames entering BR1 from campus/DTN, before the queue);
# WAN_IF ingress = both taps (frames back from the WAN: BR1's input and the bottleneck link);
# WAN_IF egress / transmit = TAP_EGRESS (frames leaving through the bottleneck).
HOOKS: tuple[str, ...] = ("lan_in", "wan_in", "wan_out")
HOOK_LAN_IN, HOOK_WAN_IN, HOOK_WAN_OUT = range(3)


def _w(bits: int) -> int:
    if bits not in (8, 16, 32, 64, 128):
        raise ValueError(f"a map field must be 8/16/32/64/128 bits wide, got {bits}")
    return bits


def words(fields: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """``fields`` with each 128-bit field as two 64-bit words ``<name>_hi``, ``<name>_lo``.

    A 128-bit address is held as two host-order 64-bit integers, the upper and the lower
    half (ours): exactly the twin's ``DIGEST_*_DTYPE`` columns and the class LPM's
    ``view.lpm_entry`` words, so a digest is copied out field for field and a prefix match
    is two masked 64-bit compares; C has no portable 128-bit integer in BPF's ABI, and a
    byte array would need a byte swap per word on every read anyway.
    """
    out: list[tuple[str, int]] = []
    for name, bits in fields:
        out += [(f"{name}_hi", 64), (f"{name}_lo", 64)] if _w(bits) == 128 else [(name, bits)]
    return tuple(out)


# (name, bits) in memory order; natural alignment, no implicit padding.
CELL: tuple[tuple[str, int], ...] = (("sig", 32), ("ts", 32))
AF_SLOT: tuple[tuple[str, int], ...] = (
    (C.REG_AF_SIG, 32), (C.REG_AF_TS, 32), (C.REG_AF_BYTES, _w(C.AF_BYTES_BITS)), (C.REG_FLOW_RTT, 32),
    (C.REG_AF_MAX_EACK, 32), (C.REG_AF_RECOVER, 32), (C.REG_AF_COUNT, _w(C.AF_COUNT_BITS)),
    (C.REG_AF_ACTIVE, 8), (C.REG_AF_RECOVER_FLAG, 8),
)
# The flow digest's fields (constants.DIGEST_FLOW_FIELDS), widest first so the struct packs;
# the 128-bit addresses as two words each (``words``).
FLOW_EVENT: tuple[tuple[str, int], ...] = words(tuple(sorted(C.DIGEST_FLOW_FIELDS, key=lambda f: -f[1])))
# One class_lpm entry on the 128-bit address (IPv4 as ::ffff:a/(96 + n), ``view.lpm_entry``).
PREFIX: tuple[tuple[str, int], ...] = words((("net", 128), ("mask", 128))) + (("cls", 32), ("pad", 32))
# The configuration (read-only data, frozen at load: the verifier prunes what it switches off),
# followed by CLASS_LPM_SIZE PREFIX entries, longest prefix first.
CFG_HEAD: tuple[tuple[str, int], ...] = (
    ("n_prefix", 32), ("rtt_tap", 32), ("clock_skb", 32), ("wan_ifindex", 32), ("wan_netns", 32), ("pad", 32),
)

# Parser reasons the programs count (parse.REASONS 1..11; the file-level ones cannot happen on a
# live interface, and a non-Ethernet interface is refused at attach time).
PARSE_REASONS: tuple[str, ...] = REASONS[1:12]
# The programs' own reasons (codes after PARSE_REASONS'), for frames they do not measure as the
# twin does (docs/telemetry_ebpf.md "Known gaps"): ``tunnel``, a frame the twin decapsulates
# (GRE carrying IP, Ethernet or ERSPAN I/II/III, VXLAN, an MPLS pseudowire), whose inner
# packet the programs do not read (ours: a border router forwards tunnels, it is not their
# mirror endpoint, and a second parse doubles the verifier's work); ``too_deep``, more VLAN
# tags or MPLS labels than ``EBPF_ONLY``'s bounds (the twin reads any number).
EBPF_REASONS: tuple[str, ...] = ("tunnel", "too_deep")


def _counter_names() -> tuple[str, ...]:
    names = [f"cls_{t}_{c}_{k}" for t in range(C.N_TAPS) for c in range(C.N_CLASSES) for k in ("bytes", "packets")]
    names += [f"stat_{s}" for s in STAT_NAMES]
    names += [f"parse_{r}" for r in (*PARSE_REASONS, *EBPF_REASONS)]
    names += [f"{what}_{c}" for what in ("rtt_sum", "rtt_cnt", "qd_sum", "qd_cnt") for c in range(C.N_CLASSES)]
    names += [f"hook_{h}" for h in HOOKS]
    names += ["events_lost"]
    return tuple(names)


COUNTER_NAMES: tuple[str, ...] = _counter_names()
COUNTER_INDEX: dict[str, int] = {n: i for i, n in enumerate(COUNTER_NAMES)}

# eBPF-only numbers (no twin or P4 counterpart), emitted as SCIDMZ_EBPF_<NAME>.
EBPF_ONLY: dict[str, int] = {
    # Flow digests are rare (new / ended / long flows, not packets): 1 MiB holds ~26,000
    # of them, more than a period of flow churn at 10,000 concurrent flows. Ours.
    "RINGBUF_BYTES": 1 << 20,
    "HOOK_LAN_IN": HOOK_LAN_IN,
    "HOOK_WAN_IN": HOOK_WAN_IN,
    "HOOK_WAN_OUT": HOOK_WAN_OUT,
    "N_HOOKS": len(HOOKS),
    "AF_SLOT_BYTES": 32,
    # Header depths the parser reads (a verifier needs a bound; the twin has none). Ours: QinQ
    # and an L3VPN label stack fit many times over; IPv6 extension headers as the twin (16).
    "VLAN_TAGS": 8,
    "MPLS_LABELS": 8,
    "IPV6_EXT_HEADERS": 16,
}


def ctr_cls(tap: int, cls: int, k: int) -> int:
    """Index of the class counter (k = 0 bytes, 1 packets) of ``cls`` at ``tap``."""
    return COUNTER_INDEX[f"cls_{tap}_{cls}_{('bytes', 'packets')[k]}"]


def dtype(fields: tuple[tuple[str, int], ...], itemsize: int | None = None) -> np.dtype:
    """The little-endian NumPy dtype of a struct of ``fields`` (natural alignment, as the C side)."""
    names, formats, offsets = [], [], []
    off, align = 0, 1
    for name, bits in words(fields):
        size = bits // 8
        off = -(-off // size) * size
        align = max(align, size)
        names.append(name)
        formats.append(f"<u{size}")
        offsets.append(off)
        off += size
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": max(itemsize or 0, -(-off // align) * align)})
