"""The software twin of the P4 telemetry data plane (MLC Algorithms 2, 5, 7; JENKS 3.1).

``SoftwareDataPlane`` keeps exactly the registers, tables and counters the
P4 programs in ``telemetry_p4/`` keep (sizes, CRC-32 layouts, widths and
thresholds from ``constants.py``) and updates them packet by packet in one
numba kernel, ``_process_py``, over the parsed columns of ``parse.py``. It
implements the ``view.DataPlaneView`` read interface, so the collector reads
it exactly as it reads a switch.

Per packet, in the pipeline order of the P4 programs:

1. Classify (Algorithm 2): class_lpm on the destination (outgoing) or, on a
   miss, on the source (incoming). Misses are counted ``unclassified``.
2. Outgoing at ``TAP_EGRESS``: class byte/packet counters (Algorithm 2).
3. Outgoing: queuing delay (Algorithm 5): the ingress tap writes
   (signature, timestamp) into ``qd_table``; the egress tap reads and clears
   it and updates ``qd_last`` / ``qd_sum`` / ``qd_cnt`` of the class.
4. Outgoing TCP/UDP at ``TAP_EGRESS``: active-flow table (Algorithm 7, with
   the lazy idle/eviction rules of constants.py) and the Count-Min sketch
   (JENKS 3.1) with its 10 MB long-flow digest.
5. TCP at the RTT tap (egress by default): data segments store
   (FID, eACK) -> timestamp in the multi-stage table; incoming ACKs match,
   clear and emit an RTT digest, rejecting retransmission-ambiguous,
   duplicated and expired matches (constants.py "RTT").
6. FIN or RST (either direction, egress tap): flow removed (Algorithm 7).

The kernel stops early when a digest buffer is nearly full; ``process``
drains and resumes, so any batch size works with bounded memory.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import numpy as np

from . import constants as C
from .view import parse_prefix

__all__ = ["SoftwareDataPlane", "merge_taps", "crc32_fields", "STAT_NAMES"]

STAT_NAMES: tuple[str, ...] = (
    "unclassified", "rtt_stored", "rtt_table_full", "rtt_retx_poisoned", "rtt_retx_flow",
    "rtt_samples", "rtt_rejected_retx", "rtt_rejected_expired", "rtt_rejected_ambiguous",
    "af_new", "af_collisions", "af_evictions", "af_fin_removed", "qd_samples", "qd_unmatched",
    "qd_overwritten", "qd_too_old", "long_flows",
)
(S_UNCL, S_RTT_STORED, S_RTT_FULL, S_RTT_POISON, S_RTT_RETXF, S_RTT_SAMPLES, S_RTT_REJ_RETX,
 S_RTT_REJ_EXP, S_RTT_REJ_AMB, S_AF_NEW, S_AF_COLL, S_AF_EVICT, S_AF_FIN, S_QD_SAMPLES,
 S_QD_UNMATCHED, S_QD_OVERWRITE, S_QD_OLD, S_LONG) = range(len(STAT_NAMES))

_FIELD_IDS = {name: i for i, name in enumerate(C.HASH_FIELD_BITS)}
_FIELD_WIDTHS = np.array(list(C.HASH_FIELD_BITS.values()), dtype=np.int64)
# Layout rows: 0 flow index, 1 flow sig, 2..5 RTT stages, 6 RTT sig, 7 QD index, 8 QD sig, 9.. CMS.
_LAYOUT_LIST = [C.FLOW_FIELDS, C.FLOW_SIG_FIELDS, *C.RTT_STAGE_FIELDS, C.RTT_SIG_FIELDS,
                C.QD_INDEX_FIELDS, C.QD_SIG_FIELDS, *C.CMS_ROW_FIELDS]
L_FLOW, L_FSIG, L_RTT0 = 0, 1, 2
L_RTTSIG = L_RTT0 + C.RTT_STAGES
L_QDI, L_QDS, L_CMS0 = L_RTTSIG + 1, L_RTTSIG + 2, L_RTTSIG + 3
_LAYOUTS = np.full((len(_LAYOUT_LIST), len(_FIELD_IDS)), -1, dtype=np.int64)
for _r, _fields in enumerate(_LAYOUT_LIST):
    _LAYOUTS[_r, : len(_fields)] = [_FIELD_IDS[f] for f in _fields]


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


_CRC_TABLE = _crc_table()


def crc32_fields(values: dict[str, int], fields: tuple[str, ...]) -> int:
    """Reference (pure Python) hash: ``zlib.crc32`` of the fields, big-endian, in order."""
    import zlib

    data = b"".join(int(values[f]).to_bytes(C.HASH_FIELD_BITS[f] // 8, "big") for f in fields)
    return zlib.crc32(data) & 0xFFFFFFFF


# ----------------------------------------------------------------------------
# numba kernel (plain Python source; compiled lazily by _kernel())


def _crc(table, vals, widths, layouts, row):
    # Slicing-by-4/2/1 on whole fields: a field's big-endian bytes enter the
    # reflected CRC as one little-endian word, so a 32-bit field is one step.
    c = np.int64(0xFFFFFFFF)
    for j in range(layouts.shape[1]):
        f = layouts[row, j]
        if f < 0:
            break
        v = vals[f]
        w = widths[f]
        if w == 32:
            c ^= ((v >> 24) & 0xFF) | ((v >> 8) & 0xFF00) | ((v << 8) & 0xFF0000) | ((v & 0xFF) << 24)
            c = (table[3, c & 0xFF] ^ table[2, (c >> 8) & 0xFF] ^ table[1, (c >> 16) & 0xFF]
                 ^ table[0, (c >> 24) & 0xFF])
        elif w == 16:
            c ^= ((v >> 8) & 0xFF) | ((v & 0xFF) << 8)
            c = (c >> 16) ^ table[1, c & 0xFF] ^ table[0, (c >> 8) & 0xFF]
        else:
            c = table[0, (c ^ v) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _gen_crc_source() -> str:
    """Straight-line CRC code per layout row (numba compiles each to a few table loads)."""
    lines = ["def _crcg(t, vs, row):"]
    for row, fields in enumerate(_LAYOUT_LIST):
        lines.append(f"    if row == {row}:")
        lines.append("        c = np.int64(0xFFFFFFFF)")
        for f in fields:
            i, w = _FIELD_IDS[f], C.HASH_FIELD_BITS[f]
            if w == 32:
                lines.append(f"        c ^= vs[{i}]")
                lines.append("        c = t[3, c & 0xFF] ^ t[2, (c >> 8) & 0xFF] ^ t[1, (c >> 16) & 0xFF]"
                             " ^ t[0, (c >> 24) & 0xFF]")
            elif w == 16:
                lines.append(f"        c ^= vs[{i}]")
                lines.append("        c = (c >> 16) ^ t[1, c & 0xFF] ^ t[0, (c >> 8) & 0xFF]")
            else:
                lines.append(f"        c = t[0, (c ^ vs[{i}]) & 0xFF] ^ (c >> 8)")
        lines.append("        return c ^ 0xFFFFFFFF")
    lines.append("    return np.int64(0)")
    return "\n".join(lines) + "\n"


def _make_crcg() -> Any:
    ns: dict[str, Any] = {"np": np}
    exec(compile(_gen_crc_source(), "<scidmz.telemetry.dataplane._crcg>", "exec"), ns)
    return ns["_crcg"]


_crcg = _make_crcg()


def _swap(v, w):
    """A field's big-endian bytes as the little-endian word the reflected CRC consumes."""
    if w == 32:
        return ((v >> 24) & 0xFF) | ((v >> 8) & 0xFF00) | ((v << 8) & 0xFF0000) | ((v & 0xFF) << 24)
    if w == 16:
        return ((v >> 8) & 0xFF) | ((v & 0xFF) << 8)
    return v & 0xFF


