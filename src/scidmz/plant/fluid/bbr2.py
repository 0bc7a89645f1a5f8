"""BBRv2 in the fluid kernel, read against Google's v2alpha Linux code (``tcp_bbr2.c``).

Source: github.com/google/bbr, branch v2alpha, ``net/ipv4/tcp_bbr2.c``
(commit 0487ade5), cited by function name below; the IETF draft that
continues it (draft-ietf-ccwg-bbr, sections named in constants.py) states
the same loss response (loss threshold 2 %, beta 0.7, headroom 0.15) for
BBRv3, whose gains differ (constants.py says where). ECN is off, as in
v2alpha's default (``bbr_ecn_enable = false``), so the ECN branches are not
modelled.

``bbr2_update`` is ``bbr2_main`` per fluid sub-step, in its order:
congestion signals and the lower bounds (``bbr2_update_congestion_signals``,
``bbr2_adapt_lower_bounds``), the Startup loss exit
(``bbr2_check_loss_too_high_in_startup``), the full-pipe check, Drain, the
ProbeBW state machine with its upper bounds (``bbr2_update_cycle_phase``,
``bbr2_adapt_upper_bounds``), the min RTT and ProbeRTT
(``bbr_update_min_rtt``), then the pacing rate and cwnd
(``bbr_set_cwnd``, ``bbr2_bound_cwnd_for_inflight_model``).

The fluid counterparts of the kernel's per-ACK inputs (ours): a round is one
current RTT of the flow; its bandwidth sample is the bytes delivered in the
round over its length; ``inflight`` is the flow's bytes in the network now
(sending rate x base RTT + its queued bytes); the loss of a round is the
flow's bytes dropped in it, reported when dropped. A probe's loss rate is
checked at every sub-step as lost-this-round / inflight, the counterpart of
``bbr2_is_inflight_too_high`` on ``rs->lost`` / ``rs->tx_in_flight``.
"""

from __future__ import annotations

from numba import njit

from .common import _FM, CRUISE, DOWN, DRAIN, INF, PROBE_BW, PROBE_RTT, REFILL, STARTUP, UP, _rand
from .constants import (
    BBR2_BETA,
    BBR2_CWND_GAIN,
    BBR2_DOWN_GAIN,
    BBR2_DRAIN_GAIN,
    BBR2_FULL_LOSS_CNT,
    BBR2_HEADROOM,
    BBR2_LOSS_THRESH,
    BBR2_MIN_RTT_WINDOW,
    BBR2_PACING_MARGIN,
    BBR2_PROBE_MAX_ROUNDS,
    BBR2_PROBE_PIF_GAIN,
    BBR2_PROBE_RAND_ROUNDS,
    BBR2_PROBE_RENO_GAIN,
    BBR2_PROBE_RTT_CWND_GAIN,
    BBR2_PROBE_RTT_INTERVAL,
    BBR2_PROBE_RTT_TIME,
    BBR2_PROBE_WAIT_BASE,
    BBR2_PROBE_WAIT_RAND,
    BBR2_STARTUP_CWND_GAIN,
    BBR2_STARTUP_GAIN,
    BBR2_UP_GAIN,
    BBR_FULL_BW_ROUNDS,
    BBR_FULL_BW_THRESH,
    BBR_MIN_CWND,
    MSS,
)
from .layout import (
    S_BW,
    S_BWHI_CUR,
    S_BWHI_PREV,
    S_BWLO,
    S_CIDX,
    S_CSTART,
    S_CWND,
    S_FULLBW,
    S_FULLCNT,
    S_FULLPIPE,
    S_GAIN,
    S_IHI,
    S_ILO,
    S_MINRTT,
    S_MINRTT_STAMP,
    S_MODE,
    S_PACE,
    S_PRTT_DONE,
    S_PWAIT,
    S_RDELIV,
    S_RLOST,
    S_ROUNDS,
    S_RSINCE,
    S_RSTART,
    S_SLOT0,
    S_UPCNT,
)

