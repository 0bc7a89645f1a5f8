"""Statistics of paired trials, one module for every study: summaries, tests, effects, families, Holm.

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

**Families** (the leaderboard, the decision table, the MLC report's page correction).
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
- ``vs_trivial_hl_pct`` and ``vs_trivial_hl_ci95``: the effect that goes with the
  Wilcoxon test, the Hodges-Lehmann estimate of the paired difference (the median of
  the Walsh averages of the differences) and its 95 % interval from the signed-rank
  distribution (``hodges_lehmann``), in % of trivial's mean on those trials, + = better;
- ``vs_trivial_loo_pct``: [least, most] of ``vs_trivial_pct`` with each paired trial left
  out in turn (leave-one-out; NaN below three pairs): a range that straddles 0 says one
  trial decides the change's sign, as one disturbed window decided a re-check's MLC MRAE;
- ``p_vs_trivial_raw`` / ``p_vs_best_raw``: two-sided paired Wilcoxon signed-rank
  tests (``scipy.stats.wilcoxon``) against trivial and against the best policy; the
  all-ties convention is ``wilcoxon_p``'s (p = 1.0), None with fewer
  than two pairs;
- ``shared_n`` / ``shared_mean``: the trials every ranked policy kept, and the policy's
  mean over exactly those; ``rank``: 1 = best by ``shared_mean`` among the ranked
  policies (``ranked``: those the plant models on equal footing), None for the others;
  ``best``: rank 1. Ranks are paired comparisons, so a policy cannot climb by losing its
  worst trial to the starvation filter (ours: with no trial shared by every ranked
  policy, nothing is ranked).

Holm's correction is not applied per family: ``holm_rows`` corrects every test a page
renders at once (each row's vs-trivial and vs-best tests and the planned mlc-vs-pi test,
``statsmodels.stats.multitest.multipletests(method="holm")``), so the family is the page.
"""

from __future__ import annotations

import inspect
import math
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..metrics import reduction_pct

__all__ = ["BASELINE", "WITH_ANN", "WITHOUT_ANN", "summarize", "ci95_halfwidth", "compare", "paired", "by_policy",
           "per_policy", "wilcoxon_p", "hodges_lehmann", "signed_rank_cdf", "BOOTSTRAP_RESAMPLES", "bootstrap_ci",
           "paired_ci", "holm", "holm_rows", "improvement_pct", "family", "stable_seed", "paired_values",
           "planned_pair", "hl_pct", "PAGE_TESTS", "page_tests", "loo_pct", "holm_floor"]

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


#: Resamples of every bootstrap interval (seeded).
BOOTSTRAP_RESAMPLES = 9999
#: The tests every leaderboard row may hold, as (raw p field, corrected p field) (``holm_rows``); a
#: planned comparison against policy X adds ``vs_X_p_raw`` / ``vs_X_p`` (``page_tests``).
PAGE_TESTS = (("p_vs_trivial_raw", "p_vs_trivial"), ("p_vs_best_raw", "p_vs_best"), ("vs_pi_p_raw", "vs_pi_p"))