def _sig(h):
    s = h & 0x7FFFFFFF
    return s if s != 0 else 1


def _sgt(a, b):
    d = (np.int64(a) - np.int64(b)) & 0xFFFFFFFF
    return d != 0 and d < 0x80000000


def _process_py(start, ts_ns, tap, kind, flags, src, dst, proto, ipid, sport, dport, seq, ack, payload,
                flen, cls_dst, cls_src, tick_ns, rtt_tap, p,
                table, widths, layouts,
                cls_ctr, rtt_sig, rtt_ts, af_sig, af_count, af_ts, af_active, af_bytes, flow_rtt,
                af_max_eack, af_recover, af_recover_flag, qd_sig, qd_ts, qd_last, qd_sum, qd_cnt, cms,
                stats, rtt_out, n_rtt, flow_out, n_flow, last_ts):
    """Process packets from ``start``; return the index of the first unprocessed one.

    At most one flow digest leaves per packet (the first event wins), like the
    switch, whose deparser emits one digest of a kind per packet.

    ``p``: int64 parameters [C_TH, T_TH ticks, RTT timeout ticks, QD timeout ticks,
    LONG_FLOW_BYTES]. ``n_rtt``/``n_flow``: 1-element fill counters of the
    digest buffers; ``last_ts``: 1-element newest timestamp (ns).
    """
    c_th = p[0]
    t_th = p[1]
    rtt_to = p[2]
    qd_to = p[3]
    long_b = p[4]
    mask = 0xFFFFFFFF
    n_stages = rtt_sig.shape[0]
    rtt_mask = rtt_sig.shape[1] - 1
    af_mask = af_sig.shape[0] - 1
    qd_mask = qd_sig.shape[0] - 1
    cms_mask = cms.shape[1] - 1
    vals = np.zeros(8, np.int64)
    vs = np.zeros(8, np.int64)
    n = ts_ns.shape[0]
    i = start
    while i < n:
        if n_rtt[0] + 1 > rtt_out.shape[0] or n_flow[0] + 3 > flow_out.shape[0]:
            return i
        k = kind[i]
        t_ns = ts_ns[i]
        if t_ns > last_ts[0]:
            last_ts[0] = t_ns
        if k == 0:
            i += 1
            continue
        cd = cls_dst[i]
        cs = cls_src[i]
        if cd != 0:
            out = True
            c = cd
        elif cs != 0:
            out = False
            c = cs
        else:
            stats[S_UNCL] += 1
            i += 1
            continue
        t = tap[i]
        sent = False
        now = (t_ns // tick_ns) & mask
        ln = np.int64(flen[i])
        fl = np.int64(flags[i])
        is_tcp = k == 2
        # Hash inputs, always in the outgoing orientation.
        if out:
            vals[0] = src[i]
            vals[1] = dst[i]
            vals[2] = sport[i]
            vals[3] = dport[i]
        else:
            vals[0] = dst[i]
            vals[1] = src[i]
            vals[2] = dport[i]
            vals[3] = sport[i]
        vals[4] = proto[i]
        vals[5] = 0
        vals[6] = ipid[i]
        vals[7] = seq[i] if is_tcp else 0
        for f in range(8):
            vs[f] = _swap(vals[f], widths[f])
        # -- Algorithm 2 and Algorithm 5 ------------------------------------
        if out:
            cls_ctr[t, c, 0] += ln
            cls_ctr[t, c, 1] += 1
            qi = _crcg(table, vs, L_QDI) & qd_mask
            qs = _sig(_crcg(table, vs, L_QDS))
            if t == 0:
                if qd_sig[qi] != 0 and ((now - qd_ts[qi]) & mask) <= qd_to:
                    stats[S_QD_OVERWRITE] += 1
                qd_sig[qi] = qs
                qd_ts[qi] = now
            else:
                if qd_sig[qi] == qs:
                    d = (now - qd_ts[qi]) & mask
                    qd_sig[qi] = 0
                    if d <= qd_to:
                        qd_last[c] = d
                        qd_sum[c] += d
                        qd_cnt[c] += 1
                        stats[S_QD_SAMPLES] += 1
                    else:
                        stats[S_QD_OLD] += 1
                else:
                    stats[S_QD_UNMATCHED] += 1
        if k == 1 or (t != 1 and t != rtt_tap):
            i += 1
            continue
        fidx = _crcg(table, vs, L_FLOW) & af_mask
        fsig = _sig(_crcg(table, vs, L_FSIG))
        slot_ok = False
        is_new = False
        # -- Algorithm 7: active flows, and the Count-Min sketch ------------------
        if t == 1 and out:
            cur = af_sig[fidx]
            if cur == fsig:
                gap = (now - af_ts[fidx]) & mask
                af_ts[fidx] = now
                if gap < t_th:
                    if af_count[fidx] < c_th:
                        af_count[fidx] += 1
                        if af_count[fidx] == c_th:
                            af_active[fidx] = 1
                            if not sent:  # one flow digest per packet, as on the switch
                                _flow_digest(flow_out, n_flow, 1, vals, c, fidx, now)
                                sent = True
                            stats[S_AF_NEW] += 1
                else:
                    if af_active[fidx] == 1:
                        af_active[fidx] = 0
                        if not sent:  # one flow digest per packet, as on the switch
                            _flow_digest(flow_out, n_flow, 2, vals, c, fidx, now)
                            sent = True
                    af_count[fidx] = 1
                af_bytes[fidx] = (af_bytes[fidx] + ln) & mask
                slot_ok = True
            elif cur == 0 or ((now - af_ts[fidx]) & mask) >= t_th:
                if cur != 0:
                    stats[S_AF_EVICT] += 1
                    if af_active[fidx] == 1:
                        if not sent:  # one flow digest per packet, as on the switch
                            _flow_digest(flow_out, n_flow, 2, vals, c, fidx, now)
                            sent = True
                af_sig[fidx] = fsig
                af_count[fidx] = 1
                af_ts[fidx] = now
                af_active[fidx] = 0
                af_bytes[fidx] = ln & mask
                flow_rtt[fidx] = 0
                af_max_eack[fidx] = 0
                af_recover[fidx] = 0
                af_recover_flag[fidx] = 0
                slot_ok = True
                is_new = True
                if c_th <= 1:
                    af_active[fidx] = 1
                    if not sent:  # one flow digest per packet, as on the switch
                        _flow_digest(flow_out, n_flow, 1, vals, c, fidx, now)
                        sent = True
                    stats[S_AF_NEW] += 1
            else:
                stats[S_AF_COLL] += 1
            est = np.int64(mask)
            for r in range(cms.shape[0]):
                ci = _crcg(table, vs, L_CMS0 + r) & cms_mask
                v = np.int64(cms[r, ci]) + ln
                if v > mask:
                    v = mask
                cms[r, ci] = v
                if v < est:
                    est = v
            if est >= long_b and est - ln < long_b:
                stats[S_LONG] += 1
                if not sent:  # one flow digest per packet, as on the switch
                    _flow_digest(flow_out, n_flow, 3, vals, c, fidx if slot_ok else mask, now)
                    sent = True
        elif af_sig[fidx] == fsig:
            slot_ok = True
        # -- RTT (JENKS 3.1) ----------------------------------------------------------
        if is_tcp and t == rtt_tap:
            if out:
                seglen = np.int64(payload[i]) + (1 if fl & 0x02 else 0) + (1 if fl & 0x01 else 0)
                if seglen > 0:
                    eack = (np.int64(seq[i]) + seglen) & mask
                    retx = False
                    if slot_ok:
                        # 0: no eACK seen yet in this slot (the egress tap may create it before the
                        # RTT tap's first segment); comparing with 0 would call every segment of a
                        # flow whose ISN is >= 2^31 a retransmission, for ever.
                        if is_new or af_max_eack[fidx] == 0 or _sgt(eack, af_max_eack[fidx]):
                            af_max_eack[fidx] = eack
                        else:
                            retx = True
                            af_recover[fidx] = af_max_eack[fidx]
                            af_recover_flag[fidx] = 1
                            stats[S_RTT_RETXF] += 1
                    vals[5] = eack
                    vs[5] = _swap(eack, 32)
                    rs = _sig(_crcg(table, vs, L_RTTSIG))
                    placed = False
                    dup = False
                    for s in range(n_stages):
                        ri = _crcg(table, vs, L_RTT0 + s) & rtt_mask
                        cur = rtt_sig[s, ri]
                        age = (now - rtt_ts[s, ri]) & mask
                        if cur != 0 and (cur & 0x7FFFFFFF) == rs and age <= rtt_to:
                            rtt_sig[s, ri] = rs | 0x80000000
                            rtt_ts[s, ri] = now
                            dup = True
                            stats[S_RTT_POISON] += 1
                        elif (not placed) and (not dup) and (not retx) and (cur == 0 or age > rtt_to):
                            rtt_sig[s, ri] = rs
                            rtt_ts[s, ri] = now
                            placed = True
                    if placed:
                        stats[S_RTT_STORED] += 1
                    elif not dup and not retx:
                        stats[S_RTT_FULL] += 1
            elif fl & 0x10:
                a = np.int64(ack[i])
                vals[5] = a
                vs[5] = _swap(a, 32)
                rs = _sig(_crcg(table, vs, L_RTTSIG))
                matches = 0
                poisoned = False
                expired = False
                ts0 = np.int64(0)
                for s in range(n_stages):
                    ri = _crcg(table, vs, L_RTT0 + s) & rtt_mask
                    cur = rtt_sig[s, ri]
                    if cur != 0 and (cur & 0x7FFFFFFF) == rs:
                        matches += 1
                        if cur & 0x80000000:
                            poisoned = True
                        if ((now - rtt_ts[s, ri]) & mask) > rtt_to:
                            expired = True
                        ts0 = rtt_ts[s, ri]
                        rtt_sig[s, ri] = 0
                in_recovery = False
                if slot_ok and af_recover_flag[fidx] == 1:
                    if _sgt(a, af_recover[fidx]):
                        af_recover_flag[fidx] = 0
                    else:
                        in_recovery = True
                if matches > 0:
                    if expired:
                        stats[S_RTT_REJ_EXP] += 1
                    elif poisoned or in_recovery:
                        stats[S_RTT_REJ_RETX] += 1
                    elif matches > 1:
                        stats[S_RTT_REJ_AMB] += 1
                    else:
                        rtt = (now - ts0) & mask
                        j = n_rtt[0]
                        rtt_out[j, 0] = vals[0]
                        rtt_out[j, 1] = vals[1]
                        rtt_out[j, 2] = vals[2]
                        rtt_out[j, 3] = vals[3]
                        rtt_out[j, 4] = vals[4]
                        rtt_out[j, 5] = c
                        rtt_out[j, 6] = rtt
                        rtt_out[j, 7] = now
                        n_rtt[0] = j + 1
                        stats[S_RTT_SAMPLES] += 1
                        if slot_ok:
                            flow_rtt[fidx] = rtt
        # -- FIN / RST removes the flow (Algorithm 7) ------------------------------------
        if is_tcp and t == 1 and (fl & 0x05) and af_sig[fidx] == fsig:
            if af_active[fidx] == 1:
                if not sent:  # one flow digest per packet, as on the switch
                    _flow_digest(flow_out, n_flow, 2, vals, c, fidx, now)
                    sent = True
            af_sig[fidx] = 0
            af_count[fidx] = 0
            af_active[fidx] = 0
            af_bytes[fidx] = 0
            af_recover_flag[fidx] = 0
            stats[S_AF_FIN] += 1
        i += 1
    return i



def _flow_digest(flow_out, n_flow, kind, vals, c, slot, now):
    j = n_flow[0]
    flow_out[j, 0] = kind
    flow_out[j, 1] = vals[0]
    flow_out[j, 2] = vals[1]
    flow_out[j, 3] = vals[2]
    flow_out[j, 4] = vals[3]
    flow_out[j, 5] = vals[4]
    flow_out[j, 6] = c
    flow_out[j, 7] = slot
    flow_out[j, 8] = now
    n_flow[0] = j + 1


_KERNEL: Any = None


def _kernel() -> Any:
    global _KERNEL
    if _KERNEL is None:
        import numba

        jit = numba.njit(cache=True, nogil=True)
        g = globals()
        for name in ("_crc", "_swap", "_sig", "_sgt", "_flow_digest"):
            g[name] = jit(g[name])
        # Generated source has no file for numba's cache; the cached kernel embeds it anyway.
        g["_crcg"] = numba.njit(nogil=True)(g["_crcg"])
        _KERNEL = jit(_process_py)
    return _KERNEL


# ----------------------------------------------------------------------------


def merge_taps(*captures: np.ndarray) -> np.ndarray:
    """Interleave parsed packets of several taps by time (ingress before egress on ties)."""
    parts = [np.asarray(c) for c in captures if len(c)]
    if not parts:
        return captures[0] if captures else np.zeros(0)
    if len(parts) == 1:
        p = parts[0]
        ts = p["ts_ns"]
        return p if bool(np.all(ts[1:] >= ts[:-1])) else p[np.argsort(ts, kind="stable")]
    # A stable sort on time over the parts ordered by tap keeps ingress first on ties.
    parts.sort(key=lambda p: int(p["tap"].min()))
    allp = np.concatenate(parts)
    return allp[np.argsort(allp["ts_ns"], kind="stable")]


def _parse_prefixes(prefixes: list[str] | tuple[str, ...] | str | None) -> list[ipaddress.IPv4Network]:
    if prefixes is None:
        return []
    if isinstance(prefixes, str):
        prefixes = [x for x in prefixes.split(",") if x.strip()]
    return [parse_prefix(p) for p in prefixes]


class SoftwareDataPlane:
    """The twin: registers, tables, counters and digests of the P4 program, in NumPy.

    ``dtn_prefixes`` (DTN-r host(s), usually one /32) and ``remote_prefixes``
    (remote network) are the class_lpm entries; the longest match wins.
    ``rtt_tap`` chooses where data and ACKs are matched (default the
    bottleneck/egress tap, as in MLC 3.4.2).
    """

    def __init__(self, dtn_prefixes: list[str] | str | None = (C.DEFAULT_DTN_PREFIX,),
                 remote_prefixes: list[str] | str | None = (C.DEFAULT_REMOTE_PREFIX,),
                 tick_ns: int = C.TS_TICK_NS, rtt_tap: int = C.TAP_EGRESS,
                 digest_capacity: int = 1 << 16) -> None:
        if tick_ns <= 0:
            raise ValueError(f"tick_ns must be > 0, got {tick_ns}")
        if rtt_tap not in (C.TAP_INGRESS, C.TAP_EGRESS):
            raise ValueError(f"rtt_tap must be {C.TAP_INGRESS} or {C.TAP_EGRESS}, got {rtt_tap}")
        entries = [(n, C.CLASS_DTN) for n in _parse_prefixes(dtn_prefixes)]
        entries += [(n, C.CLASS_CAMPUS) for n in _parse_prefixes(remote_prefixes)]
        if not entries:
            raise ValueError("class_lpm needs at least one prefix (--dtn-prefix / --remote-prefix)")
        if len(entries) > C.CLASS_LPM_SIZE:
            raise ValueError(f"class_lpm holds {C.CLASS_LPM_SIZE} entries, got {len(entries)}")
        entries.sort(key=lambda e: -e[0].prefixlen)
        self.lpm = entries
        self.tick_ns = int(tick_ns)
        self.rtt_tap = int(rtt_tap)
        self._params = np.array([C.C_TH, C.T_TH_US * 1000 // tick_ns, C.RTT_TIMEOUT_US * 1000 // tick_ns,
                                 C.QD_TIMEOUT_US * 1000 // tick_ns, C.LONG_FLOW_BYTES], dtype=np.int64)
        u32 = np.uint32
        self.cls_ctr = np.zeros((C.N_TAPS, C.N_CLASSES, 2), dtype=np.int64)
        self.regs: dict[str, np.ndarray] = {
            "rtt_sig": np.zeros((C.RTT_STAGES, C.RTT_STAGE_SIZE), u32),
            "rtt_ts": np.zeros((C.RTT_STAGES, C.RTT_STAGE_SIZE), u32),
            C.REG_AF_SIG: np.zeros(C.AF_TABLE_SIZE, u32),
            C.REG_AF_COUNT: np.zeros(C.AF_TABLE_SIZE, np.uint16),
            C.REG_AF_TS: np.zeros(C.AF_TABLE_SIZE, u32),
            C.REG_AF_ACTIVE: np.zeros(C.AF_TABLE_SIZE, np.uint8),
            C.REG_AF_BYTES: np.zeros(C.AF_TABLE_SIZE, u32),
            C.REG_FLOW_RTT: np.zeros(C.AF_TABLE_SIZE, u32),
            C.REG_AF_MAX_EACK: np.zeros(C.AF_TABLE_SIZE, u32),
            C.REG_AF_RECOVER: np.zeros(C.AF_TABLE_SIZE, u32),
            C.REG_AF_RECOVER_FLAG: np.zeros(C.AF_TABLE_SIZE, np.uint8),
            "qd_sig": np.zeros(C.QD_TABLE_SIZE, u32),
            "qd_ts": np.zeros(C.QD_TABLE_SIZE, u32),
            C.REG_QD_LAST: np.zeros(C.N_CLASSES, u32),
            C.REG_QD_SUM: np.zeros(C.N_CLASSES, np.int64),  # int64: numba mixes uint64+int64 as float
            C.REG_QD_CNT: np.zeros(C.N_CLASSES, u32),
            "cms": np.zeros((C.CMS_ROWS, C.CMS_COLS), u32),
        }
        self.stats = np.zeros(len(STAT_NAMES), dtype=np.int64)
        self._rtt_buf = np.zeros((digest_capacity, len(C.DIGEST_RTT_FIELDS)), dtype=np.int64)
        self._flow_buf = np.zeros((digest_capacity, len(C.DIGEST_FLOW_FIELDS)), dtype=np.int64)
        self._rtt_chunks: list[np.ndarray] = []
        self._flow_chunks: list[np.ndarray] = []
        self._last_ts = np.zeros(1, dtype=np.int64)
        self._clock_ns = 0
        self.packets = 0

    # -- classification (class_lpm) ----------------------------------------------
    def classify(self, addr: np.ndarray) -> np.ndarray:
        """LPM of IPv4 addresses (uint32) onto class ids (0 = miss)."""
        a = np.asarray(addr, dtype=np.uint32)
        out = np.zeros(a.shape, dtype=np.uint8)
        for net, cls in self.lpm:  # longest first: the first hit wins
            m = np.uint32(int(net.netmask))
            hit = ((a & m) == np.uint32(int(net.network_address))) & (out == 0)
            out[hit] = cls
        return out

    # -- processing ----------------------------------------------------------------
    def process(self, pk: np.ndarray) -> None:
        """Run a time-ordered batch of parsed packets (``parse.PACKET_DTYPE``) through the pipeline."""
        n = int(pk.shape[0])
        if n == 0:
            return
        r = self.regs
        cols = [np.ascontiguousarray(pk[f]) for f in
                ("ts_ns", "tap", "kind", "flags", "src", "dst", "proto", "ip_id", "sport", "dport",
                 "seq", "ack", "payload", "frame_len")]
        cd = self.classify(pk["dst"])
        cs = self.classify(pk["src"])
        kern = _kernel()
        n_rtt = np.zeros(1, np.int64)
        n_flow = np.zeros(1, np.int64)
        i = 0
        while i < n:
            i = kern(i, *cols, cd, cs, self.tick_ns, self.rtt_tap, self._params, _CRC_TABLE, _FIELD_WIDTHS,
                     _LAYOUTS, self.cls_ctr, r["rtt_sig"], r["rtt_ts"], r[C.REG_AF_SIG], r[C.REG_AF_COUNT],
                     r[C.REG_AF_TS], r[C.REG_AF_ACTIVE], r[C.REG_AF_BYTES], r[C.REG_FLOW_RTT],
                     r[C.REG_AF_MAX_EACK], r[C.REG_AF_RECOVER], r[C.REG_AF_RECOVER_FLAG], r["qd_sig"],
                     r["qd_ts"], r[C.REG_QD_LAST], r[C.REG_QD_SUM], r[C.REG_QD_CNT], r["cms"], self.stats,
                     self._rtt_buf, n_rtt, self._flow_buf, n_flow, self._last_ts)
            if n_rtt[0]:
                self._rtt_chunks.append(self._rtt_buf[: n_rtt[0]].copy())
            if n_flow[0]:
                self._flow_chunks.append(self._flow_buf[: n_flow[0]].copy())
            n_rtt[0] = 0
            n_flow[0] = 0
        self.packets += n
        self._clock_ns = max(self._clock_ns, int(self._last_ts[0]))

    def advance_clock(self, t_s: float) -> None:
        """Move the data-plane clock to ``t_s`` (never backwards): the replay's period boundary."""
        self._clock_ns = max(self._clock_ns, int(round(t_s * 1e9)))

    # -- DataPlaneView -----------------------------------------------------------------
    def clock(self) -> float:
        return self._clock_ns / 1e9

    def read_class_counters(self) -> np.ndarray:
        return self.cls_ctr[C.TAP_EGRESS].astype(np.uint64)

    def read_register(self, name: str, index: np.ndarray | None = None) -> np.ndarray:
        r = self.regs
        if name in C.REG_RTT_STAGE:
            s = C.REG_RTT_STAGE.index(name)
            arr = (r["rtt_sig"][s].astype(np.uint64) << np.uint64(32)) | r["rtt_ts"][s]
        elif name == C.REG_QD_TABLE:
            arr = (r["qd_sig"].astype(np.uint64) << np.uint64(32)) | r["qd_ts"]
        elif name in C.REG_CMS:
            arr = r["cms"][C.REG_CMS.index(name)]
        elif name in r:
            arr = r[name]
        else:
            raise ValueError(f"unknown register {name!r}")
        arr = np.asarray(arr)
        if index is not None:
            arr = arr[np.asarray(index, dtype=np.int64)]
        return arr.astype(np.uint64)

    def drain_digests(self) -> tuple[np.ndarray, np.ndarray]:
        rtt = _to_struct(self._rtt_chunks, C.DIGEST_RTT_DTYPE)
        flow = _to_struct(self._flow_chunks, C.DIGEST_FLOW_DTYPE)
        self._rtt_chunks, self._flow_chunks = [], []
        return rtt, flow

    def stats_dict(self) -> dict[str, int]:
        return {k: int(v) for k, v in zip(STAT_NAMES, self.stats, strict=True)}

    def occupancy(self) -> dict[str, float]:
        """Fraction of occupied cells per table (for the benchmark)."""
        r = self.regs
        return {
            "rtt_stages": [float(np.count_nonzero(r["rtt_sig"][s])) / C.RTT_STAGE_SIZE
                           for s in range(C.RTT_STAGES)],
            "af_table": float(np.count_nonzero(r[C.REG_AF_SIG])) / C.AF_TABLE_SIZE,
            "qd_table": float(np.count_nonzero(r["qd_sig"])) / C.QD_TABLE_SIZE,
        }


def _to_struct(chunks: list[np.ndarray], dtype: list[tuple[str, str]]) -> np.ndarray:
    arr = np.concatenate(chunks) if chunks else np.zeros((0, len(dtype)), dtype=np.int64)
    out = np.zeros(arr.shape[0], dtype=dtype)
    for j, (name, _) in enumerate(dtype):
        out[name] = arr[:, j]
    return out
