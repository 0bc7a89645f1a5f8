"""The leaderboard's statistics, pure: per family of paired trials, means, intervals, tests, ranks.

A *family* is one (plant, cca, experiment): every policy's per-trial values of one
metric, trial i of every policy run on the same seed and target (paired). For each
policy (``family``):

- ``n``, ``mean``, ``std`` and ``ci95``: the bootstrap 95 % interval of the mean
  (``scipy.stats.bootstrap``, BCa, 9,999 resamples, seeded; percentile where BCa is
  undefined, e.g. two trials; ``[v, v]`` when every value is v);
- ``vs_trivial_pct``: how much better than trivial, in % of trivial's mean, over the
  trials both kept (+ = better, whichever way ``better`` points: a reduction for
  MRAE and FCTs, an increase for utilisation), with ``vs_trivial_ci95`` from paired
  resampling of those trials;
- ``p_vs_trivial_raw`` / ``p_vs_best_raw``: two-sided paired Wilcoxon signed-rank
  tests (``scipy.stats.wilcoxon``) against trivial and against the best policy (the
  best mean among the ranked ones); 1.0 when every pair is equal, None with fewer
  than two pairs;
- ``p_vs_trivial`` / ``p_vs_best``: the same, Holm-corrected across the family's
  tests (``statsmodels.stats.multitest.multipletests(method="holm")``); ours: every
  policy tested in the family counts, also those kept out of the ranking, which can
  only make the correction more conservative;
- ``rank``: 1 = best among the ranked policies (``ranked``: those the plant models on
  equal footing), None for the others; ``best``: rank 1.
"""

from __future__ import annotations

import inspect
import math
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

__all__ = ["BASELINE", "BOOTSTRAP_RESAMPLES", "bootstrap_ci", "paired_ci", "wilcoxon_p", "holm",
           "improvement_pct", "family", "stable_seed", "paired_values", "planned_pair"]

#: The paired baseline (the MLC paper's trivial TBF, section 3.7).
BASELINE = "trivial"
BOOTSTRAP_RESAMPLES = 9999


def stable_seed(*parts: Any) -> int:
    """A seed from names and numbers that is the same in every process (``hash`` is salted)."""
    return zlib.crc32("/".join(map(str, parts)).encode())


def _finite(x: Iterable[float]) -> np.ndarray:
    v = np.asarray(list(x) if not isinstance(x, np.ndarray) else x, dtype=np.float64).reshape(-1)
    return v[np.isfinite(v)]


def _bootstrap(data: tuple[np.ndarray, ...], statistic: Callable[..., Any], seed: int, paired: bool) -> tuple[float, float]:
    from scipy import stats

    key = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"
    for method in ("BCa", "percentile"):
        with np.errstate(all="ignore"):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = stats.bootstrap(data, statistic, n_resamples=BOOTSTRAP_RESAMPLES, paired=paired,
                                      vectorized=True, confidence_level=0.95, method=method,
                                      **{key: np.random.default_rng(seed)})
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            return lo, hi
    return math.nan, math.nan


def bootstrap_ci(x: Iterable[float], seed: int = 0) -> tuple[float, float]:
    """Bootstrap 95 % interval of the mean of the finite values of ``x`` (module docstring)."""
    v = _finite(x)
    if v.size < 2:
        return math.nan, math.nan
    if np.all(v == v[0]):
        return float(v[0]), float(v[0])
    return _bootstrap((v,), lambda s, axis=-1: np.mean(s, axis=axis), seed, paired=False)


def improvement_pct(base: float, value: float, better: str) -> float:
    """How much ``value`` is better than ``base``, in % of ``base`` (+ = better)."""
    if not (math.isfinite(base) and math.isfinite(value)) or base == 0:
        return math.nan
    sign = 1.0 if better == "higher" else -1.0
    return sign * 100.0 * (value - base) / abs(base)


