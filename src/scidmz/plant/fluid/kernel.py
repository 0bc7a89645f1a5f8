"""The numba kernel: advance B instances x F flows through one control period.

One call of :func:`advance_period` integrates one control period for every
instance (``prange`` over the batch; instances never share state, so the
result does not depend on the thread schedule), in sub-steps of ``dt``: fixed,
or adaptive (a fifth of the smallest RTT any flow currently sees, see
constants.DT_RTT_DIVISOR). Each sub-step:

1. Weibull senders start short flows (Table 6 of the MLC paper).
2. Every flow picks its sending rate from its congestion controller:
   window CCAs send cwnd / RTT, BBR paces at gain x bandwidth estimate capped
   by its inflight limit, UDP sends at a constant rate.
3. Campus flows pass the token-bucket shaper (rate u, bucket ``burst``, a
   drop-tail queue of ``u x latency + burst`` bytes, like tc TBF).
4. The bottleneck queue discipline serves the queues (``_serve_queues``: K
   weighted queues, each with its own drop-tail buffer; K = 1 is the plain
   FIFO of the MLC testbed). Within a queue, service and drops are shared
   in proportion to each flow's backlog/arrivals (fluid FIFO). Drop-tail
   queues also have packet-level noise (``_packet_noise_excess``: the link
   idles and drops although the mean queue is between empty and full;
   constants.ARRIVAL_IDC).
5. Each flow's controller reacts to what was delivered (ACK clock) and lost
   (the controllers are in ``cca.py``; codes, the RNG and the cache locator
   shared by both modules in ``common.py``).

Loss feedback: a flow that lost d bytes in a sub-step sees a loss event with
probability 1 - exp(-d / MSS) and reacts one RTT later (constants.py).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ...disciplines.abc import fluid as _abc
from ...disciplines.droptail import fluid as _droptail
from ...disciplines.ffs import fluid as _ffs
from .cca import _bbr_update, _minloss_update, _window_grow, _window_loss
from .common import (
    _FM,
    _NSLOTS,
    BBR,
    BBR2,
    CLASS_DTN,
    CLASS_SHORT,
    CUBIC,
    INF,
    MINLOSS,
    STARTUP,
    UDP,
    _rand,
)
from .constants import (
    ACTIVE_BYTES,
    BBR2_STARTUP_GAIN,
    BBR_HIGH_GAIN,
    DT_MAX,
    DT_MIN,
    DT_RTT_DIVISOR,
    FCT_ONE_WAY_FRACTION,
    INIT_CWND,
    LOSS_FEEDBACK_RTTS,
    MSS,
    RTT_CAMPUS_ALPHA,
    TBF_BURST_TIME,
    TBF_MIN_BURST_PKTS,
)
from .layout import (
    I_DTN_DONE,
    I_DTN_FIRST,
    I_DTN_LASTFIN,
    I_DTN_LEFT,
    I_NEXT_START,
    I_NEXTFID,
    I_PERIODS,
    I_QDC,
    I_QDD,
    I_REC_LOST,
    I_RTTC,
    I_RTTD,
    I_RTTMIN,
    I_T,
    I_TBFQ,
    I_TOKENS,
    I_WAITING,
    IP_ARRIVAL_IDC,
    IP_BURST,
    IP_CAMPUS_BASE,
    IP_CAP,
    IP_DISCIPLINE,
    IP_DT,
    IP_G_MAX,
    IP_G_MIN,
    IP_G_SCALE,
    IP_G_SHAPE,
    IP_LATENCY,
    IP_LINK_BURST,
    IP_NSUB,
    IP_PERIOD,
    IP_Z_MAX,
    IP_Z_MIN,
    IP_Z_SCALE,
    IP_Z_SHAPE,
    NOUT,
    O_ACTIVE,
    O_CAMP_B,
    O_CAMP_L,
    O_CAMP_SENT,
    O_DTN_B,
    O_DTN_L,
    O_DTN_SENT,
    O_QBYTES,
    O_QDC,
    O_QDD,
    O_RTTC,
    O_RTTD,
    O_SHORT_DONE,
    O_TBF_DELAY,
    O_TBF_L,
    O_TBF_OUT,
    P_BASE,
    P_CCA,
    P_CLASS,
    P_QID,
    P_RMAX,
    P_SHAPED,
    P_SIZE,
    P_START,
    P_UDP,
    QP_BUFFER,
    QP_CEIL,
    QP_WEIGHT,
    QS_BYTES,
    QS_NOISE,
    QS_ORPH_CAMP,
    QS_ORPH_DTN,
    QS_ORPH_TBF,
    QS_RATE,
    R_BYTES,
    R_CLASS,
    R_FID,
    R_FINISH,
    R_START,
    S_BW,
    S_BWHI_CUR,
    S_BWHI_PREV,
    S_BWLO,
    S_CIDX,
    S_CSTART,
    S_CWND,
    S_DELIV,
    S_EPOCH,
    S_FID,
    S_FSTART,
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
    S_ON,
    S_PACE,
    S_PBYTES,
    S_PLOST,
    S_PRTT_DONE,
    S_PWAIT,
    S_QB,
    S_RATE,
    S_RDELIV,
    S_RECOV_END,
    S_RI,
    S_RIHOLD,
    S_RLOST,
    S_ROUNDS,
    S_RSINCE,
    S_RSTART,
    S_RTT,
    S_SIZE,
    S_SLOT0,
    S_SSTH,
    S_TB,
    S_TOSEND,
    S_UPCNT,
    S_WMAX,
)


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _weibull(rng, b, shape, scale, lo, hi):
    """Weibull(k, lambda) by inversion, clipped to [lo, hi] (MLC Table 6)."""
    v = scale * (-math.log(_rand(rng, b))) ** (1.0 / shape)
    return min(max(v, lo), hi)


# -- flow start ------------------------------------------------------------------------------
@njit(cache=True, error_model="numpy", fastmath=_FM)
def _start_flow(s, p, f, t, size, fid, rng, b):
    """(Re)initialise flow slot f at time t: slow start from the initial window."""
    s[S_ON, f] = 1.0
    s[S_CWND, f] = INIT_CWND
    s[S_SSTH, f] = INF
    s[S_WMAX, f] = 0.0
    s[S_EPOCH, f] = t
    s[S_K, f] = 0.0
    s[S_LOSS_AT, f] = INF
    s[S_RECOV_END, f] = -INF
    s[S_TOSEND, f] = size
    s[S_DELIV, f] = 0.0
    s[S_PBYTES, f] = 0.0  # the period's delivered-bytes offset starts afresh with the flow
    s[S_SIZE, f] = size
    s[S_FSTART, f] = t
    s[S_FID, f] = fid
    s[S_QB, f] = 0.0
    s[S_TB, f] = 0.0
    base = p[P_BASE, f]
    s[S_RTT, f] = base
    s[S_MINRTT, f] = INF
    s[S_MINRTT_STAMP, f] = t
    s[S_RSTART, f] = t
    s[S_RDELIV, f] = 0.0
    s[S_RLOST, f] = 0.0
    s[S_ROUNDS, f] = 0.0
    cca = int(p[P_CCA, f])
    s[S_RI, f] = 0.0
    s[S_RIHOLD, f] = 0.0
    if cca == MINLOSS:
        s[S_PACE, f] = INIT_CWND / base  # "starting at a low rate" (section IX): one initial window per RTT
    if cca == BBR or cca == BBR2:
        s[S_MODE, f] = STARTUP
        gain = BBR_HIGH_GAIN if cca == BBR else BBR2_STARTUP_GAIN
        s[S_GAIN, f] = gain
        s[S_BW, f] = INIT_CWND / base
        s[S_PACE, f] = gain * INIT_CWND / base
        s[S_FULLBW, f] = 0.0
        s[S_FULLCNT, f] = 0.0
        s[S_FULLPIPE, f] = 0.0
        s[S_CIDX, f] = 0.0
        s[S_CSTART, f] = t
        s[S_PRTT_DONE, f] = INF
        s[S_IHI, f] = INF
        s[S_ILO, f] = INF
        s[S_BWLO, f] = INF
        s[S_PWAIT, f] = INF
        s[S_UPCNT, f] = 1.0
        s[S_BWHI_PREV, f] = 0.0
        s[S_BWHI_CUR, f] = 0.0
        s[S_RSINCE, f] = 0.0
        for j in range(_NSLOTS):
            s[S_SLOT0 + j, f] = 0.0


# -- the bottleneck queue discipline -------------------------------------------------------------
@njit(cache=True, error_model="numpy", fastmath=_FM)
def _serve_queues(demand, weight, cap, served):
    """Work-conserving weighted service of K queues in one sub-step (fluid DRR / WFQ).

    ``demand[k]`` = backlog + arrivals (bytes), ``cap`` = bytes the link sends
    in the sub-step. Queues that want less than their weighted share give the
    rest to the others (water filling). With K = 1 this is the FIFO of the
    testbed. ``qdisc`` selects the discipline (0 = drop-tail queues); later
    disciplines (ABC, FFS) add their drop rules next to ``_droptail``.
    """
    k_n = demand.shape[0]
    for k in range(k_n):
        served[k] = 0.0
    left = cap
    for _ in range(k_n):
        wsum = 0.0
        for k in range(k_n):
            if demand[k] - served[k] > 1e-12:
                wsum += weight[k]
        if wsum <= 0.0 or left <= 1e-12:
            break
        used = 0.0
        for k in range(k_n):
            want = demand[k] - served[k]
            if want > 1e-12:
                give = min(want, left * weight[k] / wsum)
                served[k] += give
                used += give
        left -= used
        if used <= 1e-12:
            break


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _queue_rate(q, k, capacity, weight, wtot, ceil):
    """Drain rate of queue k for its queueing delay: what it was served at in the last sub-step,
    at least its weighted share of the link (with one queue: the link rate), at most its ceiling."""
    return min(max(q[k, QS_RATE], capacity * weight[k] / wtot), ceil[k])


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _queue_seen(q, k):
    """Bytes a packet finds queued: the fluid mean, or the packet-level noise's mean content where
    the fluid queue is emptier than that (a shallow FIFO at a load near 1, ``_packet_noise_relax``)."""
    return max(q[k, QS_BYTES], q[k, QS_NOISE])


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _packet_noise_excess(drift, var, length):
    """Idle service (= extra overflow) per second that packet-level arrival noise adds to a fluid queue.

    Issue 9's mechanism: the kernel's link idled about 1/(K+1) of the time at 0.01-0.1 BDP although
    the senders were not slower on average (reports/mlc/regime). The queue of a K-frame FIFO fed by
    packets is not its mean: between the fluid's sub-steps it random-walks, so the link idles at
    times although the mean queue is not empty, and overflows at times although the mean is below
    the buffer. Diffusion approximation (ours, after Harrison, "Brownian Motion and Stochastic Flow
    Systems", 1985, ch. 5): the content is a Brownian motion with ``drift`` (arrival rate - service
    rate of this sub-step, bytes/s) and variance ``var`` (bytes^2/s), reflected at the empty end
    (the link idles) and at the full end (drops), ``length`` bytes apart (the buffer plus the
    bottleneck's tokens), and taken as stationary at each sub-step's drift. Its lost-service and
    overflow rates are L = d / (e^(2 d length / var) - 1) and U = L + d; the deterministic fluid
    already has max(-d, 0) of idle and max(d, 0) of overflow, so the noise adds
    |d| / (e^(2 |d| length / var) - 1) to both (var / (2 length) at d = 0): as much extra drop as
    extra idle, so the mean queue and every flow's bytes stay conserved. The extra drops are
    isolated packets, so they reach the flows as loss events (Poisson thinning, constants.py).
    """
    if var <= 0.0 or length <= 0.0:
        return 0.0
    ad = abs(drift)
    x = 2.0 * ad * length / var
    if x < 1e-6:
        return var / (2.0 * length)
    if x > 40.0:
        return 0.0
    return ad / math.expm1(x)


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _packet_noise_queue(drift, var, buffer, tokens):
    """Mean bytes queued in the reflected Brownian queue of ``_packet_noise_excess``.

    With the bottleneck's token bucket the content X lives on [-tokens, buffer] (X < 0: saved
    tokens, nothing queued); its stationary density is proportional to e^(theta (x + tokens)),
    theta = 2 drift / var, and this returns E[max(X, 0)] (buffer^2 / (2 length) at drift 0).
    """
    length = buffer + tokens
    if var <= 0.0 or length <= 0.0:
        return 0.0
    th = 2.0 * drift / var
    if abs(th) * length < 1e-6:
        return buffer * buffer / (2.0 * length)
    if th > 0.0:
        # scaled by e^(-theta length) so that nothing overflows
        return (buffer + math.expm1(-th * buffer) / th) / -math.expm1(-th * length)
    e_l = math.exp(th * length)
    e_a = math.exp(th * tokens)
    return (buffer * e_l - (e_l - e_a) / th) / math.expm1(th * length)


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _packet_noise_relax(m, drift, var, rate, dt, buffer, tokens):
    """The noise's mean content after one sub-step: it moves towards the stationary value at the
    current drift (``_packet_noise_queue``) no faster than packets can build or drain it (ours).

    The stationary content is reached only after the noise has had time to spread: a diffusion
    covers a distance x in x^2 / var seconds, so growing to m* takes m*^2 / var; a queue drains
    at the drift when that is negative, or spreads back down diffusively, whichever is faster.
    Without this a deep buffer at a drift near 0 (a standing fluid queue, BBR's small queue in 4
    BDP) would see the stationary content of half its buffer at once, which takes minutes to
    build; with it the shallow buffers, whose m* is a few frames, follow the drift within ms.
    """
    if var <= 0.0:
        # no arrivals: what is queued drains at the link rate
        return max(m - rate * dt, 0.0)
    target = _packet_noise_queue(drift, var, buffer, tokens)
    if target >= m:
        tau = target * target / var
    else:
        tau = min(m * m / var, m / -drift) if drift < 0.0 else m * m / var
    if tau <= 0.0:
        return target
    return target + (m - target) * math.exp(-dt / tau)


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _discipline_admit(kind, dp, dm, ds, df, dw, grp, on, ain, t, dt, cap_rate, q0, buffer, rej, fb):
    if kind == _abc.FLUID_ID:
        return _abc.admit(dp, dm, ds, df, dw, grp, on, ain, t, dt, cap_rate, q0, buffer, MSS, rej, fb)
    if kind == _ffs.FLUID_ID:
        return _ffs.admit(dp, dm, ds, df, dw, grp, on, ain, t, dt, cap_rate, q0, buffer, MSS, rej, fb)
    return 0.0


# -- the period kernel --------------------------------------------------------------------------------
@njit(cache=True, error_model="numpy", fastmath=_FM)
def advance_period_serial(P, S, INST, IP, Q, QP, G, RNG, u, OUT, REC, NREC, n_dtn, short_off, n_send, slots,
                          DP, DM, DS, DF, DW, DG):
    """Same as ``advance_period`` without threads (B = 1, or when threads do not pay)."""
    for b in range(S.shape[0]):
        _advance_one(P[b], S[b], INST[b], IP[b], Q[b], QP[b], G[b], RNG, b, u[b], OUT[b], REC[b], NREC,
                     n_dtn, short_off, n_send, slots, DP[b], DM[b], DS[b], DF[b], DW[b], DG[b])


@njit(cache=True, parallel=True, error_model="numpy", fastmath=_FM)
def advance_period(P, S, INST, IP, Q, QP, G, RNG, u, OUT, REC, NREC, n_dtn, short_off, n_send, slots,
                   DP, DM, DS, DF, DW, DG):
    """Advance every instance by one control period; results go to OUT/REC/NREC."""
    B = S.shape[0]
    for b in prange(B):
        _advance_one(P[b], S[b], INST[b], IP[b], Q[b], QP[b], G[b], RNG, b, u[b], OUT[b], REC[b], NREC,
                     n_dtn, short_off, n_send, slots, DP[b], DM[b], DS[b], DF[b], DW[b], DG[b])


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _advance_one(p, s, inst, ip, q, qp, g, rng, b, u_bits, out, rec, nrec, n_dtn, short_off, n_send, slots,
                 dp, dm, ds, df, dw, dg):
    F = s.shape[1]
    K = q.shape[0]
    fixed_dt = ip[IP_DT]
    nsub = int(ip[IP_NSUB])
    period = ip[IP_PERIOD]
    t_end = (inst[I_PERIODS] + 1.0) * period
    u = u_bits / 8.0
    burst = ip[IP_BURST]
    if burst <= 0.0:
        burst = max(u * TBF_BURST_TIME, TBF_MIN_BURST_PKTS * MSS)
    limit = u * ip[IP_LATENCY] + burst
    # a new rate may come with a smaller bucket: tokens never exceed it (tc change resets them)
    inst[I_TOKENS] = min(inst[I_TOKENS], burst)
    qdisc = int(ip[IP_DISCIPLINE])
    # packet-level noise in every drop-tail queue: the testbed's single FIFO and each Jenks queue (at
    # its ceiling, or the link rate when it borrows). Not behind ABC/FFS (ours): their fluid cores
    # decide on the mean queue, and the noise's drops, which land by arrival share, broke ABC's
    # per-user fairness in tests/test_disciplines_fluid.py (0.74-0.80 of the link to the 4-8 flow
    # user instead of 0.4-0.6), which the kernel's ABC runs do not show.
    idc = ip[IP_ARRIVAL_IDC] if qdisc == 0 else 0.0
    dt = fixed_dt if fixed_dt > 0.0 else DT_MIN
    inv_dt = 1.0 / dt
    for j in range(NOUT):
        out[j] = 0.0
    nrec[b] = 0
    for f in range(F):
        # delivered this period = S_DELIV(end) - S_DELIV(start), kept as an offset
        s[S_PBYTES, f] = -s[S_DELIV, f]
        s[S_PLOST, f] = 0.0
    rlo = (0, n_dtn, short_off)
    rhi = (n_dtn, short_off, F)
    a = np.zeros(F)  # bytes each flow sends in the sub-step
    qa = np.empty(K)  # bytes arriving at each bottleneck queue
    tbd = np.empty(K)  # shaper backlog + arrivals bound for each queue
    qd = np.empty(K)
    qdel = np.empty(K)
    served = np.empty(K)
    qdrop = np.empty(K)
    sfrac = np.empty(K)
    dfrac = np.empty(K)
    weight = np.empty(K)
    ceil = np.empty(K)
    qdc = np.empty(K)
    rej = np.zeros(F)
    ain_f = np.zeros(F)
    wtot = 0.0
    for k in range(K):
        weight[k] = qp[k, QP_WEIGHT]
        ceil[k] = qp[k, QP_CEIL]
        wtot += weight[k]
    t = inst[I_T]
    rttd_sum = 0.0
    rttd_time = 0.0
    rttc_sum = 0.0
    rttc_time = 0.0
    qdd_w = 0.0
    qdd_sum = 0.0
    qdc_w = 0.0
    qdc_sum = 0.0
    tbf_delay_sum = 0.0
    qbytes_sum = 0.0
    dtn_b = 0.0
    camp_b = 0.0
    dtn_l = 0.0
    camp_l = 0.0
    dtn_sent = 0.0
    camp_sent = 0.0
    step = 0
    while True:
        if fixed_dt > 0.0:
            if step == nsub:
                break
            if step == nsub - 1:
                dt = t_end - t  # absorb rounding so the period ends exactly at t_end
        else:
            left = t_end - t
            if left <= 1e-9 * period:
                break
            dt = min(max(inst[I_RTTMIN] / DT_RTT_DIVISOR, DT_MIN), DT_MAX)
            if dt >= left * 0.8:
                dt = left  # no sliver of a step at the end of the period
        step += 1
        inv_dt = 1.0 / dt
        cap = ip[IP_CAP] * dt
        # ---- 1. long flows that start now; Weibull short-flow arrivals ----
        if t >= inst[I_NEXT_START]:
            nxt = INF
            for f in range(short_off):
                if s[S_FSTART, f] < 0.0:
                    if t >= p[P_START, f]:
                        _start_flow(s, p, f, t, p[P_SIZE, f], f, rng, b)
                        if f < n_dtn and inst[I_DTN_FIRST] == INF:
                            inst[I_DTN_FIRST] = t
                    elif p[P_START, f] < nxt:
                        nxt = p[P_START, f]
            inst[I_NEXT_START] = nxt
        for gi in range(n_send):
            while g[gi, 0] <= t:
                g[gi, 1] += 1.0
                g[gi, 0] += _weibull(rng, b, ip[IP_G_SHAPE], ip[IP_G_SCALE], ip[IP_G_MIN], ip[IP_G_MAX])
            if g[gi, 1] > 0.0:
                base_f = short_off + gi * slots
                for f in range(base_f, base_f + slots):
                    if g[gi, 1] <= 0.0:
                        break
                    if s[S_ON, f] == 0.0:
                        size = _weibull(rng, b, ip[IP_Z_SHAPE], ip[IP_Z_SCALE], ip[IP_Z_MIN], ip[IP_Z_MAX])
                        _start_flow(s, p, f, t, size, inst[I_NEXTFID], rng, b)
                        inst[I_NEXTFID] += 1.0
                        g[gi, 1] -= 1.0
        # ---- 2. queue delays and sending rates ----
        # Flows come in three ranges (DTN, campus/UDP/[[flows]], short-flow slots); a range
        # shares its class. CCA and shaper are per flow (set_ccas, [[flows]] entries).
        for k in range(K):
            qdel[k] = _queue_seen(q, k) / _queue_rate(q, k, ip[IP_CAP], weight, wtot, ceil)
            qa[k] = 0.0
            tbd[k] = q[k, QS_ORPH_TBF]
        tbfq = inst[I_TBFQ]
        tbf_delay = tbfq / u if u > 0.0 else (ip[IP_LATENCY] if tbfq > 0.0 else 0.0)
        a_tbf = 0.0
        rtt_min = INF
        for r in range(3):
            lo, hi = rlo[r], rhi[r]
            if lo >= hi:
                continue
            for f in range(lo, hi):
                if s[S_ON, f] == 0.0:
                    a[f] = 0.0
                    continue
                cca = int(p[P_CCA, f])
                shaped = p[P_SHAPED, f] > 0.0
                extra = tbf_delay if shaped else 0.0
                k = int(p[P_QID, f])
                rtt = p[P_BASE, f] + qdel[k] + extra
                if rtt < rtt_min:
                    rtt_min = rtt
                if cca == UDP:
                    x = p[P_UDP, f] * 0.125
                elif cca == MINLOSS:
                    x = s[S_PACE, f]  # a leaky bucket at the learned rate: exact pacing in a fluid
                elif cca <= CUBIC:
                    x = s[S_CWND, f] / rtt
                else:
                    # BBR paces; its inflight cap (cwnd) binds through the ACK clock
                    x = min(s[S_PACE, f], s[S_CWND, f] / rtt)
                if x > p[P_RMAX, f]:
                    x = p[P_RMAX, f]
                sent = x * dt
                tosend = s[S_TOSEND, f]
                if sent > tosend:
                    sent = tosend if tosend > 0.0 else 0.0
                s[S_TOSEND, f] = tosend - sent
                a[f] = sent
                if shaped:
                    a_tbf += sent
                    tbd[k] += sent + s[S_TB, f]
                else:
                    qa[k] += sent
        inst[I_RTTMIN] = rtt_min
        # ---- 3. token-bucket shaper (campus egress) ----
        # the bucket refills continuously during the sub-step, so u is reachable even
        # when burst < u * dt; only what is left over is capped at the bucket size
        allowance = inst[I_TOKENS] + u * dt
        avail = tbfq + a_tbf
        t_out = min(avail, allowance)
        tokens = min(allowance - t_out, burst)
        rem = avail - t_out
        t_drop = rem - limit if rem > limit else 0.0
        inst[I_TOKENS] = tokens
        inst[I_TBFQ] = rem - t_drop
        out[O_TBF_L] += t_drop
        out[O_TBF_OUT] += t_out
        tbf_delay_sum += tbf_delay * dt
        out_frac = t_out / avail if avail > 0.0 else 0.0
        drop_frac = t_drop / a_tbf if a_tbf > 0.0 else 0.0
        # ---- 4. bottleneck: weighted service, drop-tail per queue ----
        for k in range(K):
            qa[k] += tbd[k] * out_frac
        if qdisc != 0:
            # K = 1 (FluidPlant.set_discipline): the discipline decides in front of the FIFO
            for f in range(F):
                ain_f[f] = 0.0
                if s[S_ON, f] > 0.0:
                    ain_f[f] = (s[S_TB, f] + a[f]) * out_frac if p[P_SHAPED, f] > 0.0 else a[f]
            qa[0] -= _discipline_admit(qdisc, dp, dm, ds, df, dw, dg, s[S_ON], ain_f, t, dt, ip[IP_CAP],
                                       q[0, QS_BYTES], qp[0, QP_BUFFER], rej, s[S_RI])
            if qa[0] < 0.0:
                qa[0] = 0.0
        for k in range(K):
            qd[k] = q[k, QS_BYTES] + qa[k]
            # A ceiling caps what the queue may send this sub-step (no borrowing).
            qdc[k] = min(qd[k], ceil[k] * dt)
        _serve_queues(qdc, weight, cap, served)
        qtot = 0.0
        for k in range(K):
            nq = qd[k] - served[k]
            qdrop[k] = _droptail.overflow(nq, qp[k, QP_BUFFER])
            q[k, QS_BYTES] = nq - qdrop[k]
            if idc > 0.0:
                rate_k = min(ip[IP_CAP], ceil[k])
                lam = qa[k] * inv_dt
                drift = lam - rate_k
                var = idc * lam * MSS
                # tokens the bottleneck saves while idle act as buffer
                ex = _packet_noise_excess(drift, var, qp[k, QP_BUFFER] + ip[IP_LINK_BURST]) * dt
                ex = min(ex, served[k], qa[k] - qdrop[k])
                if ex > 0.0:
                    served[k] -= ex
                    qdrop[k] += ex
                q[k, QS_NOISE] = _packet_noise_relax(q[k, QS_NOISE], drift, var, rate_k, dt,
                                                     qp[k, QP_BUFFER], ip[IP_LINK_BURST])
            q[k, QS_RATE] = served[k] * inv_dt
            qtot += _queue_seen(q, k)
            sfrac[k] = served[k] / qd[k] if qd[k] > 0.0 else 0.0
            dfrac[k] = qdrop[k] / qa[k] if qa[k] > 0.0 else 0.0
            # bytes of finished flows still queued: served like everyone else's
            mv = q[k, QS_ORPH_TBF] * out_frac
            q[k, QS_ORPH_TBF] -= mv
            ocd = q[k, QS_ORPH_DTN] * sfrac[k]
            q[k, QS_ORPH_DTN] -= ocd
            dem = q[k, QS_ORPH_CAMP] + mv
            occ = dem * sfrac[k]
            odr = mv * dfrac[k]
            q[k, QS_ORPH_CAMP] = max(dem - occ - odr, 0.0)
            dtn_b += ocd
            camp_b += occ
            camp_l += odr
        qbytes_sum += qtot * dt
        # ---- 5. per-flow delivery, loss detection and controller update ----
        n_dtn_on = 0
        n_camp_on = 0
        rttd_step = 0.0
        rttc_step = 0.0
        for r in range(3):
            lo, hi = rlo[r], rhi[r]
            if lo >= hi:
                continue
            cls = int(p[P_CLASS, lo])
            is_dtn = cls == CLASS_DTN
            r_b = 0.0
            r_l = 0.0
            r_sent = 0.0
            r_n = 0
            r_rtt = 0.0
            r_qd = 0.0
            r_w = 0.0
            for f in range(lo, hi):
                if s[S_ON, f] == 0.0:
                    continue
                cca = int(p[P_CCA, f])
                shaped = p[P_SHAPED, f] > 0.0
                extra = tbf_delay if shaped else 0.0
                k = int(p[P_QID, f])
                base = p[P_BASE, f]
                af = a[f]
                lost = 0.0
                tb = 0.0
                if shaped:
                    tb = s[S_TB, f]
                    dem = tb + af
                    ain = dem * out_frac
                    lost = af * drop_frac
                    tb = dem - ain - lost
                    if tb < 0.0:
                        tb = 0.0
                    s[S_TB, f] = tb
                else:
                    ain = af
                qb = s[S_QB, f]
                rj = 0.0
                if qdisc != 0:
                    rj = ain * rej[f]  # the discipline's rejections are this flow's losses
                    ain -= rj
                dem = qb + ain
                o = 0.0
                if rj > 0.0:
                    lost += rj
                    r_l += rj
                if dem > 0.0:
                    o = dem * sfrac[k]
                    d = ain * dfrac[k]
                    qb = dem - o - d
                    if qb < 0.0:
                        qb = 0.0
                    s[S_QB, f] = qb
                    lost += d
                    r_l += d
                meas_rtt = base + qdel[k]  # what a tap at the bottleneck sees (no shaper queue)
                rtt = meas_rtt + extra  # what the sender sees
                deliv = s[S_DELIV, f] + o
                s[S_DELIV, f] = deliv
                r_b += o
                r_sent += af
                if ain > 0.0:  # the tap only sees flows whose packets reach the bottleneck
                    r_n += 1
                    r_rtt += meas_rtt
                    r_qd += ain * qdel[k]
                    r_w += ain
                if lost > 0.0:
                    s[S_PLOST, f] += lost
                    s[S_TOSEND, f] += lost  # to be retransmitted
                if cca <= CUBIC:
                    minrtt = s[S_MINRTT, f]
                    if rtt < minrtt:
                        minrtt = rtt
                        s[S_MINRTT, f] = rtt
                    loss_at = s[S_LOSS_AT, f]
                    if lost > 0.0 and loss_at == INF and t >= s[S_RECOV_END, f]:
                        if _rand(rng, b) < 1.0 - math.exp(-lost / MSS):
                            loss_at = t + LOSS_FEEDBACK_RTTS * rtt
                            s[S_LOSS_AT, f] = loss_at
                            s[S_RECOV_END, f] = INF
                    if t >= loss_at:
                        _window_loss(s, f, cca, t, rtt)
                    elif o > 0.0:
                        s[S_CWND, f] = _window_grow(cca, t, o, rtt, s[S_CWND, f], s[S_SSTH, f], minrtt, s, f)
                elif cca == MINLOSS:
                    _minloss_update(s, f, t, rtt)
                elif cca != UDP:
                    infl = af * inv_dt * base + qb + tb
                    _bbr_update(s, f, cca, t, dt, o, lost, rtt, infl, rng, b)
                # ---- completion of finite flows ----
                size = s[S_SIZE, f]
                if size < INF and s[S_TOSEND, f] <= 1e-6:
                    # all sent, nothing lost: the last byte leaves the FIFOs after their delay
                    fin = t + dt + FCT_ONE_WAY_FRACTION * base + _queue_seen(q, k) / _queue_rate(q, k, ip[IP_CAP], weight, wtot, ceil)
                    if shaped and u > 0.0:
                        fin += inst[I_TBFQ] / u
                    n = nrec[b]
                    if n < rec.shape[0]:
                        rec[n, R_CLASS] = cls
                        rec[n, R_FID] = s[S_FID, f]
                        rec[n, R_START] = s[S_FSTART, f]
                        rec[n, R_FINISH] = fin
                        rec[n, R_BYTES] = size
                        nrec[b] = n + 1
                    else:
                        inst[I_REC_LOST] += 1.0
                    # S_PBYTES holds -(delivered at period start); see the period end
                    if s[S_PBYTES, f] + deliv + qb + tb >= ACTIVE_BYTES:
                        out[O_ACTIVE] += 1.0
                    s[S_PBYTES, f] = -deliv
                    q[k, QS_ORPH_DTN if is_dtn else QS_ORPH_CAMP] += qb
                    q[k, QS_ORPH_TBF] += tb
                    s[S_QB, f] = 0.0
                    s[S_TB, f] = 0.0
                    s[S_ON, f] = 0.0
                    s[S_RTT, f] = rtt
                    if cls == CLASS_SHORT:
                        out[O_SHORT_DONE] += 1.0
                    if is_dtn:
                        inst[I_DTN_LEFT] -= 1.0
                        inst[I_DTN_LASTFIN] = max(inst[I_DTN_LASTFIN], fin)
                        if inst[I_DTN_LEFT] <= 0.0:
                            inst[I_DTN_DONE] = inst[I_DTN_LASTFIN]
            if is_dtn:
                dtn_b += r_b
                dtn_l += r_l
                dtn_sent += r_sent
                n_dtn_on += r_n
                rttd_step += r_rtt
                qdd_sum += r_qd
                qdd_w += r_w
            else:
                camp_b += r_b
                camp_l += r_l
                camp_sent += r_sent
                n_camp_on += r_n
                rttc_step += r_rtt
                qdc_sum += r_qd
                qdc_w += r_w
        # ---- measurements of this sub-step ----
        if n_dtn_on > 0:
            rttd_sum += rttd_step / n_dtn_on * dt
            rttd_time += dt
        if n_camp_on > 0:
            rttc_sum += rttc_step / n_camp_on * dt
            rttc_time += dt
        t += dt
    inst[I_PERIODS] += 1.0
    inst[I_T] = inst[I_PERIODS] * period
    out[O_DTN_B] = dtn_b
    out[O_CAMP_B] = camp_b
    out[O_DTN_L] = dtn_l
    out[O_CAMP_L] = camp_l
    out[O_DTN_SENT] = dtn_sent
    out[O_CAMP_SENT] = camp_sent
    # ---- the seven Table 3 variables (and ground truth) for this period ----
    if rttd_time > 0.0:
        inst[I_RTTD] = rttd_sum / rttd_time
    out[O_RTTD] = inst[I_RTTD]
    if rttc_time > 0.0:
        avg = rttc_sum / rttc_time
        if inst[I_RTTC] < 0.0:
            inst[I_RTTC] = avg
        else:
            inst[I_RTTC] = RTT_CAMPUS_ALPHA * inst[I_RTTC] + (1.0 - RTT_CAMPUS_ALPHA) * avg
    out[O_RTTC] = inst[I_RTTC] if inst[I_RTTC] >= 0.0 else ip[IP_CAMPUS_BASE]
    if qdd_w > 0.0:
        inst[I_QDD] = qdd_sum / qdd_w
    if qdc_w > 0.0:
        inst[I_QDC] = qdc_sum / qdc_w
    out[O_QDD] = inst[I_QDD]
    out[O_QDC] = inst[I_QDC]
    out[O_TBF_DELAY] = tbf_delay_sum / period
    out[O_QBYTES] = qbytes_sum / period
    for f in range(F):
        s[S_PBYTES, f] += s[S_DELIV, f]
        if s[S_PBYTES, f] >= ACTIVE_BYTES:
            out[O_ACTIVE] += 1.0
        if s[S_ON, f] > 0.0:
            k = int(p[P_QID, f])
            s[S_RATE, f] = a[f] * inv_dt
            s[S_RTT, f] = p[P_BASE, f] + _queue_seen(q, k) / _queue_rate(q, k, ip[IP_CAP], weight, wtot, ceil)
            if p[P_SHAPED, f] > 0.0:
                s[S_RTT, f] += inst[I_TBFQ] / u if u > 0.0 else 0.0
        else:
            s[S_RATE, f] = 0.0
    w = 0.0
    for gi in range(n_send):
        w += g[gi, 1]
    inst[I_WAITING] = w