def page_tests(row: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (raw, corrected) p fields of one row: ``PAGE_TESTS`` and every planned comparison's
    ``vs_X_p_raw`` (mlc against pi, a configuration against the paced DTN alone)."""
    fixed = [t for t in PAGE_TESTS if t[0] in row]
    extra = sorted((k, k[: -len("_raw")]) for k in row if k.startswith("vs_") and k.endswith("_p_raw"))
    return fixed + [t for t in extra if t not in fixed]


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


def holm(pvalues: Iterable[float]) -> list[float]:
    """Holm-corrected p-values (statsmodels); NaN entries stay NaN and do not count as tests."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(list(pvalues), dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method="holm")[1]
    return [float(v) for v in out]


def holm_floor(pvalues: Sequence[float], i: int, best: float) -> float:
    """The Holm-corrected p test ``i`` of a family would get were its raw p ``best`` (the smallest its
    test can give, e.g. a Wilcoxon test's on its pairs), every other test's raw p as it is. Holm's
    corrected p never falls when a raw p rises, so no outcome of test ``i`` gets below this: where it
    is >= the level, the test cannot be significant in this family, however its trials came out.
    NaN where ``best`` is not finite (no test).

    Hand-written, not ``holm``: a page asks this of each of its few hundred tests, and statsmodels
    takes about 40 ms a family here (a rendered page took minutes). Holm's step-down read at one
    place: the largest (m - j) * p_(j) over the sorted p's up to that test's; ties before it count,
    as they do in ``holm`` (a test checks the two agree)."""
    if not math.isfinite(best):
        return math.nan
    p = np.array([float(v) if isinstance(v, int | float) else math.nan for v in pvalues])
    p[i] = best
    srt = np.sort(p[np.isfinite(p)])
    k = int(np.searchsorted(srt, best, side="right"))
    return float(min(1.0, np.max(srt[:k] * (srt.size - np.arange(k)))))


def holm_rows(rows: Iterable[dict[str, Any]]) -> int:
    """Holm-correct every test of a page at once (``PAGE_TESTS``: each raw p a row holds), writing the
    corrected p beside each raw one; the number of tests corrected (the family's size, for the page)."""
    rows = list(rows)
    slots = [(r, raw, adj) for r in rows for raw, adj in page_tests(r)]
    adjusted = holm(r[raw] if isinstance(r[raw], int | float) else math.nan for r, raw, _ in slots)
    for (r, _, adj), p in zip(slots, adjusted, strict=True):
        r[adj] = p
    return sum(1 for p in adjusted if math.isfinite(p))


def loo_pct(ref: np.ndarray, other: np.ndarray, better: str) -> list[float]:
    """[least, most] ``improvement_pct`` of the paired means with each pair left out in turn (NaN with
    fewer than three pairs): how much the change depends on any single trial."""
    n = ref.size
    if n < 3:
        return [math.nan, math.nan]
    sa, sb = float(ref.sum()), float(other.sum())
    vals = [improvement_pct((sa - ref[k]) / (n - 1), (sb - other[k]) / (n - 1), better) for k in range(n)]
    vals = [v for v in vals if math.isfinite(v)]
    return [min(vals), max(vals)] if vals else [math.nan, math.nan]


def hl_pct(ref: np.ndarray, other: np.ndarray, better: str) -> tuple[float, list[float]]:
    """``hodges_lehmann(other - ref)`` and its 95 % interval in % of ``ref``'s mean, + = better
    (as ``improvement_pct``); NaN with fewer than two pairs."""
    if ref.size < 2:
        return math.nan, [math.nan, math.nan]
    est, lo, hi = hodges_lehmann(other - ref)
    m = float(ref.mean())
    if m == 0 or not math.isfinite(m):
        return math.nan, [math.nan, math.nan]
    sign = 1.0 if better == "higher" else -1.0
    ends = sorted(sign * 100.0 * v / abs(m) for v in (lo, hi))
    return sign * 100.0 * est / abs(m), ends


def paired_values(a: Mapping[int, float], b: Mapping[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """The values of the trials both have (finite in both), in trial order."""
    keys = sorted(k for k in a if k in b and math.isfinite(a[k]) and math.isfinite(b[k]))
    return np.array([a[k] for k in keys], dtype=np.float64), np.array([b[k] for k in keys], dtype=np.float64)


def planned_pair(ref: Mapping[int, float], other: Mapping[int, float], better: str, seed: int = 0) -> dict[str, Any]:
    """One planned paired comparison, ``other`` against ``ref`` on the trials both have: its
    improvement in % of ``ref``'s mean (+ = ``other`` better), the bootstrap 95 % interval of it, the
    Hodges-Lehmann estimate and interval (``hl_pct``) and the raw two-sided Wilcoxon p (a page that
    renders it corrects it with its other tests, ``holm_rows``)."""
    a, b = paired_values(ref, other)
    hl, hl_ci = hl_pct(a, b, better)
    return {"n": int(a.size), "pct": improvement_pct(float(a.mean()), float(b.mean()), better) if a.size else math.nan,
            "ci95": list(paired_ci(a, b, better, seed)), "hl_pct": hl, "hl_ci95": hl_ci, "loo_pct": loo_pct(a, b, better),
            "p": wilcoxon_p(a, b)}


def _shared(values: Mapping[str, Mapping[int, float]], names: Iterable[str]) -> list[int]:
    """The trials every one of ``names`` kept with a finite value, in trial order."""
    sets = [{k for k, v in values[n].items() if math.isfinite(v)} for n in names]
    return sorted(set.intersection(*sets)) if sets else []


def family(values: Mapping[str, Mapping[int, float]], better: str, ranked: Iterable[str] | None = None,
           baseline: str = BASELINE, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Every policy's statistics in one family (module docstring), raw p values only.

    ``values``: policy -> {trial: value} (excluded trials already left out; NaN counts as
    missing). ``better``: ``"lower"`` or ``"higher"``. ``ranked``: the policies that may be
    ranked and be the best (default: all). Policies come back in ``values``' order.
    """
    if better not in ("lower", "higher"):
        raise ValueError(f"better must be 'lower' or 'higher', got {better!r}")
    ranked_names = [n for n in values if n in set(values if ranked is None else ranked)]
    shared = _shared(values, ranked_names)
    out: dict[str, dict[str, Any]] = {}
    for name, vals in values.items():
        v = _finite(vals.values())
        on = [vals[k] for k in shared] if name in ranked_names else []
        out[name] = {"n": int(v.size), "mean": float(v.mean()) if v.size else math.nan,
                     "std": float(v.std(ddof=1)) if v.size > 1 else math.nan,
                     "ci95": list(bootstrap_ci(v, stable_seed(seed, name, "mean"))),
                     "shared_n": len(on), "shared_mean": float(np.mean(on)) if on else math.nan}
    sign = -1.0 if better == "lower" else 1.0
    order = sorted((n for n in ranked_names if shared), key=lambda n: -sign * out[n]["shared_mean"])
    best = order[0] if order else None
    for name, s in out.items():
        s["rank"] = order.index(name) + 1 if name in order else None
        s["best"] = name == best
        s.update(_versus(values, name, baseline, best, better, seed))
    return out


def _versus(values: Mapping[str, Mapping[int, float]], name: str, baseline: str, best: str | None, better: str,
            seed: int) -> dict[str, Any]:
    """One policy's paired tests against the baseline and the best (raw p), with the vs-trivial effects."""
    s: dict[str, Any] = {}
    for ref, key in ((baseline, "vs_trivial"), (best, "vs_best")):
        if ref is None or ref not in values or name == ref:
            s[f"p_{key}_raw"] = math.nan
            if key == "vs_trivial":
                own = int(_finite(values[name].values()).size)
                s.update(vs_trivial_pct=0.0 if name == ref else math.nan, vs_trivial_ci95=[math.nan, math.nan],
                         vs_trivial_hl_pct=0.0 if name == ref else math.nan, vs_trivial_hl_ci95=[math.nan, math.nan],
                         vs_trivial_loo_pct=[math.nan, math.nan], paired_n=own if name == ref else 0)
            continue
        a, b = paired_values(values[ref], values[name])
        s[f"p_{key}_raw"] = wilcoxon_p(a, b)
        if key == "vs_trivial":
            hl, hl_ci = hl_pct(a, b, better)
            s.update(paired_n=int(a.size),
                     vs_trivial_pct=improvement_pct(float(a.mean()), float(b.mean()), better) if a.size else math.nan,
                     vs_trivial_ci95=list(paired_ci(a, b, better, stable_seed(seed, name, "vs"))),
                     vs_trivial_hl_pct=hl, vs_trivial_hl_ci95=hl_ci, vs_trivial_loo_pct=loo_pct(a, b, better))
    return s
