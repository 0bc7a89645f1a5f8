"""The numba kernel: advance B instances x F flows through one control period.

One call of :func:`advance_period` integrates one control period for every
instance (``prange`` over the batch; instances never share state, so the
result does not depend on the thread schedule). :func:`_advance_one` takes one
instance through the period in sub-steps of ``dt`` (``_next_dt``: fixed, or a
fifth of the smallest RTT any flow currently sees, constants.DT_RTT_DIVISOR),
each made of the stages of docs/fluid_model.md "Time stepping":

1. ``_start_flows``: long flows start at their time; Weibull senders start
   short flows (Table 6 of the MLC paper).
2. ``_send``: every flow sends at the rate its congestion controller sets
   (``_sending_rate``: window CCAs cwnd / RTT, BBR paces at gain x bandwidth
   estimate capped by its inflight limit, UDP at a constant rate).
3. ``_shape``: campus flows pass the token-bucket shaper (rate u, bucket
   ``burst``, a drop-tail queue of ``u x latency + burst`` bytes, like tc TBF).
4. ``_arrive``: a bottleneck discipline (``scidmz.disciplines``, via
   ``_discipline_admit``) may reject bytes in front of the FIFO; ``_serve``:
   the queues are served (``_serve_queues``: K weighted queues, each with its
   own drop-tail buffer; K = 1 is the plain FIFO of the MLC testbed). Within a
   queue, service and drops are shared in proportion to each flow's
   backlog/arrivals (fluid FIFO). Every queue also has packet-level noise
   (``_packet_noise``: the link idles and drops although the mean queue is
   between empty and where dropping starts; constants.ARRIVAL_IDC): the FIFO,
   each HTB leaf of a queue policy (idle service lent to the other leaves,
   ``_lend``), the FIFO behind a discipline (which may book the extra drops as
   its own, ``_noise_drop``).
5. ``_deliver``, class by class: each flow's delivered and lost bytes and the
   taps' samples (``_account_range``) drive its controller (``_react_range``;
   the controllers are in ``cca.py``; codes, the RNG and the cache locator
   shared by both modules in ``common.py``); finished flows are recorded
   (``_complete``).

``_report`` turns the period's sums into the seven Table 3 variables. The
stages are ``inline="always"``: numba compiles them into one function, which
runs without reference counting (``_advance_one`` says why), and the per-flow
helpers take numbers, not arrays (``_shaper_share``) -- so the divided loop is
as fast as the undivided one was, or faster. Fast-math ``reassoc`` lets LLVM order a sum by where its
terms are defined, so moving code between stages can move a result in its last
bits (splitting the loop did so for BBRv2, ~1e-16 relative);
``tests/test_trace_hash.py`` pins the results to 7 digits.

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
from .cca import (
    S_STALL_END,
    S_STALL_KIND,
    S_STALL_W,
    S_WEST,
    _bbr_update,
    _flight_lost,
    _minloss_update,
    _stalled,
    _window_grow,
    _window_loss,
)
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
    if cca <= CUBIC:
        s[S_STALL_W, f] = 0.0
        s[S_STALL_END, f] = -INF
        s[S_STALL_KIND, f] = -1.0
        s[S_WEST, f] = 0.0
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
    testbed.
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

    The mechanism: the kernel's link idled about 1/(K+1) of the time at 0.01-0.1 BDP although
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


# -- the bottleneck discipline in front of the FIFO (scidmz.disciplines.<name>.fluid) ----------------
@njit(cache=True, error_model="numpy", fastmath=_FM)
def _discipline_admit(kind, dp, dm, ds, df, dw, grp, on, ain, t, dt, cap_rate, q0, buffer, rej, fb):
    """Bytes the discipline ``kind`` rejects of the flows' arrivals ``ain`` this sub-step (``rej``: per flow).

    numba calls only functions it sees when it compiles, so this is a static
    switch on the fluid ids of ``scidmz.disciplines.registry``: one ``if`` per
    discipline, calling that discipline's ``fluid.admit`` (its contract:
    ``scidmz.disciplines.base``). Drop-tail has nothing in front of its FIFO and
    never gets here.
    """
    if kind == _abc.FLUID_ID:
        return _abc.admit(dp, dm, ds, df, dw, grp, on, ain, t, dt, cap_rate, q0, buffer, MSS, rej, fb)
    if kind == _ffs.FLUID_ID:
        return _ffs.admit(dp, dm, ds, df, dw, grp, on, ain, t, dt, cap_rate, q0, buffer, MSS, rej, fb)
    return 0.0


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _noise_edge(kind, dp, dw, buffer):
    """Queue length (bytes) at which the bottleneck starts dropping: drop-tail's buffer, or the
    discipline's ``noise_edge`` (``scidmz.disciplines.base``); -1 for a discipline without the noise
    hooks, whose queue then has no packet noise (``FluidPlant.noise_covers`` says so)."""
    if kind == _droptail.FLUID_ID:
        return _droptail.noise_edge(dp, dw, buffer)
    if kind == _abc.FLUID_ID:
        return _abc.noise_edge(dp, dw, buffer)
    if kind == _ffs.FLUID_ID:
        return _ffs.noise_edge(dp, dw, buffer)
    return -1.0


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _noise_drop(kind, dw, grp, ain, rej, extra):
    """Bytes of the noise's ``extra`` overflow the discipline books as its own drops (``noise_drop``);
    the FIFO drops the rest by arrivals, as drop-tail does all of it."""
    if kind == _abc.FLUID_ID:
        return _abc.noise_drop(dw, grp, ain, rej, extra, MSS)
    if kind == _ffs.FLUID_ID:
        return _ffs.noise_drop(dw, grp, ain, rej, extra, MSS)
    return 0.0


# -- the period kernel: one instance through one period, stage by stage (docs/fluid_model.md) ----------
# The period's measurement sums (time- or byte-weighted), reduced to y at its end.
M_RTTD, M_RTTD_T, M_RTTC, M_RTTC_T, M_QDD, M_QDD_W, M_QDC, M_QDC_W = range(8)
NM = 8
# Per flow and sub-step, what the controllers see (rows of ``fl``, _account_range -> _react_range).
FL_O, FL_LOST, FL_RTT, FL_QB, FL_TB = range(5)
NFL = 5
# One period's scratch, allocated by advance_period* (_advance_one allocates nothing): per flow, the
# bytes it sends, of which arrive at the bottleneck, the fraction the discipline rejects, then the
# rows of ``fl``; per queue, the rows named in _advance_one.
FW_SENT, FW_AIN, FW_REJ, FW_FL = 0, 1, 2, 3
NFW = FW_FL + NFL
QW_A, QW_TBD, QW_D, QW_DC, QW_DEL, QW_SERVED, QW_DROP, QW_SFRAC, QW_DFRAC, QW_WEIGHT, QW_CEIL, QW_PACED, QW_IDLE = range(13)
NQW = 13


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _scratch(F, K):
    """(per-flow, per-queue, measurement) scratch of one period for one instance."""
    return np.zeros((NFW, F)), np.zeros((NQW, K)), np.zeros(NM)


@njit(cache=True, error_model="numpy", fastmath=_FM)
def advance_period_serial(P, S, INST, IP, Q, QP, G, RNG, u, OUT, REC, NREC, n_dtn, short_off, n_send, slots,
                          DP, DM, DS, DF, DW, DG):
    """Same as ``advance_period`` without threads (B = 1, or when threads do not pay)."""
    for b in range(S.shape[0]):
        fw, qw, ms = _scratch(S.shape[2], Q.shape[1])
        _advance_one(P[b], S[b], INST[b], IP[b], Q[b], QP[b], G[b], RNG, b, u[b], OUT[b], REC[b], NREC,
                     n_dtn, short_off, n_send, slots, DP[b], DM[b], DS[b], DF[b], DW[b], DG[b], fw, qw, ms)


@njit(cache=True, parallel=True, error_model="numpy", fastmath=_FM)
def advance_period(P, S, INST, IP, Q, QP, G, RNG, u, OUT, REC, NREC, n_dtn, short_off, n_send, slots,
                   DP, DM, DS, DF, DW, DG):
    """Advance every instance by one control period; results go to OUT/REC/NREC."""
    B = S.shape[0]
    for b in prange(B):
        fw, qw, ms = _scratch(S.shape[2], Q.shape[1])
        _advance_one(P[b], S[b], INST[b], IP[b], Q[b], QP[b], G[b], RNG, b, u[b], OUT[b], REC[b], NREC,
                     n_dtn, short_off, n_send, slots, DP[b], DM[b], DS[b], DF[b], DW[b], DG[b], fw, qw, ms)


@njit(cache=True, error_model="numpy", fastmath=_FM, _nrt=False)
def _advance_one(p, s, inst, ip, q, qp, g, rng, b, u_bits, out, rec, nrec, n_dtn, short_off, n_send, slots,
                 dp, dm, ds, df, dw, dg, fw, qw, ms):
    """One instance through one control period: the sub-steps of docs/fluid_model.md "Time stepping".

    Compiled without numba's reference counting (``_nrt=False``): numba would incref and decref
    every array each inlined stage receives, every sub-step -- 20 % more CPU on small-cubic than the
    undivided loop. Without it, this function may not allocate (numba refuses to compile that), so
    its scratch ``fw``, ``qw``, ``ms`` comes from ``_scratch``; every array it sees is owned by its
    caller, which outlives the call.
    """
    period = ip[IP_PERIOD]
    t_end = (inst[I_PERIODS] + 1.0) * period
    u = u_bits / 8.0
    burst, limit = _shaper_bucket(ip, inst, u)
    kind = int(ip[IP_DISCIPLINE])
    # packet-level noise in every queue any policy makes: the single FIFO, each HTB leaf of a
    # queue policy, the FIFO behind a discipline, each with its own edge and drops (_packet_noise)
    idc = ip[IP_ARRIVAL_IDC]
    _period_start(s, out, nrec, b)
    a = fw[FW_SENT]  # bytes each flow sends in the sub-step
    ain = fw[FW_AIN]  # ... of which arrive at the bottleneck (after the shaper)
    rej = fw[FW_REJ]  # the fraction of them the discipline in front of the FIFO rejects
    fl = fw[FW_FL:]  # what each flow's controller sees
    qa = qw[QW_A]  # bytes arriving at each bottleneck queue
    tbd = qw[QW_TBD]  # shaper backlog + arrivals bound for each queue
    qd = qw[QW_D]  # backlog + arrivals of each queue
    qdc = qw[QW_DC]  # ... capped by its ceiling
    qdel = qw[QW_DEL]  # queueing delay a packet meets in each queue
    served = qw[QW_SERVED]
    qdrop = qw[QW_DROP]
    sfrac = qw[QW_SFRAC]  # fraction of backlog + arrivals served
    dfrac = qw[QW_DFRAC]  # fraction of arrivals dropped
    weight = qw[QW_WEIGHT]
    ceil = qw[QW_CEIL]
    paced = qw[QW_PACED]  # ... of which paced flows sent (their arrivals are not bursty)
    idle = qw[QW_IDLE]  # service each queue's packet noise left unused in the sub-step
    wtot = _queue_params(qp, weight, ceil)
    t = inst[I_T]
    dt = ip[IP_DT] if ip[IP_DT] > 0.0 else DT_MIN
    inv_dt = 1.0 / dt
    step = 0
    while True:
        dt = _next_dt(ip, inst, t, t_end, step, dt)
        if dt <= 0.0:
            break
        step += 1
        inv_dt = 1.0 / dt
        _start_flows(p, s, inst, ip, g, rng, b, t, n_dtn, short_off, n_send, slots)
        a_tbf, tbf_delay = _send(p, s, inst, ip, q, dt, u, a, qa, tbd, paced, qdel, weight, wtot, ceil)
        out_frac, drop_frac = _shape(inst, out, u, dt, burst, limit, a_tbf)
        out[O_TBF_DELAY] += tbf_delay * dt
        _arrive(p, s, ip, q, qp, t, dt, kind, out_frac, a, ain, rej, qa, tbd, dp, dm, ds, df, dw, dg)
        _serve(q, qp, ip, dt, inv_dt, idc, out_frac, qa, qd, qdc, served, qdrop, sfrac, dfrac, weight, wtot, ceil,
               paced, idle, kind, dp, dw, dg, ain, rej, out)
        _deliver(p, s, inst, ip, q, rng, b, t, dt, inv_dt, u, tbf_delay, out_frac, drop_frac, kind, a, rej,
                 qdel, sfrac, dfrac, weight, wtot, ceil, rec, nrec, out, ms, fl, n_dtn, short_off)
        t += dt
    _report(p, s, inst, ip, q, out, ms, a, period, inv_dt, u, weight, wtot, ceil)
    w = 0.0
    for gi in range(n_send):
        w += g[gi, 1]
    inst[I_WAITING] = w


# -- period set-up ----------------------------------------------------------------------------------
@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _shaper_bucket(ip, inst, u):
    """The shaper's bucket and queue limit at rate u (bytes/s), like tc TBF; returns (burst, limit)."""
    burst = ip[IP_BURST]
    if burst <= 0.0:
        burst = max(u * TBF_BURST_TIME, TBF_MIN_BURST_PKTS * MSS)
    limit = u * ip[IP_LATENCY] + burst
    # a new rate may come with a smaller bucket: tokens never exceed it (tc change resets them)
    inst[I_TOKENS] = min(inst[I_TOKENS], burst)
    return burst, limit


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _period_start(s, out, nrec, b):
    """Zero the period's results; each flow's delivered bytes are counted from here."""
    for j in range(NOUT):
        out[j] = 0.0
    nrec[b] = 0
    for f in range(s.shape[1]):
        # delivered this period = S_DELIV(end) - S_DELIV(start), kept as an offset
        s[S_PBYTES, f] = -s[S_DELIV, f]
        s[S_PLOST, f] = 0.0


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _queue_params(qp, weight, ceil):
    """Each bottleneck queue's service weight and ceiling; returns the weights' sum."""
    wtot = 0.0
    for k in range(qp.shape[0]):
        weight[k] = qp[k, QP_WEIGHT]
        ceil[k] = qp[k, QP_CEIL]
        wtot += weight[k]
    return wtot


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _next_dt(ip, inst, t, t_end, step, dt):
    """The next sub-step: fixed (the last one ends the period exactly), or a fifth of the smallest
    RTT any flow saw in the last one, clipped (constants.DT_RTT_DIVISOR); 0 once the period is done."""
    if ip[IP_DT] > 0.0:
        nsub = int(ip[IP_NSUB])
        if step == nsub:
            return 0.0
        return t_end - t if step == nsub - 1 else dt
    left = t_end - t
    if left <= 1e-9 * ip[IP_PERIOD]:
        return 0.0
    dt = min(max(inst[I_RTTMIN] / DT_RTT_DIVISOR, DT_MIN), DT_MAX)
    return left if dt >= left * 0.8 else dt  # no sliver of a step at the end of the period


