"""Statistics of paired trials: summaries with Student-t intervals, reductions, paired Wilcoxon tests.

Every study compares policies on the *same* trials (trial i of every policy uses
seed + i, ``evaluation.trials``), so a policy is judged against a baseline pair
by pair. The functions work on a per-policy summary mapping, the shape every
results file stores::

    summary = {"trivial": summarize(x0), "mlc": summarize(x1), "target": 5e8}
    compare(summary, "mean", "reduction_pct")    # adds summary["mlc"]["reduction_pct"]
    paired(summary, table, "mrae")               # adds paired_n / paired_wins / paired_p

Non-mapping entries (``"target"`` above) are context and are skipped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..metrics import reduction_pct

__all__ = ["BASELINE", "summarize", "ci95_halfwidth", "compare", "paired", "by_policy", "per_policy"]

#: The policy every other is compared with (the MLC paper's trivial TBF, section 3.7).
BASELINE = "trivial"


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
    (pairs where this policy is lower than the baseline) and ``paired_p`` (two-sided;
    NaN with fewer than two pairs or no difference at all).
    """
    from scipy.stats import wilcoxon

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
        if len(diff) >= 2 and np.any(diff != 0):
            s["paired_p"] = float(wilcoxon(both[:, 0], both[:, 1]).pvalue)
        else:
            s["paired_p"] = math.nan


def by_policy(table: Any, col: str) -> dict[str, np.ndarray]:
    """``{policy: values of col}`` in the table's policy order (for CDF plots)."""
    return {str(n): g[col].to_numpy(dtype=np.float64) for n, g in table.groupby("policy", sort=False)}


def per_policy(table: Any, col: str, **extra: Any) -> dict[str, Any]:
    """``{policy: summarize(col) | extra}`` where each ``extra`` value is a function of the policy's rows."""
    return {str(name): {**summarize(g[col]), **{k: fn(g) for k, fn in extra.items()}}
            for name, g in table.groupby("policy", sort=False)}

