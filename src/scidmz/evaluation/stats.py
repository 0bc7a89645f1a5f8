"""Statistics of paired trials: summaries with Student-t intervals, reductions, paired Wilcoxon tests.

Every study compares policies on the *same* trials (trial i of every policy uses
seed + i, ``evaluation.trials``), so a policy is judged against a baseline pair
by pair. The functions work on a per-policy summary mapping, the shape every
results file stores::

    summary = {"trivial": summarize(x0), "mlc": summarize(x1), "target": 5e8}
    compare(summary, "mean", "reduction_pct")    # adds summary["mlc"]["reduction_pct"]
    paired(summary, table, "mrae")               # adds paired_n / paired_wins / paired_p

Non-mapping entries (``"target"`` above) are context and are skipped.

The pieces every study shares live here once: ``BASELINE``, the paired test
``wilcoxon_p`` with its all-ties convention, and the effect that goes with it,
``hodges_lehmann`` (the MLC study and the leaderboard both use them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..metrics import reduction_pct

__all__ = ["BASELINE", "WITH_ANN", "WITHOUT_ANN", "summarize", "ci95_halfwidth", "compare", "paired", "by_policy", "per_policy", "wilcoxon_p",
           "hodges_lehmann", "signed_rank_cdf"]

#: The policy every other is compared with (the MLC paper's trivial TBF, section 3.7).
BASELINE = "trivial"
#: The study's named question on the inverse ANN: the MLC against the same PI without its model.
WITH_ANN, WITHOUT_ANN = "mlc", "pi"


def wilcoxon_p(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided paired Wilcoxon signed-rank p of ``a`` vs ``b`` (same trials, ``scipy.stats.wilcoxon``).

    The all-ties convention (ours, one for every study): when every pair is equal the test's
    statistic is defined (no signed rank is positive or negative) and there is no evidence of a
    difference, so p = 1.0, not scipy's NaN. NaN with fewer than two pairs (no test).
    """
    from scipy.stats import wilcoxon

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.size < 2:
        return math.nan
    if np.all(x == y):
        return 1.0
    return float(wilcoxon(x, y).pvalue)


#: Largest n whose signed-rank null distribution ``signed_rank_cdf`` computes exactly (float64 holds
#: the subset counts up to 2**n without overflow well past this); above it, the normal approximation.
_EXACT_N = 400


def signed_rank_cdf(n: int) -> np.ndarray:
    """P(T+ <= t), t = 0 .. n(n+1)/2, under the exact null of the signed-rank statistic (no ties):
    the number of subsets of {1..n} with each sum, over 2**n. Hand-written (scipy keeps its exact
    distribution private); tests check it against ``scipy.stats.wilcoxon``'s exact p."""
    m = n * (n + 1) // 2
    counts = np.zeros(m + 1)
    counts[0] = 1.0
    for k in range(1, n + 1):
        counts[k:] = counts[k:] + counts[:-k].copy()
    return np.cumsum(counts) / 2.0**n


