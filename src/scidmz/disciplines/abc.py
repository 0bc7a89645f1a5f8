"""Activity-based congestion management (ABC) -- the one decision core.

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
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numba import njit

from scidmz.disciplines.base import BottleneckDiscipline, check_at_least, check_positive

# Layout of the parameter vector the core reads (one float64 array: numba-friendly).
P_MEM_METER, P_REF_RATE, P_MEM_AVG, P_QMIN, P_QBASE, P_GAMMA, P_BUFFER, P_T0 = range(8)
N_PARAMS = 8
# Meter state per aggregate: decayed byte sum, time of its last packet, and the
# aggregate's own reference rate (0: the configuration's R_r). Section 3.2:
# "Reference rates R_r specific to aggregates may be used to differentiate
# their achievable throughput in case of congestion."
M_S, M_TLAST, M_REF = 0, 1, 2
# Averager state: decayed activity sum, decayed count, time of last accepted packet.
A_S, A_N, A_TLAST = 0, 1, 2

_T_FLOOR_S = 1e-6


@dataclass(frozen=True)
class ABCConfig(BottleneckDiscipline):
    """ABC parameters (SI units; queue quantities in packets as in the paper)."""

    kind: ClassVar[str] = "abc"
    memory_meter_s: float = 3.0
    ref_rate_bps: float = 10e3
    memory_avg_s: float = 0.3
    q_min_pkts: float = 6.0
    q_base_pkts: float = 20.0
    gamma_pkts: float = 16.0
    buffer_pkts: float = 24.0
    ref_rates_bps: tuple[float, ...] = ()  # per aggregate (section 3.2); empty: R_r for all

    def __post_init__(self) -> None:
        super().__post_init__()
        refs = tuple(check_positive(f"ref_rates_bps[{i}] (R_r)", r) for i, r in enumerate(self.ref_rates_bps))
        object.__setattr__(self, "ref_rates_bps", refs)
        object.__setattr__(self, "memory_meter_s", check_positive("memory_meter_s", self.memory_meter_s))
        object.__setattr__(self, "memory_avg_s", check_positive("memory_avg_s", self.memory_avg_s))
        object.__setattr__(self, "ref_rate_bps", check_positive("ref_rate_bps (R_r)", self.ref_rate_bps))
        for name in ("q_min_pkts", "q_base_pkts", "gamma_pkts", "buffer_pkts"):
            object.__setattr__(self, name, check_at_least(name, getattr(self, name), 1.0, "packet"))

    def params(self, t0: float = 0.0) -> np.ndarray:
        """The core's parameter vector; ``t0`` is the meter start time (s)."""
        p = np.empty(N_PARAMS)
        p[P_MEM_METER] = self.memory_meter_s
        p[P_REF_RATE] = self.ref_rate_bps
        p[P_MEM_AVG] = self.memory_avg_s
        p[P_QMIN] = self.q_min_pkts
        p[P_QBASE] = self.q_base_pkts
        p[P_GAMMA] = self.gamma_pkts
        p[P_BUFFER] = self.buffer_pkts
        p[P_T0] = float(t0)
        return p


def new_state(
    n_aggregates: int, t0: float = 0.0, ref_rates_bps: tuple[float, ...] | np.ndarray = ()
) -> tuple[np.ndarray, np.ndarray]:
    """Fresh (meter, averager) state for ``n_aggregates`` aggregates (optional per-aggregate R_r)."""
    if n_aggregates < 1:
        raise ValueError(f"n_aggregates must be >= 1, got {n_aggregates}")
    meter = np.zeros((n_aggregates, 3))
    meter[:, M_TLAST] = t0
    refs = np.asarray(ref_rates_bps, dtype=np.float64)
    if refs.size:
        if refs.shape != (n_aggregates,):
            raise ValueError(f"ref_rates_bps needs one rate per aggregate ({n_aggregates}), got {refs.size}")
        meter[:, M_REF] = refs
    avg = np.zeros(3)
    avg[A_TLAST] = t0
    return meter, avg


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


# Virtual FIFO state: backlog (bytes), time of the last packet.
V_Q, V_T = 0, 1
QUEUE_PKT_BYTES = 1500.0  # the virtual FIFO counts its backlog in packets of this size