# -- 1. long flows that start now; Weibull short-flow arrivals -------------------------------------
@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _start_flows(p, s, inst, ip, g, rng, b, t, n_dtn, short_off, n_send, slots):
    """Long flows start at their start time; each Weibull sender starts flows in its free slots."""
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


# -- 2. sending rates ------------------------------------------------------------------------------
@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _sending_rate(cca, cwnd, pace, udp_bps, rmax, rtt):
    """Bytes/s a flow sends now: window CCAs cwnd / RTT, BBR its pacing rate capped by its inflight
    limit through the ACK clock, minloss its learned rate, UDP its constant rate; at most ``rmax``."""
    if cca == UDP:
        x = udp_bps * 0.125
    elif cca == MINLOSS:
        x = pace  # a leaky bucket at the learned rate: exact pacing in a fluid
    elif cca <= CUBIC:
        x = cwnd / rtt
    else:
        x = min(pace, cwnd / rtt)
    if x > rmax:
        x = rmax
    return x


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _send(p, s, inst, ip, q, dt, u, a, qa, tbd, paced, qdel, weight, wtot, ceil):
    """Each flow's bytes of the sub-step -> ``a``; unshaped ones arrive at their queue (``qa``; those of
    paced flows also in ``paced``), shaped ones at the shaper (``tbd``, with its backlog). Returns
    (bytes into the shaper, its delay)."""
    for k in range(q.shape[0]):
        qdel[k] = _queue_seen(q, k) / _queue_rate(q, k, ip[IP_CAP], weight, wtot, ceil)
        qa[k] = 0.0
        paced[k] = 0.0
        tbd[k] = q[k, QS_ORPH_TBF]
    tbfq = inst[I_TBFQ]
    tbf_delay = tbfq / u if u > 0.0 else (ip[IP_LATENCY] if tbfq > 0.0 else 0.0)
    a_tbf = 0.0
    rtt_min = INF
    # CCA and shaper are per flow (set_ccas, [[flows]] entries)
    for f in range(s.shape[1]):
        if s[S_ON, f] == 0.0:
            a[f] = 0.0
            continue
        shaped = p[P_SHAPED, f] > 0.0
        k = int(p[P_QID, f])
        rtt = p[P_BASE, f] + qdel[k] + (tbf_delay if shaped else 0.0)
        if rtt < rtt_min:
            rtt_min = rtt
        sent = _sending_rate(int(p[P_CCA, f]), s[S_CWND, f], s[S_PACE, f], p[P_UDP, f], p[P_RMAX, f], rtt) * dt
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
            if p[P_RMAX, f] < INF or int(p[P_CCA, f]) == UDP:
                paced[k] += sent
    inst[I_RTTMIN] = rtt_min
    return a_tbf, tbf_delay