def hodges_lehmann(d: Sequence[float] | np.ndarray, confidence: float = 0.95) -> tuple[float, float, float]:
    """(estimate, lo, hi): the Hodges-Lehmann estimate of the paired differences ``d`` (the median of
    their Walsh averages (d_i + d_j)/2, i <= j) and its interval inverted from the signed-rank test,
    as R's ``wilcox.test(conf.int=TRUE)`` (Hollander & Wolfe, section 3.3): with k the smallest t
    such that P(T+ <= t) >= alpha/2 (at least 1), [W_(k), W_(M+1-k)] of the M sorted Walsh averages.
    Hand-written (scipy has no Hodges-Lehmann); exact null up to ``_EXACT_N`` pairs, the normal
    approximation above. With ties or zeros the exact null is approximate (as in R); with fewer
    than 6 pairs no interval reaches 95 % and the widest one, [min, max] of the Walsh averages, is
    given. NaN with no pairs."""
    v = np.asarray(d, dtype=np.float64).reshape(-1)
    v = v[np.isfinite(v)]
    n = v.size
    if n == 0:
        return math.nan, math.nan, math.nan
    i, j = np.triu_indices(n)
    w = np.sort((v[i] + v[j]) / 2.0)
    m = w.size
    alpha = 1.0 - confidence
    if n <= _EXACT_N:
        k = int(np.searchsorted(signed_rank_cdf(n), alpha / 2.0 - 1e-12))
    else:
        from scipy.stats import norm

        k = int(math.floor(m / 2.0 - norm.ppf(1 - alpha / 2) * math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)))
    k = min(max(k, 1), (m + 1) // 2)
    return float(np.median(w)), float(w[k - 1]), float(w[m - k])


def ci95_halfwidth(values: Sequence[float] | np.ndarray) -> float:
    """Half-width of the 95 % interval of the mean from Student's t (n - 1 degrees of freedom).

    1.96 s/sqrt(n) is the normal limit and is 35 % too narrow at n = 4 (t = 3.18).
    NaN with fewer than two finite values.
    """
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size < 2:
        return math.nan
    from scipy import stats

    return float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))


def summarize(values: Sequence[float] | np.ndarray) -> dict[str, float]:
    """n, mean, std (ddof 1), median and ``ci95`` (``ci95_halfwidth``) over the finite values."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"n": 0, "mean": math.nan, "std": math.nan, "median": math.nan, "ci95": math.nan}
    std = float(v.std(ddof=1)) if v.size > 1 else 0.0
    return {"n": int(v.size), "mean": float(v.mean()), "std": std, "median": float(np.median(v)),
            "ci95": ci95_halfwidth(v)}


def compare(summary: dict[str, Any], key: str, out: str, baseline: str = BASELINE) -> None:
    """Add ``out`` = reduction in % of every policy's ``key`` vs the baseline's (positive: lower)."""
    base = summary.get(baseline, {}).get(key)
    if base is None or not math.isfinite(base) or base == 0:
        return
    for name, s in summary.items():
        if name != baseline and isinstance(s, dict) and math.isfinite(s.get(key, math.nan)):
            s[out] = reduction_pct(base, s[key])


def paired(summary: dict[str, Any], table: Any, col: str, key: str = "trial", baseline: str = BASELINE) -> None:
    """Paired Wilcoxon signed-rank test of each policy vs the baseline over the same trials.

    ``table``: one row per (policy, ``key``) with the metric ``col``. Adds to each
    policy's summary ``paired_n`` (pairs with both values finite), ``paired_wins``
    (pairs where this policy is lower than the baseline) and ``paired_p`` (two-sided,
    ``wilcoxon_p``: 1.0 when every pair is equal, NaN with fewer than two pairs).
    """
    base = table[table["policy"] == baseline].set_index(key)[col]
    for name, s in summary.items():
        if name == baseline or not isinstance(s, dict):
            continue
        other = table[table["policy"] == name].set_index(key)[col]
        both = np.column_stack([base.reindex(other.index).to_numpy(dtype=float), other.to_numpy(dtype=float)])
        both = both[np.all(np.isfinite(both), axis=1)]
        diff = both[:, 0] - both[:, 1]
        s["paired_n"] = int(len(diff))
        s["paired_wins"] = int(np.sum(diff > 0))
        s["paired_p"] = wilcoxon_p(both[:, 0], both[:, 1])


def by_policy(table: Any, col: str) -> dict[str, np.ndarray]:
    """``{policy: values of col}`` in the table's policy order (for CDF plots)."""
    return {str(n): g[col].to_numpy(dtype=np.float64) for n, g in table.groupby("policy", sort=False)}


def per_policy(table: Any, col: str, **extra: Any) -> dict[str, Any]:
    """``{policy: summarize(col) | extra}`` where each ``extra`` value is a function of the policy's rows."""
    return {str(name): {**summarize(g[col]), **{k: fn(g) for k, fn in extra.items()}}
            for name, g in table.groupby("policy", sort=False)}

