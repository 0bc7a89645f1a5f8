"""FFS in the fluid plant: the estimators and Algorithm 1 once per sub-step, or equation (2) exactly.

Wyss et al., sections VI and XII, Appendix A (:func:`fluid_gammas`: the
section XII estimators see each ingress's bytes of the sub-step as one
arrival, Appendix A ticks once per elapsed tau period, Algorithm 1 line 2
gives each flow's forwarding fraction) or section V's equation (2) solved by
water-filling every sub-step (:func:`fluid_gammas_exact`, the exact mode).
Same numba functions as the packet core (:mod:`.core`), so the two cannot
drift. A flow's r label is the rate its first node measures (section VI:
"initialized to the stream's rate"; :func:`.core.ewma_rate`, constant K); its
f label is given (``FluidPlant.set_discipline(labels=...)``) or r. The rate
indicator of Algorithm 2 goes back to the flow's sender (``fb``, read by the
``minloss`` sender, section IX). The contract of this module is in
:mod:`scidmz.disciplines.base`.

Array layout (one instance): ``dp`` the core's parameter vector plus the
exact-mode flag; ``dm`` the fairness-matrix column (bit/s); ``ds`` rows
``0..A-1`` the ingresses' estimators, row ``A`` the egress state; ``df`` rows
each flow's f label (0: f = r) and its measured r; ``dw`` rows bits offered,
r and f labels, gamma and rate indicator per flow.

Packet-level noise (``noise_edge``, ``noise_drop``; ours, the paper has no
fluid model): FFS drops by rate (a stream's label against tau), never by the
queue's length, so the FIFO behind it is a plain drop-tail FIFO fed by what
FFS forwards, and its packet noise is drop-tail's
(``plant/fluid/kernel.py``, ``_packet_noise_excess``): reflected at the
buffer, the extra overflow shared by arrivals (a full FIFO drops whichever
packet arrives). FFS's estimators count forwarded bytes before that FIFO, as
the DPDK node does, so they do not see those drops.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from ..base import FluidLayout
from ..registry import fluid_id
from .config import (
    I_F,
    I_R,
    I_TLAST,
    N_PARAMS,
    N_STATE,
    P_CAP,
    P_K,
    P_TAU_PERIOD,
    S_A,
    S_CONG,
    S_RSTAR,
    S_TAU,
    S_TLAST,
    S_TTAU,
)
from .core import ewma_rate, forwarding_probability, rate_indicator, tau_uncongested, tau_update
from .waterfill import maxmin_tau_into

FLUID_ID = fluid_id("ffs")
#: Not on equal footing (``FluidPlant.noise_covers``): on the testbed at R* = B_max / 2 the kernel's
#: FFS-C100 (the NFQUEUE stage) gave the DTN 0.40 of its target at 0.90 utilisation; the noise moves
#: the fluid FFS towards it (0.94 -> 0.79 of the target) but not to it (reports/leaderboard/noise.json).
NOISE_FOOTING = False
DP_EXACT = N_PARAMS  # 1: equation (2) solved exactly every sub-step
DF_LABEL, DF_R = 0, 1
_W_BITS, _W_R, _W_F, _W_GAMMA, _W_RI, _W_WEIGHT, _W_RATIO, _W_ORDER, _W_FSUM, _W_RIN, _W_FIN = range(11)


def layout(config: Any, n_flows: int, labels: bool, exact: bool) -> FluidLayout:
    n = len(config.matrix_col_bps)
    # work rows 5-10: scratch of the water-filling and the estimators (the kernel may not allocate)
    return FluidLayout(n_params=N_PARAMS + 1, n_aggregates=n, state=(n + 1, N_STATE), flow_rows=2,
                       work=(11, max(n_flows, n)))


def init(config: Any, dp: np.ndarray, dm: np.ndarray, ds: np.ndarray, df: np.ndarray, groups: np.ndarray,
         labels: np.ndarray, exact: bool, buffer_bytes: float, pkt_bytes: float) -> None:
    """Parameters, matrix column, estimators and tau of one instance at t = 0; the flows' f labels."""
    n = dm.shape[0]
    dp[:N_PARAMS] = config.params()
    dp[DP_EXACT] = 1.0 if exact else 0.0
    dm[:] = config.matrix
    st, ing = config.new_state(0.0)
    ds[n, : st.shape[0]] = st
    ds[:n, : ing.shape[1]] = ing
    df[DF_LABEL] = labels


