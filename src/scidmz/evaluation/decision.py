"""The answer a person reads: one decision table, and the tracking / short-flow trade-off per regime.

Input: a merged leaderboard results file (``reports/leaderboard/results.json``, its ``rows``;
``leaderboard.results``). Output, for ``templates/docs/readme-decision.md.j2`` and the plots pass:

- ``decision_table``: rows = where the admin acts (``PLACES``: the policy kinds), columns = the
  (plant, DTN CCA) regimes the file holds; each cell the best *comparable* policy of that kind on
  the paired MRAE ranking (``verdict.rank``), with its paired MRAE and DTN FCT change vs the
  trivial TBF (mean change and its 95 % interval, + = better) and a mark: ``*`` significantly
  better, ``†`` significantly worse (Holm-corrected p < ``ALPHA``, sign checked), ``°`` too few
  pairs for any outcome to reach it after the page's Holm correction (``verdict.with_floors``),
  ``~`` one left-out trial turns the sign; an FCT gained by running the DTN above its target is
  shown as overshoot with its rate / target, never as better.
- ``mlc_standing``: per regime, the MLC against the trivial TBF and against ``pi`` (the same PI
  without the inverse ANN), the planned test.
- ``tradeoff_points``: per regime and policy, MRAE and campus short-flow FCT (means with their
  95 % intervals) for ``plots.plot_tradeoff``; ``short`` is None where the run has no short-flow
  trials (the committed kernel runs do not), never invented.
- ``configuration_answers``: per regime where a configuration ran, the answer to the question set
  for configurations (``verdict.configuration_answer``).
- ``floors``: per regime of the table, what the measurement itself allows: the MRAE of the DTN
  alone on the link on the same targets (the merged file's ``floors``, from floor runs,
  ``leaderboard.results.is_floor``), or None where no floor run was made.

Our choices: the MRAE picks a place's best (the tracking metric the MLC paper ranks by, as
``verdict.by_place``); the table's intervals are the paired mean change's (``vs_trivial_ci95``),
the Hodges-Lehmann estimates are on docs/results.md. The code is generic over policy names: any
row with a ``kind`` takes part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .stats import BASELINE, WITH_ANN
from .verdict import (
    ALPHA,
    configuration_answer,
    interval_text,
    leads_trivial,
    one_trial_decides,
    overshoot,
    rank,
    untestable_vs_trivial,
    with_floors,
)

__all__ = ["PLACES", "COLUMN_LABELS", "decision_table", "mlc_standing", "tradeoff_points", "regime_label", "floors",
           "configuration_answers", "provisional_runs"]

#: Where an admin can act, as the decision table names its rows (policy kind -> words).
PLACES = (("host", "the DTN host"), ("rate", "the campus uplink only"), ("queue", "the border router's queues"),
          ("discipline", "the bottleneck"))
#: How a regime is named in a column head: (plant, DTN CCA) words.
COLUMN_LABELS = {"fluid": "fluid", "netns": "kernel", "cubic": "CUBIC", "bbr2": "BBRv2", "bbr": "BBR v1"}
_ORDER = ("fluid", "netns", "cubic", "bbr2", "bbr")


def regime_label(plant: str, cca: str) -> str:
    """``kernel, BBR v1``: a regime in words."""
    return f"{COLUMN_LABELS.get(plant, plant)}, {COLUMN_LABELS.get(cca, cca)}"


def _regimes(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, list[Mapping[str, Any]]]]:
    out: dict[tuple[str, str], dict[str, list[Mapping[str, Any]]]] = {}
    for r in rows:
        out.setdefault((str(r["plant"]), str(r["cca"])), {}).setdefault(str(r["experiment"]), []).append(r)
    order = {p: i for i, p in enumerate(_ORDER)}
    return dict(sorted(out.items(), key=lambda kv: tuple(order.get(x, len(order)) for x in kv[0])))


def _fin(x: Any) -> bool:
    import math

    return isinstance(x, int | float) and math.isfinite(x)


def _mark(row: Mapping[str, Any]) -> str:
    p = row.get("p_vs_trivial")
    sig = _fin(p) and p < ALPHA
    mark = "*" if leads_trivial(row) else "†" if sig else "°" if untestable_vs_trivial(row) else ""
    return mark + ("~" if one_trial_decides(row) else "")


def _change(row: Mapping[str, Any] | None, what: str) -> str:
    """``MRAE +16.8 % [+11.8, +21.4]*``: a row's paired change vs the trivial TBF, its interval, its mark."""
    if row is None or not _fin(row.get("vs_trivial_pct")):
        return f"{what} n/a"
    span = interval_text(row)
    if what == "FCT" and overshoot(row):
        ratio = row.get("rate_vs_target")
        at = f"{ratio:.2f} x" if _fin(ratio) else "above"
        return f"FCT {row['vs_trivial_pct']:+.1f} %{span} by overshoot ({at} its target rate)"
    return f"{what} {row['vs_trivial_pct']:+.1f} %{span}{_mark(row)}"


