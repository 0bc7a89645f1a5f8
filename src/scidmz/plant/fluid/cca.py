"""The fluid kernel's congestion controllers: Reno, CUBIC, BBR (bbr1.py, bbr2.py) and FFS's MinLoss sender.

Each controller updates one flow's columns of the state array ``s`` (layout.py)
from what the kernel measured in a sub-step (bytes acknowledged and lost, RTT);
the period kernel (kernel.py) decides when to call them. Every constant lives
in constants.py with its source.
"""

from __future__ import annotations

from numba import njit

from .bbr1 import bbr1_update
from .bbr2 import bbr2_update
from .common import _FM, _RENO_FRIENDLY_SLOPE, BBR, CUBIC, INF
from .constants import (
    CUBIC_BETA,
    CUBIC_C,
    CUBIC_FAST_CONVERGENCE,
    CUBIC_MAX_INCREASE_PER_ACK,
    CUBIC_TARGET_FLOOR_INCREASE,
    HYSTART_DELAY_DIVISOR,
    HYSTART_DELAY_MAX,
    HYSTART_DELAY_MIN,
    HYSTART_LOW_WINDOW,
    MAX_CWND,
    MIN_CWND,
    MSS,
    RENO_BETA,
    SS_ACK_GAIN,
)
from .layout import (
    S_CWND,
    S_EPOCH,
    S_K,
    S_LOSS_AT,
    S_PACE,
    S_RECOV_END,
    S_RI,
    S_RIHOLD,
    S_RSTART,
    S_SSTH,
    S_WMAX,
)


# -- window-based controllers (Reno, CUBIC) ----------------------------------------------------
@njit(cache=True, error_model="numpy", fastmath=_FM)
def _window_loss(s, f, cca, t, rtt):
    """Multiplicative decrease, once per congestion event (RFC 5681 / RFC 8312 with fast convergence)."""
    cwnd = s[S_CWND, f]
    s[S_LOSS_AT, f] = INF
    s[S_RECOV_END, f] = t + rtt
    if cca == CUBIC:
        w = cwnd / MSS
        if CUBIC_FAST_CONVERGENCE and w < s[S_WMAX, f]:
            s[S_WMAX, f] = w * (1.0 + CUBIC_BETA) / 2.0
        else:
            s[S_WMAX, f] = w
        cwnd = max(cwnd * CUBIC_BETA, MIN_CWND)
        s[S_EPOCH, f] = t
        s[S_K, f] = (max(s[S_WMAX, f] - cwnd / MSS, 0.0) / CUBIC_C) ** (1.0 / 3.0)
    else:
        cwnd = max(cwnd * RENO_BETA, MIN_CWND)
    s[S_SSTH, f] = cwnd
    s[S_CWND, f] = cwnd


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _window_grow(cca, t, acked, rtt, cwnd, ssth, minrtt, s, f):
    """ACK-clocked growth: slow start (with HyStart for CUBIC), then CUBIC or Reno avoidance."""
    if cwnd < ssth:
        cwnd += SS_ACK_GAIN * acked
        # HyStart: leave slow start when the RTT has grown by clamp(minRTT/8, 4, 16 ms)
        if cca == CUBIC and cwnd >= HYSTART_LOW_WINDOW:
            thr = min(max(minrtt / HYSTART_DELAY_DIVISOR, HYSTART_DELAY_MIN), HYSTART_DELAY_MAX)
            if rtt >= minrtt + thr:
                s[S_SSTH, f] = cwnd
                s[S_WMAX, f] = cwnd / MSS
                s[S_EPOCH, f] = t
                s[S_K, f] = 0.0
    elif cca == CUBIC:
        el = t - s[S_EPOCH, f]
        wmax = s[S_WMAX, f]
        tt = el + minrtt - s[S_K, f]
        target = (CUBIC_C * tt * tt * tt + wmax) * MSS
        inv = 1.0 / (cwnd * minrtt)  # one division serves 1/cwnd and 1/minrtt
        # TCP-friendly region: what Reno with the same beta would have reached
        west = (wmax * CUBIC_BETA + _RENO_FRIENDLY_SLOPE * el * cwnd * inv) * MSS
        if west > target:
            target = west
        if target > cwnd:
            cwnd += acked * min((target - cwnd) * minrtt * inv, CUBIC_MAX_INCREASE_PER_ACK)
        else:
            cwnd += acked * CUBIC_TARGET_FLOOR_INCREASE * MSS * minrtt * inv
    else:
        cwnd += MSS * acked / cwnd
    return min(cwnd, MAX_CWND)


# -- BBR: v1 in bbr1.py (tcp_bbr.c), v2 in bbr2.py (v2alpha tcp_bbr2.c) ---------------------------
@njit(cache=True, error_model="numpy", fastmath=_FM)
def _bbr_update(s, f, cca, t, dt, acked, lost, rtt, inflight, rng, b):
    """One sub-step of the flow's BBR (``dt`` is not needed: rounds are timed by the RTT)."""
    if cca == BBR:
        bbr1_update(s, f, t, acked, lost, rtt, inflight, rng, b)
    else:
        bbr2_update(s, f, t, acked, lost, rtt, inflight, rng, b)


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _minloss_update(s, f, t, rtt):
    """MinLoss (FFS section IX): once a round (one RTT), send at the RI learned a round ago.

    The paper's source takes the median of its 21 latest RIs and paces with a
    leaky bucket; ours: the lowest RI the node gave the flow's packets in a
    round, applied a round later (the feedback's one-RTT path).
    Without an FFS node there is no RI and the rate stays at its start.
    """
    if t >= s[S_RSTART, f] + rtt:
        if s[S_RIHOLD, f] > 0.0:
            s[S_PACE, f] = s[S_RIHOLD, f]
        s[S_RIHOLD, f] = s[S_RI, f]
        s[S_RI, f] = 0.0
        s[S_RSTART, f] = t


