"""``results.json`` from the ledger, and the report and ranking plot rendered from it (Flent's model).

Top level (``RESULTS_FORMAT`` = 1)::

    format_version, scidmz_version, git_commit, generated, command, scenario (its full
    to_dict()), fingerprint (regime.fingerprint), plant, plant_model, code, machine (cpus,
    arch, kernel, python), load (1/5/15 min load averages at start and end of this
    invocation), plan, policies (kind, files' sha256), max_starved (the legacy rule's threshold;
    null under the plan's ``validity`` rule), invalid_trials, and under that rule validity,
    reruns and stayed_invalid (below), ledger (units: lines, re-runs included; lines
    cut on resume), drift (each ``--allow-drift`` resume: units_before, at, code, kernel and
    what they were; ``ledger``), rows

``rows``: one per (plant, cca, policy, experiment), in experiment then rank order::

    plant, cca, policy, kind, experiment, metric, better ("lower" | "higher"), trials (the
    trials in the statistics), mean, std, ci95 [lo, hi], vs_trivial_pct, vs_trivial_ci95,
    vs_trivial_hl_pct, vs_trivial_hl_ci95, vs_trivial_loo_pct, paired_n, p_vs_trivial (Holm), p_vs_trivial_raw,
    p_vs_best (Holm), p_vs_best_raw, shared_n, shared_mean, rank, best, comparable,
    starved_trials, excluded_trials, starved_by (starved periods per symptom over all its
    trials, ``plant.netns.manage.starvation.SYMPTOMS``; {} where the ledger does not say),
    unfinished_trials and rate_vs_target (FCT: the DTN's mean rate over its target, mean of
    the kept trials; above 1 it overshot); and on the rows of a planned comparison
    (``PLANNED``: mlc against pi) vs_pi_pct, vs_pi_ci95, vs_pi_hl_pct, vs_pi_hl_ci95, vs_pi_loo_pct,
    vs_pi_p (Holm), vs_pi_p_raw

and ``holm``: {"tests": how many tests the correction spans, "family": which}. Every
p value a page renders is corrected in one family: a run's report, all of its tests
(``stats.holm_rows``); a merged file (``merge_runs``), every test of every run in it.

A merged file also has ``floors``: what the measurement itself allows in each regime. A
*floor run* (``is_floor``, ours) is a run whose scenario carries no campus traffic (no campus
hosts, no ``[[flows]]``): the DTN alone on the link, tracking the same targets as the regime's
other runs (``merge_runs`` refuses targets that differ). Its rows are not ranked, tested or
counted in the Holm family; each non-baseline MRAE row becomes one entry: run, plant, cca,
policy, mean, ci95, trials.

(``evaluation.stats`` defines the statistics.) ``comparable`` is false
where the plant does not model the policy on equal footing (the fluid plant's
``noise_covers``); such rows are shown but have no rank and are never the best.

Our choices: validity is judged per trial, not per unit, by the plan's rule
(``validity``: machine signals recorded per unit, fixed before the run and in the ledger
header; ``evaluation.leaderboard.validity``): each (trial kind, trial i) counts with the last
run in which every policy's unit is valid (a re-run is appended to the ledger with its
``rerun`` counter); a trial with no such run is left out of every policy's statistics of
every experiment it gives (counted in each row's ``excluded_trials``), so all policies keep
the same valid trials (``invalid_trials``: per trial kind, the trials left out;
``reruns``: per trial kind, trial -> re-runs; ``stayed_invalid``: the trials no re-run made
valid; ``validity``: the rule). Ledgers written before the plan carried ``validity`` keep the
rule they ran under: a trial in which any policy's unit had a starved share (starved
periods / periods) above ``max_starved`` (the plan's, else the results file's) is left out;
an FCT trial whose transfer did not finish within the bound
counts at the bound (a lower bound of its FCT, so a policy that never finishes cannot
look fast; counted in ``unfinished_trials``).
"""

from __future__ import annotations

import math
import os
import platform
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import stats
from ..render import render, write_report
from ..results import read_results, write_json
from .plan import DEFAULT_MAX_STARVED, EXPERIMENTS, METRICS, ideal_fct, unit_of
from .validity import LegacyStarvation, ValidityRule, rule_of, select_runs

