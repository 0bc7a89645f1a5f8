"""Activity-based congestion management (ABC) -- the one per-packet decision core.

Paper: Menth, Mostafaei, Merling, Haeberle, "Implementation and Evaluation of
Activity-Based Congestion Management Using P4 (P4-ABC)", Future Internet 11(7)
159, 2019.

- Section 3.2, activity meter: per aggregate, a time-dependent rate R_m with
  memory M_AM (TDRM-UTEMA, their ref. [24]) and activity ``A = log2(R_m / R_r)``.
- Section 3.3, activity AQM: drop if the queue Q exceeds
  ``T_drop(A) = max(Q_min, Q_base - gamma * (A - A_avg))`` (packets; the text
  lost the operators, this is the issue's reading), where ``A_avg`` is a UTEMA
  moving average with memory M_AA of the activity of *accepted* packets.
- Section 6.1.3 defaults: M_AM = 3 s, R_r = 10 kbit/s, M_AA = 0.3 s,
  Q_min = 6, Q_base = 20, gamma = 16 packets, buffer 24 packets.

TDRM-UTEMA: the search tools found only the abstract of Menth & Hauser (ICPE
2017), not the definition. Implemented here is the natural reconstruction
(ours): an exponentially decayed byte sum over an exponentially decayed time,
both with memory M,

    S <- exp(-(t - t_last)/M) * S + X            (bytes, current packet included)
    T(t) = M * (1 - exp(-(t - t0)/M))           (decayed observation time)
    R_m = 8 * S / T                              (bit/s)

which is unbiased for a constant rate from the meter start t0 on (no warm-up
bias, unlike a plain TEMA that starts from 0). UTEMA for the activity average
is the same construction with a count instead of time:
``S_A <- d*S_A + A``, ``N <- d*N + 1``, ``A_avg = S_A / N``.

Our choices where the paper is silent (labelled, with reasons):

- The meter includes the current packet's bytes (so R_m > 0 and A finite for
  every packet); T is floored at 1 us so a packet at t0 exactly is finite.
- ``A_avg`` before the first accepted packet is the packet's own activity
  (threshold = Q_base): no history means no bias for or against anyone.
- The test uses the queue *before* this packet is enqueued and drops when
  ``Q > T_drop`` (paper: "exceeds"); a full buffer (Q >= buffer) always drops,
  which is the drop-tail the AQM sits in front of.
- Every packet updates its aggregate's meter (the ingress meters offered
  traffic); only accepted packets update ``A_avg`` (paper: "recently accepted").
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .config import (
    A_N,
    A_S,
    A_TLAST,
    M_REF,
    M_S,
    M_TLAST,
    P_BUFFER,
    P_GAMMA,
    P_MEM_AVG,
    P_MEM_METER,
    P_QBASE,
    P_QMIN,
    P_REF_RATE,
    P_T0,
    QUEUE_PKT_BYTES,
    V_Q,
    V_T,
)

_T_FLOOR_S = 1e-6


@njit(cache=True, inline="always")
def meter_activity(meter: np.ndarray, p: np.ndarray, agg: int, t: float, nbytes: float) -> float:
    """TDRM-UTEMA update for one packet of aggregate ``agg``; returns its activity A."""
    mem = p[P_MEM_METER]
    dt = t - meter[agg, M_TLAST]
    if dt < 0.0:
        dt = 0.0  # reordered timestamps: never grow the sum by a negative decay
    meter[agg, M_S] = math.exp(-dt / mem) * meter[agg, M_S] + nbytes
    meter[agg, M_TLAST] = t
    tt = mem * -math.expm1(-(t - p[P_T0]) / mem)
    if tt < _T_FLOOR_S:
        tt = _T_FLOOR_S
    rate = 8.0 * meter[agg, M_S] / tt
    ref = p[P_REF_RATE]
    if meter.shape[1] > M_REF and meter[agg, M_REF] > 0.0:
        ref = meter[agg, M_REF]
    return math.log2(rate / ref)


@njit(cache=True, inline="always")
def drop_threshold(p: np.ndarray, activity: float, a_avg: float) -> float:
    """T_drop(A) = max(Q_min, Q_base - gamma * (A - A_avg)), in packets (section 3.3)."""
    th = p[P_QBASE] - p[P_GAMMA] * (activity - a_avg)
    return th if th > p[P_QMIN] else p[P_QMIN]


@njit(cache=True)
def abc_packet(
    meter: np.ndarray, avg: np.ndarray, p: np.ndarray, agg: int, t: float, nbytes: float, q_pkts: float
) -> bool:
    """THE ABC decision for one packet: meter, threshold test, averager. True = accept."""
    a = meter_activity(meter, p, agg, t, nbytes)
    a_avg = average_activity(avg, a)
    accept = q_pkts < p[P_BUFFER] and q_pkts <= drop_threshold(p, a, a_avg)
    if accept:
        average_accepted(avg, p, t, a, 1.0)
    return accept


@njit(cache=True, inline="always")
def average_accepted(avg: np.ndarray, p: np.ndarray, t: float, activity: float, n_pkts: float) -> None:
    """UTEMA activity averager (memory M_AA) fed ``n_pkts`` accepted packets of one activity."""
    dt = t - avg[A_TLAST]
    if dt < 0.0:
        dt = 0.0
    d = math.exp(-dt / p[P_MEM_AVG])
    avg[A_S] = d * avg[A_S] + activity * n_pkts
    avg[A_N] = d * avg[A_N] + n_pkts
    avg[A_TLAST] = t


@njit(cache=True, inline="always")
def average_activity(avg: np.ndarray, fallback: float) -> float:
    """A_avg, or ``fallback`` before the first accepted packet (see the module docstring)."""
    return avg[A_S] / avg[A_N] if avg[A_N] > 0.0 else fallback


@njit(cache=True)
def abc_run(
    meter: np.ndarray,
    avg: np.ndarray,
    p: np.ndarray,
    aggs: np.ndarray,
    ts: np.ndarray,
    sizes: np.ndarray,
    qs: np.ndarray,
    accept: np.ndarray,
) -> int:
    """Decide a packet sequence with a given queue trace; returns packets accepted."""
    n = 0
    for k in range(ts.shape[0]):
        ok = abc_packet(meter, avg, p, aggs[k], ts[k], sizes[k], qs[k])
        accept[k] = ok
        n += ok
    return n


@njit(cache=True)
def abc_fifo_packet(
    meter: np.ndarray, avg: np.ndarray, p: np.ndarray, vq: np.ndarray, agg: int, t: float, nbytes: float, link_bps: float
) -> bool:
    """ABC in front of a FIFO drained at ``link_bps`` whose backlog is tracked here.

    The queue is tracked in bytes and counted in full-size packets of
    ``QUEUE_PKT_BYTES`` (ours: the paper counts packets and its packets are all
    full-size; dividing by the arriving packet's own size would make a 60 B SYN
    behind 60 kB see a 1000-packet queue and be dropped -- seen on the netns
    testbed as DTN connections that took 12 s to open).
    The NFQUEUE stage uses this too (ours): the kernel's qdisc backlog cannot be
    read per packet cheaply, and a FIFO served at the bottleneck rate behind the
    stage has exactly this backlog.
    """
    dt = t - vq[V_T]
    if dt > 0.0:
        vq[V_Q] -= dt * link_bps / 8.0
        if vq[V_Q] < 0.0:
            vq[V_Q] = 0.0
        vq[V_T] = t
    ok = abc_packet(meter, avg, p, agg, t, nbytes, vq[V_Q] / QUEUE_PKT_BYTES)
    if ok:
        vq[V_Q] += nbytes
    return ok


@njit(cache=True)
def abc_run_fifo(
    meter: np.ndarray,
    avg: np.ndarray,
    p: np.ndarray,
    aggs: np.ndarray,
    ts: np.ndarray,
    sizes: np.ndarray,
    link_bps: float,
    accept: np.ndarray,
) -> float:
    """Decide a packet sequence in front of a FIFO drained at ``link_bps``; returns final backlog (bytes)."""
    vq = np.empty(2)
    vq[V_Q] = 0.0
    vq[V_T] = ts[0] if ts.shape[0] > 0 else 0.0
    for k in range(ts.shape[0]):
        accept[k] = abc_fifo_packet(meter, avg, p, vq, aggs[k], ts[k], sizes[k], link_bps)
    return vq[V_Q]
