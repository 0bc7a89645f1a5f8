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
from ..layout import STAT_NAMES
from ..parse import REASONS

__all__ = [
    "HOOKS", "HOOK_LAN_IN", "HOOK_WAN_IN", "HOOK_WAN_OUT", "CELL", "AF_SLOT", "FLOW_EVENT", "PREFIX", "CFG_HEAD",
    "COUNTER_NAMES", "COUNTER_INDEX", "PARSE_REASONS", "EBPF_ONLY", "dtype", "ctr_cls",
]

# Where a program runs (what the mirrored taps of the twin see there, constants.py "Tap points"):
# LAN_IF ingress = TAP_INGRESS (frames entering BR1 from campus/DTN, before the queue);
# WAN_IF ingress = both taps (frames back from the WAN: BR1's input and the bottleneck link);
# WAN_IF egress / transmit = TAP_EGRESS (frames leaving through the bottleneck).
HOOKS: tuple[str, ...] = ("lan_in", "wan_in", "wan_out")
HOOK_LAN_IN, HOOK_WAN_IN, HOOK_WAN_OUT = range(3)


def _w(bits: int) -> int:
    if bits not in (8, 16, 32, 64):
        raise ValueError(f"a map field must be 8/16/32/64 bits wide, got {bits}")
    return bits


# (name, bits) in memory order; natural alignment, no implicit padding.
CELL: tuple[tuple[str, int], ...] = (("sig", 32), ("ts", 32))
AF_SLOT: tuple[tuple[str, int], ...] = (
    (C.REG_AF_SIG, 32), (C.REG_AF_TS, 32), (C.REG_AF_BYTES, _w(C.AF_BYTES_BITS)), (C.REG_FLOW_RTT, 32),
    (C.REG_AF_MAX_EACK, 32), (C.REG_AF_RECOVER, 32), (C.REG_AF_COUNT, _w(C.AF_COUNT_BITS)),
    (C.REG_AF_ACTIVE, 8), (C.REG_AF_RECOVER_FLAG, 8),
)
# The flow digest's fields (constants.DIGEST_FLOW_FIELDS), widest first so the struct packs.
FLOW_EVENT: tuple[tuple[str, int], ...] = tuple(sorted(C.DIGEST_FLOW_FIELDS, key=lambda f: -f[1]))
PREFIX: tuple[tuple[str, int], ...] = (("net", 32), ("mask", 32), ("cls", 32), ("pad", 32))
# The configuration (read-only data, frozen at load: the verifier prunes what it switches off),
# followed by CLASS_LPM_SIZE PREFIX entries, longest prefix first.
CFG_HEAD: tuple[tuple[str, int], ...] = (
    ("n_prefix", 32), ("rtt_tap", 32), ("clock_skb", 32), ("wan_ifindex", 32), ("wan_netns", 32), ("pad", 32),
)

# Parser reasons the programs count (parse.REASONS 1..11; the file-level ones cannot happen on a
# live interface, and a non-Ethernet interface is refused at attach time).
PARSE_REASONS: tuple[str, ...] = REASONS[1:12]


def _counter_names() -> tuple[str, ...]:
    names = [f"cls_{t}_{c}_{k}" for t in range(C.N_TAPS) for c in range(C.N_CLASSES) for k in ("bytes", "packets")]
    names += [f"stat_{s}" for s in STAT_NAMES]
    names += [f"parse_{r}" for r in PARSE_REASONS]
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
}


def ctr_cls(tap: int, cls: int, k: int) -> int:
    """Index of the class counter (k = 0 bytes, 1 packets) of ``cls`` at ``tap``."""
    return COUNTER_INDEX[f"cls_{tap}_{cls}_{('bytes', 'packets')[k]}"]


def dtype(fields: tuple[tuple[str, int], ...], itemsize: int | None = None) -> np.dtype:
    """The little-endian NumPy dtype of a struct of ``fields`` (natural alignment, as the C side)."""
    names, formats, offsets = [], [], []
    off = 0
    for name, bits in fields:
        size = bits // 8
        off = -(-off // size) * size
        names.append(name)
        formats.append(f"<u{size}")
        offsets.append(off)
        off += size
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": max(itemsize or 0, -(-off // 4) * 4)})