__all__ = ["RESULTS_FORMAT", "DEFAULT_MAX_STARVED", "ROW_FIELDS", "build_rows", "results_doc", "render_outputs",
           "write_results", "merge_runs", "write_merged", "is_floor", "planned_pairs", "machine", "load_avg", "unit_value", "starved_flags", "fct_ideal_of",
           "recompute", "comparable_now", "HOLM_FAMILY", "holm_note", "invalid_trials", "validity_of", "validity_fields"]

RESULTS_FORMAT = 1
#: The fields every row has (the first ten: what a reader needs to rank and judge a policy).
ROW_FIELDS = ("plant", "cca", "policy", "experiment", "trials", "mean", "ci95", "vs_trivial_pct", "p_vs_trivial",
              "comparable", "p_vs_trivial_raw", "p_vs_best", "p_vs_best_raw", "better", "starved_trials",
              "excluded_trials", "kind", "metric", "std", "vs_trivial_ci95", "paired_n", "rank", "best",
              "unfinished_trials")


def machine() -> dict[str, Any]:
    """cpus, arch, kernel release, python: what the numbers were measured on."""
    return {"cpus": os.cpu_count(), "arch": platform.machine(), "kernel": platform.release(),
            "python": platform.python_version()}


def load_avg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def unit_value(experiment: str, rec: Mapping[str, Any]) -> float:
    """One unit line's value for ``experiment`` (NaN where it has none)."""
    m = rec.get("metrics") or {}
    key = METRICS[experiment][0]
    v = m.get(key)
    if experiment == "fct" and v is None and m.get("finished") is False:
        v = m.get("fct_bound")  # unfinished: counted at the bound (module docstring)
    return float(v) if isinstance(v, int | float) and math.isfinite(v) else math.nan


def starved_flags(rec: Mapping[str, Any], max_starved: float) -> tuple[bool, bool]:
    """(any starved period, excluded) of one unit line."""
    n, periods = int(rec.get("starved_periods") or 0), int(rec.get("periods") or 0)
    return n > 0, periods > 0 and n / periods > max_starved