# BBRv2 has no 10-round max filter; it keeps its further state in the columns BBR v1 uses for one
# (layout.S_SLOT0 .. S_SLOT0 + 9, zero when a flow starts).
S2_PRTT_MIN = S_SLOT0  # min RTT of the last BBR2_PROBE_RTT_INTERVAL (probe_rtt_min_us); 0: none yet
S2_PRTT_STAMP = S_SLOT0 + 1  # when it was taken (probe_rtt_min_stamp)
S2_PROBE_SAMPLES = S_SLOT0 + 2  # 1 while ACKs carry a bandwidth probe's feedback (bw_probe_samples)
S2_PREV_TOO_HIGH = S_SLOT0 + 3  # the last probe went too high (prev_probe_too_high)
S2_STOPPED_RISKY = S_SLOT0 + 4  # the last UP stopped at inflight_hi (stopped_risky_probe)
S2_STOPPING = S_SLOT0 + 5  # 1 from DOWN's start until its first round ends (BBR_ACKS_PROBE_STOPPING)
S2_UP_ROUNDS = S_SLOT0 + 6  # rounds of UP so far: inflight_hi grows 2^n packets in round n
S2_PRIOR_CWND = S_SLOT0 + 7  # cwnd before ProbeRTT, restored after it (prior_cwnd)
S2_PRTT_ROUND = S_SLOT0 + 8  # start of the round ProbeRTT must also wait for (probe_rtt_round_done)


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _max_bw(s, f):
    """bbr_max_bw: the max filter over the current and the previous probe cycle."""
    return max(s[S_BWHI_PREV, f], s[S_BWHI_CUR, f])


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _bdp(s, f, bw, gain):
    """bbr_inflight(bw, gain) with v2alpha's flooring TSO budget (cwnd_tso_budget = 1):
    gain x BDP, at least 4 packets, plus 2 packets in UP (bbr_quantization_budget)."""
    w = max(gain * bw * s[S_MINRTT, f], BBR_MIN_CWND)
    if int(s[S_MODE, f]) == PROBE_BW and int(s[S_CIDX, f]) == UP:
        w += 2.0 * MSS
    return w


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _target_inflight(s, f):
    """bbr2_target_inflight: the BDP, unless congestion cut cwnd."""
    return min(_bdp(s, f, min(_max_bw(s, f), s[S_BWLO, f]), 1.0), s[S_CWND, f])


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _headroom(s, f):
    """bbr2_inflight_with_headroom: inflight_hi less 15 %, at least 4 packets (inf while unset)."""
    ihi = s[S_IHI, f]
    if ihi == INF:
        return INF
    return max(ihi - max(BBR2_HEADROOM * ihi, MSS), BBR_MIN_CWND)


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _is_probing(s, f):
    """bbr2_is_probing_bandwidth: Startup, or ProbeBW's REFILL and UP."""
    mode = int(s[S_MODE, f])
    ph = int(s[S_CIDX, f])
    return mode == STARTUP or (mode == PROBE_BW and (ph == REFILL or ph == UP))