def set_weights(config: Any, dm: np.ndarray, ds: np.ndarray, w: np.ndarray) -> None:
    """The fairness-matrix column, rescaled to sum to the capacity; estimators and tau keep running."""
    dm[:] = w / w.sum(axis=1, keepdims=True) * config.capacity_bps


def state(config: Any, dm: np.ndarray, ds: np.ndarray) -> dict[str, np.ndarray]:
    """``tau`` and ``accepted_rate`` (bit/s) (B,), and ``weights`` (B, A): the matrix column."""
    st = ds[:, dm.shape[1]]
    return {"tau": st[:, S_TAU].copy(), "accepted_rate": st[:, S_A].copy(), "weights": dm.copy()}


@njit(cache=True, inline="always")
def admit(dp, dm, ds, df, dw, grp, on, ain, t, dt, cap_rate, q0, buffer, pkt, rej, fb):
    """Each flow's forwarding fraction over one sub-step; ``fb`` gets the lowest RI of the round."""
    n_flows = ain.shape[0]
    n_ing = dm.shape[0]
    exact = dp[DP_EXACT] > 0.0
    bits = dw[_W_BITS]
    rlab = dw[_W_R]
    flab = dw[_W_F]
    gam = dw[_W_GAMMA]
    for f in range(n_flows):
        bits[f] = 8.0 * ain[f] if on[f] > 0.0 else 0.0
        if exact:
            rlab[f] = bits[f] / dt
        else:
            if on[f] > 0.0:
                df[DF_R, f] = ewma_rate(df[DF_R, f], bits[f], dt, dp[P_K])
            rlab[f] = df[DF_R, f]
            if rlab[f] <= 0.0:
                bits[f] = 0.0
        flab[f] = df[DF_LABEL, f] if df[DF_LABEL, f] > 0.0 else rlab[f]
    if exact:
        tau = fluid_gammas_exact(dm, dp[P_CAP], grp, rlab, flab, gam, dw[_W_WEIGHT], dw[_W_RATIO],
                                 dw[_W_ORDER], dw[_W_FSUM])
        if tau < math.inf:
            ds[n_ing, S_TAU] = tau
    else:
        ri = dw[_W_RI]
        fluid_gammas(ds[n_ing, :], ds[:n_ing, :3], dp, dm, grp, bits, rlab, flab, t + dt, dt, gam, ri,
                     dw[_W_RIN], dw[_W_FIN])
        for f in range(n_flows):
            if bits[f] > 0.0:
                # the lowest RI of the round: during congestion the RI is the stream's minimum CFR
                v = ri[f] * 0.125
                if fb[f] <= 0.0 or v < fb[f]:
                    fb[f] = v
    rejected = 0.0
    for f in range(n_flows):
        rej[f] = 1.0 - gam[f] if ain[f] > 0.0 else 0.0
        rejected += ain[f] * rej[f]
    return rejected


@njit(cache=True, inline="always")
def noise_edge(dp, dw, buffer):
    """FFS drops nothing by queue length: the packet noise meets the FIFO's buffer (module docstring)."""
    return buffer


@njit(cache=True, inline="always")
def noise_drop(dw, grp, ain, rej, extra, pkt):
    """None of the noise's overflow is FFS's: the FIFO behind it drops it by arrivals (returns 0)."""
    return 0.0