def _symptoms(recs: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Starved periods per symptom over unit lines (``starved_by``; older netns ledgers lack it)."""
    out: Counter[str] = Counter()
    for r in recs:
        out.update(r.get("starved_by") or {})
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


#: Planned comparisons besides the family's (ours): policy -> the policy it is
#: tested against, on the same paired trials. ``mlc`` against ``pi`` asks whether the inverse
#: ANN pays for itself: the two differ only by it. Row fields ``vs_pi_pct``, ``vs_pi_ci95``, ``vs_pi_p``.
PLANNED: dict[str, str] = {"mlc": "pi"}


def planned_pairs(pols: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """``PLANNED``, plus each configuration (a name ``a+b``, ARCHITECTURE.md "Configurations") against
    the paced DTN alone: its own host policy where it has one and that ran alone too, else the run's
    one host policy (ours: the question set for configurations is whether any beats pacing alone;
    ``pacing+pi`` against ``pacing``, row fields ``vs_pacing_*``). ``pols``: the header's policies,
    name -> {kind, ...}."""
    out = dict(PLANNED)
    hosts = [str(n) for n, p in pols.items() if "+" not in str(n) and (p or {}).get("kind") == "host"]
    for name in (str(n) for n in pols if "+" in str(n)):
        own = [p for p in name.split("+") if p in hosts]
        ref = own[0] if own else hosts[0] if len(hosts) == 1 else None
        if ref is not None:
            out[name] = ref
    return out


def validity_of(header: Mapping[str, Any], fallback: float = DEFAULT_MAX_STARVED) -> float | None:
    """A legacy run's starvation threshold: the plan's ``max_starved`` where the header records it, else
    ``fallback``; None for a run under the plan's ``validity`` rule (the starved share is evidence there)."""
    rule = rule_of(header, fallback)
    return rule.max_starved if isinstance(rule, LegacyStarvation) else None


def invalid_trials(units: Iterable[Mapping[str, Any]], rule: float | ValidityRule | LegacyStarvation,
                   ) -> dict[str, set[int]]:
    """Per trial kind, the trials invalid for every policy: those with no run in which every policy's
    unit passes ``rule`` (a number: the legacy starved-share threshold; ``validity.select_runs``)."""
    r = LegacyStarvation(float(rule)) if isinstance(rule, int | float) else rule
    return select_runs(units, r)[1]


def build_rows(header: Mapping[str, Any], units: Iterable[Mapping[str, Any]], comparable: Mapping[str, bool],
               max_starved: float = DEFAULT_MAX_STARVED) -> list[dict[str, Any]]:
    """The rows of ``results.json`` from the ledger's header and unit lines (module docstring);
    ``max_starved``: the rule for a header whose plan does not carry one."""
    plan, pols = header["plan"], header["policies"]
    plant = header["plant"]
    cca = (header["scenario"].get("fingerprint") or {}).get("dtn_cca")
    chosen, bad, _ = select_runs(units, rule_of(header, max_starved), pols)
    by_unit: dict[tuple[str, str], dict[int, Mapping[str, Any]]] = {}
    for (unit, name, trial), r in chosen.items():
        by_unit.setdefault((unit, name), {})[trial] = r
    rows: list[dict[str, Any]] = []
    seed = int(plan.get("seed", 0))
    pairs = planned_pairs(pols)
    for exp in (e for e in EXPERIMENTS if e in plan["experiments"]):
        metric, better = METRICS[exp]
        values: dict[str, dict[int, float]] = {}
        counts: dict[str, dict[str, int]] = {}
        for name in pols:
            recs = by_unit.get((unit_of(exp), name), {})
            out = bad.get(unit_of(exp), set())
            values[name] = {i: unit_value(exp, r) for i, r in recs.items() if i not in out}
            counts[name] = {"starved_trials": sum(starved_flags(r, 0.0)[0] for r in recs.values()),
                            "excluded_trials": sum(1 for i in recs if i in out),
                            "starved_by": _symptoms(recs.values()),
                            "unfinished_trials": sum(1 for r in recs.values()
                                                     if (r.get("metrics") or {}).get("finished") is False)}
        fam = stats.family(values, better, ranked=[n for n in pols if comparable.get(n, True)],
                           seed=stats.stable_seed(seed, plant, cca, exp))
        planned = {a: stats.planned_pair(values[b], values[a], better, stats.stable_seed(seed, plant, cca, exp, a, b))
                   for a, b in pairs.items() if a in values and b in values}
        for name, s in fam.items():
            extra = ({f"vs_{pairs[name]}_{'p_raw' if k == 'p' else k}": v for k, v in planned[name].items()
                      if k != "n"} if name in planned else {})
            if unit_of(exp) == "fct":
                extra["rate_vs_target"] = _rate_vs_target(by_unit.get(("fct", name), {}), values[name], header)
            rows.append({"plant": plant, "cca": cca, "policy": name, "kind": pols[name].get("kind"),
                         "experiment": exp, "metric": metric, "better": better, "trials": s["n"],
                         "comparable": bool(comparable.get(name, True)), **s, **counts[name],
                         **({} if unit_of(exp) == "fct" else {"unfinished_trials": None}), **extra})
        rows.sort(key=lambda r: (EXPERIMENTS.index(r["experiment"]), r["rank"] is None, r["rank"] or 0))
    for r in rows:
        r.pop("n", None)
    stats.holm_rows(rows)
    return rows


#: What ``holm`` says of a page's family (results.json's ``holm.family``).
HOLM_FAMILY = ("every paired test on this page: each row's vs-trivial and vs-best tests and the planned "
               "mlc-vs-pi test, across all experiments{runs}")


def holm_note(rows: Iterable[Mapping[str, Any]], merged: bool = False) -> dict[str, Any]:
    """``holm`` of a results file: the number of tests its corrected p values span, and which."""
    rows = list(rows)
    n = sum(1 for r in rows for raw, _ in stats.page_tests(r) if isinstance(r.get(raw), int | float)
            and math.isfinite(r[raw]))
    family = HOLM_FAMILY.format(runs=" and every run merged here" if merged else "")
    if any("+" in str(r.get("policy")) and any(raw.startswith("vs_") for raw, _ in stats.page_tests(r))
           for r in rows):
        family += "; and each configuration against the paced DTN alone"
    return {"tests": n, "family": family}


def _rate_vs_target(recs: Mapping[int, Mapping[str, Any]], kept: Mapping[int, float],
                    header: Mapping[str, Any]) -> float | None:
    """The DTN's mean rate over its FCT target, averaged over the kept trials (None where the ledger or
    the scenario does not say): above 1 the DTN overshot, and its shorter FCT is not better service."""
    cap = (header["scenario"].get("fingerprint") or {}).get("capacity")
    share = header["plan"].get("fct_target")
    rates = [(recs[i].get("metrics") or {}).get("mean_rate_dtn") for i in kept if i in recs]
    rates = [r for r in rates if isinstance(r, int | float) and math.isfinite(r)]
    if not rates or not isinstance(cap, int | float) or not isinstance(share, int | float) or cap * share <= 0:
        return None
    return float(sum(rates) / len(rates) / (share * cap))


def results_doc(header: Mapping[str, Any], units: Iterable[Mapping[str, Any]], comparable: Mapping[str, bool], *,
                command: str, max_starved: float, load_start: list[float] | None, cut: int = 0,
                scenario: Mapping[str, Any] | None = None,
                drift: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The whole ``results.json`` (module docstring); ``drift``: the ledger's drift lines."""
    import time

    from ..._version import __version__
    from ..results import git_commit

    units = list(units)
    rule = rule_of(header, max_starved)
    return {
        "format_version": RESULTS_FORMAT, "scidmz_version": __version__, "git_commit": git_commit(),
        "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "command": command,
        "scenario": dict(scenario or {}), "fingerprint": header["scenario"].get("fingerprint"),
        "scenario_sha256": header["scenario"].get("sha256"), "plant": header["plant"],
        "plant_model": header["plant_model"], "code": header["code"], "machine": machine(),
        "load": {"start": load_start, "end": load_avg()}, "plan": header["plan"], "policies": header["policies"],
        "max_starved": validity_of(header, max_starved), "ledger": {"units": len(units), "cut_bytes": cut},
        **validity_fields(units, rule),
        "drift": [{k: d.get(k) for k in ("units_before", "at", "code", "kernel", "was")} for d in drift],
        "targets": header.get("targets"), **_rows_and_holm(build_rows(header, units, comparable, max_starved)),
    }


def validity_fields(units: Iterable[Mapping[str, Any]], rule: ValidityRule | LegacyStarvation) -> dict[str, Any]:
    """``invalid_trials``, and under the plan's ``validity`` rule the rule, ``reruns`` and
    ``stayed_invalid`` (module docstring); a legacy run's file keeps the one field it always had."""
    _, bad, reruns = select_runs(units, rule)
    out: dict[str, Any] = {"invalid_trials": {u: sorted(t) for u, t in bad.items()}}
    if isinstance(rule, ValidityRule):
        out["validity"] = rule.to_dict()
        out["reruns"] = {u: {str(i): n for i, n in sorted(by.items())} for u, by in reruns.items()}
        out["stayed_invalid"] = {u: sorted(i for i in t if reruns.get(u, {}).get(i, 0) >= rule.max_reruns)
                                 for u, t in bad.items()}
    return out


def _rows_and_holm(rows: list[dict[str, Any]], merged: bool = False) -> dict[str, Any]:
    return {"holm": holm_note(rows, merged), "rows": rows}


def render_outputs(out_dir: str | os.PathLike[str], doc: Mapping[str, Any] | None = None,
                   rendered: str | None = None) -> dict[str, str]:
    """``report.md`` and ``ranking.png`` from ``doc`` (default: ``out_dir/results.json``);
    ``rendered``: the command of a ``--render-only`` pass, named in the report."""
    from ...plots import plot_ranking, save_figure
    from ..verdict import configuration_answer

    out = Path(out_dir)
    if doc is None:
        doc = read_results(out / "results.json", "scidmz leaderboard")
        if not isinstance(doc.get("rows"), list):
            raise ValueError(f"{out / 'results.json'}: not a leaderboard results file (no \"rows\" list)")
    title = f"{(doc.get('scenario') or {}).get('name', '?')} on the {doc.get('plant', '?')} plant"
    png = save_figure(plot_ranking(doc["rows"], title=title), out / "ranking.png")
    exps: dict[str, list[Mapping[str, Any]]] = {}
    for r in doc["rows"]:
        exps.setdefault(r["experiment"], []).append(r)
    report = write_report(render("leaderboard_report.md.j2", out, doc=doc, rendered=rendered,
                                 ranking=str(png), experiments=[e for e in EXPERIMENTS if e in exps],
                                 configurations=configuration_answer(exps)),
                          out)
    return {"report": str(report), "ranking": str(png)}


def write_results(doc: Mapping[str, Any], out_dir: str | os.PathLike[str]) -> Path:
    """``out_dir/results.json``, atomically."""
    return write_json(dict(doc), Path(out_dir) / "results.json")


def fct_ideal_of(doc: Mapping[str, Any]) -> float | None:
    """The run's DTN FCT at exactly its target (``plan.ideal_fct``), None if the file lacks a part."""
    plan, cap = doc.get("plan") or {}, (doc.get("fingerprint") or {}).get("capacity")
    try:
        return ideal_fct(float(plan["transfer"]), float(plan["fct_target"]), float(cap))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


def is_floor(doc: Mapping[str, Any]) -> bool:
    """Whether a run is a floor run (module docstring): its scenario has no campus hosts and no
    ``[[flows]]``, so nothing shares the link with the DTN."""
    sc = doc.get("scenario") or {}
    return bool(sc) and (sc.get("campus") or {}).get("hosts") == 0 and not sc.get("flows")


def _floor_entries(name: str, doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A floor run's MRAE rows, its baseline's left out (a TBF shaping no campus traffic measures nothing)."""
    return [{"run": name, "plant": r.get("plant"), "cca": r.get("cca"), "policy": r.get("policy"),
             "mean": r.get("mean"), "ci95": r.get("ci95"), "trials": r.get("trials")}
            for r in doc["rows"] if r.get("experiment") == "mrae" and r.get("policy") != stats.BASELINE]


def merge_runs(top: str | os.PathLike[str]) -> dict[str, Any]:
    """The combined results of every finished run under ``top`` (``top/*/results.json``, one folder per
    run): their rows, each with its ``run`` (folder name) and ``scenario``, and what made each run.
    An interrupted run (``complete: false``) is listed in ``incomplete_runs`` and its rows are left out."""
    import time

    from ..._version import __version__

    root = Path(top)
    docs = []
    for p in sorted(root.glob("*/results.json")):
        doc = read_results(p, "scidmz leaderboard")
        if isinstance(doc.get("rows"), list):
            docs.append((p.parent.name, doc))
    if not docs:
        raise ValueError(f"{root}: no leaderboard runs to merge (no {root}/*/results.json with \"rows\")")
    runs, rows, incomplete, floors = [], [], [], []
    for name, doc in docs:
        sc = (doc.get("scenario") or {}).get("name")
        if doc.get("complete") is False:
            # An interrupted run's trials so far are not the planned evidence: listed, never merged.
            cca = (doc.get("fingerprint") or {}).get("dtn_cca")
            incomplete.append({"run": name, "scenario": sc, "plant": doc.get("plant"), "cca": cca,
                               "units_left": doc.get("units_left"), "command": doc.get("command")})
            continue
        runs.append({"run": name, "scenario": sc, "plant": doc.get("plant"), "command": doc.get("command"),
                     "git_commit": doc.get("git_commit"), "generated": doc.get("generated"),
                     "plant_model": doc.get("plant_model"), "plan": doc.get("plan"), "load": doc.get("load"),
                     "fct_ideal_s": fct_ideal_of(doc), "floor": is_floor(doc)})
        if is_floor(doc):
            floors += _floor_entries(name, doc)
        else:
            rows += [{"run": name, "scenario": sc, **r} for r in doc["rows"]]
    if not runs:
        raise ValueError(f"{root}: no finished leaderboard run to merge (every run is incomplete)")
    _check_targets(docs)
    # One page, one family: the runs' raw p values corrected together (module docstring).
    stats.holm_rows(rows)
    return {"format_version": RESULTS_FORMAT, "scidmz_version": __version__,
            "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "merged": True, "runs": runs,
            "incomplete_runs": incomplete, "floors": floors, **_rows_and_holm(rows, merged=True)}


def _target_key(doc: Mapping[str, Any]) -> tuple[Any, ...]:
    """What fixes a run's targets besides the code: its plan's target fields and its capacity."""
    plan = doc.get("plan") or {}
    return (*(plan.get(k) for k in ("seed", "duration", "target_low", "target_high", "target_hold", "fct_target")),
            (doc.get("fingerprint") or {}).get("capacity"), (doc.get("fingerprint") or {}).get("period"))


def _check_targets(docs: list[tuple[str, Mapping[str, Any]]]) -> None:
    """Runs merged on one page that claim the same trials (same target plan and capacity) must have
    tracked the same targets, trial by trial: one-line ValueError naming the first trial that differs.
    Runs whose results predate per-trial target hashes are not checked."""
    seen: dict[tuple[Any, ...], tuple[str, Mapping[str, Any]]] = {}
    for name, doc in docs:
        tg = doc.get("targets")
        if not isinstance(tg, Mapping):
            continue
        key = _target_key(doc)
        if key not in seen:
            seen[key] = (name, tg)
            continue
        other, ref = seen[key]
        for unit in (u for u in tg if u in ref):
            bad = next((i for i, (x, y) in enumerate(zip(ref[unit], tg[unit], strict=False)) if x != y), None)
            if bad is not None:
                raise ValueError(f"--merge: runs {other} and {name} share a plan but trial {bad}'s {unit.upper()} "
                                 "target differs (the code that drew it changed between them); merge them apart")


def write_merged(top: str | os.PathLike[str], command: str) -> dict[str, str]:
    """``top/results.json`` and ``top/report.md`` merging the runs under ``top`` (``merge_runs``)."""
    doc = merge_runs(top)
    res = write_results(doc, top)
    report = write_report(render("leaderboard_combined.md.j2", top, doc=doc, command=command,
                                 experiments=[e for e in EXPERIMENTS if any(r["experiment"] == e for r in doc["rows"])]),
                          top)
    return {"results": str(res), "report": str(report)}


#: What ``recompute`` rebuilds from the ledger; every other field describes the run and is kept.
RECOMPUTED = ("rows", "holm", "targets", "max_starved", "invalid_trials", "validity", "reruns", "stayed_invalid")


def comparable_now(doc: Mapping[str, Any]) -> dict[str, bool]:
    """Today's judgement of which of a run's policies its plant models on equal footing: the plant's
    ``noise_covers`` for each place a policy's kind names (``run.comparable_policies``), on the run's own scenario;
    every policy where the plant declares no such rule. For a committed run whose plant's rule
    changed since (``recompute(..., rejudge=True)``)."""
    from ...plant.base import check_plant_options, make_plant
    from ...scenario import Scenario

    pols = doc.get("policies") or {}
    if not hasattr(check_plant_options(str(doc["plant"])).cls, "noise_covers"):
        return dict.fromkeys(pols, True)
    with make_plant(str(doc["plant"]), Scenario.from_dict(dict(doc["scenario"]), "results.json")) as pl:
        # a configuration's kind names each place it acts in ("host+rate"), as ``run.comparable_policies`` judges it
        return {n: all(pl.noise_covers(k) for k in str(p["kind"]).split("+"))  # type: ignore[attr-defined]
                for n, p in pols.items()}


def recompute(run_dir: str | os.PathLike[str], rejudge: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the committed ``results.json`` of a run, the same file with ``RECOMPUTED`` rebuilt from its
    ``ledger.jsonl`` by today's statistics): a reader's check that every number in it follows from
    the ledger. The run's comparability and ``max_starved`` are read from the file (the plant's
    judgement and the command line's, not the ledger's); ``rejudge``: comparability from today's
    plant instead (``comparable_now``). One-line ValueError if a part is missing."""
    from .ledger import parse_ledger_lines

    d = Path(run_dir)
    doc = read_results(d / "results.json", "scidmz leaderboard")
    if not isinstance(doc.get("rows"), list) or not (d / "ledger.jsonl").is_file():
        raise ValueError(f"{d}: not a leaderboard run (needs results.json with \"rows\" and ledger.jsonl)")
    head, lines, _ = parse_ledger_lines((d / "ledger.jsonl").read_bytes(), str(d / "ledger.jsonl"))
    comparable = (comparable_now(doc) if rejudge else
                  {r["policy"]: bool(r.get("comparable", True)) for r in doc["rows"]})
    fallback = doc.get("max_starved")
    fallback = float(fallback) if isinstance(fallback, int | float) else DEFAULT_MAX_STARVED
    rows = build_rows(head, lines, comparable, fallback)
    import json

    from ..results import clean

    # One JSON round trip, as written: NaN becomes null, tuples lists.
    new = {**doc, "targets": head.get("targets"), "max_starved": validity_of(head, fallback),
           **validity_fields(lines, rule_of(head, fallback)), **_rows_and_holm(rows)}
    return doc, json.loads(json.dumps(clean(new)))
