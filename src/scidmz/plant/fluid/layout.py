"""Array layout shared by the builder (``plant.py``) and the numba kernel (``kernel.py``).

All state lives in a few float64 arrays so that one kernel call advances B
instances x F flows through a whole control period:

- ``P`` (B, NP, F)  per-flow parameters (class, CCA, base RTT, queue id, ...)
- ``S`` (B, NS, F)  per-flow state (cwnd, queue backlogs, BBR model, ...)
- ``I`` (B, NI)     per-instance state (time, token bucket, EWMA RTT, ...)
- ``IP`` (B, NIP)   per-instance parameters (capacity, dt, shaper, Weibull, ...)
- ``Q`` (B, K, NQS) bytes in each bottleneck queue; ``QP`` (B, K, NQP) its buffer/weight/ceiling
- ``G`` (B, NSEND, 2) Weibull senders: next arrival time, flows waiting for a slot
- ``DP``, ``DM``, ``DS``, ``DF``, ``DW`` a bottleneck discipline's parameters, per-aggregate
  weights, state, per-flow rows and scratch: the plant allocates them in the sizes the
  discipline's fluid hook asks for (``FluidLayout``) and only the hook knows what is in them
  (``scidmz.disciplines.base``); ``DG`` (B, F) each flow's aggregate at the discipline
- ``OUT`` (B, NOUT) per-period results; ``REC`` (B, cap, NREC) finished flows

Field indices are module constants, which numba freezes into the kernel.
"""

from __future__ import annotations

# -- P: per-flow parameters ---------------------------------------------------------
# P_RMAX: the flow's own sending-rate limit in bytes/s (inf: none), for flows
# limited outside the bottleneck (the Jenks papers' "degraded" flows, Exp 4/Test 2).
P_CLASS, P_CCA, P_BASE, P_QID, P_SHAPED, P_START, P_SIZE, P_UDP, P_SENDER, P_RMAX = range(10)
NP = 10

# -- S: per-flow state ----------------------------------------------------------------
(
    S_ON,  # 1 while the flow has data to send
    S_CWND,  # bytes (window CCAs) / current inflight cap (BBR)
    S_SSTH,  # slow-start threshold, bytes
    S_WMAX,  # CUBIC W_max, packets
    S_EPOCH,  # CUBIC epoch start (time of last reduction)
    S_K,  # CUBIC K, s
    S_LOSS_AT,  # time at which a detected loss is acted on (inf: none pending)
    S_RECOV_END,  # the last reaction to a loss: drops before it belong to that event; Recovery after it
    S_TOSEND,  # bytes still to send, including retransmissions (inf: unlimited)
    S_DELIV,  # bytes delivered of the current flow
    S_SIZE,  # size of the current flow, bytes (inf: unlimited)
    S_FSTART,  # start of the current flow, s
    S_FID,  # id of the current flow
    S_QB,  # bytes of this flow in its bottleneck queue
    S_TB,  # bytes of this flow in the TBF queue
    S_RATE,  # sending rate in the last sub-step, bytes/s
    S_RTT,  # current RTT (base + shaper queue + bottleneck queue), s
    S_MINRTT,
    S_MINRTT_STAMP,
    S_PBYTES,  # delivered this period
    S_PLOST,  # lost this period
    S_RSTART,  # start of the current round (one RTT)
    S_RDELIV,  # delivered in the current round
    S_RLOST,  # lost in the current round
    S_ROUNDS,  # rounds so far
    S_MODE,  # BBR mode: 0 startup, 1 drain, 2 probe_bw, 3 probe_rtt
    S_GAIN,  # BBR pacing gain
    S_PACE,  # BBR pacing rate, bytes/s
    S_BW,  # BBR bottleneck bandwidth estimate (v1 max filter, v2 bw_hi)
    S_FULLBW,
    S_FULLCNT,
    S_FULLPIPE,
    S_CIDX,  # v1 gain-cycle index; v2 phase 0 DOWN, 1 CRUISE, 2 REFILL, 3 UP
    S_CSTART,  # start of the current phase
    S_PRTT_DONE,  # end of ProbeRTT
    S_PRIOR_MODE,
    S_IHI,  # BBRv2 inflight_hi
    S_ILO,  # BBRv2 inflight_lo
    S_BWLO,  # BBRv2 bw_lo
    S_PWAIT,  # BBRv2 time of the next bandwidth probe
    S_UPCNT,  # BBRv2 inflight_hi growth per round in UP (packets)
    S_BWHI_PREV,  # BBRv2 max filter over two probe cycles
    S_BWHI_CUR,
    S_RSINCE,  # BBRv2 rounds since the last probe
    S_SLOT0,  # BBRv1 bandwidth samples of the last 10 rounds (S_SLOT0 .. S_SLOT0 + 9)
) = range(45)
# the rate feedback a bottleneck discipline gives the flow's sender (FFS: the rate indicator of
# Algorithm 2 of the flow's latest packets), bytes/s (0: none)
S_RI = S_SLOT0 + 10
S_RIHOLD = S_RI + 1  # minloss: the RI sampled one round ago, applied at the next round
NS = S_RIHOLD + 1

