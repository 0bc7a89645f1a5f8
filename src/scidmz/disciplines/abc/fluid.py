"""ABC in the fluid plant: the activity AQM in front of the bottleneck FIFO, one sub-step at a time.

Menth et al. 2019, sections 3.2-3.3, with the same numba functions as the
packet core (:mod:`.core`): each aggregate's meter sees its bytes of the
sub-step at its end, ``T_drop`` (packets of the fluid model's packet size,
capped by the buffer) is solved exactly over the step (:func:`fluid_accept`),
and the averager is fed the accepted packets. The contract of this module is
in :mod:`scidmz.disciplines.base`.

Array layout (one instance): ``dp`` the core's parameter vector; ``ds`` rows
``0..A-1`` the aggregates' meters, row ``A`` the activity averager; ``dw``
rows arrivals, thresholds (then rejected fractions), accepted bytes and
activity per aggregate, and each aggregate's drop threshold in bytes (kept
for the packet noise); ``dm`` and ``df`` unused (the aggregates' reference
rates live in the meters, as in the core).

Packet-level noise (``noise_edge``, ``noise_drop``; ours, the paper has no
fluid model): the FIFO behind ABC random-walks around its mean as a drop-tail
FIFO does (``plant/fluid/kernel.py``, ``_packet_noise_excess``), but what it
hits at the top is not the buffer: ABC drops an aggregate's packet once the
queue exceeds that aggregate's ``T_drop``, so the noise's upper barrier is the
lowest threshold among the aggregates sending (the most active one's), and
its extra drops are that aggregate's -- where ABC would drop them -- not
shared by arrivals, which would make the less active aggregate pay for the
more active one's queue.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from ..base import FluidLayout, no_option
from ..registry import fluid_id
from .config import A_N, A_S, M_REF, N_PARAMS, P_BUFFER, new_state
from .core import average_accepted, average_activity, drop_threshold, meter_activity

FLUID_ID = fluid_id("abc")
#: Not on equal footing (``FluidPlant.noise_covers``): on the testbed at R* = B_max / 2 the kernel's ABC
#: (the NFQUEUE stage) gave the DTN 0.69-0.90 of its target in 20 s runs, the fluid ABC 0.94 with the
#: noise and without it alike (reports/leaderboard/noise.json): the gap is not the noise's, and the
#: kernel's spread is wider than the fluid's effect.
NOISE_FOOTING = False
_W_ARRIVALS, _W_THRESHOLD, _W_ACCEPTED, _W_ACTIVITY, _W_DROP_AT = range(5)


def layout(config: Any, n_flows: int, labels: bool, exact: bool) -> FluidLayout:
    no_option("ABC", labels, exact)
    refs = config.ref_rates_bps
    n_agg = max(len(refs), 2)
    if refs and len(refs) != n_agg:
        raise ValueError("ref_rates_bps must give one rate per aggregate")
    return FluidLayout(n_params=N_PARAMS, n_aggregates=n_agg, state=(n_agg + 1, 3), flow_rows=1, work=(5, n_agg))


def init(config: Any, dp: np.ndarray, dm: np.ndarray, ds: np.ndarray, df: np.ndarray, groups: np.ndarray,
         labels: np.ndarray, exact: bool, buffer_bytes: float, pkt_bytes: float) -> None:
    """Parameters, meters (with the per-aggregate R_r) and averager of one instance at t = 0."""
    if config.buffer_pkts * pkt_bytes > buffer_bytes * (1 + 1e-9):
        raise ValueError(
            f"ABC buffer {config.buffer_pkts:g} packets exceeds the scenario's bottleneck buffer "
            f"({buffer_bytes / pkt_bytes:.1f} packets); set link.buffer to match"
        )
    n_agg = dm.shape[0]
    dp[:N_PARAMS] = config.params(0.0)
    meter, avg = new_state(n_agg, 0.0, config.ref_rates_bps)
    ds[:n_agg] = meter
    ds[n_agg] = avg


def set_weights(config: Any, dm: np.ndarray, ds: np.ndarray, w: np.ndarray) -> None:
    """The aggregates' reference rates R_r (section 3.2); meters and averager keep running."""
    ds[:, : dm.shape[1], M_REF] = w


