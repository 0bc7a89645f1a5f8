"""The leaderboard's ranking and its verdict in plain words, from ``reports/leaderboard/results.json``.

Input: the results file's top-level ``"rows"`` (``leaderboard.results``), one per
(plant, cca, policy, experiment) with ``plant, cca, policy, experiment, trials, mean, ci95
([lo, hi]), vs_trivial_pct, p_vs_trivial, comparable`` and optionally ``better``
("lower"/"higher"), ``rank`` (the paired ranking on the trials every ranked policy shares,
``stats.family``), ``p_vs_best``, the Hodges-Lehmann effect
(``vs_trivial_hl_pct``, ``vs_trivial_hl_ci95``) and, on FCT rows, ``rate_vs_target``. Output:
per (plant, cca) regime and experiment, the comparable policies in their paired rank order
(by mean only where a row has no rank), the rows marked not comparable listed apart (never
ranked, never in the verdict), and one sentence per experiment saying which policy is best
and whether it beats the trivial TBF significantly.

The words check the sign: "significantly better" needs p < ALPHA *and* a paired change in
the better direction; a significant change the other way is called significantly worse. A
DTN that ran above its FCT target (``rate_vs_target`` > 1, or, where rows lack it, a mean
FCT below the ideal one) overshot: its shorter FCT is taken from campus traffic, so it is
never the FCT verdict's best nor "better"; the sentence names it with its rate / target.

Our choices, where the spec is silent: significance at p < 0.05 on the (Holm-corrected)
``p_vs_trivial``; when ``better`` is absent, utilisation is higher-is-better and every other
experiment lower-is-better; the verdict names the experiments MRAE and DTN FCT first
(the two the MLC paper and the issue rank by), then the others. A test with too few pairs to
ever reach p < ALPHA is said to be untestable, never "not significant" or "not
distinguishable": five pairs cannot separate even a policy that is slower in every pair. "Ever"
counts the page's Holm correction (``with_floors``): in a merged family of 200+ tests, ten pairs
all of one sign (raw p 0.002) still correct to p > 0.05.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .stats import BASELINE, WITH_ANN, WITHOUT_ANN, holm_floor, page_tests

__all__ = ["ALPHA", "CONFIG_ALPHA", "PLACES", "by_place", "configuration_answer", "interval_text", "leaderboard_context", "leads_trivial",
           "one_trial_decides", "overshoot", "p_floor", "rank", "saturator_verdict", "untestable_vs_trivial", "verdict_lines",
           "with_floors"]

ALPHA = 0.05
#: The bar a configuration must clear against the paced DTN alone (``configuration_answer``): the
#: question set for configurations asks for p < 0.01, stricter than ``ALPHA``.
CONFIG_ALPHA = 0.01
#: Ours: how much longer, in % of the trivial TBF's, the campus's short-flow FCT under a configuration
#: may be and still count as "no worse" (``_short_verdict``). Chosen before the first kernel short-flow
#: trial ran: 5 % is the smallest slowdown of a campus user's short transfers we would call one.
SHORT_MARGIN_PCT = 5.0
_FIRST = ("mrae", "fct")
_HIGHER = ("utilization", "utilisation")
#: Where an admin can act (the policy kinds, ARCHITECTURE.md), in the order the sentence names them.
PLACES = (("host", "the DTN host"), ("rate", "the campus uplink rate"), ("queue", "the border router's queues"),
          ("discipline", "the bottleneck discipline"))
_REQUIRED = ("plant", "cca", "policy", "experiment", "trials", "mean", "ci95", "vs_trivial_pct", "p_vs_trivial",
             "comparable")


def _higher(row: Mapping[str, Any]) -> bool:
    return row.get("better", "higher" if row["experiment"] in _HIGHER else "lower") == "higher"


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def rank(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One experiment of one regime: comparable rows best first, each with its ``rank``: the paired
    rank the statistics gave (``stats.family``) where every row has one, else by mean."""
    ok = [r for r in rows if r.get("comparable") and _finite(r.get("mean"))]
    if ok and all(isinstance(r.get("rank"), int) for r in ok):
        ok.sort(key=lambda r: r["rank"])
    else:
        ok.sort(key=lambda r: -r["mean"] if _higher(r) else r["mean"])
    return [{**r, "rank": i + 1} for i, r in enumerate(ok)]