# -- 3. token-bucket shaper (campus egress) --------------------------------------------------------
@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _shape(inst, out, u, dt, burst, limit, a_tbf):
    """The shaper serves its FIFO at u; returns (fraction of its backlog + arrivals that leaves,
    fraction of its arrivals dropped). The bucket refills continuously during the sub-step, so u is
    reachable even when burst < u * dt; only what is left over is capped at the bucket size."""
    tbfq = inst[I_TBFQ]
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
    out_frac = t_out / avail if avail > 0.0 else 0.0
    drop_frac = t_drop / a_tbf if a_tbf > 0.0 else 0.0
    return out_frac, drop_frac


# -- 4. the bottleneck: a discipline in front of the FIFO, weighted service, drop-tail per queue ----
@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _arrive(p, s, ip, q, qp, t, dt, kind, out_frac, a, ain, rej, qa, tbd, dp, dm, ds, df, dw, dg):
    """Bytes arriving at each queue (``qa``): the unshaped ones and what left the shaper, less what the
    discipline in front of the FIFO rejects (K = 1; ``rej``: each flow's rejected fraction)."""
    for k in range(q.shape[0]):
        qa[k] += tbd[k] * out_frac
    if kind == _droptail.FLUID_ID:
        return
    for f in range(s.shape[1]):
        ain[f] = 0.0
        if s[S_ON, f] > 0.0:
            ain[f] = (s[S_TB, f] + a[f]) * out_frac if p[P_SHAPED, f] > 0.0 else a[f]
    qa[0] -= _discipline_admit(kind, dp, dm, ds, df, dw, dg, s[S_ON], ain, t, dt, ip[IP_CAP], q[0, QS_BYTES],
                               qp[0, QP_BUFFER], rej, s[S_RI])
    if qa[0] < 0.0:
        qa[0] = 0.0


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _leaf_rate(ip, k, served, stot, weight, wtot, ceil):
    """The rate queue k drains at while it holds packets: one queue, the link (at most its ceiling);
    several (HTB leaves), its guaranteed share of the link or what the others' service leaves of it,
    whichever is more, at most its ceiling -- HTB's rate, borrowing up to ceil."""
    cap = ip[IP_CAP]
    if served.shape[0] == 1:
        return min(cap, ceil[k])
    return min(ceil[k], max(cap * weight[k] / wtot, cap - (stot - served[k])))


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _packet_noise(q, ip, k, qa, qd, served, qdrop, paced, idc, dt, inv_dt, mu, edge, kind, dw, dg, ain, rej):
    """Queue k's packet-level noise (``_packet_noise_excess``) between empty and ``edge``, the queue
    length at which it starts dropping (``_noise_edge``), at the drain rate ``mu`` (``_leaf_rate``):
    as much extra drop as extra idle, and the mean content the noise holds (``QS_NOISE``). Returns
    the service the noise left unused (the idle).

    Paced flows' bytes (``paced``: an unshaped flow with a sending cap, ``P_RMAX``, or a constant-rate
    UDP sender) add no variance (ours): a paced sender spaces its packets at its rate
    (``SO_MAX_PACING_RATE`` turns on TCP's internal pacing for every segment, capped or not; a cap
    upstream spaces them at its rate; CBR is constant), so what is left of the measured IDC is the
    unpaced flows' ACK-clocked bursts. Flows behind the campus shaper leave it in its bursts: never
    paced here. A discipline may book the
    extra drops as its own (``_noise_drop``: ABC drops the most active aggregate at its threshold);
    the rest the FIFO drops by arrivals, as drop-tail does.
    """
    lam = qa[k] * inv_dt
    drift = lam - mu
    lam_b = lam if paced[k] <= 0.0 else max(qa[k] - paced[k], 0.0) * inv_dt
    var = idc * lam_b * MSS
    # tokens the bottleneck saves while idle act as buffer
    ex = _packet_noise_excess(drift, var, edge + ip[IP_LINK_BURST]) * dt
    ex = min(ex, served[k], qa[k] - qdrop[k])
    if ex > 0.0:
        served[k] -= ex
        if kind == _droptail.FLUID_ID:
            qdrop[k] += ex
        else:
            # what the discipline drops never entered the FIFO: its arrivals shrink, its queue does not
            booked = _noise_drop(kind, dw, dg, ain, rej, ex)
            qa[k] -= booked
            qd[k] -= booked
            qdrop[k] += ex - booked
    q[k, QS_NOISE] = _packet_noise_relax(q[k, QS_NOISE], drift, var, mu, dt, edge, ip[IP_LINK_BURST])
    return ex if ex > 0.0 else 0.0


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _headroom(q, served, ceil, dt, j):
    """Bytes leaf j could still send in this sub-step: what it has queued, within its ceiling."""
    return max(min(q[j, QS_BYTES], ceil[j] * dt - served[j]), 0.0)


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _lend(q, served, idle, ceil, dt):
    """HTB lends (ours, after the HTB's borrowing): service a leaf's packet noise left unused goes to
    the other leaves with packets waiting, in proportion to what they can still send within their
    ceilings; the link idles only for what none of them can take. A leaf at ceil = rate lends but
    cannot borrow (the papers' queues, the DTN's queue of the Jenks policy in a Science DMZ)."""
    K = q.shape[0]
    for k in range(K):
        if idle[k] <= 0.0:
            continue
        room = 0.0
        for j in range(K):
            if j != k:
                room += _headroom(q, served, ceil, dt, j)
        if room <= 0.0:
            continue
        scale = min(idle[k], room) / room
        for j in range(K):
            if j != k:
                give = _headroom(q, served, ceil, dt, j) * scale
                served[j] += give
                q[j, QS_BYTES] -= give


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _serve_orphans(q, k, sfrac, dfrac, out_frac, out):
    """Bytes of finished flows still queued in queue k (and its share of the shaper's) are served and
    dropped like everyone else's, counted as their class's."""
    mv = q[k, QS_ORPH_TBF] * out_frac
    q[k, QS_ORPH_TBF] -= mv
    ocd = q[k, QS_ORPH_DTN] * sfrac
    q[k, QS_ORPH_DTN] -= ocd
    dem = q[k, QS_ORPH_CAMP] + mv
    occ = dem * sfrac
    odr = mv * dfrac
    q[k, QS_ORPH_CAMP] = max(dem - occ - odr, 0.0)
    out[O_DTN_B] += ocd
    out[O_CAMP_B] += occ
    out[O_CAMP_L] += odr


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _serve(q, qp, ip, dt, inv_dt, idc, out_frac, qa, qd, qdc, served, qdrop, sfrac, dfrac, weight, wtot, ceil, paced,
           idle, kind, dp, dw, dg, ain, rej, out):
    """Weighted service of the queues, drop-tail and the packet noise per queue (several: HTB lends
    what one's noise leaves unused to the others, ``_lend``): each queue's fraction of backlog +
    arrivals served (``sfrac``) and of arrivals dropped (``dfrac``)."""
    K = q.shape[0]
    for k in range(K):
        qd[k] = q[k, QS_BYTES] + qa[k]
        # A ceiling caps what the queue may send this sub-step (no borrowing).
        qdc[k] = min(qd[k], ceil[k] * dt)
    _serve_queues(qdc, weight, ip[IP_CAP] * dt, served)
    stot = 0.0
    for k in range(K):
        stot += served[k]
    for k in range(K):
        nq = qd[k] - served[k]
        qdrop[k] = _droptail.overflow(nq, qp[k, QP_BUFFER])
        q[k, QS_BYTES] = nq - qdrop[k]
        idle[k] = 0.0
        if idc > 0.0:
            edge = _noise_edge(kind, dp, dw, qp[k, QP_BUFFER])
            if edge >= 0.0:
                mu = _leaf_rate(ip, k, served, stot, weight, wtot, ceil)
                idle[k] = _packet_noise(q, ip, k, qa, qd, served, qdrop, paced, idc, dt, inv_dt, mu, edge, kind,
                                        dw, dg, ain, rej)
    if K > 1:
        _lend(q, served, idle, ceil, dt)
    qtot = 0.0
    for k in range(K):
        q[k, QS_RATE] = served[k] * inv_dt
        qtot += _queue_seen(q, k)
        sfrac[k] = served[k] / qd[k] if qd[k] > 0.0 else 0.0
        dfrac[k] = qdrop[k] / qa[k] if qa[k] > 0.0 else 0.0
        _serve_orphans(q, k, sfrac[k], dfrac[k], out_frac, out)
    out[O_QBYTES] += qtot * dt