# -- ProbeBW's phases -----------------------------------------------------------------------------
@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _new_round(s, f, t):
    """next_rtt_delivered = tp->delivered: REFILL, UP and DOWN each start a round, so the round that
    measures a probe starts with it."""
    s[S_RSTART, f] = t
    s[S_RDELIV, f] = 0.0
    s[S_RLOST, f] = 0.0


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _start_down(s, f, t, rng, b):
    """bbr2_start_bw_probe_down: drain what the probe queued; pick when to probe again."""
    s[S_CIDX, f] = DOWN
    s[S_CSTART, f] = t
    _new_round(s, f, t)
    s[S_UPCNT, f] = INF  # inflight_hi stops growing
    s[S_PWAIT, f] = t + BBR2_PROBE_WAIT_BASE + BBR2_PROBE_WAIT_RAND * _rand(rng, b)
    s[S_RSINCE, f] = float(int(_rand(rng, b) * BBR2_PROBE_RAND_ROUNDS))
    s[S2_STOPPING, f] = 1.0


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _start_cruise(s, f):
    """bbr2_start_bw_probe_cruise."""
    if s[S_ILO, f] < INF:
        s[S_ILO, f] = min(s[S_ILO, f], s[S_IHI, f])
    s[S_CIDX, f] = CRUISE


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _start_refill(s, f, t):
    """bbr2_start_bw_probe_refill: forget the short-term bounds, send at bw for one round."""
    s[S_BWLO, f] = INF
    s[S_ILO, f] = INF
    s[S2_UP_ROUNDS, f] = 0.0
    s[S2_STOPPED_RISKY, f] = 0.0
    s[S_CIDX, f] = REFILL
    s[S_CSTART, f] = t
    _new_round(s, f, t)


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _start_up(s, f, t):
    """bbr2_start_bw_probe_up: probe with pacing gain 1.25; its ACKs are probe feedback."""
    s[S_CIDX, f] = UP
    s[S_CSTART, f] = t
    _new_round(s, f, t)
    s[S2_PROBE_SAMPLES, f] = 1.0
    s[S_UPCNT, f] = 1.0  # bbr2_raise_inflight_hi_slope: 1 packet in the first round, then 2, 4, ...
    s[S2_UP_ROUNDS, f] = 1.0


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _inflight_too_high(s, f, t, inflight, rng, b):
    """bbr2_handle_inflight_too_high: the probe's loss rate passed 2 % -- remember the inflight that
    was too high as inflight_hi (at least beta x the target inflight), then drain."""
    s[S2_PREV_TOO_HIGH, f] = 1.0
    s[S2_PROBE_SAMPLES, f] = 0.0  # react once per probe
    s[S_IHI, f] = max(inflight, BBR2_BETA * _target_inflight(s, f))
    if int(s[S_MODE, f]) == PROBE_BW and int(s[S_CIDX, f]) == UP:
        _start_down(s, f, t, rng, b)


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _adapt_upper_bounds(s, f, t, round_end, acked, rtt, inflight, rng, b):
    """bbr2_adapt_upper_bounds: end of a probe's feedback; inflight_hi down on a too-lossy probe,
    up when a higher inflight proved safe, and its growth in UP while cwnd-limited."""
    if round_end and s[S2_STOPPING, f] > 0.0:
        # the first round of DOWN is over: the probe's samples end; advance the max filter
        s[S2_STOPPING, f] = 0.0
        s[S2_PROBE_SAMPLES, f] = 0.0
        if int(s[S_MODE, f]) == PROBE_BW and s[S_BWHI_CUR, f] > 0.0:
            s[S_BWHI_PREV, f] = s[S_BWHI_CUR, f]
            s[S_BWHI_CUR, f] = 0.0
        if int(s[S_MODE, f]) == PROBE_BW and s[S2_STOPPED_RISKY, f] > 0.0 and s[S2_PREV_TOO_HIGH, f] == 0.0:
            _start_refill(s, f, t)  # reprobe: the risky probe stopped short of any loss
            return True
    if s[S_RLOST, f] > BBR2_LOSS_THRESH * inflight:
        if s[S2_PROBE_SAMPLES, f] > 0.0:
            _inflight_too_high(s, f, t, inflight, rng, b)
        return False
    if s[S_IHI, f] == INF:
        return False
    if inflight > s[S_IHI, f]:
        s[S_IHI, f] = inflight
    if int(s[S_MODE, f]) == PROBE_BW and int(s[S_CIDX, f]) == UP:
        # bbr2_probe_inflight_hi_upward: cwnd-limited at inflight_hi -> +2^n packets in UP's n-th round
        cwnd = s[S_CWND, f]
        if cwnd >= s[S_IHI, f] and s[S_PACE, f] * rtt >= cwnd:
            s[S_IHI, f] += acked * s[S_UPCNT, f] * MSS / cwnd
        if round_end:
            s[S_UPCNT, f] = 2.0 ** s[S2_UP_ROUNDS, f]
            s[S2_UP_ROUNDS, f] = min(s[S2_UP_ROUNDS, f] + 1.0, 30.0)
    return False


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _time_to_probe(s, f, t):
    """bbr2_check_time_to_probe_bw: 2-3 s of wall clock, or as many rounds as a Reno flow with
    our BDP needs (at most 63): whichever comes first."""
    reno = min(BBR2_PROBE_MAX_ROUNDS, BBR2_PROBE_RENO_GAIN * _target_inflight(s, f) / MSS)
    if t >= s[S_PWAIT, f] or s[S_RSINCE, f] >= reno:
        _start_refill(s, f, t)
        return True
    return False


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _cycle_phase(s, f, t, round_end, inflight, rng, b):
    """bbr2_update_cycle_phase's switch: CRUISE -> REFILL -> UP -> DOWN -> CRUISE."""
    ph = int(s[S_CIDX, f])
    max_bw = _max_bw(s, f)
    if ph == CRUISE:
        _time_to_probe(s, f, t)
    elif ph == REFILL:
        if round_end:
            _start_up(s, f, t)
    elif ph == UP:
        risky = s[S2_PREV_TOO_HIGH, f] > 0.0 and inflight >= s[S_IHI, f]
        queuing = t - s[S_CSTART, f] > s[S_MINRTT, f] and inflight >= _bdp(s, f, max_bw, BBR2_PROBE_PIF_GAIN)
        if risky:
            s[S2_STOPPED_RISKY, f] = 1.0
        if risky or queuing:
            s[S2_PREV_TOO_HIGH, f] = 0.0
            _start_down(s, f, t, rng, b)
    elif ph == DOWN:
        # bbr2_check_time_to_cruise (drain_to_target): under the headroom and under the BDP
        if not _time_to_probe(s, f, t) and inflight <= _headroom(s, f) and inflight <= _bdp(s, f, max_bw, 1.0):
            _start_cruise(s, f)


