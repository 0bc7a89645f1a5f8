"""A re-check of a finished run: the same trials run again after a fix, trial by trial against the first.

A leaderboard run's trial i has the seed and target signal of trial i of every other run of
the same plan, whatever either run's trial count (``signals.trial_steps``), so a second run on
the same scenario (after a testbed fix, say) pairs with the first trial by trial. That is
checked, not assumed: ``target_mismatch`` compares the ledgers' per-trial target hashes (or,
for ledgers written before those were recorded, each trial's mean target); runs whose targets
differ are not compared trial by trial (the re-check then stands as a run of its own). Paired: per policy and experiment, the paired change from the first run
to the re-check, its bootstrap 95 % interval and a raw Wilcoxon p (one planned test per
row, uncorrected; it asks "did this policy's numbers move?", not which policy is best).

Ours: a re-check runs the policies whose verdict matters most on fewer trials (re-running a
whole kernel run is a day of testbed time; the first use was the kernel CUBIC run whose delay
stage held some ACKs too little, docs/testbed.md), and this comparison says whether their
numbers and the verdict among them held. ``scidmz leaderboard --out AGAIN --recheck FIRST``
writes it to ``AGAIN/recheck.md`` (``write_recheck``). Trials left out of the
statistics (by each run's validity rule, ``validity``; a ledger of the legacy rule: a trial in
which any policy's unit had a starved share over ``max_starved``) are left out here too, for
every policy, on either side, and a re-run trial counts with its last valid run.

Only the two ledgers are read (never written: a partial last line is skipped, not cut).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import stats
from .ledger import parse_ledger_lines
from .plan import EXPERIMENTS, METRICS, unit_of
from .results import DEFAULT_MAX_STARVED, build_rows, fct_ideal_of, unit_value
from .validity import LegacyStarvation, ValidityRule, rule_of, select_runs

__all__ = ["read_ledger", "recheck_rows", "check_same_plan", "target_mismatch", "recheck_context", "standing",
           "write_recheck", "RECHECK_NAME"]

#: The re-check's page, in the re-check's folder.
RECHECK_NAME = "recheck.md"


def read_ledger(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, unit lines, re-runs included) of a ``ledger.jsonl``, read only; one-line ``ValueError`` if
    it is not one."""
    from ...fileio import read_member
    from ...limits import MAX_LEDGER_BYTES

    p = Path(path)
    # Never through a link, only a regular file of its own, bounded (docs/safety.md, output folders).
    data = read_member(p, "ledger", MAX_LEDGER_BYTES)
    if data is None:
        raise ValueError(f"{p}: no such ledger")
    head, lines, _ = parse_ledger_lines(data, str(p))  # read only: a partial last line stays in the file
    return head, lines


def check_same_plan(first: Mapping[str, Any], again: Mapping[str, Any]) -> None:
    """A re-check pairs with its first run only on the same scenario, plant and trial plan (seed,
    durations, targets, transfer), and a policy both ran with the same trained files (its model and
    gains); the trial counts and the set of policies may differ. ``ValueError`` otherwise."""
    keys = ("seed", "duration", "target_low", "target_high", "target_hold", "fct_target", "transfer")
    a, b = first.get("plan") or {}, again.get("plan") or {}
    diff = [k for k in keys if a.get(k) != b.get(k)]
    pa, pb = first.get("policies") or {}, again.get("policies") or {}
    diff += [f"{n}'s files" for n in pb if n in pa and (pa[n] or {}).get("files") != (pb[n] or {}).get("files")]
    if first.get("plant") != again.get("plant"):
        diff.insert(0, "plant")
    if (first.get("scenario") or {}).get("sha256") != (again.get("scenario") or {}).get("sha256"):
        diff.insert(0, "scenario")
    if diff:
        raise ValueError(f"the re-check's trials do not pair with the first run's: {', '.join(diff)} differ")


