"""The fluid kernel's congestion controllers: Reno, CUBIC, BBR (bbr1.py, bbr2.py) and FFS's MinLoss sender.

Each controller updates one flow's columns of the state array ``s`` (layout.py)
from what the kernel measured in a sub-step (bytes acknowledged and lost, RTT);
the period kernel (kernel.py) decides when to call them. Every constant lives
in constants.py with its source.
"""

from __future__ import annotations

import math

from numba import njit

from .bbr1 import bbr1_update
from .bbr2 import bbr2_update
from .common import _FM, _RENO_FRIENDLY_SLOPE, BBR, CUBIC, INF, _rand
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
    TCP_TIMEOUT_MIN,
)
from .layout import (
    S_BWLO,
    S_CWND,
    S_EPOCH,
    S_K,
    S_LOSS_AT,
    S_PACE,
    S_PRIOR_MODE,
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
# Columns that are BBR-only otherwise, used by the window CCAs' timer recovery and CUBIC:
S_STALL_W = S_PRTT_DONE  # > 0 while stalled by a probe or timeout: the window (bytes) of the lost flight
S_STALL_END = S_RSINCE  # when the last stall ended (the round of its retransmission follows)
S_STALL_KIND = S_PRIOR_MODE  # the last stall: -1 a tail-loss probe that repaired it, k >= 0 an RTO after k backoffs
S_WEST = S_BWLO  # CUBIC's Reno-friendly window W_est (tcp_cubic.c ca->tcp_cwnd), packets


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _stalled(s, f):
    return s[S_STALL_W, f] > 0.0 and s[S_LOSS_AT, f] < INF


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _flight_lost(s, f, cca, t, dt, rtt, p, rng, b):
    """Whether the whole flight of the last RTT was lost in this sub-step; if so, stall the flow.

    Linux repairs a loss without a timer only when a packet sent after it is (S)ACKed (RACK,
    tcp_rack_detect_loss), so a flight of w packets that is lost whole gets no ACK at all: with
    the loss fraction p it happens with probability p^w per round trip, p^w dt / RTT in a sub-step.
    w is the whole packets in flight, cwnd rounded down (tcp_cwnd_test), at least one. Then:

    - Open (neither in Recovery nor slow-starting after a timeout: tcp_schedule_loss_probe
      probes only in TCP_CA_Open/CWR): the tail-loss probe after PTO = 2 SRTT + TCP_TIMEOUT_MIN,
      + TCP_RTO_MIN with one packet out, capped at the RTO left. A delivered probe (1 - p) is
      SACKed one RTT later and the flow recovers as after any loss (tcp_enter_recovery); a lost
      probe leaves the RTO.
    - Recovery or the slow start after a timeout: the RTO. It runs from the head of the flight,
      sent (w - 1) / w RTT ago, so it fires TCP_RTO_MIN + RTT / w from now (tcp_rearm_rto,
      tcp_set_rto: SRTT + rttvar, rttvar >= TCP_RTO_MIN). If the loss is the retransmission an
      RTO just sent (the first round after it), the timer was doubled (tcp_retransmit_timer:
      icsk_rto << 1; icsk_backoff is cleared by the next RTT sample).
    - An RTO restarts from one packet (tcp_enter_loss: cwnd = in flight + 1) with ssthresh
      reduced unless this window was already reduced (from Recovery, or a backoff).
    p is the flow's loss fraction in the sub-step. Derivation and the packet-level check:
    docs/fluid_model.md, "Timer-driven recovery at small windows"."""
    cwnd = s[S_CWND, f]
    w = max(math.floor(cwnd / MSS), 1.0)
    kind = s[S_STALL_KIND, f]
    loss_state = kind >= 0.0 and cwnd < s[S_SSTH, f]  # slow-starting after an RTO (TCP_CA_Loss)
    # Recovery lasts a round plus one per lost retransmission (1 / (1 - p) rounds); a loss detected
    # but not yet acted on (S_LOSS_AT pending) leaves the flow Open until then
    in_recovery = (not loss_state and s[S_LOSS_AT, f] == INF
                   and t < s[S_RECOV_END, f] + rtt / (1.0 - min(p, 0.5)))
    n = w
    if in_recovery:
        # what can SACK a retransmission is what PRR sends after it: beta (ssthresh / prior cwnd,
        # RFC 6937) packets per packet delivered, of the at most ssthresh ahead of it (ours)
        n = max((CUBIC_BETA if cca == CUBIC else RENO_BETA) * w, 1.0)
    if _rand(rng, b) >= p ** n * dt / rtt:
        return
    rto_left = TCP_RTO_MIN + rtt / w
    if not in_recovery and not loss_state:
        pto = min(2.0 * rtt + (TCP_RTO_MIN if w == 1.0 else TCP_TIMEOUT_MIN), rto_left)
        if _rand(rng, b) >= p:
            end = t + pto + rtt
            kind = -1.0
        else:
            end = t + rto_left
            kind = 0.0
        _window_reduce(s, f, cca, t, rtt, cwnd)
    elif loss_state and t < s[S_STALL_END, f] + rtt:
        kind += 1.0
        end = s[S_STALL_END, f] + (rtt + TCP_RTO_MIN) * 2.0 ** kind
    else:
        end = t + rto_left
        kind = 0.0
    s[S_STALL_W, f] = max(cwnd, 1.0)
    s[S_STALL_KIND, f] = kind
    s[S_CWND, f] = 0.0  # nothing is sent until the probe or the timeout
    s[S_LOSS_AT, f] = max(end, t + dt)  # the kernel calls back then (_window_loss)
    s[S_RECOV_END, f] = INF


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _window_loss(s, f, cca, t, rtt):
    """A detected loss: multiplicative decrease, once per congestion event (RFC 5681 / RFC 8312 with
    fast convergence); or the end of a probe or timeout stall (_flight_lost)."""
    if not _stalled(s, f):
        # the reaction is due at S_LOSS_AT, and the sub-step that applies it may start after that:
        # the event's boundary (and CUBIC's epoch) is the reaction's own time, whatever the step
        _window_reduce(s, f, cca, min(s[S_LOSS_AT, f], t), rtt, s[S_CWND, f])
        return
    s[S_STALL_W, f] = 0.0
    s[S_STALL_END, f] = t
    s[S_LOSS_AT, f] = INF
    s[S_RECOV_END, f] = t
    ssth = s[S_SSTH, f]
    s[S_EPOCH, f] = t
    if s[S_STALL_KIND, f] < 0.0:
        s[S_CWND, f] = ssth  # the probe's SACK starts an ordinary recovery, reduced at the stall's start
        s[S_WEST, f] = ssth / MSS
        return
    # RTO: slow start from one packet to ssthresh; CUBIC forgets W_max (bictcp_state -> bictcp_reset),
    # so its next epoch starts at the window it reaches (K = 0)
    s[S_CWND, f] = MSS
    s[S_WMAX, f] = ssth / MSS
    s[S_K, f] = 0.0
    s[S_WEST, f] = ssth / MSS


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _window_reduce(s, f, cca, t, rtt, cwnd):
    """The multiplicative decrease of one congestion event from window ``cwnd`` (bytes).

    Losses after this moment are of packets sent after the loss was detected: a new congestion
    event (RFC 6675 / RFC 6582 recovery covers what was outstanding at detection)."""
    s[S_LOSS_AT, f] = INF
    s[S_RECOV_END, f] = t
    if cca == CUBIC:
        w = cwnd / MSS
        if CUBIC_FAST_CONVERGENCE and w < s[S_WMAX, f]:
            s[S_WMAX, f] = w * (1.0 + CUBIC_BETA) / 2.0
        else:
            s[S_WMAX, f] = w
        cwnd = max(cwnd * CUBIC_BETA, MIN_CWND)
        s[S_EPOCH, f] = t
        s[S_K, f] = (max(s[S_WMAX, f] - cwnd / MSS, 0.0) / CUBIC_C) ** (1.0 / 3.0)
        s[S_WEST, f] = cwnd / MSS
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
                s[S_WEST, f] = cwnd / MSS
    elif cca == CUBIC:
        el = t - s[S_EPOCH, f]
        wmax = s[S_WMAX, f]
        tt = el + minrtt - s[S_K, f]
        target = (CUBIC_C * tt * tt * tt + wmax) * MSS
        inv = 1.0 / (cwnd * minrtt)  # one division serves 1/cwnd and 1/minrtt
        # TCP-friendly region: what Reno with the same beta would have reached, counted in ACKs
        # (tcp_cubic.c: ca->tcp_cwnd + 1 per cwnd x beta_scale / 8 acked packets), i.e. per RTT
        # whatever the queue, not per min RTT
        west_p = s[S_WEST, f] + _RENO_FRIENDLY_SLOPE * acked / cwnd
        s[S_WEST, f] = west_p
        west = west_p * MSS
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


