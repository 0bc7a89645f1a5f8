"""The fluid kernel's congestion controllers: Reno, CUBIC, BBR v1/v2 and FFS's MinLoss sender.

Each controller updates one flow's columns of the state array ``s`` (layout.py)
from what the kernel measured in a sub-step (bytes acknowledged and lost, RTT);
the period kernel (kernel.py) decides when to call them. Every constant lives
in constants.py with its source.
"""

from __future__ import annotations

from numba import njit

from .common import (
    _FM,
    _NSLOTS,
    _PROBE_GAINS,
    _RENO_FRIENDLY_SLOPE,
    BBR,
    BBR2,
    CRUISE,
    CUBIC,
    DOWN,
    DRAIN,
    INF,
    PROBE_BW,
    PROBE_RTT,
    REFILL,
    STARTUP,
    UP,
    _rand,
)
from .constants import (
    BBR2_BETA,
    BBR2_CWND_GAIN,
    BBR2_DOWN_GAIN,
    BBR2_DRAIN_GAIN,
    BBR2_HEADROOM,
    BBR2_LOSS_THRESH,
    BBR2_MIN_RTT_WINDOW,
    BBR2_PACING_MARGIN,
    BBR2_PROBE_MAX_ROUNDS,
    BBR2_PROBE_RTT_CWND_GAIN,
    BBR2_PROBE_RTT_TIME,
    BBR2_PROBE_WAIT_BASE,
    BBR2_PROBE_WAIT_RAND,
    BBR2_STARTUP_FULL_LOSS_MIN,
    BBR2_STARTUP_GAIN,
    BBR2_UP_CNT_MAX,
    BBR2_UP_GAIN,
    BBR_CWND_GAIN,
    BBR_DRAIN_GAIN,
    BBR_FULL_BW_ROUNDS,
    BBR_FULL_BW_THRESH,
    BBR_HIGH_GAIN,
    BBR_MIN_CWND,
    BBR_MIN_RTT_WINDOW,
    BBR_PROBE_RTT_CWND,
    BBR_PROBE_RTT_TIME,
    BBR_PROBE_UP_MAX_RTTS,
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
    S_BW,
    S_BWHI_CUR,
    S_BWHI_PREV,
    S_BWLO,
    S_CIDX,
    S_CSTART,
    S_CWND,
    S_EPOCH,
    S_FULLBW,
    S_FULLCNT,
    S_FULLPIPE,
    S_GAIN,
    S_IHI,
    S_ILO,
    S_K,
    S_LOSS_AT,
    S_MINRTT,
    S_MINRTT_STAMP,
    S_MODE,
    S_PACE,
    S_PRIOR_MODE,
    S_PRTT_DONE,
    S_PWAIT,
    S_RDELIV,
    S_RECOV_END,
    S_RI,
    S_RIHOLD,
    S_RLOST,
    S_ROUNDS,
    S_RSINCE,
    S_RSTART,
    S_SLOT0,
    S_SSTH,
    S_UPCNT,
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


# -- BBR (v1 and v2) ------------------------------------------------------------------------------
@njit(cache=True, error_model="numpy", fastmath=_FM)
def _bbr_enter_probe_bw(s, f, cca, t, rng, b):
    s[S_MODE, f] = PROBE_BW
    s[S_CSTART, f] = t
    if cca == BBR:
        # random start phase, never the draining 0.75 phase (tcp_bbr.c)
        idx = int(_rand(rng, b) * 7.0)
        s[S_CIDX, f] = idx + 1 if idx >= 1 else 0
    else:
        s[S_CIDX, f] = DOWN
        s[S_PWAIT, f] = t + BBR2_PROBE_WAIT_BASE + BBR2_PROBE_WAIT_RAND * _rand(rng, b)
        s[S_RSINCE, f] = 0.0


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _bbr_update(s, f, cca, t, dt, acked, lost, rtt, inflight, rng, b):
    """BBR's model and state machine, per sub-step (v1: tcp_bbr.c; v2: draft-cardwell-02).

    Bandwidth samples are taken once per round (one RTT) as delivered/elapsed,
    the fluid counterpart of BBR's per-ACK delivery-rate samples.
    """
    s[S_RDELIV, f] += acked
    s[S_RLOST, f] += lost
    prt_win = BBR_MIN_RTT_WINDOW if cca == BBR else BBR2_MIN_RTT_WINDOW
    # min RTT filter and ProbeRTT entry
    if rtt <= s[S_MINRTT, f]:
        s[S_MINRTT, f] = rtt
        s[S_MINRTT_STAMP, f] = t
    elif t - s[S_MINRTT_STAMP, f] > prt_win and s[S_MODE, f] != PROBE_RTT:
        s[S_MINRTT, f] = rtt
        s[S_MINRTT_STAMP, f] = t
        s[S_PRIOR_MODE, f] = s[S_MODE, f]
        s[S_MODE, f] = PROBE_RTT
        s[S_PRTT_DONE, f] = t + (BBR_PROBE_RTT_TIME if cca == BBR else BBR2_PROBE_RTT_TIME) + rtt
    minrtt = s[S_MINRTT, f]
    mode = int(s[S_MODE, f])

    # ---- round end: bandwidth sample, startup exit, BBRv2 loss response ----
    el = t - s[S_RSTART, f]
    if el >= rtt and el > 0.0:
        sample = s[S_RDELIV, f] / el
        rl = s[S_RLOST, f]
        rd = s[S_RDELIV, f]
        loss_rate = rl / (rl + rd) if rl + rd > 0.0 else 0.0
        s[S_ROUNDS, f] += 1.0
        s[S_RSINCE, f] += 1.0
        if cca == BBR:
            slot = int(s[S_ROUNDS, f]) % _NSLOTS
            s[S_SLOT0 + slot, f] = sample
            bw = 0.0
            for j in range(_NSLOTS):
                bw = max(bw, s[S_SLOT0 + j, f])
            s[S_BW, f] = max(bw, MSS / minrtt)
        else:
            s[S_BWHI_CUR, f] = max(s[S_BWHI_CUR, f], sample)
            s[S_BW, f] = max(max(s[S_BWHI_CUR, f], s[S_BWHI_PREV, f]), MSS / minrtt)
        bw = s[S_BW, f]
        bdp = bw * minrtt
        if mode == STARTUP:
            if bw >= s[S_FULLBW, f] * BBR_FULL_BW_THRESH:
                s[S_FULLBW, f] = bw
                s[S_FULLCNT, f] = 0.0
            else:
                s[S_FULLCNT, f] += 1.0
            full = s[S_FULLCNT, f] >= BBR_FULL_BW_ROUNDS
            if cca == BBR2 and loss_rate > BBR2_LOSS_THRESH and rl >= BBR2_STARTUP_FULL_LOSS_MIN:
                s[S_IHI, f] = max(bdp, inflight)
                full = True
            if full:
                s[S_FULLPIPE, f] = 1.0
                s[S_MODE, f] = DRAIN
                s[S_GAIN, f] = BBR_DRAIN_GAIN if cca == BBR else BBR2_DRAIN_GAIN
                mode = DRAIN
        elif cca == BBR2 and mode == PROBE_BW:
            ph = int(s[S_CIDX, f])
            if loss_rate > BBR2_LOSS_THRESH and ph == UP:
                # inflight too high while probing: remember a safe upper bound, back off
                s[S_IHI, f] = max(inflight * BBR2_BETA, bdp * BBR2_BETA)
                s[S_CIDX, f] = DOWN
                s[S_CSTART, f] = t
                s[S_PWAIT, f] = t + BBR2_PROBE_WAIT_BASE + BBR2_PROBE_WAIT_RAND * _rand(rng, b)
                s[S_RSINCE, f] = 0.0
            elif rl > 0.0 and ph != UP and ph != REFILL:
                # short-term model: any loss in a round cuts bw_lo / inflight_lo by beta
                if s[S_BWLO, f] == INF:
                    s[S_BWLO, f] = bw
                if s[S_ILO, f] == INF:
                    s[S_ILO, f] = s[S_CWND, f]
                s[S_BWLO, f] = max(sample, BBR2_BETA * s[S_BWLO, f])
                s[S_ILO, f] = max(rd, BBR2_BETA * s[S_ILO, f])
            if ph == REFILL:
                s[S_CIDX, f] = UP
                s[S_CSTART, f] = t
                s[S_UPCNT, f] = 1.0
            elif ph == UP:
                if s[S_IHI, f] < INF and inflight >= s[S_IHI, f] * (1.0 - 1e-3):
                    # cwnd-limited by inflight_hi: grow it 1, 2, 4, ... packets per round
                    s[S_IHI, f] += s[S_UPCNT, f] * MSS
                    s[S_UPCNT, f] = min(s[S_UPCNT, f] * 2.0, BBR2_UP_CNT_MAX)
                if t - s[S_CSTART, f] >= minrtt and inflight >= BBR2_UP_GAIN * bdp:
                    s[S_CIDX, f] = DOWN
                    s[S_CSTART, f] = t
                    s[S_PWAIT, f] = t + BBR2_PROBE_WAIT_BASE + BBR2_PROBE_WAIT_RAND * _rand(rng, b)
                    s[S_RSINCE, f] = 0.0
        s[S_RSTART, f] = t
        s[S_RDELIV, f] = 0.0
        s[S_RLOST, f] = 0.0

    bw = s[S_BW, f]
    bdp = bw * minrtt
    # ---- per-step mode logic ----
    if mode == DRAIN:
        if inflight <= bdp:
            _bbr_enter_probe_bw(s, f, cca, t, rng, b)
    elif mode == PROBE_RTT:
        if t >= s[S_PRTT_DONE, f]:
            s[S_MINRTT_STAMP, f] = t
            if s[S_FULLPIPE, f] > 0.0:
                _bbr_enter_probe_bw(s, f, cca, t, rng, b)
            else:
                s[S_MODE, f] = STARTUP
    elif mode == PROBE_BW:
        if cca == BBR:
            idx = int(s[S_CIDX, f])
            el = t - s[S_CSTART, f]
            adv = el >= minrtt
            if idx == 0 and adv and lost <= 0.0 and inflight < _PROBE_GAINS[0] * bdp:
                adv = False  # keep probing until inflight reaches 1.25 BDP or a loss
            if idx == 0 and el >= BBR_PROBE_UP_MAX_RTTS * minrtt:
                adv = True
            if idx == 1 and inflight <= bdp:
                adv = True
            if adv:
                s[S_CIDX, f] = (idx + 1) % 8
                s[S_CSTART, f] = t
        else:
            ph = int(s[S_CIDX, f])
            if ph == DOWN:
                if inflight <= min(bdp, (1.0 - BBR2_HEADROOM) * s[S_IHI, f]):
                    s[S_CIDX, f] = CRUISE
                    s[S_CSTART, f] = t
            if int(s[S_CIDX, f]) == CRUISE or int(s[S_CIDX, f]) == DOWN:
                rounds_cap = min(BBR2_PROBE_MAX_ROUNDS, bdp / MSS)
                if t >= s[S_PWAIT, f] or s[S_RSINCE, f] >= rounds_cap:
                    # start a new probe cycle: forget the short-term bounds, age bw_hi
                    s[S_CIDX, f] = REFILL
                    s[S_CSTART, f] = t
                    s[S_BWLO, f] = INF
                    s[S_ILO, f] = INF
                    s[S_BWHI_PREV, f] = s[S_BWHI_CUR, f]
                    s[S_BWHI_CUR, f] = 0.0
                    s[S_RSTART, f] = t
                    s[S_RDELIV, f] = 0.0
                    s[S_RLOST, f] = 0.0

    # ---- outputs: pacing rate and inflight cap ----
    mode = int(s[S_MODE, f])
    if cca == BBR:
        if mode == STARTUP:
            gain, cg = BBR_HIGH_GAIN, BBR_HIGH_GAIN
        elif mode == DRAIN:
            gain, cg = BBR_DRAIN_GAIN, BBR_HIGH_GAIN
        elif mode == PROBE_RTT:
            gain, cg = 1.0, BBR_CWND_GAIN
        else:
            gain, cg = _PROBE_GAINS[int(s[S_CIDX, f])], BBR_CWND_GAIN
        s[S_GAIN, f] = gain
        s[S_PACE, f] = gain * bw
        cw = max(cg * bdp, BBR_MIN_CWND)
        if mode == PROBE_RTT:
            cw = BBR_PROBE_RTT_CWND
        s[S_CWND, f] = cw
    else:
        bwe = min(bw, s[S_BWLO, f])
        ph = int(s[S_CIDX, f])
        if mode == STARTUP:
            gain = BBR2_STARTUP_GAIN
        elif mode == DRAIN:
            gain = BBR2_DRAIN_GAIN
        elif mode == PROBE_RTT:
            gain = 1.0
        elif ph == UP:
            gain = BBR2_UP_GAIN
        elif ph == DOWN:
            gain = BBR2_DOWN_GAIN
        else:
            gain = 1.0
        s[S_GAIN, f] = gain
        s[S_PACE, f] = gain * bwe * (1.0 - BBR2_PACING_MARGIN)
        cw = BBR2_CWND_GAIN * bwe * minrtt
        if mode == PROBE_BW and (ph == CRUISE or ph == DOWN):
            cw = min(cw, (1.0 - BBR2_HEADROOM) * s[S_IHI, f])
        else:
            cw = min(cw, s[S_IHI, f])
        cw = min(cw, s[S_ILO, f])
        if mode == PROBE_RTT:
            cw = min(cw, BBR2_PROBE_RTT_CWND_GAIN * bdp)
        s[S_CWND, f] = max(cw, BBR_MIN_CWND)



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