# -- I: per-instance state ---------------------------------------------------------------
(
    I_T,
    I_TOKENS,
    I_TBFQ,
    I_RTTC,  # EWMA campus RTT (Algorithm 4)
    I_RTTD,  # last DTN RTT
    I_NEXTFID,
    I_DTN_FIRST,  # first DTN byte sent (s), inf before
    I_DTN_DONE,  # time the DTN transfer completed, inf before
    I_DTN_LEFT,  # DTN streams still sending
    I_PERIODS,
    I_QDD,  # last qdelay seen by DTN / campus (held when a class sends nothing)
    I_QDC,
    I_REC_LOST,  # finished-flow records that did not fit the buffer
    I_WAITING,  # Weibull flows waiting for a free slot (sum over senders)
    I_NEXT_START,  # earliest start time of a long flow that has not started yet
    I_RTTMIN,  # smallest RTT any active flow saw in the last sub-step (sets the adaptive dt)
    I_DTN_LASTFIN,  # latest finish time of the DTN streams done so far
) = range(17)
NI = 17

# -- IP: per-instance parameters ----------------------------------------------------------
(
    IP_CAP,  # bytes/s
    IP_DT,  # fixed sub-step (s); <= 0: adaptive, min RTT now / DT_RTT_DIVISOR in [DT_MIN, DT_MAX]
    IP_NSUB,  # sub-steps per period when dt is fixed
    IP_BURST,  # bytes; <= 0: derive from the rate
    IP_LATENCY,
    IP_PERIOD,
    IP_DTN_TRANSFER,  # bytes, inf = unlimited
    IP_DTN_BASE,
    IP_CAMPUS_BASE,
    IP_G_SHAPE,
    IP_G_SCALE,
    IP_G_MIN,
    IP_G_MAX,
    IP_Z_SHAPE,
    IP_Z_SCALE,
    IP_Z_MIN,
    IP_Z_MAX,
    IP_SHORT_CCA,
    IP_DISCIPLINE,  # the bottleneck discipline's fluid id (scidmz.disciplines.registry; 0: drop-tail)
    IP_LINK_BURST,  # bytes of tokens the bottleneck saves while idle (0: a plain line)
    IP_ARRIVAL_IDC,  # index of dispersion of the bottleneck's arrivals (0: no packet-level noise)
) = range(21)
NIP = 21

# QP_CEIL: the queue's rate ceiling in bytes/s (inf: none, work-conserving), for
# queue policies whose queues do not borrow (HTB ceil = rate).
QP_BUFFER, QP_WEIGHT, QP_CEIL = 0, 1, 2
NQP = 3

# -- Q: per-queue state (B, K, NQS) --------------------------------------------------------------
# A flow is finished once all its bytes are sent and none was lost: drop-tail
# only drops arrivals, so what it still has queued will be delivered. Those
# bytes stay in the queue as "orphans" of their class until served.
QS_BYTES, QS_ORPH_DTN, QS_ORPH_CAMP, QS_ORPH_TBF = range(4)
QS_RATE = 4  # service rate of the queue in the last sub-step, bytes/s (for its queueing delay)
# mean bytes the packet-level noise holds in the queue in the last sub-step (kernel._packet_noise_queue);
# the queue a packet meets is the larger of this and QS_BYTES (kernel._queue_seen)
QS_NOISE = 5
NQS = 6

# -- OUT: per-period results ------------------------------------------------------------
(
    O_DTN_B,
    O_CAMP_B,
    O_DTN_L,
    O_CAMP_L,
    O_TBF_L,
    O_RTTD,
    O_RTTC,
    O_QDD,
    O_QDC,
    O_ACTIVE,
    O_DTN_SENT,
    O_CAMP_SENT,
    O_TBF_DELAY,
    O_QBYTES,
    O_SHORT_DONE,
    O_TBF_OUT,  # bytes that left the shaper
) = range(16)
NOUT = 16

# -- REC: finished flows ---------------------------------------------------------------------
R_CLASS, R_FID, R_START, R_FINISH, R_BYTES = range(5)
NREC = 5
