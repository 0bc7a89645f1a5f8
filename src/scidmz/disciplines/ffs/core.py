"""Fractional Fair Shares (FFS) -- the one per-packet decision core of an FFS egress.

Paper: Wyss, Hu, Lenders, Meier, Perrig, "Lightweight Internet Bandwidth
Allocation and Isolation with Fractional Fair Shares".

- Section VI, **Algorithm 1** (per packet at egress j from ingress i):
  ``f <- f / F_(i,j)^pre * M_(i,j)``; ``gamma <- min(1, f/r * tau)``;
  ``r <- r * gamma``; Algorithm 2; forward with probability gamma.
- Section VI "Sum of Fair Shares": ``F^pre`` is a rate measured with each
  packet's length weighted by ``f/r`` (labels before Algorithm 1); R_(i,j),
  R_(*,j) likewise from arriving packets; A_j from forwarded packets.
- Section VII-A: the Python node updates A_j with ``len * gamma`` (the expected
  forwarded bytes) instead of accepted packets only -- adopted here; the random
  number ``u`` in [0, 1) is an argument so every realisation can replay it.
- Section XII: exponential averaging ``R <- (1 - e^{-T/K}) len/T + e^{-T/K} R``
  with T the inter-arrival time, K = 10 ms (the DPDK constant 10^7 ns).
- **Appendix A**: ``tau <- tau * (C + delta) / (A + delta)`` every 1 ms.
- Section VIII, **Algorithm 2** (rate indicator RI).
- **Appendix D**, Algorithms 3 and 4: the compact variant on one label
  ``rf = r / f`` and a relative rate indicator RRI, with the log encoding of
  equations (3)/(4) (:func:`log_encode`, :func:`log_decode`).

Our choices where the paper is silent (labelled, with reasons):

- ``delta = 9 * C``: the paper gives no value. With A lagging tau by about K =
  10 ms and an update every 1 ms, ``(C + delta)/(A + delta)`` moves log(tau) by
  about ``(C - A)/(C + delta)`` per update, i.e. a loop gain of ~0.1 per ms; times
  the 10 ms lag that is ~1, the fastest setting that does not ring.
- tau starts at 1 (the worst-case allocation: every stream exactly its FFS,
  which sums to C) and is clamped to [1e-3, 4 * C / min_i M_i]. Appendix A
  runs only while the egress is congested; while it is not (paper: tau = inf,
  gamma = 1), tau is the largest ``r/f`` seen since the uncongested interval
  began -- (H)CSFQ's way of starting its fair share -- so congestion starts
  from the smallest tau that limits nobody instead of a wound-up one, and the
  RI (``f tau``) never jumps (:func:`tau_uncongested`).
- Congested means ``R_* > C`` (section IV's definition, estimated).
- An inter-arrival of 0 uses the limit ``R <- R + len/K`` of the estimator.
- FFS-C85 reads as ``C = sum_i M_(i,j) = 0.85 * link`` (the column must sum to
  the capacity the discipline enforces; the link itself stays faster).
- Algorithm 4 line 5 uses ``rf`` before line 3 of Algorithm 3 scaled it by
  gamma; with the scaled value the factor is always 1 when gamma < 1, which
  would hide the decrease that Algorithm 2's ``min(RI, f * tau)`` conveys.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..base import DisciplineConfigError, check_labels
from .config import (
    I_F,
    I_R,
    I_TLAST,
    P_CAP,
    P_DELTA,
    P_K,
    P_TAU_MAX,
    P_TAU_MIN,
    P_TAU_PERIOD,
    S_A,
    S_CONG,
    S_RSTAR,
    S_TAU,
    S_TLAST,
    S_TTAU,
    FFSConfig,
)


@njit(cache=True, inline="always")
def ewma_rate(rate: float, bits: float, dt: float, k: float) -> float:
    """Exponential averaging of section XII (CSFQ); dt = 0 is its limit."""
    if dt <= 0.0:
        return rate + bits / k
    x = dt / k
    f = math.exp(-x)
    return (1.0 - f) * bits / dt + f * rate


@njit(cache=True, inline="always")
def _measure_and_tau(st: np.ndarray, ing: np.ndarray, p: np.ndarray, i: int, t: float, bits: float, wf: float) -> bool:
    """Arrival-side estimators (R_*, R_i, F_i with weight ``wf``), Appendix A tau; returns congested."""
    k = p[P_K]
    st[S_RSTAR] = ewma_rate(st[S_RSTAR], bits, t - st[S_TLAST], k)
    ing[i, I_R] = ewma_rate(ing[i, I_R], bits, t - ing[i, I_TLAST], k)
    ing[i, I_F] = ewma_rate(ing[i, I_F], bits * wf, t - ing[i, I_TLAST], k)
    ing[i, I_TLAST] = t
    congested = st[S_RSTAR] > p[P_CAP]
    if congested and t - st[S_TTAU] >= p[P_TAU_PERIOD]:
        tau_update(st, p)
        st[S_TTAU] = t
    return congested


@njit(cache=True, inline="always")
def tau_uncongested(st: np.ndarray, p: np.ndarray, ratio: float) -> None:
    """While the egress is uncongested, tau is the largest ``r / f`` seen since it last was (ours).

    Equation (2) has tau = inf without congestion; a node must still start from
    something when congestion begins. As (H)CSFQ does with its fair share
    (alpha = the largest flow rate seen in an uncongested interval), tau
    restarts at each uncongested interval and tracks the largest ``r/f`` -- the
    smallest tau that limits nobody -- so Appendix A begins from there, and the
    RI of Algorithm 2 (``f tau``) never jumps to a wound-up tau.
    """
    if st[S_CONG] > 0.0:
        st[S_TAU] = ratio
        st[S_CONG] = 0.0
    elif ratio > st[S_TAU]:
        st[S_TAU] = ratio
    st[S_TAU] = min(max(st[S_TAU], p[P_TAU_MIN]), p[P_TAU_MAX])


@njit(cache=True, inline="always")
def tau_update(st: np.ndarray, p: np.ndarray) -> None:
    """Appendix A, one timer tick: ``tau <- tau * (C + delta) / (A + delta)``, clamped (ours)."""
    tau = st[S_TAU] * (p[P_CAP] + p[P_DELTA]) / (st[S_A] + p[P_DELTA])
    st[S_TAU] = min(max(tau, p[P_TAU_MIN]), p[P_TAU_MAX])


@njit(cache=True, inline="always")
def rate_indicator(ri: float, f: float, tau: float, r: float, cap: float, rstar: float, congested: bool) -> float:
    """Algorithm 2: the RI label after this node (``f``: normalised FFS, ``r``: rate after gamma)."""
    if congested:
        return min(ri, f * tau)
    return min(ri, cap, max(r * cap / rstar, f))


@njit(cache=True, inline="always")
def forwarding_probability(f: float, r: float, tau: float, congested: bool) -> float:
    """Algorithm 1 line 2: ``gamma = min(1, f / r * tau)`` under congestion, else 1."""
    if not congested:
        return 1.0
    return min(1.0, f / r * tau)


@njit(cache=True, inline="always")
def _account_accepted(st: np.ndarray, p: np.ndarray, t: float, bits: float, gamma: float) -> None:
    # A_j from the expected forwarded bytes (section VII-A), on the arrival clock.
    st[S_A] = ewma_rate(st[S_A], bits * gamma, t - st[S_TLAST], p[P_K])
    st[S_TLAST] = t


@njit(cache=True)
def ffs_packet(
    st: np.ndarray,
    ing: np.ndarray,
    p: np.ndarray,
    m: np.ndarray,
    i: int,
    t: float,
    nbytes: float,
    r: float,
    f: float,
    ri: float,
    u: float,
) -> tuple[bool, float, float, float, float]:
    """THE FFS decision for one packet from ingress ``i``: Algorithms 1 and 2.

    Returns (forward, r', f', RI', gamma). ``ri = inf`` means the source set no
    limit yet; pass ``nan`` to skip Algorithm 2 (no RI label on the packet).
    """
    bits = 8.0 * nbytes
    congested = _measure_and_tau(st, ing, p, i, t, bits, f / r)
    tau = st[S_TAU]
    f2 = f / ing[i, I_F] * m[i]  # Alg. 1 line 1 (F_i > 0: it includes this packet)
    if congested:
        st[S_CONG] = 1.0
    else:
        tau_uncongested(st, p, r / f2)
    gamma = forwarding_probability(f2, r, tau, congested)  # line 2
    r2 = r * gamma  # line 3
    ri2 = ri
    if ri == ri:  # Algorithm 2 (line 4), skipped for NaN
        ri2 = rate_indicator(ri, f2, tau, r2, p[P_CAP], st[S_RSTAR], congested)
    _account_accepted(st, p, t, bits, gamma)
    return u < gamma, r2, f2, ri2, gamma  # line 5


@njit(cache=True)
def ffs_compact_packet(
    st: np.ndarray,
    ing: np.ndarray,
    p: np.ndarray,
    m: np.ndarray,
    i: int,
    t: float,
    nbytes: float,
    rf: float,
    rri: float,
    u: float,
) -> tuple[bool, float, float, float]:
    """Appendix D: Algorithms 3 and 4 on ``rf = r/f`` and RRI. Returns (forward, rf', RRI', gamma)."""
    bits = 8.0 * nbytes
    congested = _measure_and_tau(st, ing, p, i, t, bits, 1.0 / rf)
    tau = st[S_TAU]
    rf1 = rf * ing[i, I_F] / m[i]  # Alg. 3 line 1
    if congested:
        st[S_CONG] = 1.0
    else:
        tau_uncongested(st, p, rf1)
    gamma = 1.0
    if congested:
        gamma = min(1.0, tau / rf1)  # line 2
    rf2 = rf1 * gamma  # line 3
    if rri < 1.0:  # Alg. 4
        rri2 = rri * gamma
    elif congested:
        rri2 = min(rri, tau / rf1)  # ours: pre-gamma rf (module docstring)
    else:
        rri2 = min(rri, max(p[P_CAP] / st[S_RSTAR], 1.0 / rf2))
    _account_accepted(st, p, t, bits, gamma)
    return u < gamma, rf2, rri2, gamma


@njit(cache=True)
def ffs_first_node_packet(
    st: np.ndarray,
    ing: np.ndarray,
    p: np.ndarray,
    m: np.ndarray,
    streams: np.ndarray,
    sidx: int,
    i: int,
    t: float,
    nbytes: float,
    u: float,
) -> tuple[bool, float]:
    """FFS at a stream's first on-path node, which initialises the labels.

    Section VI: "Labels are initialized at the stream's source endpoint or the
    first on-path node, both initialized to the stream's rate." The stream's
    rate is measured here per stream (``streams[sidx] = [rate, t_last]``) with
    the same estimator as the egress (ours: the paper does not say how the first
    node measures it). Returns (forward, gamma).
    """
    r = ewma_rate(streams[sidx, 0], 8.0 * nbytes, t - streams[sidx, 1], p[P_K])
    streams[sidx, 0] = r
    streams[sidx, 1] = t
    ok, _r, _f, _ri, gamma = ffs_packet(st, ing, p, m, i, t, nbytes, r, r, math.nan, u)
    return ok, gamma


@njit(cache=True)
def log_encode(x: float, lo: float, hi: float, nbits: int) -> int:
    """Equation (3): n-bit logarithmic code of x in [lo, hi] (clamped). The base cancels."""
    if x < lo:
        x = lo
    elif x > hi:
        x = hi
    levels = (1 << nbits) - 1
    return int(math.floor((math.log(x) - math.log(lo)) / (math.log(hi) - math.log(lo)) * levels))


@njit(cache=True)
def log_decode(b: int, lo: float, hi: float, nbits: int) -> float:
    """Equation (4): the value of code ``b``."""
    levels = (1 << nbits) - 1
    return math.exp(b * (math.log(hi) - math.log(lo)) / levels + math.log(lo))


@njit(cache=True)
def ffs_run(
    st: np.ndarray,
    ing: np.ndarray,
    p: np.ndarray,
    m: np.ndarray,
    ingress: np.ndarray,
    ts: np.ndarray,
    sizes: np.ndarray,
    r: np.ndarray,
    f: np.ndarray,
    ri: np.ndarray,
    u: np.ndarray,
    accept: np.ndarray,
    tau_out: np.ndarray,
) -> int:
    """Decide a packet sequence (labels updated in place); returns packets forwarded."""
    n = 0
    for k in range(ts.shape[0]):
        ok, r[k], f[k], ri[k], _g = ffs_packet(st, ing, p, m, ingress[k], ts[k], sizes[k], r[k], f[k], ri[k], u[k])
        accept[k] = ok
        tau_out[k] = st[S_TAU]
        n += ok
    return n


@njit(cache=True)
def ffs_compact_run_encoded(
    st: np.ndarray,
    ing: np.ndarray,
    p: np.ndarray,
    m: np.ndarray,
    ingress: np.ndarray,
    ts: np.ndarray,
    sizes: np.ndarray,
    rf_code: np.ndarray,
    rri_code: np.ndarray,
    u: np.ndarray,
    lo: float,
    hi: float,
    nbits: int,
    accept: np.ndarray,
) -> int:
    """Appendix D end to end: decode labels, Algorithms 3/4, re-encode (in place)."""
    n = 0
    for k in range(ts.shape[0]):
        rf = log_decode(rf_code[k], lo, hi, nbits)
        rri = log_decode(rri_code[k], lo, hi, nbits)
        ok, rf2, rri2, _g = ffs_compact_packet(st, ing, p, m, ingress[k], ts[k], sizes[k], rf, rri, u[k])
        rf_code[k] = log_encode(rf2, lo, hi, nbits)
        rri_code[k] = log_encode(rri2, lo, hi, nbits)
        accept[k] = ok
        n += ok
    return n


def run_sequence(
    cfg: FFSConfig,
    ingress: np.ndarray,
    ts: np.ndarray,
    sizes: np.ndarray,
    r: np.ndarray,
    f: np.ndarray,
    seed: int,
    ri: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Validated convenience wrapper around :func:`ffs_run` (labels checked: 0/NaN is an error)."""
    r = check_labels("r", r).copy()
    f = check_labels("f", f).copy()
    ingress = np.asarray(ingress, dtype=np.int64)
    if ingress.min() < 0 or ingress.max() >= len(cfg.matrix_col_bps):
        raise DisciplineConfigError("ingress index outside the fairness-matrix column")
    ri = np.full(ts.shape, np.inf) if ri is None else np.asarray(ri, dtype=np.float64).copy()
    u = np.random.default_rng(seed).random(ts.shape[0])
    st, ing = cfg.new_state(float(ts[0]) if ts.shape[0] else 0.0)
    acc = np.zeros(ts.shape[0], dtype=np.bool_)
    tau = np.zeros(ts.shape[0])
    ffs_run(st, ing, cfg.params(), cfg.matrix, ingress, np.asarray(ts, float), np.asarray(sizes, float), r, f, ri, u, acc, tau)
    return {"accept": acc, "r": r, "f": f, "ri": ri, "tau": tau}