@njit(cache=True)
def fluid_gammas(
    st: np.ndarray,
    ing: np.ndarray,
    p: np.ndarray,
    m: np.ndarray,
    ingress: np.ndarray,
    bits: np.ndarray,
    r: np.ndarray,
    f: np.ndarray,
    t: float,
    dt: float,
    gamma: np.ndarray,
    ri: np.ndarray,
    rin: np.ndarray,
    fin: np.ndarray,
) -> None:
    """FFS over one fluid time step ending at ``t``: forwarding fraction of every stream.

    Stream ``s`` offers ``bits[s]`` over ``dt`` from ingress ``ingress[s]`` with
    labels ``r[s]`` and ``f[s]`` (bit/s, before the node). The section XII
    estimators see each ingress's bits of the step as one arrival (R_i, F_i with
    the ``f/r`` weight, R_*), Appendix A ticks once per elapsed ``tau`` period
    (a timer, as in the DPDK node), Algorithm 1 lines 1-2 give gamma, and A is
    fed the expected forwarded bits (section VII-A). Streams offering nothing
    get gamma = 1; ``ri`` gets each stream's Algorithm 2 rate indicator (the
    source set none: inf in). Same functions as :func:`.core.ffs_packet`, so the
    two cannot drift. ``rin``/``fin`` (>= the ingresses) are scratch: the fluid
    kernel runs without allocation.
    """
    k = p[P_K]
    n_ing = ing.shape[0]
    tot = 0.0
    for i in range(n_ing):
        rin[i] = 0.0
        fin[i] = 0.0
    for s in range(bits.shape[0]):
        if bits[s] > 0.0:
            i = ingress[s]
            rin[i] += bits[s]
            fin[i] += bits[s] * f[s] / r[s]
            tot += bits[s]
    st[S_RSTAR] = ewma_rate(st[S_RSTAR], tot, dt, k)
    for i in range(n_ing):
        ing[i, I_R] = ewma_rate(ing[i, I_R], rin[i], dt, k)
        ing[i, I_F] = ewma_rate(ing[i, I_F], fin[i], dt, k)
        ing[i, I_TLAST] = t
    congested = st[S_RSTAR] > p[P_CAP]
    if congested:
        while t - st[S_TTAU] >= p[P_TAU_PERIOD]:
            tau_update(st, p)
            st[S_TTAU] += p[P_TAU_PERIOD]
        st[S_CONG] = 1.0
    else:
        st[S_TTAU] = t
        for s in range(bits.shape[0]):
            if bits[s] > 0.0:
                tau_uncongested(st, p, r[s] / (f[s] / ing[ingress[s], I_F] * m[ingress[s]]))
    fwd = 0.0
    for s in range(bits.shape[0]):
        g = 1.0
        if bits[s] > 0.0:
            i = ingress[s]
            f2 = f[s] / ing[i, I_F] * m[i]
            g = forwarding_probability(f2, r[s], st[S_TAU], congested)
            fwd += bits[s] * g
            ri[s] = rate_indicator(math.inf, f2, st[S_TAU], r[s] * g, p[P_CAP], st[S_RSTAR], congested)
        gamma[s] = g
    st[S_A] = ewma_rate(st[S_A], fwd, dt, k)
    st[S_TLAST] = t


@njit(cache=True)
def fluid_gammas_exact(
    m: np.ndarray, capacity: float, ingress: np.ndarray, rate: np.ndarray, f_pre: np.ndarray, gamma: np.ndarray,
    w: np.ndarray, ratio: np.ndarray, order: np.ndarray, fsum: np.ndarray,
) -> float:
    """Equations (1) and (2) solved exactly for the offered rates; returns tau (inf: uncongested).

    ``gamma[s] = min(1, f_s * tau / r_s)`` -- the forwarding fraction that gives
    every stream its FFS allocation (the exact mode of the fluid plant, checked
    against Table II). ``w``, ``ratio``, ``order`` (>= n each) and ``fsum`` (>= the
    ingresses) are scratch: the kernel calling this runs without allocation.
    """
    n = rate.shape[0]
    for i in range(m.shape[0]):
        fsum[i] = 0.0
    for s in range(n):
        if rate[s] > 0.0:
            fsum[ingress[s]] += f_pre[s]
    for s in range(n):
        w[s] = 0.0
        if rate[s] > 0.0 and fsum[ingress[s]] > 0.0:
            w[s] = f_pre[s] / fsum[ingress[s]] * m[ingress[s]]
    idx = order[:n]
    tau = maxmin_tau_into(rate, w[:n], capacity, ratio[:n], idx)
    for s in range(n):
        gamma[s] = 1.0 if rate[s] <= 0.0 else min(1.0, w[s] * tau / rate[s])
    return tau
