"""The per-packet algorithms of the telemetry data plane, one numba function each.

The software twin runs these exactly as the P4 programs in ``telemetry_p4/``
do, register for register (``dataplane.SoftwareDataPlane`` owns the state and
calls ``process_packets``). By name:

- ``algorithm2_count`` -- MLC Algorithm 2: per-class byte and packet counters.
- ``algorithm5_queuing_delay`` -- MLC Algorithm 5: the ingress tap stores a
  (signature, timestamp) pair, the egress tap matches and clears it and adds
  the delay to its class's ``qd_last`` / ``qd_sum`` / ``qd_cnt``.
- ``algorithm7_active_flow`` -- MLC Algorithm 7: the active-flow table
  (C_TH packets less than T_TH apart make a flow active; lazy idle and
  eviction rules of constants.py); ``algorithm7_fin`` removes a flow on
  FIN or RST.
- ``cms_long_flow`` -- JENKS section 3.1: the Count-Min sketch of flow bytes
  and its one-time long-flow digest at ``LONG_FLOW_BYTES``.
- ``rtt_store_data`` / ``rtt_match_ack`` -- JENKS section 3.1 (MLC 3.4.2):
  data segments store (flow, eACK) -> timestamp in the multi-stage table;
  ACKs match, clear and emit an RTT digest, rejecting retransmission-
  ambiguous, duplicated and expired matches.
- ``crc32`` -- the P4 ``crc32`` hash over one layout row of header fields
  (slicing-by-4, hand-written: bit-exactness with the switch's hash).

``process_packets`` runs them in the P4 pipeline order over parsed packet
columns. Registers travel as tuples (``af``, ``qd``, ``rtt``); every counter
is the switch's width and wraps as it does (``MASK``). Hand-written in numba
rather than vectorised because each packet's effect depends on the previous
packet's register writes (ours: the speed goal is >= 1 M packets/s per core).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .constants import CMS_ROWS, RTT_STAGES
from .layout import (
    CRC_TABLE,
    FIELD_WIDTHS,
    L_CMS0,
    L_FLOW,
    L_FSIG,
    L_QDI,
    L_QDS,
    L_RTT0,
    L_RTTSIG,
    LAYOUTS,
    S_AF_COLL,
    S_AF_EVICT,
    S_AF_FIN,
    S_AF_NEW,
    S_LONG,
    S_QD_OLD,
    S_QD_OVERWRITE,
    S_QD_SAMPLES,
    S_QD_UNMATCHED,
    S_RTT_FULL,
    S_RTT_POISON,
    S_RTT_REJ_AMB,
    S_RTT_REJ_EXP,
    S_RTT_REJ_RETX,
    S_RTT_RETXF,
    S_RTT_SAMPLES,
    S_RTT_STORED,
    S_UNCL,
)

__all__ = [
    "algorithm2_count", "algorithm5_queuing_delay", "algorithm7_active_flow", "algorithm7_fin",
    "cms_long_flow", "rtt_store_data", "rtt_match_ack", "crc32", "process_packets",
]

MASK = 0xFFFFFFFF  # 32-bit registers and timestamps wrap here
_JIT = {"cache": True, "nogil": True}


# -- hashing ------------------------------------------------------------------------------------

@njit(inline="always", **_JIT)
def swap(v, w):
    """A field's big-endian bytes as the little-endian word the reflected CRC consumes."""
    if w == 32:
        return ((v >> 24) & 0xFF) | ((v >> 8) & 0xFF00) | ((v << 8) & 0xFF0000) | ((v & 0xFF) << 24)
    if w == 16:
        return ((v >> 8) & 0xFF) | ((v & 0xFF) << 8)
    return v & 0xFF