def state(config: Any, dm: np.ndarray, ds: np.ndarray) -> dict[str, np.ndarray]:
    """``activity_avg`` (B,) (NaN before any accepted packet) and ``weights`` (B, A): each aggregate's R_r."""
    n = dm.shape[1]
    a = ds[:, n]
    refs = ds[:, :n, M_REF]
    return {
        "activity_avg": np.where(a[:, A_N] > 0, a[:, A_S] / np.maximum(a[:, A_N], 1e-300), np.nan),
        "weights": np.where(refs > 0, refs, config.ref_rate_bps),
    }


@njit(cache=True, inline="always")
def admit(dp, dm, ds, df, dw, grp, on, ain, t, dt, cap_rate, q0, buffer, pkt, rej, fb):
    """The activity AQM over one sub-step: each flow's rejected fraction is its aggregate's."""
    n_flows = ain.shape[0]
    n_agg = dm.shape[0]
    t_end = t + dt
    meter = ds[:n_agg, :3]
    avg = ds[n_agg, :3]
    arr = dw[_W_ARRIVALS]
    th = dw[_W_THRESHOLD]
    acc = dw[_W_ACCEPTED]
    act = dw[_W_ACTIVITY]
    for g in range(n_agg):
        arr[g] = 0.0
    for f in range(n_flows):
        if ain[f] > 0.0:
            arr[grp[f]] += ain[f]
    for g in range(n_agg):
        th[g] = buffer
        act[g] = 0.0
        if arr[g] > 0.0:
            a = meter_activity(meter, dp, g, t_end, arr[g])
            act[g] = a
            th[g] = min(drop_threshold(dp, a, average_activity(avg, a)), dp[P_BUFFER]) * pkt
            th[g] = min(th[g], buffer)
    drop_at = dw[_W_DROP_AT]
    for g in range(n_agg):
        drop_at[g] = th[g]
    fluid_accept(q0, arr, th, cap_rate, dt, acc, pkt)
    for g in range(n_agg):
        if acc[g] > 0.0:
            average_accepted(avg, dp, t_end, act[g], acc[g] / pkt)
        th[g] = 1.0 - acc[g] / arr[g] if arr[g] > 0.0 else 0.0  # from here on: the rejected fraction
    rejected = 0.0
    for f in range(n_flows):
        rej[f] = 0.0
        if ain[f] > 0.0:
            rej[f] = th[grp[f]]
            rejected += ain[f] * rej[f]
    return rejected


@njit(cache=True, inline="always")
def noise_edge(dp, dw, buffer):
    """Bytes of queue at which ABC starts dropping this sub-step: the lowest ``T_drop`` of the aggregates
    it accepted bytes of (set by ``admit``), at most ``buffer``; the packet noise's upper barrier (module docstring)."""
    acc = dw[_W_ACCEPTED]
    drop_at = dw[_W_DROP_AT]
    edge = buffer
    for g in range(acc.shape[0]):
        if acc[g] > 0.0 and drop_at[g] < edge:
            edge = drop_at[g]
    return edge


@njit(cache=True, inline="always")
def noise_drop(dw, grp, ain, rej, extra, pkt):
    """Book ``extra`` bytes of the packet noise's overflow as ABC's own drops: of the aggregates whose
    threshold lies within one packet of the lowest (``fluid_accept``'s band), by their accepted bytes,
    at most what they had accepted; each flow's rejected fraction ``rej`` grows with its aggregate's.
    Returns the bytes booked (the kernel takes them off the FIFO's arrivals)."""
    arr = dw[_W_ARRIVALS]
    rejf = dw[_W_THRESHOLD]  # after admit: each aggregate's rejected fraction
    acc = dw[_W_ACCEPTED]
    drop_at = dw[_W_DROP_AT]
    n_agg = arr.shape[0]
    edge = math.inf
    for g in range(n_agg):
        if acc[g] > 0.0 and drop_at[g] < edge:
            edge = drop_at[g]
    at = 0.0
    for g in range(n_agg):
        if acc[g] > 0.0 and drop_at[g] <= edge + pkt:
            at += acc[g]
    booked = min(extra, at)
    if booked <= 0.0:
        return 0.0
    for g in range(n_agg):
        if acc[g] > 0.0 and drop_at[g] <= edge + pkt:
            rejf[g] += booked * acc[g] / at / arr[g]
    for f in range(ain.shape[0]):
        if ain[f] > 0.0:
            rej[f] = rejf[grp[f]]
    return booked


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
