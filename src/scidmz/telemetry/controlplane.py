"""The control plane's per-period arithmetic (MLC Algorithms 3, 4, 6 and 8), in numba.

One implementation serves two callers:

* ``collector.Collector.sample()`` on any ``DataPlaneView`` (a P4 switch over
  P4Runtime or BF Runtime, or the software twin read like a switch): it reads
  the counters, registers and digests through the view and calls
  ``apply_flow_digests`` and ``close_period``;
* the software twin's replay (``algorithms.process_packets``), which calls the
  same two functions inside its packet loop at every period boundary, on its
  own registers, so that a replay costs per packet and not per period.

The state is plain arrays (``new_state``), so the two callers share it:

* ``fs`` (int64, one row per flow-table slot, ``F_*`` columns): the
  flow_vector of Algorithms 4 and 8 (active flag, the flow's 128-bit addresses,
  ports, protocol and class, the previous ``af_bytes`` read, bytes since the
  flow became active, the period it became active in, its position in
  ``alist``), ``ff`` (float64: per-flow rate and RTT) and ``alist`` (the active
  slots, in activation order, so a period visits only active flows);
* ``ci`` / ``cf``: the scalars (``I_*``, ``X_*``).

Per period (``close_period``), in the order of ``Collector``'s docstring:
Algorithm 3 (rates = 8 dB / dt on the data-plane clock), idle expiry (``af_ts``
older than T_TH), Algorithm 4 (RTT_DTN = mean of the period's DTN RTT samples,
held when there is none; RTT_campus = alpha-smoothed mean of the campus flows'
``flow_rtt``), Algorithm 6 (queuing delay = period mean from ``qd_sum`` /
``qd_cnt``, else ``qd_last``) and Algorithm 8 (active flows = length of the
flow_vector). A flow that became active and ended within one period (new-flow
then flow-ended digest, or expired at the period's end) still counts in that
period's active flows: it was there, and no sample would show it otherwise.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import constants as C
from .twin.layout import (
    A_BYTES,
    A_RTT,
    A_TS,
    DF_CLS,
    DF_DPORT,
    DF_KIND,
    DF_PROTO,
    DF_SLOT,
    DF_SPORT,
    DF_SRC_HI,
)

__all__ = ["new_state", "apply_flow_digests", "close_period", "OUT_COLS", "FS_COLS"]

_JIT = {"cache": True, "nogil": True}
MASK = 0xFFFFFFFF
HALF = 1 << 31  # serial arithmetic of 32-bit timestamps (RFC 1982)

# fs columns
(F_ACTIVE, F_SRC_HI, F_SRC_LO, F_DST_HI, F_DST_LO, F_SPORT, F_DPORT, F_PROTO, F_CLS, F_PREV_BYTES, F_TOTAL,
 F_BORN, F_APOS) = range(13)
FS_COLS = 16
# ff columns
FF_RATE, FF_RTT = 0, 1
# ci: active count, flows that came and went this period, periods closed, previous class byte
# counters, previous qd_sum and qd_cnt (per class), RTT_campus initialised, and the clock in
# integer ns (previous read, t0, the tick): float64 epoch seconds hold 1.7e9 s to 2.4e-7 s, which
# put a rate over T = 0.1 s 1.4 ppm off; integer differences are exact.
I_NACT, I_EPHEMERAL, I_PERIOD = 0, 1, 2
I_PREV_BYTES = 3
I_PREV_QSUM = I_PREV_BYTES + C.N_CLASSES
I_PREV_QCNT = I_PREV_QSUM + C.N_CLASSES
I_CAMPUS_INIT = I_PREV_QCNT + C.N_CLASSES
I_PREV_NS = I_CAMPUS_INIT + 1
I_T0_NS = I_PREV_NS + 1
I_TICK_NS = I_T0_NS + 1
CI_LEN = I_TICK_NS + 1
# cf: (two unused slots), RTT_campus, RTT_DTN, queuing delay per class, tick (s), alpha
X_RTT_CAMPUS, X_RTT_DTN = 2, 3
X_QD = 4
X_TICK = X_QD + C.N_CLASSES
X_ALPHA = X_TICK + 1
CF_LEN = X_ALPHA + 1
# One output row per period: t, the seven NetworkState fields, then their seven stale flags.
OUT_COLS = 15


def new_state(tick_ns: int, alpha: float, t0_ns: int, clock_ns: int, ctr_bytes: np.ndarray,
              qd_sum: np.ndarray, qd_cnt: np.ndarray) -> tuple[np.ndarray, ...]:
    """Fresh collector arrays (fs, ff, alist, ci, cf) starting from the given first reads
    (times in integer ns: the data-plane tick, the series' t0 and the clock read now)."""
    n = C.AF_TABLE_SIZE
    fs = np.zeros((n, FS_COLS), np.int64)
    fs[:, F_PREV_BYTES] = -1
    fs[:, F_BORN] = -1
    fs[:, F_APOS] = -1
    ff = np.zeros((n, 2), np.float64)
    alist = np.zeros(n, np.int64)
    ci = np.zeros(CI_LEN, np.int64)
    ci[I_PREV_BYTES:I_PREV_BYTES + C.N_CLASSES] = ctr_bytes
    ci[I_PREV_QSUM:I_PREV_QSUM + C.N_CLASSES] = qd_sum
    ci[I_PREV_QCNT:I_PREV_QCNT + C.N_CLASSES] = qd_cnt
    ci[I_PREV_NS] = clock_ns
    ci[I_T0_NS] = t0_ns
    ci[I_TICK_NS] = tick_ns
    cf = np.zeros(CF_LEN, np.float64)
    cf[X_TICK] = tick_ns * 1e-9
    cf[X_ALPHA] = alpha
    return fs, ff, alist, ci, cf


@njit(inline="always", **_JIT)
def _remove(fs, alist, ci, slot):
    """Take ``slot`` out of the flow_vector (swap with the last active slot)."""
    pos = fs[slot, F_APOS]
    last = ci[I_NACT] - 1
    moved = alist[last]
    alist[pos] = moved
    fs[moved, F_APOS] = pos
    fs[slot, F_APOS] = -1
    fs[slot, F_ACTIVE] = 0
    ci[I_NACT] = last
    if fs[slot, F_BORN] == ci[I_PERIOD]:  # came and went within this period: it still counts
        ci[I_EPHEMERAL] += 1
        fs[slot, F_BORN] = -1


@njit(**_JIT)
def apply_flow_digests(fs, ff, alist, ci, rows, lo, hi):
    """MLC Algorithm 8: flow digests ``rows[lo:hi]`` (``layout.DF_*`` columns) in order.

    New flow: the slot joins the flow_vector with the digest's flow key and class and
    fresh per-flow state; flow ended (timeout, FIN/RST, eviction): it leaves. Long-flow
    digests are the caller's (a key set, only for the flow records).
    """
    n = fs.shape[0]
    for j in range(lo, hi):
        kind = rows[j, DF_KIND]
        slot = rows[j, DF_SLOT]
        if slot < 0 or slot >= n:
            continue
        if kind == C.DIGEST_NEW_FLOW:
            if fs[slot, F_ACTIVE] == 0:
                fs[slot, F_ACTIVE] = 1
                fs[slot, F_APOS] = ci[I_NACT]
                alist[ci[I_NACT]] = slot
                ci[I_NACT] += 1
            for f in range(4):
                fs[slot, F_SRC_HI + f] = rows[j, DF_SRC_HI + f]
            fs[slot, F_SPORT] = rows[j, DF_SPORT]
            fs[slot, F_DPORT] = rows[j, DF_DPORT]
            fs[slot, F_PROTO] = rows[j, DF_PROTO]
            fs[slot, F_CLS] = rows[j, DF_CLS]
            fs[slot, F_PREV_BYTES] = -1
            fs[slot, F_TOTAL] = 0
            fs[slot, F_BORN] = ci[I_PERIOD]
            ff[slot, FF_RATE] = 0.0
            ff[slot, FF_RTT] = 0.0
        elif kind == C.DIGEST_TIMEOUT and fs[slot, F_ACTIVE] == 1:
            _remove(fs, alist, ci, slot)


@njit(**_JIT)
def close_period(fs, ff, alist, ci, cf, now_ns, ctr_bytes, qsum, qcnt, qlast, af, rtt_acc, t_th_ticks, out, row):
    """One ``NetworkState`` at data-plane time ``now_ns`` (integer ns) into ``out[row]`` (``OUT_COLS``).

    ``ctr_bytes``, ``qsum``, ``qcnt``, ``qlast``: per-class reads of the class byte
    counters and queuing-delay registers; ``af``: the active-flow registers, one row per
    slot (``layout.A_*`` columns; a switch reader fills only the active slots' ``af_ts``,
    ``af_bytes``, ``flow_rtt``); ``rtt_acc[c]``: (sum, count) of the period's RTT samples
    of class c, in ticks. Digests must have been applied (``apply_flow_digests``).
    """
    tick = cf[X_TICK]
    dt = (now_ns - ci[I_PREV_NS]) / 1e9  # an exact integer, rounded once
    out[row, 0] = (now_ns - ci[I_T0_NS]) / 1e9
    # Algorithm 3
    for c in range(C.N_CLASSES):
        d = ctr_bytes[c] - ci[I_PREV_BYTES + c]
        ci[I_PREV_BYTES + c] = ctr_bytes[c]
        if c == C.CLASS_DTN:
            out[row, 1] = 8.0 * d / dt if dt > 0 else 0.0
        elif c == C.CLASS_CAMPUS:
            out[row, 2] = 8.0 * d / dt if dt > 0 else 0.0
    # Algorithm 4 / MLC "deleting inactive flows using a timeout": af_ts older than T_TH
    tick_ns = ci[I_TICK_NS]
    now_t = ((now_ns + tick_ns // 2) // tick_ns) & MASK
    for idx in range(ci[I_NACT] - 1, -1, -1):  # backwards: a removal swaps in an already seen slot
        slot = alist[idx]
        age = (now_t - np.int64(af[slot, A_TS])) & MASK
        # Serial arithmetic: an age in the upper half of the tick space is a stamp *newer* than
        # `now` (a live data plane stamps packets after the collector read its clock), not a
        # 71-minute-old one. The twin never sees it (its clock is its newest packet); an active
        # flow is checked every period, long before a real age reaches 2^31 ticks.
        if t_th_ticks <= age < HALF:
            _remove(fs, alist, ci, slot)
    # Algorithm 4: RTT_DTN from the period's samples
    dtn_fresh = rtt_acc[C.CLASS_DTN, 1] > 0
    if dtn_fresh:
        cf[X_RTT_DTN] = rtt_acc[C.CLASS_DTN, 0] / rtt_acc[C.CLASS_DTN, 1] * tick
    # per-flow records and RTT_campus
    s_campus = 0.0
    n_campus = 0
    for idx in range(ci[I_NACT]):
        slot = alist[idx]
        b = np.int64(af[slot, A_BYTES])
        prev = fs[slot, F_PREV_BYTES]
        if prev >= 0:
            delta = (b - prev) & MASK
            fs[slot, F_TOTAL] += delta
            ff[slot, FF_RATE] = 8.0 * delta / dt if dt > 0 else 0.0
        else:
            fs[slot, F_TOTAL] = b
            ff[slot, FF_RATE] = 0.0
        fs[slot, F_PREV_BYTES] = b
        r = np.int64(af[slot, A_RTT])
        if r > 0:
            ff[slot, FF_RTT] = r * tick
        if fs[slot, F_CLS] == C.CLASS_CAMPUS and ff[slot, FF_RTT] > 0:
            s_campus += ff[slot, FF_RTT]
            n_campus += 1
    if n_campus:
        avg = s_campus / n_campus
        if ci[I_CAMPUS_INIT]:
            cf[X_RTT_CAMPUS] = cf[X_ALPHA] * cf[X_RTT_CAMPUS] + (1.0 - cf[X_ALPHA]) * avg
        else:
            cf[X_RTT_CAMPUS] = avg
            ci[I_CAMPUS_INIT] = 1
    # Algorithm 6
    fresh_qd = np.zeros(C.N_CLASSES, np.bool_)
    for c in (C.CLASS_DTN, C.CLASS_CAMPUS):
        dsum = qsum[c] - ci[I_PREV_QSUM + c]
        dcnt = (qcnt[c] - ci[I_PREV_QCNT + c]) & MASK
        cf[X_QD + c] = (dsum / dcnt if dcnt > 0 else float(qlast[c])) * tick
        fresh_qd[c] = dcnt > 0
    for c in range(C.N_CLASSES):
        ci[I_PREV_QSUM + c] = qsum[c]
        ci[I_PREV_QCNT + c] = qcnt[c]
    ci[I_PREV_NS] = now_ns
    out[row, 3] = cf[X_RTT_DTN]
    out[row, 4] = cf[X_RTT_CAMPUS]
    out[row, 5] = cf[X_QD + C.CLASS_DTN]
    out[row, 6] = cf[X_QD + C.CLASS_CAMPUS]
    out[row, 7] = ci[I_NACT] + ci[I_EPHEMERAL]
    # stale flags (ARCHITECTURE.md): no fresh sample in the period
    out[row, 8] = 1.0 if dt <= 0 else 0.0
    out[row, 9] = out[row, 8]
    out[row, 10] = 0.0 if dtn_fresh else 1.0
    out[row, 11] = 0.0 if n_campus else 1.0
    out[row, 12] = 0.0 if fresh_qd[C.CLASS_DTN] else 1.0
    out[row, 13] = 0.0 if fresh_qd[C.CLASS_CAMPUS] else 1.0
    out[row, 14] = 0.0
    ci[I_EPHEMERAL] = 0
    ci[I_PERIOD] += 1


#: Quantiles of the per-period RTT percentiles (``rtt_percentiles``).
QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99)


@njit(**_JIT)
def rtt_percentiles(cls, rtt_s, ends, quantiles, out):
    """Per period j and class c (DTN, campus): the quantiles of the period's RTT samples.

    ``cls``/``rtt_s``: the samples' class and RTT (s), oldest first; period j holds
    samples ``[ends[j-1], ends[j])``. ``out[j, c, q]``: NumPy's default ("linear")
    percentile, NaN for a period without a sample of that class.
    """
    lo = 0
    for j in range(ends.shape[0]):
        hi = ends[j]
        for c in range(2):
            want = C.CLASS_DTN if c == 0 else C.CLASS_CAMPUS
            m = 0
            for i in range(lo, hi):
                if cls[i] == want:
                    m += 1
            if m == 0:
                for q in range(quantiles.shape[0]):
                    out[j, c, q] = np.nan
                continue
            v = np.empty(m)
            m = 0
            for i in range(lo, hi):
                if cls[i] == want:
                    v[m] = rtt_s[i]
                    m += 1
            v.sort()
            for q in range(quantiles.shape[0]):
                pos = quantiles[q] * (m - 1)
                k = int(np.floor(pos))
                frac = pos - k
                out[j, c, q] = v[k] if k + 1 >= m else v[k] + (v[k + 1] - v[k]) * frac
        lo = hi