def new_fifo(t0: float = 0.0) -> np.ndarray:
    """Fresh virtual-FIFO state (empty at ``t0``)."""
    return np.array([0.0, t0])


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


@njit(cache=True)
def fluid_accept(q0: float, arrivals: np.ndarray, thresholds: np.ndarray, cap_rate: float, dt: float,
                 accepted: np.ndarray, band: float = 0.0) -> float:
    """The activity AQM over one fluid time step (ours: the fluid limit of :func:`abc_packet`'s test).

    Aggregate ``g`` offers ``arrivals[g]`` bytes spread evenly over ``dt``; a
    byte is accepted iff the queue is at most ``thresholds[g]`` bytes when it
    arrives (``T_drop(A_g)`` capped by the buffer); the FIFO drains at
    ``cap_rate`` bytes/s. With constant arrival rates the queue is piecewise
    linear, so the step is solved exactly event by event: the queue rises
    until the aggregates still accepted no longer exceed the link, and then
    either sits at a threshold -- the aggregate whose threshold it is accepted
    at exactly the rate that keeps it there (what per-packet drops at
    ``Q > T_drop`` average to) -- or falls. Writes the accepted bytes of every
    aggregate to ``accepted`` and returns the backlog at the end of the step.

    ``band`` (bytes; ours): while the queue is held, aggregates whose thresholds
    lie within ``band`` above it share what is left in proportion to their
    arrivals instead of the higher one taking strict priority. A real queue
    moves in whole packets and jitters by several around a threshold, so two
    thresholds a fraction of a packet apart (two equal senders whose meters
    differ by a rounding) are one threshold to it; without the band the fluid
    limit would hand one of them everything. The plant uses one packet.
    """
    n = arrivals.shape[0]
    for g in range(n):
        accepted[g] = 0.0
    if dt <= 0.0:
        return q0
    tol = 1e-9
    q = q0
    left = dt
    for _ in range(4 * n + 4):
        if left <= 0.0:
            break
        above = 0.0
        at = 0.0
        for g in range(n):
            lam = arrivals[g] / dt
            if thresholds[g] > q + tol:
                above += lam
            elif thresholds[g] >= q - tol:
                at += lam
        if above > cap_rate:  # rising to the next threshold above q
            tn = math.inf
            for g in range(n):
                if thresholds[g] > q + tol and thresholds[g] < tn:
                    tn = thresholds[g]
            step = min((tn - q) / (above - cap_rate), left)
            for g in range(n):
                if thresholds[g] > q + tol:
                    accepted[g] += arrivals[g] / dt * step
            q = tn if step < left else q + (above - cap_rate) * step
            left -= step
            continue
        if at > 0.0 and above + at >= cap_rate and q > tol:  # held at a threshold
            above_b = 0.0
            at_b = 0.0
            for g in range(n):
                lam = arrivals[g] / dt
                if thresholds[g] > q + band + tol:
                    above_b += lam
                elif thresholds[g] >= q - tol:
                    at_b += lam
            share = (cap_rate - above_b) / at_b
            for g in range(n):
                lam = arrivals[g] / dt
                if thresholds[g] > q + band + tol:
                    accepted[g] += lam * left
                elif thresholds[g] >= q - tol:
                    accepted[g] += lam * share * left
            left = 0.0
            break
        inflow = above + at  # falling (or empty): everyone at or above q is accepted
        tl = 0.0
        for g in range(n):
            if thresholds[g] < q - tol and thresholds[g] > tl:
                tl = thresholds[g]
        step = left if inflow >= cap_rate or q <= tol else min((q - tl) / (cap_rate - inflow), left)
        for g in range(n):
            if thresholds[g] >= q - tol:
                accepted[g] += arrivals[g] / dt * step
        if q > tol:
            q = tl if step < left else max(q - (cap_rate - inflow) * step, 0.0)
        left -= step
    total = 0.0
    for g in range(n):
        total += accepted[g]
    # the path above ends at q; the FIFO's own account of the step must agree with it
    served = min(q0 + total, cap_rate * dt)
    return q0 + total - served
