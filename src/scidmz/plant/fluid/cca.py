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
    TCP_RTO_MIN,
    TCP_STALL_P_MAX,
    TCP_TIMEOUT_MIN,
)
from .layout import (
    S_CWND,
    S_DELIV,
    S_EPOCH,
    S_K,
    S_LOSS_AT,
    S_PACE,
    S_PBYTES,
    S_PLOST,
    S_PRTT_DONE,
    S_RECOV_END,
    S_RI,
    S_RIHOLD,
    S_RSINCE,
    S_RSTART,
    S_SSTH,
    S_WMAX,
)

# -- window-based controllers (Reno, CUBIC) ----------------------------------------------------
# A window flow stalled by a tail-loss probe or timeout keeps, in these columns (BBR-only otherwise):
S_STALL_W = S_PRTT_DONE  # > 0 while stalled: the window (bytes) the loss that stalled it found
S_STALL_CREDIT = S_RSINCE  # accumulated stall probability of its loss events (see _timeout_stall)


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _stalled(s, f):
    return s[S_STALL_W, f] > 0.0 and s[S_LOSS_AT, f] < INF


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _timeout_stall(s, f, t, rtt):
    """How long the loss detected now stalls the flow (0: SACK/RACK recovery goes on sending).

    Linux recovers a loss without a timer only if a packet sent after it is SACKed (RACK); with
    w packets in flight that fails when the other w - 1 are lost too, probability p^(w - 1) at a
    loss rate p (1 for a lone packet). The flow then sends nothing until the tail-loss probe, 2 SRTT
    + 2 ms, or 2 SRTT + 200 ms with one packet out (tcp_schedule_loss_probe), and if the probe is
    lost too (p) until the retransmission timeout, SRTT + 200 ms (tcp_set_rto with rto_min), doubled
    for every further loss: p / (1 - 2p) RTOs expected. p is the flow's loss fraction this period.
    Which events stall is decided by accumulating their probabilities (ours: the window CCAs have
    no random stream; the mean rate of stalls is the same)."""
    w = s[S_CWND, f] / MSS
    lost = s[S_PLOST, f]
    tot = lost + s[S_DELIV, f] + s[S_PBYTES, f]
    p = min(max(lost - MSS, 0.0) / tot, TCP_STALL_P_MAX) if tot > 0.0 else 0.0
    # no later packet SACKed, or the retransmission lost and none of the ~0.7 w - 1 sent after it SACKed
    q = p ** max(w - 1.0, 0.0) + p * p ** max(CUBIC_BETA * w - 1.0, 0.0)
    credit = s[S_STALL_CREDIT, f] + q
    if credit < 1.0:
        s[S_STALL_CREDIT, f] = credit
        return 0.0
    s[S_STALL_CREDIT, f] = credit - 1.0
    pto = 2.0 * rtt + (TCP_RTO_MIN if w <= 1.5 else TCP_TIMEOUT_MIN)
    rto = rtt + TCP_RTO_MIN
    return min(pto, rto) + rto * p / (1.0 - 2.0 * p)


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _window_loss(s, f, cca, t, rtt):
    """Multiplicative decrease, once per congestion event (RFC 5681 / RFC 8312 with fast convergence),
    after a stall when the window was too small for SACK recovery (_timeout_stall)."""
    cwnd = s[S_CWND, f]
    if _stalled(s, f):
        # the stall is over: reduce from the window the loss found, and restart from one packet
        # as after a timeout (tcp_enter_loss: cwnd 1, ssthresh from the CCA)
        w = s[S_STALL_W, f]
        s[S_STALL_W, f] = 0.0
        _window_reduce(s, f, cca, t, rtt, w)
        s[S_CWND, f] = MSS
        return
    else:
        stall = _timeout_stall(s, f, t, rtt)
        if stall > 0.0:
            s[S_STALL_W, f] = cwnd
            s[S_CWND, f] = 0.0  # nothing is sent until the probe or the timeout
            s[S_LOSS_AT, f] = t + stall  # the kernel calls back then
            return
    _window_reduce(s, f, cca, t, rtt, cwnd)


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _window_reduce(s, f, cca, t, rtt, cwnd):
    """The multiplicative decrease of one congestion event from window ``cwnd`` (bytes)."""
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
    if _stalled(s, f):
        return cwnd  # queued packets still arrive during a stall; the window stays shut
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


