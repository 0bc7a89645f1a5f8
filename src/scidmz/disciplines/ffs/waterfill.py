"""Exact allocations: FFS equation (2) by water-filling, and the HWFQ baseline.

Wyss et al., "Lightweight Internet Bandwidth Allocation and Isolation with
Fractional Fair Shares", section V: ``r_s = min(r_s^pre, f_s * tau)`` with tau
the unique solution of ``C = sum_s r_s`` (tau = inf without congestion), and
equation (1): ``f_s = f_s^pre / F_(i,j)^pre * M_(i,j)``. The paper solves
``g(tau) = 0`` with Brent's method in its simulator (section VII-B); here the
solution is exact: ``g`` is piecewise linear and increasing, so sorting the
streams by ``r/f`` finds the segment holding the root (water-filling).

HWFQ (Table II's comparison): interface-based two-level weighted max-min --
ingresses share the egress by their matrix entries, streams share their
ingress's allocation by their fair shares (unused share stays on the ingress
first; that is what distinguishes it from FFS).

:func:`maxmin_tau` is the one water-filling (numba): the fluid plant's exact
mode (:func:`scidmz.disciplines.ffs.fluid.fluid_gammas_exact`) and the
functions here call it.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..base import DisciplineConfigError, check_labels, check_positive


@njit(cache=True)
def maxmin_tau(demand: np.ndarray, weight: np.ndarray, capacity: float) -> float:
    """The tau of exact weighted max-min (``x_s = min(d_s, w_s tau)``, ``sum x = C``); inf if it all fits.

    Water-filling: ``g(tau)`` is piecewise linear and increasing, so the streams
    sorted by ``d/w`` locate the segment that holds the root.
    """
    n = demand.shape[0]
    return maxmin_tau_into(demand, weight, capacity, np.empty(n), np.empty(n))


@njit(cache=True)
def maxmin_tau_into(demand: np.ndarray, weight: np.ndarray, capacity: float, ratio: np.ndarray,
                    order: np.ndarray) -> float:
    """:func:`maxmin_tau` with its scratch (``ratio``, ``order``: n floats each; ``order`` holds stream indices) given.

    Allocation-free, so the fluid kernel (compiled without numba's reference
    counting) can call it. The streams are ordered by a stable insertion sort,
    which gives the same order as the stable mergesort it replaces (ties keep
    their index order); n is the flows of one bottleneck, so O(n^2) is cheap.
    """
    total = 0.0
    n = demand.shape[0]
    for s in range(n):
        total += demand[s]
    if total <= capacity:
        return math.inf
    w_left = 0.0
    for s in range(n):
        ratio[s] = math.inf
        if weight[s] > 0.0:
            ratio[s] = demand[s] / weight[s]
            w_left += weight[s]
    for i in range(n):
        order[i] = i
        j = i
        while j > 0 and ratio[int(order[j - 1])] > ratio[i]:
            order[j] = order[j - 1]
            j -= 1
        order[j] = i
    satisfied = 0.0
    for i in range(n):
        s = int(order[i])
        if weight[s] <= 0.0:
            break
        tau = (capacity - satisfied) / w_left
        if ratio[s] >= tau:
            return tau
        satisfied += demand[s]
        w_left -= weight[s]
    return math.inf


def weighted_maxmin(demands: np.ndarray, weights: np.ndarray, capacity: float) -> tuple[np.ndarray, float]:
    """Exact weighted max-min: ``x_s = min(d_s, w_s * tau)``, ``sum x = capacity``.

    Returns (allocation, tau); tau = inf when the demands fit (no congestion).
    Streams with weight 0 get ``min(d, 0)`` = 0 under congestion.
    """
    d = np.asarray(demands, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if d.shape != w.shape or d.ndim != 1:
        raise DisciplineConfigError("demands and weights must be 1-D arrays of one length")
    if (d < 0).any() or (w < 0).any() or not (np.isfinite(d).all() and np.isfinite(w).all()):
        raise DisciplineConfigError("demands and weights must be finite and >= 0")
    cap = check_positive("capacity", capacity)
    if d.sum() <= cap:
        return d.copy(), math.inf
    # one water-filling for the reports, the fluid plant's exact mode and this function
    tau = float(maxmin_tau(d, w, cap))
    if math.isinf(tau):
        # only weight-0 streams are left unsatisfied: they get nothing
        return np.where(w > 0, d, 0.0), math.inf
    return np.minimum(d, w * tau), tau


def normalize_ffs(f_pre: np.ndarray, ingress: np.ndarray, matrix_col: np.ndarray) -> np.ndarray:
    """Equation (1): each stream's FFS scaled so its ingress's FFS sum is ``M_(i,j)``."""
    f = check_labels("f", f_pre)
    ing = np.asarray(ingress, dtype=np.int64)
    m = np.asarray(matrix_col, dtype=np.float64)
    tot = np.bincount(ing, weights=f, minlength=m.shape[0])
    return f / tot[ing] * m[ing]


def ffs_allocation(
    rates: np.ndarray, f_pre: np.ndarray, ingress: np.ndarray, matrix_col: np.ndarray, capacity: float
) -> tuple[np.ndarray, float]:
    """FFS rates after the node (equations 1 and 2) and tau, exactly."""
    f = normalize_ffs(f_pre, ingress, matrix_col)
    return weighted_maxmin(rates, f, capacity)


def hwfq_allocation(
    rates: np.ndarray, f_pre: np.ndarray, ingress: np.ndarray, matrix_col: np.ndarray, capacity: float
) -> np.ndarray:
    """Interface-based HWFQ: max-min across ingresses (weights M), then within each."""
    d = np.asarray(rates, dtype=np.float64)
    ing = np.asarray(ingress, dtype=np.int64)
    m = np.asarray(matrix_col, dtype=np.float64)
    per_ing = np.bincount(ing, weights=d, minlength=m.shape[0])
    top, _ = weighted_maxmin(per_ing, m, capacity)
    out = np.zeros_like(d)
    f = np.asarray(f_pre, dtype=np.float64)
    for i in range(m.shape[0]):
        sel = ing == i
        if sel.any() and top[i] > 0:
            out[sel], _ = weighted_maxmin(d[sel], f[sel], top[i])
    return out
