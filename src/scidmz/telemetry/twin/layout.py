"""Index constants of the telemetry twin, shared by ``dataplane`` and the numba ``algorithms``.

- ``STAT_NAMES`` and the ``S_*`` slots of the twin's event counters;
- the twin's register layouts: the per-flow registers of one active-flow slot
  side by side (``AF_*`` columns of one row), each RTT and queuing-delay cell's
  (sig, ts) pair side by side, so that one packet touches one cache line per
  table instead of one per register (ours: speed; the P4 names and widths are
  unchanged, ``SoftwareDataPlane.read_register`` returns the columns);
- the digest rows of the twin (``DR_*``, ``DF_*``): the P4 digest fields in
  ``constants.py`` order, 128-bit addresses as two words, then the packet's
  full timestamp (twin only);
- the hash layouts: which header fields, in which order, feed each CRC-32 of
  the P4 programs (one row per hash: flow index and signature, the RTT stages
  and signature, the queuing-delay index and signature, the Count-Min rows),
  from ``constants.py`` so the twin and the P4 code hash the same bytes;
- the slicing-by-4 tables of the reflected CRC-32 (the P4 ``crc32``).

Plain NumPy: importing this module does not import numba.
"""

from __future__ import annotations

import numpy as np

from .. import constants as C

__all__ = ["STAT_NAMES", "CRC_TABLE", "FIELD_WIDTHS", "LAYOUT_FIELDS", "LAYOUTS", "crc32_fields", "AF_COLS",
           "AF_REGISTERS", "DIGEST_RTT_COLS", "DIGEST_FLOW_COLS"]

# ``af_new``: flows that claimed a slot (their first packet); ``af_activations``: times a
# flow crossed C_TH (its first time, or again after an idle gap of T_TH). The last four
# feed the prefix checks: outgoing packets of the DTN class and how many carried TCP
# payload, incoming DTN-class packets carrying payload, packets whose source and
# destination both hit class_lpm; the last two, the TCP payload bytes of the outgoing and the
# incoming DTN-class packets (the sender check weighs bytes: a few large segments outweigh many ACKs).
STAT_NAMES: tuple[str, ...] = (
    "unclassified", "rtt_stored", "rtt_table_full", "rtt_retx_poisoned", "rtt_retx_flow",
    "rtt_samples", "rtt_rejected_retx", "rtt_rejected_expired", "rtt_rejected_ambiguous",
    "af_new", "af_activations", "af_collisions", "af_evictions", "af_fin_removed", "qd_samples",
    "qd_unmatched", "qd_overwritten", "qd_too_old", "long_flows",
    "dtn_out_tcp", "dtn_out_data", "dtn_in_data", "both_classified", "dtn_out_payload", "dtn_in_payload",
)
(S_UNCL, S_RTT_STORED, S_RTT_FULL, S_RTT_POISON, S_RTT_RETXF, S_RTT_SAMPLES, S_RTT_REJ_RETX,
 S_RTT_REJ_EXP, S_RTT_REJ_AMB, S_AF_NEW, S_AF_ACT, S_AF_COLL, S_AF_EVICT, S_AF_FIN, S_QD_SAMPLES,
 S_QD_UNMATCHED, S_QD_OVERWRITE, S_QD_OLD, S_LONG, S_DTN_OUT, S_DTN_OUT_DATA, S_DTN_IN_DATA,
 S_BOTH, S_DTN_OUT_PAYLOAD, S_DTN_IN_PAYLOAD) = range(len(STAT_NAMES))

# Per-slot registers of the active-flow table, one row per slot (64 bytes: one cache line).
AF_REGISTERS: tuple[str, ...] = (
    C.REG_AF_SIG, C.REG_AF_TS, C.REG_AF_COUNT, C.REG_AF_ACTIVE, C.REG_AF_BYTES, C.REG_FLOW_RTT,
    C.REG_AF_MAX_EACK, C.REG_AF_RECOVER, C.REG_AF_RECOVER_FLAG,
)
(A_SIG, A_TS, A_COUNT, A_ACTIVE, A_BYTES, A_RTT, A_MAX_EACK, A_RECOVER, A_RFLAG) = range(len(AF_REGISTERS))
AF_COLS = 16

# Digest rows (int64; 64-bit words hold the address halves' bit patterns).
DIGEST_RTT_COLS: tuple[str, ...] = (*(n for n, _ in C.DIGEST_RTT_DTYPE), "ts_ns")
DIGEST_FLOW_COLS: tuple[str, ...] = (*(n for n, _ in C.DIGEST_FLOW_DTYPE), "ts_ns")
(DR_SRC_HI, DR_SRC_LO, DR_DST_HI, DR_DST_LO, DR_SPORT, DR_DPORT, DR_PROTO, DR_CLS, DR_RTT, DR_TS,
 DR_TS_NS) = range(len(DIGEST_RTT_COLS))
(DF_KIND, DF_SRC_HI, DF_SRC_LO, DF_DST_HI, DF_DST_LO, DF_SPORT, DF_DPORT, DF_PROTO, DF_CLS, DF_SLOT, DF_TS,
 DF_TS_NS) = range(len(DIGEST_FLOW_COLS))

_FIELD_IDS = {name: i for i, name in enumerate(C.HASH_FIELD_BITS)}
FIELD_WIDTHS = np.array(list(C.HASH_FIELD_BITS.values()), dtype=np.int64)
# Layout rows: 0 flow index, 1 flow sig, 2..5 RTT stages, 6 RTT sig, 7 QD index, 8 QD sig, 9.. CMS.
LAYOUT_FIELDS = [C.FLOW_FIELDS, C.FLOW_SIG_FIELDS, *C.RTT_STAGE_FIELDS, C.RTT_SIG_FIELDS,
                C.QD_INDEX_FIELDS, C.QD_SIG_FIELDS, *C.CMS_ROW_FIELDS]
L_FLOW, L_FSIG, L_RTT0 = 0, 1, 2
L_RTTSIG = L_RTT0 + C.RTT_STAGES
L_QDI, L_QDS, L_CMS0 = L_RTTSIG + 1, L_RTTSIG + 2, L_RTTSIG + 3
LAYOUTS = np.full((len(LAYOUT_FIELDS), len(_FIELD_IDS)), -1, dtype=np.int64)
for _r, _fields in enumerate(LAYOUT_FIELDS):
    LAYOUTS[_r, : len(_fields)] = [_FIELD_IDS[f] for f in _fields]


def _crc_table() -> np.ndarray:
    """Slicing-by-4 tables of the reflected CRC-32: row 0 is the classic byte table."""
    t = np.zeros((4, 256), dtype=np.int64)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ C.CRC32_POLY_REFLECTED if c & 1 else c >> 1
        t[0, i] = c
    for k in range(1, 4):
        t[k] = (t[k - 1] >> 8) ^ t[0][t[k - 1] & 0xFF]
    return t


CRC_TABLE = _crc_table()


def crc32_fields(values: dict[str, int], fields: tuple[str, ...]) -> int:
    """Reference (pure Python) hash: ``zlib.crc32`` of the fields, big-endian, in order."""
    import zlib

    data = b"".join(int(values[f]).to_bytes(C.HASH_FIELD_BITS[f] // 8, "big") for f in fields)
    return zlib.crc32(data) & 0xFFFFFFFF