# -- 5. per-flow delivery, losses and controllers ------------------------------------------------------
# The per-flow helpers take and return numbers, not arrays: numba increfs every array an inlined
# function receives, which in the per-flow loop cost as much as the rest of the loop.
@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _shaper_share(tb, af, out_frac, drop_frac):
    """A shaped flow's share of the shaper's FIFO: of its backlog ``tb`` + arrivals ``af``, what
    leaves (by backlog + arrivals) and what is dropped (by arrivals); returns (out, lost, backlog)."""
    dem = tb + af
    ain = dem * out_frac
    lost = af * drop_frac
    tb = dem - ain - lost
    if tb < 0.0:
        tb = 0.0
    return ain, lost, tb


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _fifo_share(dem, ain, sfrac, dfrac):
    """A flow's share of its bottleneck queue: of its backlog + arrivals ``dem``, what is served (by
    backlog + arrivals) and what is dropped (by arrivals ``ain``); returns (out, dropped, backlog)."""
    o = dem * sfrac
    d = ain * dfrac
    qb = dem - o - d
    if qb < 0.0:
        qb = 0.0
    return o, d, qb


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _loss_event(lost, t, dt, rtt, u01):
    """A window CCA lost ``lost`` bytes in the sub-step [t, t + dt): it sees a loss event with
    probability 1 - exp(-lost / MSS) (``u01`` a uniform draw) and acts on it one RTT after the loss
    (constants.LOSS_FEEDBACK_RTTS), the loss dated at the sub-step's middle on average; returns that
    time, inf for none."""
    if u01 < 1.0 - math.exp(-lost / MSS):
        return t + 0.5 * dt + LOSS_FEEDBACK_RTTS * rtt
    return INF


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _record(rec, nrec, inst, b, cls, fid, start, fin, size):
    """One finished flow into the period's records (counted as lost if they are full)."""
    n = nrec[b]
    if n < rec.shape[0]:
        rec[n, R_CLASS] = cls
        rec[n, R_FID] = fid
        rec[n, R_START] = start
        rec[n, R_FINISH] = fin
        rec[n, R_BYTES] = size
        nrec[b] = n + 1
    else:
        inst[I_REC_LOST] += 1.0


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _complete(p, s, inst, ip, q, rec, nrec, out, b, f, t, dt, u, rtt, qb, tb, weight, wtot, ceil):
    """Flow f has sent everything and lost nothing: it finishes when its last byte leaves the FIFOs;
    what it still has queued stays there as its class's orphans (docs/fluid_model.md)."""
    cls = int(p[P_CLASS, f])
    is_dtn = cls == CLASS_DTN
    k = int(p[P_QID, f])
    fin = t + dt + FCT_ONE_WAY_FRACTION * p[P_BASE, f] + _queue_seen(q, k) / _queue_rate(q, k, ip[IP_CAP], weight, wtot, ceil)
    if p[P_SHAPED, f] > 0.0 and u > 0.0:
        fin += inst[I_TBFQ] / u
    _record(rec, nrec, inst, b, cls, s[S_FID, f], s[S_FSTART, f], fin, s[S_SIZE, f])
    # S_PBYTES holds -(delivered at period start); see _report
    deliv = s[S_DELIV, f]
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


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _account_range(p, s, t, tbf_delay, out_frac, drop_frac, kind, a, rej, qdel, sfrac, dfrac, fl, lo, hi):
    """Each flow of [lo, hi) (one class) through the shaper (if shaped), the discipline and its
    bottleneck queue: delivered and lost bytes, and RTT, into ``fl``. Returns the class's sums:
    delivered, lost at the bottleneck, sent, flows seen at the tap, their RTTs, and their queueing
    delay weighted by bytes, with the weight."""
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
        af = a[f]
        k = int(p[P_QID, f])
        ain, lost, tb = af, 0.0, 0.0
        if p[P_SHAPED, f] > 0.0:
            ain, lost, tb = _shaper_share(s[S_TB, f], af, out_frac, drop_frac)
            s[S_TB, f] = tb
        qb = s[S_QB, f]
        rj = 0.0
        if kind != _droptail.FLUID_ID:
            rj = ain * rej[f]  # the discipline's rejections are this flow's losses
            ain -= rj
        dem = qb + ain
        o = 0.0
        if rj > 0.0:
            lost += rj
            r_l += rj
        if dem > 0.0:
            o, d, qb = _fifo_share(dem, ain, sfrac[k], dfrac[k])
            s[S_QB, f] = qb
            lost += d
            r_l += d
        meas_rtt = p[P_BASE, f] + qdel[k]  # what a tap at the bottleneck sees (no shaper queue)
        s[S_DELIV, f] += o
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
        fl[FL_O, f] = o
        fl[FL_LOST, f] = lost
        fl[FL_RTT, f] = meas_rtt + (tbf_delay if p[P_SHAPED, f] > 0.0 else 0.0)  # what the sender sees
        fl[FL_QB, f] = qb
        fl[FL_TB, f] = tb
    return r_b, r_l, r_sent, r_n, r_rtt, r_qd, r_w


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _react_range(p, s, inst, ip, q, rng, b, t, dt, inv_dt, u, a, fl, weight, wtot, ceil, rec, nrec, out, lo, hi):
    """Each flow of [lo, hi): its congestion controller sees what was delivered (the ACK clock) and
    lost (cca.py); a finite flow that has sent everything completes."""
    for f in range(lo, hi):
        if s[S_ON, f] == 0.0:
            continue
        o, lost, rtt = fl[FL_O, f], fl[FL_LOST, f], fl[FL_RTT, f]
        cca = int(p[P_CCA, f])
        if cca <= CUBIC:
            if rtt < s[S_MINRTT, f]:
                s[S_MINRTT, f] = rtt
            if lost > 0.0 and a[f] > 0.0 and not _stalled(s, f):
                _flight_lost(s, f, cca, t, dt, rtt, min(lost / a[f], 1.0), rng, b)
            if lost > 0.0 and s[S_LOSS_AT, f] == INF and t >= s[S_RECOV_END, f]:
                s[S_LOSS_AT, f] = _loss_event(lost, t, dt, rtt, _rand(rng, b))
                if s[S_LOSS_AT, f] < INF:
                    s[S_RECOV_END, f] = INF
            if t >= s[S_LOSS_AT, f]:
                _window_loss(s, f, cca, t, rtt)
            elif o > 0.0:
                s[S_CWND, f] = _window_grow(cca, t, o, rtt, s[S_CWND, f], s[S_SSTH, f], s[S_MINRTT, f], s, f)
        elif cca == MINLOSS:
            _minloss_update(s, f, t, rtt)
        elif cca != UDP:
            infl = a[f] * inv_dt * p[P_BASE, f] + fl[FL_QB, f] + fl[FL_TB, f]
            _bbr_update(s, f, cca, t, dt, o, lost, rtt, infl, rng, b)
        if s[S_SIZE, f] < INF and s[S_TOSEND, f] <= 1e-6:
            _complete(p, s, inst, ip, q, rec, nrec, out, b, f, t, dt, u, rtt, fl[FL_QB, f], fl[FL_TB, f],
                      weight, wtot, ceil)


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _deliver(p, s, inst, ip, q, rng, b, t, dt, inv_dt, u, tbf_delay, out_frac, drop_frac, kind, a, rej,
             qdel, sfrac, dfrac, weight, wtot, ceil, rec, nrec, out, ms, fl, n_dtn, short_off):
    """Every flow's delivery, losses and controller, by class (DTN, campus/UDP/[[flows]], short-flow
    slots: each range shares its class), and what the taps measure in this sub-step."""
    rlo = (0, n_dtn, short_off)
    rhi = (n_dtn, short_off, s.shape[1])
    n_dtn_on = 0
    n_camp_on = 0
    rttd_step = 0.0
    rttc_step = 0.0
    for r in range(3):
        lo, hi = rlo[r], rhi[r]
        if lo >= hi:
            continue
        r_b, r_l, r_sent, r_n, r_rtt, r_qd, r_w = _account_range(
            p, s, t, tbf_delay, out_frac, drop_frac, kind, a, rej, qdel, sfrac, dfrac, fl, lo, hi)
        _react_range(p, s, inst, ip, q, rng, b, t, dt, inv_dt, u, a, fl, weight, wtot, ceil, rec, nrec, out, lo, hi)
        if int(p[P_CLASS, lo]) == CLASS_DTN:
            out[O_DTN_B] += r_b
            out[O_DTN_L] += r_l
            out[O_DTN_SENT] += r_sent
            n_dtn_on += r_n
            rttd_step += r_rtt
            ms[M_QDD] += r_qd
            ms[M_QDD_W] += r_w
        else:
            out[O_CAMP_B] += r_b
            out[O_CAMP_L] += r_l
            out[O_CAMP_SENT] += r_sent
            n_camp_on += r_n
            rttc_step += r_rtt
            ms[M_QDC] += r_qd
            ms[M_QDC_W] += r_w
    # the RTTs of this sub-step: the mean over the class's flows seen at the tap, time-weighted
    if n_dtn_on > 0:
        ms[M_RTTD] += rttd_step / n_dtn_on * dt
        ms[M_RTTD_T] += dt
    if n_camp_on > 0:
        ms[M_RTTC] += rttc_step / n_camp_on * dt
        ms[M_RTTC_T] += dt