def _significant(row: Mapping[str, Any]) -> bool:
    p = row.get("p_vs_trivial")
    return _finite(p) and p < ALPHA


def leads_trivial(row: Mapping[str, Any]) -> bool:
    """Whether a row is significantly better than the trivial TBF: Holm-corrected p vs trivial <
    ``ALPHA`` and a better mean (``vs_trivial_pct`` > 0)."""
    return _significant(row) and _finite(row.get("vs_trivial_pct")) and row["vs_trivial_pct"] > 0


def p_floor(pairs: int) -> float:
    """The smallest p a two-sided paired Wilcoxon signed-rank test can give on ``pairs`` pairs:
    every difference of one sign, 2 / 2**pairs under the exact null distribution (scipy's
    ``wilcoxon`` uses it up to 50 pairs without ties; 1.0 below one pair). Holm's correction
    can only raise a p, so ``p_floor(n) >= ALPHA`` means no result on n pairs can be significant."""
    return 1.0 if pairs < 1 else min(1.0, 2.0 ** (1 - pairs))


def with_floors(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copies of a page's rows, each test field ``X`` (``stats.page_tests``) given ``X_floor``: the
    smallest Holm-corrected p its test could reach in this page's family were all its pairs of one sign
    (``stats.holm_floor`` at ``p_floor``). Pairs: ``paired_n`` against the trivial TBF, else the row's
    trial count, an upper bound, so the floor stays a lower bound. The rows are taken as the family:
    the merged file's are the family its p's were corrected over (``stats.holm_rows``), and fewer rows
    than the family only lower the floors (Holm's corrected p never rises when a test leaves the
    family), so they never make a test falsely "untestable"."""
    out = [dict(r) for r in rows]
    slots = [(r, raw, adj) for r in out for raw, adj in page_tests(r)]
    raws = [r[raw] for r, raw, _ in slots]
    for i, (r, _, adj) in enumerate(slots):
        pairs = _pairs_vs_trivial(r) if adj == "p_vs_trivial" else r.get("trials")
        if _finite(raws[i]) and isinstance(pairs, int):
            r[f"{adj}_floor"] = holm_floor(raws, i, p_floor(pairs))
    return out


def _reach(row: Mapping[str, Any], key: str, pairs: Any) -> float:
    """The smallest p the row's ``key`` test could report, whatever its trials: the larger of two bounds
    no outcome gets below, the Wilcoxon floor on ``pairs`` and the page's Holm floor (``with_floors``);
    0 where neither is known."""
    bounds = [p_floor(pairs)] if isinstance(pairs, int) else []
    holm = row.get(f"{key}_floor")
    return max(bounds + ([holm] if _finite(holm) else []), default=0.0)


def _untestable(row: Mapping[str, Any], key: str, pairs: Any) -> bool:
    return _reach(row, key, pairs) >= ALPHA


def untestable_vs_trivial(row: Mapping[str, Any]) -> bool:
    """Whether no outcome of the row's test against the trivial TBF could be significant (the ``°`` mark)."""
    return _untestable(row, "p_vs_trivial", _pairs_vs_trivial(row))


def _pairs_vs_trivial(row: Mapping[str, Any]) -> Any:
    return row.get("paired_n", row.get("trials"))


def _pairs_with(row: Mapping[str, Any], other: Mapping[str, Any]) -> Any:
    """At most the smaller trial count: trial i of every policy is paired, so a policy pairs with
    another only on trials both kept (rows do not store that count, so this is an upper bound,
    which keeps the untestable claim safe)."""
    a, b = row.get("trials"), other.get("trials")
    return min(a, b) if isinstance(a, int) and isinstance(b, int) else None


def _too_few(row: Mapping[str, Any], key: str, pairs: Any) -> str:
    if isinstance(pairs, int) and p_floor(pairs) >= ALPHA:
        return f"too few paired trials (n = {pairs}; the smallest p a two-sided Wilcoxon test can give is {p_floor(pairs):.3g})"
    return (f"too few paired trials for this page's Holm correction (n = {pairs}; the smallest corrected p any "
            f"outcome could get is {_reach(row, key, pairs):.2g})")


def overshoot(row: Mapping[str, Any], ideal: float | None = None) -> bool:
    """Whether an FCT row's DTN ran above its target (module docstring)."""
    ratio = row.get("rate_vs_target")
    if _finite(ratio):
        return ratio > 1.0
    return _finite(ideal) and _finite(row.get("mean")) and row["mean"] < ideal  # type: ignore[operator]


def _hl(row: Mapping[str, Any], key: str = "vs_trivial") -> str:
    """", HL +x % [lo, hi]": the Hodges-Lehmann effect beside the mean change, where the row has it."""
    hl, ci = row.get(f"{key}_hl_pct"), row.get(f"{key}_hl_ci95") or [None, None]
    if not _finite(hl):
        return ""
    span = f" [{ci[0]:+.1f}, {ci[1]:+.1f}]" if _finite(ci[0]) and _finite(ci[1]) else ""
    return f", HL {hl:+.1f} %{span}"


def one_trial_decides(row: Mapping[str, Any], key: str = "vs_trivial") -> bool:
    """Whether leaving out a single paired trial turns the change's sign (``{key}_loo_pct`` straddles 0)."""
    lo, hi = (row.get(f"{key}_loo_pct") or [None, None])[:2]
    return _finite(lo) and _finite(hi) and lo < 0 < hi  # type: ignore[operator]


def _loo(row: Mapping[str, Any], key: str = "vs_trivial") -> str:
    if not one_trial_decides(row, key):
        return ""
    lo, hi = row[f"{key}_loo_pct"][:2]
    return f"; one trial decides its sign (leaving one out: {lo:+.1f} to {hi:+.1f} %)"


def _sentence(exp: str, ranked: list[dict[str, Any]]) -> str:
    if not ranked:
        return f"{exp}: no comparable policy."
    best = ranked[0]
    if best["policy"] == BASELINE:
        return f"{exp}: no policy beats the trivial TBF (it ranks first of {len(ranked)})."
    gain = best.get("vs_trivial_pct")
    p = best.get("p_vs_trivial")
    how = f"{gain:+.1f} % vs trivial{_hl(best)}{_loo(best)}" if _finite(gain) else "vs trivial: n/a"
    head = f"{exp}: best is {best['policy']} ({how}, p = {p:.2g}" if _finite(p) else f"{exp}: best is {best['policy']} ({how}, no test"
    pairs = _pairs_vs_trivial(best)
    shared = best.get("shared_n")
    if isinstance(shared, int) and isinstance(pairs, int) and shared != pairs:
        head += f"; ranked on the {shared} trials every ranked policy kept"
    if leads_trivial(best):
        tail = "), significantly better than the trivial TBF"
    elif _significant(best):
        tail = "), significantly **worse** than the trivial TBF on their paired trials"
    elif untestable_vs_trivial(best):
        tail = f"), untestable against the trivial TBF: {_too_few(best, 'p_vs_trivial', pairs)}"
    else:
        tail = f"), **not** significantly better than the trivial TBF (p >= {ALPHA})"
    return head + tail + _others(best, ranked[1:]) + "."


def _others(best: Mapping[str, Any], rest: list[dict[str, Any]]) -> str:
    """The policies the tests could not separate from the best, apart from those they never could."""
    same = [r for r in rest if _finite(r.get("p_vs_best")) and r["p_vs_best"] >= ALPHA]
    blind = [r for r in same if _untestable(r, "p_vs_best", _pairs_with(r, best))]
    tied = [r["policy"] for r in same if r not in blind]
    out = f"; not distinguishable from the best: {', '.join(tied)}" if tied else ""
    if blind:
        out += (f"; too few paired trials to test against the best (no outcome on so few can reach p < {ALPHA:g}, "
                "Holm-corrected): " + ", ".join(
                    f"{r['policy']} ({r['mean']:.3g}, n = {_pairs_with(r, best)}, p >= "
                    f"{_reach(r, 'p_vs_best', _pairs_with(r, best)):.2g})" for r in blind))
    return out


def _ann(ranked: list[dict[str, Any]]) -> str:
    """The planned mlc-vs-pi test (the two differ only by the inverse ANN), when the row has it."""
    mlc = next((r for r in ranked if r["policy"] == WITH_ANN and _finite(r.get("vs_pi_p"))), None)
    if mlc is None:
        return ""
    p, gain = mlc["vs_pi_p"], mlc.get("vs_pi_pct")
    how = f"{gain:+.1f} %{_hl(mlc, 'vs_pi')}{_loo(mlc, 'vs_pi')}" if _finite(gain) else "n/a"
    pi = next((r for r in ranked if r["policy"] == WITHOUT_ANN), None)
    pairs = _pairs_with(mlc, pi) if pi is not None else None
    word = "pays for itself" if p < ALPHA and _finite(gain) and gain > 0 else (
        "does worse" if p < ALPHA else f"cannot be judged: {_too_few(mlc, 'vs_pi_p', pairs)}"
        if _untestable(mlc, "vs_pi_p", pairs)
        else "makes no significant difference")
    return f" The inverse ANN (mlc vs pi, {how}, p = {p:.2g}, Holm) {word}."


def _pacing(ranked: list[dict[str, Any]]) -> str:
    """Where a paced DTN stands, when it ran and is not itself the best."""
    pace = next((r for r in ranked if r["policy"] == "pacing"), None)
    if pace is None or pace["rank"] == 1:
        return ""
    p = pace.get("p_vs_best")
    head = f" A paced DTN ranks {pace['rank']} of {len(ranked)}"
    if _finite(p) and p < ALPHA:
        return head + f", significantly behind the best (p = {p:.2g})."
    pairs = _pairs_with(pace, ranked[0])
    if _untestable(pace, "p_vs_best", pairs):
        return head + f"; {_too_few(pace, 'p_vs_best', pairs)} to test it against the best."
    return head + ", not distinguishable from the best."


def _rate(r: Mapping[str, Any]) -> str:
    ratio = r.get("rate_vs_target")
    return f"{r['mean']:.1f} s at {ratio:.2f} x its target rate" if _finite(ratio) else f"{r['mean']:.1f} s"


def _above_target(over: list[dict[str, Any]], ideal: float | None) -> str:
    """The policies whose DTN ran above its target: overshoot taken from campus traffic, not better
    service (module docstring), each with its FCT and rate / target."""
    if not over:
        return ""
    names = ", ".join(f"{r['policy']} ({_rate(r)})" for r in over)
    at = f"At exactly its target the DTN would take {ideal:.1f} s. " if _finite(ideal) else ""
    return (f" {at}Overshoot, not better service (the DTN ran above its target at campus traffic's expense; "
            f"read the MRAE): {names}.")


def _fct_line(ranked: list[dict[str, Any]], ideal: float | None) -> str:
    """The FCT sentence: the best among the DTNs that kept to their target, then the overshooters."""
    over = [r for r in ranked if overshoot(r, ideal)]
    kept = [r for r in ranked if r not in over]
    moved = bool(ranked) and ranked[0] in over
    if moved:
        # the tests against "the best" were against an overshooter: they say nothing of the best here
        kept = [{**r, "p_vs_best": None} for r in kept]
    return _sentence("fct", kept) + _ann(ranked) + ("" if moved else _pacing(ranked)) + _above_target(over, ideal)


def verdict_lines(by_exp: Mapping[str, list[dict[str, Any]]], fct_ideal: float | None = None) -> list[str]:
    """One sentence per experiment of a regime, MRAE and FCT first, with the planned mlc-vs-pi
    test, where a paced DTN stands and (FCT) which DTNs overshot (``overshoot``; ``fct_ideal`` in s
    for rows without ``rate_vs_target``)."""
    order = [e for e in _FIRST if e in by_exp] + [e for e in by_exp if e not in _FIRST]
    return [_fct_line(by_exp[e], fct_ideal) if e == "fct" else _sentence(e, by_exp[e]) + _ann(by_exp[e])
            + _pacing(by_exp[e]) for e in order]


def _vs_trivial(exp: str, row: Mapping[str, Any] | None) -> str:
    if row is None or not _finite(row.get("vs_trivial_pct")):
        return ""
    if exp == "fct" and overshoot(row):
        return f"FCT {row['vs_trivial_pct']:+.1f} % by overshoot ({row['rate_vs_target']:.2f} x its target rate)"
    mark = "*" if leads_trivial(row) else "†" if _significant(row) else "°" if untestable_vs_trivial(row) else ""
    return f"{exp.upper()} {row['vs_trivial_pct']:+.1f} %{mark}"


def by_place(ranked: Mapping[str, list[dict[str, Any]]], rows: Mapping[str, list[Mapping[str, Any]]]) -> str:
    """Where should an admin act, in one sentence: for each place an admin can act (a policy kind), the best
    policy there on the MRAE ranking, with its MRAE and FCT vs the trivial TBF (* p < ALPHA). Kinds
    whose rows were all kept out of the ranking are named as not comparable. Our choice: the MRAE
    (the MLC paper's tracking metric) picks each place's best; "" without MRAE rows or kinds."""
    mrae = ranked.get("mrae") or []
    fct = {r["policy"]: r for r in ranked.get("fct") or []}
    parts = []
    for kind, where in PLACES:
        best = next((r for r in mrae if r.get("kind") == kind), None)  # ranked: the first is the best
        if best is not None and best["policy"] == BASELINE:
            parts.append(f"{where}: the trivial TBF itself (no policy of this kind beats it)")
        elif best is not None:
            figures = ", ".join(x for x in (_vs_trivial("mrae", best), _vs_trivial("fct", fct.get(best["policy"])))
                                if x)
            parts.append(f"{where}: {best['policy']}" + (f" ({figures})" if figures else ""))
    if not parts:
        return ""
    ranked_names = {r["policy"] for r in mrae}
    apart = [r["policy"] for r in rows.get("mrae") or [] if r["policy"] not in ranked_names]
    tail = f"; not comparable on this plant: {', '.join(apart)}" if apart else ""
    return ("By where the admin acts, the best policy there (vs the trivial TBF, + = better, * significantly better, "
            f"† significantly worse (p < {ALPHA:g}, Holm), ° too few pairs for any outcome to reach it after Holm): "
            + "; ".join(parts) + tail + ".")


def _alone(row: Mapping[str, Any]) -> str | None:
    """The host policy a configuration row was tested against, alone (its ``vs_X_p`` field), or None."""
    return next((k[3:-2] for k in row if k.startswith("vs_") and k.endswith("_p") and k != "vs_trivial_p"), None)


def interval_text(row: Mapping[str, Any]) -> str:
    """`` [+11.8, +21.4]``: a row's paired 95 % interval of its change vs the trivial TBF, or "" without one."""
    lo, hi = (list(row.get("vs_trivial_ci95") or []) + [None, None])[:2]
    return f" [{lo:+.1f}, {hi:+.1f}]" if _finite(lo) and _finite(hi) else ""


def _short_verdict(row: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """Ours: whether the campus's short flows are "no worse than under the trivial TBF", as a
    non-inferiority test: "ok" when the paired 95 % interval of their FCT change lies above
    -``SHORT_MARGIN_PCT`` (+ = better), "worse" when they are significantly longer (Holm p < ``ALPHA``),
    else "unshown". The burden is on showing no worse: too few trials for a test to reach significance
    (10 short-flow pairs in a merged Holm family) give "unshown", never a pass. (verdict, words), or
    None without short-flow trials."""
    if row is None or not _finite(row.get("vs_trivial_pct")):
        return None
    pct, lo = row["vs_trivial_pct"], (list(row.get("vs_trivial_ci95") or []) + [None])[0]
    head = f"campus short-flow FCT {pct:+.1f} %{interval_text(row)} vs trivial, "
    if _significant(row) and pct < 0:
        return "worse", head + "significantly worse"
    if _finite(lo) and lo > -SHORT_MARGIN_PCT:
        return "ok", head + f"no worse (its interval clears -{SHORT_MARGIN_PCT:g} %)"
    return "unshown", head + f"not shown to be no worse (its interval reaches -{SHORT_MARGIN_PCT:g} % or below)"


def _config_part(r: Mapping[str, Any], short: Mapping[str, Any] | None) -> tuple[str, str]:
    """(verdict, words) of one configuration row: "yes", "no" or "open" (no short-flow trials)."""
    ref = _alone(r)
    if not r.get("comparable", True):
        return "no", f"{r['policy']} is not comparable on this plant"
    if ref is None:
        return "no", f"{r['policy']} ran without pacing alone beside it, so it was not tested against it"
    p, gain = r.get(f"vs_{ref}_p"), r.get(f"vs_{ref}_pct")
    how = f"MRAE {gain:+.1f} % vs {ref} alone (p = {p:.2g}, Holm)" if _finite(gain) and _finite(p) else "untested"
    beats = _finite(p) and p < CONFIG_ALPHA and _finite(gain) and gain > 0
    flows = _short_verdict(short)
    tail = "no campus short-flow trials here" if flows is None else flows[1]
    verdict = "open" if beats and flows is None else "yes" if beats and flows[0] == "ok" else "no"
    return verdict, f"{r['policy']}: {how}; {tail}"


def configuration_answer(exps: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """One regime's answer to the question set for configurations, in words: does any configuration
    beat the paced DTN alone (``results.planned_pairs``) on MRAE with Holm p < ``CONFIG_ALPHA``, while the campus's
    short-flow FCT under it is no worse than under the trivial TBF (``_short_verdict``)? "Yes", "no", or
    "not answerable yet" where one beats it but the regime has no short-flow trials; "" where no
    configuration ran. Given whether the answer is yes or no."""
    configs = [r for r in exps.get("mrae") or [] if "+" in str(r.get("policy"))]
    if not configs:
        return ""
    short = {r["policy"]: r for r in exps.get("short") or []}
    parts = [_config_part(r, short.get(r["policy"])) for r in configs]
    verdicts = {v for v, _ in parts}
    word = "Yes" if "yes" in verdicts else "Not answerable yet" if "open" in verdicts else "No"
    return (f"Does a configuration beat the paced DTN alone on MRAE (p < {CONFIG_ALPHA:g}, Holm) with the campus's "
            f"short flows no worse than under the trivial TBF? {word}: " + "; ".join(w for _, w in parts) + ".")


def _check(rows: Any) -> list[Mapping[str, Any]]:
    if not isinstance(rows, list) or not rows:
        raise ValueError("leaderboard results: no \"rows\" list")
    for i, r in enumerate(rows):
        missing = [k for k in _REQUIRED if not isinstance(r, Mapping) or k not in r]
        if missing:
            raise ValueError(f"leaderboard results: row {i} lacks {', '.join(missing)}")
    return rows


def leaderboard_context(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The template's context: ``regimes`` = [{plant, cca, experiments: [{name, ranked, apart}], verdict,
    by_place}],
    and ``pending`` = the merged file's ``incomplete_runs`` (not in any verdict yet)."""
    rows = with_floors(_check(doc.get("rows")))
    ideal = {r.get("run"): r.get("fct_ideal_s") for r in doc.get("runs") or []}
    regimes: dict[tuple[str, str], dict[str, list[Mapping[str, Any]]]] = {}
    for r in rows:
        regimes.setdefault((r["plant"], r["cca"]), {}).setdefault(r["experiment"], []).append(r)
    out = []
    for (plant, cca), exps in regimes.items():
        ranked = {e: rank(rs) for e, rs in exps.items()}
        order = [e for e in _FIRST if e in exps] + [e for e in exps if e not in _FIRST]
        fct_ideal = next((ideal[r.get("run")] for r in exps.get("fct", []) if ideal.get(r.get("run"))), None)
        out.append({"plant": plant, "cca": cca, "verdict": verdict_lines(ranked, fct_ideal),
                    "by_place": by_place(ranked, exps), "configurations": configuration_answer(exps),
                    "experiments": [{"name": e, "ranked": ranked[e], "higher": any(_higher(r) for r in exps[e]),
                                     "apart": [r for r in exps[e] if not r.get("comparable")]} for e in order]})
    # Runs the merge left out because they are not finished: named, so no reader takes their
    # absence for a verdict.
    pending = [{"plant": r.get("plant"), "cca": r.get("cca"), "scenario": r.get("scenario"), "run": r.get("run"),
                "units_left": r.get("units_left")} for r in doc.get("incomplete_runs") or []]
    holm = doc.get("holm") or {"tests": "the", "family": "each regime's tests"}
    return {"regimes": out, "pending": pending, "holm": holm}


def saturator_verdict(best: Mapping[str, Any], alpha: float | None = None, spread: float | None = None) -> str:
    """The saturator study's sentence on the inverse ANN (``benchmarks/pi_vs_mlc_saturator.py``): at
    each policy's best saturator, mlc's MRAE paired against pi's (``best["mlc_vs_pi"]["mrae"]``:
    ``n, mean_diff`` = mlc - pi, ``mlc_lower, wilcoxon_p``), significant below ``ALPHA`` unless
    ``alpha`` is given; a winner is named only then, and never where the difference is smaller than
    ``spread`` (default ``best["ga_spread"]``): how far one configuration's mean MRAE moves across GA
    seeds, nor where that spread was not measured. A tuning that different seeds would give is not a
    finding, whatever its p."""
    alpha = ALPHA if alpha is None else alpha
    spread = best.get("ga_spread") if spread is None else spread
    m = best["mlc_vs_pi"]["mrae"]
    counts = f"mlc lower in {m['mlc_lower']}/{m['n']} paired trials, p = {m['wilcoxon_p']:.3g}"
    if not m["wilcoxon_p"] < alpha:
        return f"At each policy's best saturator the inverse ANN makes no significant difference to the MRAE ({counts})."
    if not _finite(spread):
        return (f"At each policy's best saturator mlc's and pi's MRAE differ by {abs(m['mean_diff']):.4f} ({counts}), "
                "but how far one configuration's MRAE moves across GA runs was not measured: not a finding.")
    if abs(m["mean_diff"]) < spread:
        return (f"At each policy's best saturator mlc's and pi's MRAE differ by {abs(m['mean_diff']):.4f} ({counts}), "
                f"less than one configuration's MRAE moves across GA runs ({spread:.4f}): not a finding.")
    if m["mean_diff"] < 0:
        return (f"At each policy's best saturator the inverse ANN pays for itself: mlc's MRAE is lower than pi's "
                f"by {-m['mean_diff']:.4f} ({counts}).")
    return (f"At each policy's best saturator the inverse ANN does not pay for itself: pi's MRAE is lower than "
            f"mlc's by {m['mean_diff']:.4f} ({counts}).")