@njit(inline="always", **_JIT)
def crc32(vs, row):
    """CRC-32 of layout ``row``'s fields (``vs``: the fields already ``swap``-ped).

    Slicing-by-4/2/1 on whole fields: a field's big-endian bytes enter the
    reflected CRC as one little-endian word, so a 32-bit field is one step. The
    tables and layouts are module constants: inlined with a constant ``row``, numba
    and LLVM fold each layout into straight-line table lookups (ours: 2.6x faster
    than the same loop over array arguments).
    """
    table, widths, layouts = CRC_TABLE, FIELD_WIDTHS, LAYOUTS
    c = np.int64(0xFFFFFFFF)
    for j in range(layouts.shape[1]):
        f = layouts[row, j]
        if f < 0:
            break
        w = widths[f]
        if w == 32:
            c ^= vs[f]
            c = table[3, c & 0xFF] ^ table[2, (c >> 8) & 0xFF] ^ table[1, (c >> 16) & 0xFF] ^ table[0, (c >> 24) & 0xFF]
        elif w == 16:
            c ^= vs[f]
            c = (c >> 16) ^ table[1, c & 0xFF] ^ table[0, (c >> 8) & 0xFF]
        else:
            c = table[0, (c ^ vs[f]) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


@njit(inline="always", **_JIT)
def signature(h):
    """A 31-bit non-zero signature (0 marks an empty cell)."""
    s = h & 0x7FFFFFFF
    return s if s != 0 else 1


@njit(inline="always", **_JIT)
def seq_after(a, b):
    """Serial-number arithmetic on 32 bits: a is after b."""
    d = (np.int64(a) - np.int64(b)) & MASK
    return d != 0 and d < 0x80000000


@njit(inline="always", **_JIT)
def flow_digest(digests, sent, kind, vals, c, slot, now):
    """Append one flow digest (1 new active flow, 2 flow ended, 3 long flow) unless this packet
    already sent one (one per packet, as the switch's deparser emits); returns True."""
    if sent:
        return True
    flow_out, n_flow = digests[2], digests[3]
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
    return True


# -- MLC Algorithms 2 and 5 ----------------------------------------------------------------------

@njit(inline="always", **_JIT)
def algorithm2_count(cls_ctr, tap, c, ln):
    """MLC Algorithm 2: bytes and packets of class ``c`` seen at ``tap``."""
    cls_ctr[tap, c, 0] += ln
    cls_ctr[tap, c, 1] += 1


@njit(inline="always", **_JIT)
def algorithm5_queuing_delay(qd, tap, c, now, qi, qs, qd_to, stats):
    """MLC Algorithm 5: ingress (tap 0) stores (qs, now) at ``qi``; egress matches it."""
    qd_sig, qd_ts, qd_last, qd_sum, qd_cnt = qd
    if tap == 0:
        if qd_sig[qi] != 0 and ((now - qd_ts[qi]) & MASK) <= qd_to:
            stats[S_QD_OVERWRITE] += 1
        qd_sig[qi] = qs
        qd_ts[qi] = now
    elif qd_sig[qi] == qs:
        d = (now - qd_ts[qi]) & MASK
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


# -- MLC Algorithm 7 and the Count-Min sketch (JENKS 3.1) ----------------------------------------

@njit(inline="always", **_JIT)
def algorithm7_active_flow(af, fidx, fsig, now, ln, c_th, t_th, vals, c, digests, stats, sent):
    """MLC Algorithm 7 on an outgoing packet at the egress tap.

    Returns (slot_ok, is_new, sent): the flow owns slot ``fidx``; it was just
    (re)created there; a flow digest already left with this packet (one per
    packet, as the switch's deparser emits).
    """
    af_sig, af_count, af_ts, af_active, af_bytes, flow_rtt, af_max_eack, af_recover, af_recover_flag = af
    slot_ok = False
    is_new = False
    cur = af_sig[fidx]
    if cur == fsig:
        gap = (now - af_ts[fidx]) & MASK
        af_ts[fidx] = now
        if gap < t_th:
            if af_count[fidx] < c_th:
                af_count[fidx] += 1
                if af_count[fidx] == c_th:
                    af_active[fidx] = 1
                    sent = flow_digest(digests, sent, 1, vals, c, fidx, now)
                    stats[S_AF_NEW] += 1
        else:
            if af_active[fidx] == 1:
                af_active[fidx] = 0
                sent = flow_digest(digests, sent, 2, vals, c, fidx, now)
            af_count[fidx] = 1
        af_bytes[fidx] = (af_bytes[fidx] + ln) & MASK
        slot_ok = True
    elif cur == 0 or ((now - af_ts[fidx]) & MASK) >= t_th:
        if cur != 0:
            stats[S_AF_EVICT] += 1
            if af_active[fidx] == 1:
                sent = flow_digest(digests, sent, 2, vals, c, fidx, now)
        af_sig[fidx] = fsig
        af_count[fidx] = 1
        af_ts[fidx] = now
        af_active[fidx] = 0
        af_bytes[fidx] = ln & MASK
        flow_rtt[fidx] = 0
        af_max_eack[fidx] = 0
        af_recover[fidx] = 0
        af_recover_flag[fidx] = 0
        slot_ok = True
        is_new = True
        if c_th <= 1:
            af_active[fidx] = 1
            sent = flow_digest(digests, sent, 1, vals, c, fidx, now)
            stats[S_AF_NEW] += 1
    else:
        stats[S_AF_COLL] += 1
    return slot_ok, is_new, sent


@njit(inline="always", **_JIT)
def cms_long_flow(cms, vs, ln, long_b, vals, c, slot, now, digests, stats, sent):
    """JENKS 3.1: add ``ln`` bytes to the flow's Count-Min rows (saturating at 2^32 - 1);
    the packet that lifts the estimate across ``long_b`` sends the long-flow digest."""
    est = np.int64(MASK)
    cms_mask = cms.shape[1] - 1
    for r in range(CMS_ROWS):  # constant: unrolled
        ci = crc32(vs, L_CMS0 + r) & cms_mask
        v = np.int64(cms[r, ci]) + ln
        if v > MASK:
            v = MASK
        cms[r, ci] = v
        if v < est:
            est = v
    if est >= long_b and est - ln < long_b:
        stats[S_LONG] += 1
        sent = flow_digest(digests, sent, 3, vals, c, slot, now)
    return sent


@njit(inline="always", **_JIT)
def algorithm7_fin(af, fidx, now, vals, c, digests, stats, sent):
    """MLC Algorithm 7: FIN or RST of a tracked flow frees its slot (flow-ended digest if active)."""
    af_sig, af_count, af_active, af_bytes, af_recover_flag = af[0], af[1], af[3], af[4], af[8]
    if af_active[fidx] == 1:
        sent = flow_digest(digests, sent, 2, vals, c, fidx, now)
    af_sig[fidx] = 0
    af_count[fidx] = 0
    af_active[fidx] = 0
    af_bytes[fidx] = 0
    af_recover_flag[fidx] = 0
    stats[S_AF_FIN] += 1
    return sent


# -- RTT (JENKS 3.1; MLC 3.4.2) ------------------------------------------------------------------

@njit(inline="always", **_JIT)
def rtt_store_data(rtt, af, vals, vs, seq, payload, fl, fidx, slot_ok, is_new, now,
                   rtt_to, stats):
    """An outgoing data segment: store its (flow, eACK) -> now in the first free stage.

    A segment whose eACK is not past the flow's highest is a retransmission:
    it is not stored and marks the flow in recovery; a second copy of a stored
    eACK poisons the cell (its ACK would be ambiguous).
    """
    af_max_eack, af_recover, af_recover_flag = af[6], af[7], af[8]
    rtt_sig, rtt_ts = rtt
    seglen = np.int64(payload) + (1 if fl & 0x02 else 0) + (1 if fl & 0x01 else 0)
    if seglen <= 0:
        return
    eack = (np.int64(seq) + seglen) & MASK
    retx = False
    if slot_ok:
        # 0: no eACK seen yet in this slot (the egress tap may create it before the RTT
        # tap's first segment); comparing with 0 would call every segment of a flow whose
        # ISN is >= 2^31 a retransmission, for ever.
        if is_new or af_max_eack[fidx] == 0 or seq_after(eack, af_max_eack[fidx]):
            af_max_eack[fidx] = eack
        else:
            retx = True
            af_recover[fidx] = af_max_eack[fidx]
            af_recover_flag[fidx] = 1
            stats[S_RTT_RETXF] += 1
    vals[5] = eack
    vs[5] = swap(eack, 32)
    rs = signature(crc32(vs, L_RTTSIG))
    rtt_mask = rtt_sig.shape[1] - 1
    placed = False
    dup = False
    for s in range(RTT_STAGES):  # a constant trip count: unrolled, each stage's layout folded
        ri = crc32(vs, L_RTT0 + s) & rtt_mask
        cur = rtt_sig[s, ri]
        age = (now - rtt_ts[s, ri]) & MASK
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


@njit(inline="always", **_JIT)
def rtt_match_ack(rtt, af, vals, vs, ack, fidx, slot_ok, c, now, rtt_to, digests,
                  stats):
    """An incoming ACK: match and clear its (flow, ACK) cells; one clean match is an RTT sample.

    Rejected: no match, matches older than the RTT timeout, poisoned cells
    (duplicated segments), ACKs inside the flow's loss recovery, and
    ambiguous matches in several stages.
    """
    flow_rtt, af_recover, af_recover_flag = af[5], af[7], af[8]
    rtt_sig, rtt_ts = rtt
    rtt_out, n_rtt = digests[0], digests[1]
    a = np.int64(ack)
    vals[5] = a
    vs[5] = swap(a, 32)
    rs = signature(crc32(vs, L_RTTSIG))
    rtt_mask = rtt_sig.shape[1] - 1
    matches = 0
    poisoned = False
    expired = False
    ts0 = np.int64(0)
    for s in range(RTT_STAGES):  # a constant trip count: unrolled, each stage's layout folded
        ri = crc32(vs, L_RTT0 + s) & rtt_mask
        cur = rtt_sig[s, ri]
        if cur != 0 and (cur & 0x7FFFFFFF) == rs:
            matches += 1
            if cur & 0x80000000:
                poisoned = True
            if ((now - rtt_ts[s, ri]) & MASK) > rtt_to:
                expired = True
            ts0 = rtt_ts[s, ri]
            rtt_sig[s, ri] = 0
    in_recovery = False
    if slot_ok and af_recover_flag[fidx] == 1:
        if seq_after(a, af_recover[fidx]):
            af_recover_flag[fidx] = 0
        else:
            in_recovery = True
    if matches == 0:
        return
    if expired:
        stats[S_RTT_REJ_EXP] += 1
    elif poisoned or in_recovery:
        stats[S_RTT_REJ_RETX] += 1
    elif matches > 1:
        stats[S_RTT_REJ_AMB] += 1
    else:
        sample = (now - ts0) & MASK
        j = n_rtt[0]
        for f in range(5):
            rtt_out[j, f] = vals[f]
        rtt_out[j, 5] = c
        rtt_out[j, 6] = sample
        rtt_out[j, 7] = now
        n_rtt[0] = j + 1
        stats[S_RTT_SAMPLES] += 1
        if slot_ok:
            flow_rtt[fidx] = sample


# -- the pipeline ----------------------------------------------------------------------------------

@njit(**_JIT)
def process_packets(start, cols, cls_dst, cls_src, tick_ns, rtt_tap, p, cls_ctr, rtt, af, qd, cms,
                    stats, digests, last_ts):
    """Process packets from ``start`` in the P4 pipeline order; return the first unprocessed index.

    ``cols``: the parsed columns (ts_ns, tap, kind, flags, src, dst, proto, ip_id, sport,
    dport, seq, ack, payload, frame_len); ``cls_dst``/``cls_src``: class_lpm of each
    address; ``p``: int64 [C_TH, T_TH ticks, RTT timeout ticks, QD timeout ticks,
    LONG_FLOW_BYTES]; ``digests``:
    (rtt_out, n_rtt, flow_out, n_flow), the fill counters 1-element arrays; ``last_ts``:
    1-element newest timestamp (ns). Stops early when a digest buffer could overflow
    (the caller drains and resumes). At most one flow digest leaves per packet (the
    first event wins), like the switch.
    """
    ts_ns, tap, kind, flags, src, dst, proto, ipid, sport, dport, seq, ack, payload, flen = cols
    widths = FIELD_WIDTHS
    c_th, t_th, rtt_to, qd_to, long_b = p[0], p[1], p[2], p[3], p[4]
    af_sig = af[0]
    af_mask = af_sig.shape[0] - 1
    qd_mask = qd[0].shape[0] - 1
    vals = np.zeros(8, np.int64)
    vs = np.zeros(8, np.int64)
    n = ts_ns.shape[0]
    i = start
    while i < n:
        if digests[1][0] + 1 > digests[0].shape[0] or digests[3][0] + 3 > digests[2].shape[0]:
            return i
        k = kind[i]
        if ts_ns[i] > last_ts[0]:
            last_ts[0] = ts_ns[i]
        if k == 0:  # not parsed (its drop reason is counted by the parser)
            i += 1
            continue
        # class_lpm: the destination classifies outgoing packets, else the source incoming ones
        if cls_dst[i] != 0:
            out = True
            c = cls_dst[i]
        elif cls_src[i] != 0:
            out = False
            c = cls_src[i]
        else:
            stats[S_UNCL] += 1
            i += 1
            continue
        t = tap[i]
        now = (ts_ns[i] // tick_ns) & MASK
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
            vs[f] = swap(vals[f], widths[f])
        if out:
            algorithm2_count(cls_ctr, t, c, ln)
            qi = crc32(vs, L_QDI) & qd_mask
            qs = signature(crc32(vs, L_QDS))
            algorithm5_queuing_delay(qd, t, c, now, qi, qs, qd_to, stats)
        if k == 1 or (t != 1 and t != rtt_tap):  # IP without ports, or a tap with nothing more to do
            i += 1
            continue
        fidx = crc32(vs, L_FLOW) & af_mask
        fsig = signature(crc32(vs, L_FSIG))
        sent = False
        slot_ok = False
        is_new = False
        if t == 1 and out:
            slot_ok, is_new, sent = algorithm7_active_flow(af, fidx, fsig, now, ln, c_th, t_th, vals, c,
                                                           digests, stats, sent)
            sent = cms_long_flow(cms, vs, ln, long_b, vals, c,
                                 fidx if slot_ok else MASK, now, digests, stats, sent)
        elif af_sig[fidx] == fsig:
            slot_ok = True
        if is_tcp and t == rtt_tap:
            if out:
                rtt_store_data(rtt, af, vals, vs, seq[i], payload[i], fl, fidx,
                               slot_ok, is_new, now, rtt_to, stats)
            elif fl & 0x10:
                rtt_match_ack(rtt, af, vals, vs, ack[i], fidx, slot_ok, c, now,
                              rtt_to, digests, stats)
        if is_tcp and t == 1 and (fl & 0x05) and af_sig[fidx] == fsig:
            sent = algorithm7_fin(af, fidx, now, vals, c, digests, stats, sent)
        i += 1
    return i