# -- what the plant reports --------------------------------------------------------------------------
@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _report(p, s, inst, ip, q, out, ms, a, period, inv_dt, u, weight, wtot, ceil):
    """The seven Table 3 variables (and ground truth) of the period (docs/fluid_model.md "What the
    plant reports"), and each flow's rate, RTT and activity at its end."""
    inst[I_PERIODS] += 1.0
    inst[I_T] = inst[I_PERIODS] * period
    if ms[M_RTTD_T] > 0.0:
        inst[I_RTTD] = ms[M_RTTD] / ms[M_RTTD_T]
    out[O_RTTD] = inst[I_RTTD]
    if ms[M_RTTC_T] > 0.0:
        avg = ms[M_RTTC] / ms[M_RTTC_T]
        if inst[I_RTTC] < 0.0:
            inst[I_RTTC] = avg
        else:
            inst[I_RTTC] = RTT_CAMPUS_ALPHA * inst[I_RTTC] + (1.0 - RTT_CAMPUS_ALPHA) * avg
    out[O_RTTC] = inst[I_RTTC] if inst[I_RTTC] >= 0.0 else ip[IP_CAMPUS_BASE]
    if ms[M_QDD_W] > 0.0:
        inst[I_QDD] = ms[M_QDD] / ms[M_QDD_W]
    if ms[M_QDC_W] > 0.0:
        inst[I_QDC] = ms[M_QDC] / ms[M_QDC_W]
    out[O_QDD] = inst[I_QDD]
    out[O_QDC] = inst[I_QDC]
    out[O_TBF_DELAY] /= period
    out[O_QBYTES] /= period
    for f in range(s.shape[1]):
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