def _mean_targets(units: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """Trial -> the mean MRAE target its unit lines recorded (every policy's trial i has one target)."""
    out: dict[int, float] = {}
    for r in units:
        v = (r.get("metrics") or {}).get("mean_target")
        if r.get("unit") == "mrae" and isinstance(v, int | float):
            out.setdefault(int(r["trial"]), float(v))
    return out


def target_mismatch(first: Mapping[str, Any], first_units: Sequence[Mapping[str, Any]], again: Mapping[str, Any],
                    again_units: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Trial kind -> why the two runs' shared trials of that kind do not track the same targets (empty
    if all do): the headers' per-trial target hashes (``trialunits.target_hashes``) where both have
    them; for ledgers written before they were recorded, each MRAE trial's recorded mean target (ours:
    coarser, but it tells apart any two pseudo-random step signals; the FCT and short-flow trials'
    constant target is the plan's ``fct_target``, which ``check_same_plan`` compares)."""
    ha, hb = first.get("targets"), again.get("targets")
    out = {}
    if isinstance(ha, Mapping) and isinstance(hb, Mapping):
        for unit in (u for u in ha if u in hb):
            bad = next((i for i, (x, y) in enumerate(zip(ha[unit], hb[unit], strict=False)) if x != y), None)
            if bad is not None:
                out[unit] = f"trial {bad}'s {unit.upper()} target differs (hash {ha[unit][bad]} vs {hb[unit][bad]})"
        return out
    ma, mb = _mean_targets(first_units), _mean_targets(again_units)
    bad = next((i for i in sorted(ma) if i in mb and not math.isclose(ma[i], mb[i], rel_tol=1e-9)), None)
    if bad is not None:
        out["mrae"] = (f"trial {bad}'s MRAE target differs (mean {ma[bad] / 1e6:.1f} vs {mb[bad] / 1e6:.1f} Mbit/s; "
                       "the ledgers predate per-trial target hashes)")
    return out


def _values(units: Sequence[Mapping[str, Any]], exp: str, policy: str,
            rule: float | ValidityRule | LegacyStarvation) -> dict[int, float]:
    """One policy's values of ``exp`` on the run's valid trials, each from the trial's last valid run
    (a trial invalid for any policy is invalid for all, ``validity.select_runs``); ``rule``: the run's
    (a number: the legacy starved-share threshold)."""
    r = LegacyStarvation(float(rule)) if isinstance(rule, int | float) else rule
    chosen, bad, _ = select_runs(units, r)
    out = bad.get(unit_of(exp), set())
    return {i: unit_value(exp, line) for (u, name, i), line in chosen.items()
            if u == unit_of(exp) and name == policy and i not in out}


def recheck_rows(first: Sequence[Mapping[str, Any]], again: Sequence[Mapping[str, Any]], policies: Sequence[str],
                 experiments: Sequence[str] = ("mrae", "fct"),
                 max_starved: float | ValidityRule | LegacyStarvation = DEFAULT_MAX_STARVED,
                 seed: int = 0, again_rule: ValidityRule | LegacyStarvation | None = None) -> list[dict[str, Any]]:
    """One row per (experiment, policy) the re-check ran: ``n`` trials both runs kept, the first run's
    and the re-check's means over them, ``pct`` = the re-check's change (+ = better), its ``ci95``
    and Wilcoxon ``p`` (``stats.planned_pair``). ``max_starved``: the first run's validity rule (a
    number: the legacy starved-share threshold), ``again_rule`` the re-check's (default the same)."""
    rows = []
    for exp in (e for e in EXPERIMENTS if e in experiments):
        metric, better = METRICS[exp]
        for name in policies:
            a = _values(first, exp, name, max_starved)
            b = _values(again, exp, name, max_starved if again_rule is None else again_rule)
            x, y = stats.paired_values(a, b)
            pair = stats.planned_pair(a, b, better, stats.stable_seed(seed, "recheck", exp, name))
            rows.append({"experiment": exp, "metric": metric, "better": better, "policy": name,
                         "first_mean": float(x.mean()) if x.size else None,
                         "again_mean": float(y.mean()) if y.size else None, **pair})
    return rows


def _run_rows(header: Mapping[str, Any], units: Sequence[Mapping[str, Any]], policies: Sequence[str],
              trials: Mapping[str, set[int]], max_starved: float) -> list[dict[str, Any]]:
    """The leaderboard rows of one run among ``policies``, on the trials in ``trials`` per unit."""
    head = {**header, "policies": {n: header["policies"][n] for n in policies}}
    kept = [u for u in units if u.get("policy") in policies and int(u["trial"]) in trials.get(str(u["unit"]), set())]
    return [{"run": "r", **r} for r in build_rows(head, kept, {}, max_starved)]


def _verdict(rows: Sequence[Mapping[str, Any]], fct_ideal: float | None) -> list[str]:
    """The MRAE and FCT verdict sentences of one run's rows (``verdict.leaderboard_context``)."""
    from ..verdict import leaderboard_context

    regimes = leaderboard_context({"rows": list(rows), "runs": [{"run": "r", "fct_ideal_s": fct_ideal}]})["regimes"]
    return regimes[0]["verdict"][:2] if regimes else []


def standing(first: Sequence[Mapping[str, Any]], again: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Which policies kept their standing against the trivial TBF from the first run to the re-check:
    ``held`` and ``moved``, one phrase per (policy, experiment), "significantly better" read as
    ``verdict.leads_trivial`` reads it. Ours: the verdict's best-policy sentences can agree while a policy's
    lead over the baseline vanishes, and that lead is what an admin choosing a policy over the
    trivial TBF needs to know held."""
    from ..verdict import leads_trivial

    a = {(r["experiment"], r["policy"]): r for r in first if r["experiment"] in ("mrae", "fct")}
    out: dict[str, list[str]] = {"held": [], "moved": []}
    for r in again:
        key = (r["experiment"], r["policy"])
        if r["policy"] == stats.BASELINE or key not in a:
            continue
        was, now = leads_trivial(a[key]), leads_trivial(r)
        word = "significantly better than" if now else "not distinguishable from or worse than"
        if was == now:
            out["held"].append(f"{r['policy']}'s {r['experiment'].upper()} ({word} the trivial TBF)")
        else:
            out["moved"].append(f"{r['policy']}'s {r['experiment'].upper()}: "
                                f"p vs trivial {a[key]['p_vs_trivial']:.2g} in the first run, "
                                f"{r['p_vs_trivial']:.2g} in the re-check (now {word} it)")
    return out


def recheck_context(first_dir: str | os.PathLike[str], again_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """What a re-check's page says (``leaderboard_recheck.md.j2``): whether it finished, the
    per-policy rows (``recheck_rows``), and the verdict among its policies from the first run and from
    the re-check, both on the trials the re-check ran, and ``standing`` (``standing``); for trial kinds
    whose targets differ, the re-check's own verdict on its own trials (``again_own``)."""
    from ..results import read_results

    doc = read_results(Path(again_dir) / "results.json", "scidmz leaderboard")
    h1, u1 = read_ledger(Path(first_dir) / "ledger.jsonl")
    h2, u2 = read_ledger(Path(again_dir) / "ledger.jsonl")
    check_same_plan(h1, h2)
    policies = [n for n in h2["policies"] if n in h1["policies"]]
    if stats.BASELINE not in policies:
        raise ValueError(f"{again_dir}: a re-check needs the {stats.BASELINE} policy in both runs (the verdict's baseline)")
    if doc.get("complete") is False:
        # An unfinished re-check says so and nothing else: its trials so far are not the plan.
        return {"complete": False, "units_left": doc.get("units_left"), "policies": policies}
    # null in a run under the plan's validity rule (its header's rule is applied: ``build_rows``)
    ms = doc.get("max_starved")
    max_starved = float(ms) if isinstance(ms, int | float) else DEFAULT_MAX_STARVED
    exps = [e for e in h2["plan"]["experiments"] if e in ("mrae", "fct")]
    trials = {}
    for u in u2:
        trials.setdefault(str(u["unit"]), set()).add(int(u["trial"]))
    ideal = fct_ideal_of(doc)
    # Trial kinds whose targets differ between the runs are not the first run's trials: no
    # trial-by-trial comparison of them; the re-check's own rows against the trivial TBF stand.
    unpaired = target_mismatch(h1, u1, h2, u2)
    paired = [e for e in exps if unit_of(e) not in unpaired]
    both = {u: t for u, t in trials.items() if u not in unpaired}
    rows1, rows2 = ([r for r in _run_rows(h, u, policies, both, max_starved) if r["experiment"] in paired]
                    for h, u in ((h1, u1), (h2, u2)))
    own = _run_rows(h2, u2, policies, trials, max_starved)
    return {"complete": True, "units_left": 0, "policies": policies, "trials": {e: len(trials.get(unit_of(e), ())) for e in exps},
            "unpaired": {e: unpaired[unit_of(e)] for e in exps if unit_of(e) in unpaired},
            "again_own": {e: " ".join(_verdict([r for r in own if r["experiment"] == e], ideal))
                          for e in exps if unit_of(e) in unpaired},
            "rows": recheck_rows(u1, u2, policies, paired, rule_of(h1, max_starved), int(h2["plan"].get("seed", 0)),
                                 rule_of(h2, max_starved)),
            "first": _verdict(rows1, ideal), "again": _verdict(rows2, ideal), "standing": standing(rows1, rows2)}


def write_recheck(first_dir: str | os.PathLike[str], again_dir: str | os.PathLike[str]) -> Path:
    """Render the re-check in ``again_dir`` against the run in ``first_dir`` (``recheck_context``) to
    ``again_dir/recheck.md``, atomically; neither run's ledger or results are written."""
    from ..render import render, write_report

    ctx = recheck_context(first_dir, again_dir)
    text = render("leaderboard_recheck.md.j2", again_dir, first_dir=str(first_dir), again_dir=str(again_dir), **ctx)
    return write_report(text, again_dir, RECHECK_NAME)