def paired_ci(base: np.ndarray, other: np.ndarray, better: str, seed: int = 0) -> tuple[float, float]:
    """Bootstrap 95 % interval of ``improvement_pct(mean(base), mean(other))``, resampling pairs."""
    b, o = np.asarray(base, dtype=np.float64), np.asarray(other, dtype=np.float64)
    if b.size < 2:
        return math.nan, math.nan
    sign = 1.0 if better == "higher" else -1.0

    def stat(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        mb = np.mean(x, axis=axis)
        with np.errstate(all="ignore"):
            return sign * 100.0 * (np.mean(y, axis=axis) - mb) / np.abs(mb)

    if np.all(b == b[0]) and np.all(o == o[0]):
        v = float(stat(b, o))
        return v, v
    return _bootstrap((b, o), stat, seed, paired=True)


def wilcoxon_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided paired Wilcoxon signed-rank p of ``a`` vs ``b`` (same trials); 1.0 if every pair is
    equal, NaN with fewer than two pairs."""
    from scipy.stats import wilcoxon

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.size < 2:
        return math.nan
    if np.all(x == y):
        return 1.0
    return float(wilcoxon(x, y).pvalue)


def holm(pvalues: Iterable[float]) -> list[float]:
    """Holm-corrected p-values (statsmodels); NaN entries stay NaN and do not count as tests."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(list(pvalues), dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method="holm")[1]
    return [float(v) for v in out]


def paired_values(a: Mapping[int, float], b: Mapping[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """The values of the trials both have (finite in both), in trial order."""
    keys = sorted(k for k in a if k in b and math.isfinite(a[k]) and math.isfinite(b[k]))
    return np.array([a[k] for k in keys], dtype=np.float64), np.array([b[k] for k in keys], dtype=np.float64)


def planned_pair(ref: Mapping[int, float], other: Mapping[int, float], better: str, seed: int = 0) -> dict[str, Any]:
    """One planned paired comparison, ``other`` against ``ref`` on the trials both have: its
    improvement in % of ``ref``'s mean (+ = ``other`` better), the bootstrap 95 % interval of it and
    the raw two-sided Wilcoxon p (one planned test, so no family correction)."""
    a, b = paired_values(ref, other)
    return {"n": int(a.size), "pct": improvement_pct(float(a.mean()), float(b.mean()), better) if a.size else math.nan,
            "ci95": list(paired_ci(a, b, better, seed)), "p": wilcoxon_p(a, b)}


def family(values: Mapping[str, Mapping[int, float]], better: str, ranked: Iterable[str] | None = None,
           baseline: str = BASELINE, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Every policy's statistics in one family (module docstring).

    ``values``: policy -> {trial: value} (excluded trials already left out; NaN counts as
    missing). ``better``: ``"lower"`` or ``"higher"``. ``ranked``: the policies that may be
    ranked and be the best (default: all). Policies come back in ``values``' order.
    """
    if better not in ("lower", "higher"):
        raise ValueError(f"better must be 'lower' or 'higher', got {better!r}")
    ranked_set = set(values if ranked is None else ranked)
    out: dict[str, dict[str, Any]] = {}
    for name, vals in values.items():
        v = _finite(vals.values())
        out[name] = {"n": int(v.size), "mean": float(v.mean()) if v.size else math.nan,
                     "std": float(v.std(ddof=1)) if v.size > 1 else math.nan,
                     "ci95": list(bootstrap_ci(v, stable_seed(seed, name, "mean")))}
    sign = -1.0 if better == "lower" else 1.0
    order = sorted((n for n in out if n in ranked_set and math.isfinite(out[n]["mean"])),
                   key=lambda n: -sign * out[n]["mean"])
    best = order[0] if order else None
    for name, s in out.items():
        s["rank"] = order.index(name) + 1 if name in order else None
        s["best"] = name == best
        for ref, key in ((baseline, "vs_trivial"), (best, "vs_best")):
            if ref is None or ref not in values or name == ref:
                s[f"p_{key}_raw"] = math.nan
                if key == "vs_trivial":
                    s.update(vs_trivial_pct=0.0 if name == ref else math.nan,
                             vs_trivial_ci95=[math.nan, math.nan], paired_n=s["n"] if name == ref else 0)
                continue
            a, b = paired_values(values[ref], values[name])
            s[f"p_{key}_raw"] = wilcoxon_p(a, b)
            if key == "vs_trivial":
                s["paired_n"] = int(a.size)
                s["vs_trivial_pct"] = improvement_pct(float(a.mean()), float(b.mean()), better) if a.size else math.nan
                s["vs_trivial_ci95"] = list(paired_ci(a, b, better, stable_seed(seed, name, "vs")))
    for key in ("vs_trivial", "vs_best"):
        names = list(out)
        adj = holm(out[n][f"p_{key}_raw"] for n in names)
        for n, p in zip(names, adj, strict=True):
            out[n][f"p_{key}"] = p
    return out