# -- model updates -----------------------------------------------------------------------------
@njit(cache=True, error_model="numpy", fastmath=_FM)
def _round_signals(s, f, t, el):
    """A round ended: bandwidth sample into the max filter, the lower bounds on loss
    (bbr2_update_congestion_signals -> bbr2_adapt_lower_bounds), the Startup exits."""
    rd = s[S_RDELIV, f]
    rl = s[S_RLOST, f]
    sample = rd / el
    # ProbeRTT's samples are app-limited (bbr_update_min_rtt): they count only if they beat max_bw
    mode = int(s[S_MODE, f])
    app_limited = mode == PROBE_RTT or (s[S_PRTT_DONE, f] < INF and t < s[S_PRTT_DONE, f])
    if not app_limited or sample >= _max_bw(s, f):
        s[S_BWHI_CUR, f] = max(s[S_BWHI_CUR, f], sample)
    s[S_ROUNDS, f] += 1.0
    s[S_RSINCE, f] += 1.0
    if rl > 0.0 and not _is_probing(s, f):
        # multiplicative cut by beta, never below what this round delivered (bw_latest, inflight_latest)
        if s[S_BWLO, f] == INF:
            s[S_BWLO, f] = _max_bw(s, f)
        if s[S_ILO, f] == INF:
            s[S_ILO, f] = s[S_CWND, f]
        s[S_BWLO, f] = max(sample, BBR2_BETA * s[S_BWLO, f])
        s[S_ILO, f] = max(rd, BBR2_BETA * s[S_ILO, f])
    if s[S_FULLPIPE, f] == 0.0:
        # bbr2_check_loss_too_high_in_startup: >= 8 losses in a round and > 2 % lost
        if rl >= BBR2_FULL_LOSS_CNT * MSS and rl > BBR2_LOSS_THRESH * (rd + rl):
            s[S_FULLPIPE, f] = 1.0
            s[S_IHI, f] = _bdp(s, f, _max_bw(s, f), 1.0)
        # bbr_check_full_bw_reached: three rounds without 25 % growth
        bw = _max_bw(s, f)
        if bw >= s[S_FULLBW, f] * BBR_FULL_BW_THRESH:
            s[S_FULLBW, f] = bw
            s[S_FULLCNT, f] = 0.0
        else:
            s[S_FULLCNT, f] += 1.0
            if s[S_FULLCNT, f] >= BBR_FULL_BW_ROUNDS:
                s[S_FULLPIPE, f] = 1.0
    s[S_RSTART, f] = t
    s[S_RDELIV, f] = 0.0
    s[S_RLOST, f] = 0.0


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _min_rtt(s, f, t, rtt, inflight, rng, b):
    """bbr_update_min_rtt (v2): ProbeRTT when no RTT sample matched the 5 s minimum, at
    max(4 packets, 0.5 BDP) for 200 ms and one round; the 10 s min RTT follows the 5 s one."""
    if s[S2_PRTT_MIN, f] == 0.0:
        s[S2_PRTT_MIN, f] = rtt
        s[S2_PRTT_STAMP, f] = t
    expired = t > s[S2_PRTT_STAMP, f] + BBR2_PROBE_RTT_INTERVAL
    if rtt <= s[S2_PRTT_MIN, f] or expired:
        s[S2_PRTT_MIN, f] = rtt
        s[S2_PRTT_STAMP, f] = t
    if s[S2_PRTT_MIN, f] <= s[S_MINRTT, f] or t > s[S_MINRTT_STAMP, f] + BBR2_MIN_RTT_WINDOW:
        s[S_MINRTT, f] = s[S2_PRTT_MIN, f]
        s[S_MINRTT_STAMP, f] = s[S2_PRTT_STAMP, f]
    mode = int(s[S_MODE, f])
    if expired and mode != PROBE_RTT:
        s[S_MODE, f] = PROBE_RTT
        s[S_PRTT_DONE, f] = INF
        s[S2_STOPPING, f] = 1.0
        s[S2_PRIOR_CWND, f] = s[S_CWND, f]  # bbr_save_cwnd
        return
    if mode != PROBE_RTT:
        return
    if s[S_PRTT_DONE, f] == INF:
        if inflight <= _probe_rtt_cwnd(s, f):
            s[S_PRTT_DONE, f] = t + BBR2_PROBE_RTT_TIME
            s[S2_PRTT_ROUND, f] = t
    elif t >= s[S_PRTT_DONE, f] and t - s[S2_PRTT_ROUND, f] >= rtt:
        # bbr_check_probe_rtt_done -> bbr2_exit_probe_rtt
        s[S2_PRTT_STAMP, f] = t
        s[S_PRTT_DONE, f] = t + rtt  # app-limited until ProbeRTT's packets are delivered
        s[S_CWND, f] = max(s[S_CWND, f], s[S2_PRIOR_CWND, f])
        s[S_BWLO, f] = INF
        s[S_ILO, f] = INF
        if s[S_FULLPIPE, f] > 0.0:
            s[S_MODE, f] = PROBE_BW
            _start_down(s, f, t, rng, b)
            _start_cruise(s, f)
        else:
            s[S_MODE, f] = STARTUP


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _probe_rtt_cwnd(s, f):
    """bbr_probe_rtt_cwnd: half the BDP, at least 4 packets."""
    return max(BBR2_PROBE_RTT_CWND_GAIN * min(_max_bw(s, f), s[S_BWLO, f]) * s[S_MINRTT, f], BBR_MIN_CWND)


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _outputs(s, f, acked):
    """bbr_update_gains, bbr_set_pacing_rate, bbr_set_cwnd and bbr2_bound_cwnd_for_inflight_model."""
    mode = int(s[S_MODE, f])
    ph = int(s[S_CIDX, f])
    full = s[S_FULLPIPE, f] > 0.0
    cwnd_gain = BBR2_CWND_GAIN
    if mode == STARTUP:
        gain, cwnd_gain = BBR2_STARTUP_GAIN, BBR2_STARTUP_CWND_GAIN
    elif mode == DRAIN:
        gain, cwnd_gain = BBR2_DRAIN_GAIN, BBR2_STARTUP_CWND_GAIN
    elif mode == PROBE_RTT:
        gain, cwnd_gain = 1.0, 1.0
    elif ph == UP:
        gain = BBR2_UP_GAIN
    elif ph == DOWN:
        gain = BBR2_DOWN_GAIN
    else:
        gain = 1.0
    bw = min(_max_bw(s, f), s[S_BWLO, f])
    s[S_BW, f] = bw
    s[S_GAIN, f] = gain
    rate = gain * bw * (1.0 - BBR2_PACING_MARGIN)
    if full or rate > s[S_PACE, f]:
        s[S_PACE, f] = rate  # Startup never lowers its pacing rate
    target = _bdp(s, f, bw, cwnd_gain)
    cwnd = s[S_CWND, f]
    if full:
        cwnd = min(cwnd + acked, target)
    elif cwnd < target:
        cwnd += acked
    cwnd = max(cwnd, BBR_MIN_CWND)
    if mode == PROBE_RTT:
        cwnd = min(cwnd, _probe_rtt_cwnd(s, f))
    cap = INF
    if mode == PROBE_BW and ph != CRUISE:
        cap = s[S_IHI, f]
    elif mode == PROBE_RTT or (mode == PROBE_BW and ph == CRUISE):
        cap = _headroom(s, f)
    cap = max(min(cap, s[S_ILO, f]), BBR_MIN_CWND)
    s[S_CWND, f] = min(cwnd, cap)