def _cell(kind: str, exps: Mapping[str, list[Mapping[str, Any]]]) -> str:
    mrae = exps.get("mrae") or []
    mine = [r for r in mrae if r.get("kind") == kind]
    if not mine:
        return "not run"
    best = next((r for r in rank(mrae) if r.get("kind") == kind), None)
    if best is None:
        names = ", ".join(sorted(str(r["policy"]) for r in mine))
        return f"not comparable on this plant ({names})"
    if best["policy"] == BASELINE:
        return "the trivial TBF (no policy here beats it)"
    fct = next((r for r in exps.get("fct") or [] if r["policy"] == best["policy"]), None)
    return f"**{best['policy']}**: {_change(best, 'MRAE')}; {_change(fct, 'FCT')}{_baseline_over(exps, fct)}"


def _baseline_over(exps: Mapping[str, list[Mapping[str, Any]]], fct: Mapping[str, Any] | None) -> str:
    """Where the trivial TBF itself overshot, a slower FCT that kept to the target is no loss of service: say so."""
    triv = next((r for r in exps.get("fct") or [] if r["policy"] == BASELINE), None)
    if fct is None or triv is None or overshoot(fct) or not overshoot(triv) or not _fin(triv.get("rate_vs_target")):
        return ""
    return f" against a trivial TBF that overshoots ({triv['rate_vs_target']:.2f} x its target rate)"


def decision_table(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``{"columns": [label], "rows": [{"where", "cells": [text]}]}`` (module docstring)."""
    regimes = _regimes(with_floors(doc.get("rows") or []))
    return {"columns": [regime_label(p, c) for p, c in regimes],
            "rows": [{"where": where, "cells": [_cell(kind, exps) for exps in regimes.values()]}
                     for kind, where in PLACES]}


def mlc_standing(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per regime where ``mlc`` ran: its MRAE row (change vs trivial with mark) and the planned mlc-vs-pi
    test (``vs_pi_pct``, Holm ``vs_pi_p``) in words: ``ann`` is "better", "worse" or "no difference"."""
    out = []
    for (plant, cca), exps in _regimes(with_floors(doc.get("rows") or [])).items():
        m = next((r for r in exps.get("mrae") or [] if r["policy"] == WITH_ANN), None)
        if m is None:
            continue
        p, gain = m.get("vs_pi_p"), m.get("vs_pi_pct")
        ann = ("better" if gain > 0 else "worse") if _fin(p) and p < ALPHA and _fin(gain) else "no difference"
        out.append({"plant": plant, "cca": cca, "label": regime_label(plant, cca), "vs_trivial": _change(m, "MRAE"),
                    "vs_pi_pct": gain, "vs_pi_p": p, "ann": ann, "trials": m.get("paired_n", m.get("trials"))})
    return out


def _mean_ci(row: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if row is None or not _fin(row.get("mean")):
        return None
    lo, hi = (row.get("ci95") or [None, None])[:2]
    return {"mean": float(row["mean"]), "lo": lo if _fin(lo) else None, "hi": hi if _fin(hi) else None}


def tradeoff_points(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per regime: ``{plant, cca, label, has_short, points: [{policy, comparable, mrae, short}]}``, where
    ``mrae`` and ``short`` are ``{mean, lo, hi}`` (``short`` None without short-flow trials)."""
    out = []
    for (plant, cca), exps in _regimes(doc.get("rows") or []).items():
        short = {r["policy"]: r for r in exps.get("short") or []}
        pts = [{"policy": r["policy"], "comparable": bool(r.get("comparable", True)), "mrae": _mean_ci(r),
                "short": _mean_ci(short.get(r["policy"]))} for r in exps.get("mrae") or []]
        out.append({"plant": plant, "cca": cca, "label": regime_label(plant, cca), "has_short": bool(short),
                    "points": [p for p in pts if p["mrae"] is not None]})
    return out


def floors(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per regime of the decision table, in its column order: ``{label, floor}`` where ``floor`` is the
    regime's floor entry (``policy, mean, ci95, trials, run``; the first if several) or None."""
    by: dict[tuple[str, str], Mapping[str, Any]] = {}
    for f in doc.get("floors") or []:
        by.setdefault((str(f.get("plant")), str(f.get("cca"))), f)
    return [{"label": regime_label(p, c), "floor": by.get((p, c))} for p, c in _regimes(doc.get("rows") or [])]


def provisional_runs(doc: Mapping[str, Any]) -> list[dict[str, str]]:
    """Per regime of the decision table, in its column order: ``{label, runs}`` for each regime with rows
    from a run whose plan carries no validity rule (``runs``: those runs and when each was made). Such a
    run predates the rules the table is now computed under (per-trial targets, validity judged per trial
    before the outcome, policies interleaved within a trial), so its column is provisional."""
    legacy = {str(r.get("run")): str(r.get("generated", "")) for r in doc.get("runs") or []
              if "validity" not in (r.get("plan") or {})}
    out = []
    for (plant, cca), exps in _regimes(doc.get("rows") or []).items():
        runs = dict.fromkeys(str(r.get("run")) for rs in exps.values() for r in rs if str(r.get("run")) in legacy)
        if runs:
            out.append({"label": regime_label(plant, cca),
                        "runs": ", ".join(f"`{n}` of {legacy[n][:10] or 'an unknown date'}" for n in runs)})
    return out


def configuration_answers(doc: Mapping[str, Any]) -> list[dict[str, str]]:
    """``[{label, answer}]``: each regime's ``verdict.configuration_answer``, where a configuration ran."""
    out = []
    for (plant, cca), exps in _regimes(doc.get("rows") or []).items():
        answer = configuration_answer(exps)
        if answer:
            out.append({"label": regime_label(plant, cca), "answer": answer})
    return out