@njit(cache=True, error_model="numpy", fastmath=_FM)
def bbr2_update(s, f, t, acked, lost, rtt, inflight, rng, b):
    """One sub-step of BBRv2 for flow f (``bbr2_main``): ``acked``/``lost`` bytes in it, ``rtt`` the
    flow's current RTT, ``inflight`` its bytes in the network."""
    s[S_RDELIV, f] += acked
    s[S_RLOST, f] += lost
    el = t - s[S_RSTART, f]
    round_end = el >= rtt and el > 0.0
    if round_end:
        _round_signals(s, f, t, el)
    mode = int(s[S_MODE, f])
    if mode == STARTUP and s[S_FULLPIPE, f] > 0.0:
        s[S_MODE, f] = DRAIN
        mode = DRAIN
    if mode == DRAIN and inflight <= _bdp(s, f, _max_bw(s, f), 1.0):
        s[S_MODE, f] = PROBE_BW
        _start_down(s, f, t, rng, b)
    if s[S_FULLPIPE, f] > 0.0 and not _adapt_upper_bounds(s, f, t, round_end, acked, rtt, inflight, rng, b):
        if int(s[S_MODE, f]) == PROBE_BW:
            _cycle_phase(s, f, t, round_end, inflight, rng, b)
    _min_rtt(s, f, t, rtt, inflight, rng, b)
    _outputs(s, f, acked)
