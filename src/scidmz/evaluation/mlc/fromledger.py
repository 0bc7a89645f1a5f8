"""The MLC study's kernel evaluation laid out from the kernel leaderboard's units (ours).

The kernel leaderboard (``reports/leaderboard/netns-testbed-<cca>``) runs the MLC shipped for the
``testbed`` scenario -- the model and gains the kernel chain made (``reports/mlc-netns``:
identification, training, fine-tuning and tuning on the real network) -- beside the trivial TBF,
on the same paired trials, through the evaluation core, judged per trial by its validity rule.
Running those two policies a second time for the MLC report would spend hours of a quiet machine
on units the core has already run on the same plan. So ``scidmz reproduce mlc --evaluation-from
DIR`` lays the report's section 4 evaluation out from them (``experiments.mrae_result`` /
``fct_results``: the study's own layout, summaries and paired tests), after checking that they
are the study's:

- the run's ``mlc`` ran the shipped model and gains (the ledger header's file hashes), and those
  gains are the ones the chain's tuning wrote (``tune.gains`` of the section);
- its plan has the study's targets (seed, duration, target range and hold, FCT target, transfer).

Which trials count is the leaderboard's rule: a trial invalid for any of the run's policies is
left out for all (``validity.select_runs`` over the run's policies), so the report and the
leaderboard read the same trials. The units carry no traces, so the report has no example trace.
The FCT bound is the leaderboard plan's (unfinished transfers count at it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...scenario import Scenario
from .experiments import CoreRun, ExperimentResult, fct_results, mrae_result
from .plan import ExperimentPlan

__all__ = ["POLICIES", "TARGET_FIELDS", "core_run_from_ledger", "evaluation_from_ledger", "check_same_study",
           "study_plan", "relay"]

#: The study's two policies, in its order.
POLICIES = ("mlc", "trivial")
#: The plan fields that fix the paired trials' targets and sizes; the run's must equal the study's.
TARGET_FIELDS = ("seed", "duration", "target_low", "target_high", "target_hold", "fct_target", "transfer")


def _read(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from ...fileio import read_member
    from ...limits import MAX_LEDGER_BYTES
    from ..leaderboard.ledger import LEDGER_NAME, parse_ledger_lines

    path = run_dir / LEDGER_NAME
    data = read_member(path, "--evaluation-from: ledger", MAX_LEDGER_BYTES)
    if data is None:
        raise ValueError(f"--evaluation-from {run_dir}: no {LEDGER_NAME} (give a kernel leaderboard run's folder)")
    header, lines, _ = parse_ledger_lines(data, f"--evaluation-from: {path}")
    return header, lines


def core_run_from_ledger(run_dir: str | os.PathLike[str]) -> tuple[dict[str, Any], CoreRun]:
    """(the ledger's header, the study's units of it as a ``CoreRun``: per trial the run the run's
    validity rule chose over all of its policies, a trial invalid for any of them left out)."""
    from ..leaderboard.results import DEFAULT_MAX_STARVED
    from ..leaderboard.validity import rule_of, select_runs

    header, lines = _read(Path(run_dir))
    missing = [p for p in POLICIES if p not in (header.get("policies") or {})]
    if missing:
        raise ValueError(f"--evaluation-from {run_dir}: the run has no {', '.join(missing)} (the study compares "
                         f"{' and '.join(POLICIES)})")
    chosen, bad, _ = select_runs(lines, rule_of(header, DEFAULT_MAX_STARVED), list(header["policies"]))
    units = {k: r for k, r in chosen.items() if k[1] in POLICIES and k[2] not in bad.get(k[0], set())}
    return header, CoreRun(units, {}, [], {u: sorted(t) for u, t in bad.items()}, judged=True)


def check_same_study(header: Mapping[str, Any], study: Mapping[str, Any], files: Mapping[str, str],
                     gains: Mapping[str, Any] | None, where: str) -> None:
    """One-line ValueError unless the run is the study's (module docstring). ``study``: the study's
    experiment plan (``ExperimentPlan.to_dict``, as its results file records it); ``files``: the shipped
    model's {"model": dir, "gains": file}; ``gains``: the section's tuned gains (kp, ki, kw)."""
    import json

    from ..leaderboard.ledger import files_sha256

    run_plan = header.get("plan") or {}
    for key in TARGET_FIELDS:
        if run_plan.get(key) != study.get(key):
            raise ValueError(f"{where}: the run's plan.{key} is {run_plan.get(key)!r}, the study's {study.get(key)!r}")
    ran = ((header.get("policies") or {}).get("mlc") or {}).get("files") or {}
    for name, path in files.items():
        if ran.get(name) != files_sha256(path):
            raise ValueError(f"{where}: its mlc ran another {name} than {path} (file hashes differ)")
    shipped = json.loads(Path(files["gains"]).read_text())
    for k in ("kp", "ki", "kw"):
        if gains is not None and gains.get(k) != shipped.get(k):
            raise ValueError(f"{where}: the shipped gains' {k} is {shipped.get(k)!r}, the chain tuned {gains.get(k)!r}")


def study_plan(header: Mapping[str, Any]) -> ExperimentPlan:
    """The study's plan of the run's trials: its counts and sizes (the FCT bound included)."""
    p = header.get("plan") or {}
    return ExperimentPlan(trials=int(p["trials"]), fct_trials=int(p["fct_trials"]), duration=float(p["duration"]),
                          target_low=float(p["target_low"]), target_high=float(p["target_high"]),
                          target_hold=float(p["target_hold"]), fct_target=float(p["fct_target"]),
                          transfer=float(p["transfer"]), fct_max_time=p.get("fct_max_time"), seed=int(p["seed"]),
                          max_reruns=int((p.get("validity") or {}).get("max_reruns", 3)))


def evaluation_from_ledger(sc: Scenario, run: CoreRun, plan: ExperimentPlan) -> dict[str, ExperimentResult]:
    """The study's MRAE, FCT and utilisation results from the run's units (its layout)."""
    names = list(POLICIES)
    out = {"mrae": mrae_result(sc.replace(duration=plan.duration, dtn={"transfer": None}), plan, run, names)}
    fct, util = fct_results(sc, plan, run, names)
    return {**out, "fct": fct, "utilization": util}


def _check_finished(run_dir: Path, where: str) -> None:
    """One line unless the run has finished: an interrupted run's first trials are not its planned evidence."""
    from ..results import read_results

    path = run_dir / "results.json"
    if not path.is_file():
        raise ValueError(f"{where}: no results.json, so the run has not finished (resume it first)")
    doc = read_results(path, f"scidmz leaderboard --out {run_dir}")
    if doc.get("complete") is False:
        raise ValueError(f"{where}: the run is unfinished ({doc.get('units_left')} trial units left; resume it first)")


def _section_from_run(out_dir: Path, sections: dict[str, dict[str, Any]], study: Mapping[str, Any],
                      run_dir: str) -> str:
    """Lay one section's evaluation out from one run (module docstring); returns the section's CCA."""
    from ...datasets import shipped_model
    from ...scenario import load_scenario
    from ..results import clean
    from .experiments import write_results
    from .reproduce import _with_dtn_cca

    where = f"--evaluation-from {run_dir}"
    _check_finished(Path(run_dir), where)
    header, run = core_run_from_ledger(run_dir)
    cca = (header["scenario"].get("fingerprint") or {}).get("dtn_cca")
    if cca not in sections:
        raise ValueError(f"{where}: its DTN runs {cca}, and {out_dir}/results.json has no {cca} section")
    sec = sections[cca]
    sc = _with_dtn_cca(load_scenario(sec["scenario"]), cca)
    shipped = shipped_model(sc)
    if shipped is None:
        raise ValueError(f"{where}: no MLC ships for {sc.name} with a {cca} DTN to check the run's model against")
    check_same_study(header, study, {"model": str(shipped[0]), "gains": str(shipped[1])},
                     (sec.get("tune") or {}).get("gains"), where)
    plan = study_plan(header)
    results = evaluation_from_ledger(sc, run, plan)
    # the units carry no traces: an example trace of the earlier engine's trials would not be these trials'
    sec["files"] = {k: v for k, v in sec.get("files", {}).items() if k != "example_trace.png"}
    sec["files"].update(write_results(results, out_dir / cca, sc, plan))
    sec["summaries"] = clean({k: v.summary for k, v in results.items()})
    sec["wall_s"] = {k: v.wall_s for k, v in results.items()}
    sec["evaluation_from"] = {"run": str(run_dir), "units": len(run.units), "invalid_trials": run.invalid,
                              "plan": header.get("plan"), "code": header.get("code")}
    return str(cca)


def relay(out: str | os.PathLike[str], runs: list[str], command: str | None = None,
          notes: str | None = None) -> tuple[dict[str, Any], str]:
    """``scidmz reproduce mlc --evaluation-from DIR ... --out OUT``: each run's section of OUT's report
    gets its evaluation from the run's units (module docstring); identification, training and tuning
    stay as ``OUT/results.json`` has them. Rewrites ``OUT/results.json`` and ``OUT/report.md``."""
    import time

    from ..results import provenance, read_results, write_json
    from .report import ENGINE, write_report
    from .reproduce import _rel, headline, sections_of

    out_dir = Path(out)
    path = out_dir / "results.json"
    doc = read_results(path, f"scidmz reproduce mlc --out {out_dir}")
    if not isinstance(doc.get("sections"), dict) or not isinstance(doc.get("meta"), dict):
        raise ValueError(f"{path}: not a results.json written by `scidmz reproduce mlc`")
    sections = sections_of(doc, out_dir)
    study = ((doc.get("plan") or {}).get("experiments") or {})
    with provenance(command or f"scidmz reproduce mlc --evaluation-from {' '.join(runs)} --out {out_dir}"):
        used = {_section_from_run(out_dir, sections, study, r): str(r) for r in runs}
    meta = {**doc["meta"], "engine": ENGINE, "evaluation_from": used,
            "evaluated_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            **({"evaluated_by": command} if command else {})}
    sizes = dict(meta.get("sizes") or {})
    for cca in used:
        p = sections[cca]["evaluation_from"]["plan"]
        sizes.update(mrae_trials=f"{p['trials']} x {p['duration']:g} s",
                     fct_trials=f"{p['fct_trials']} x {p['transfer'] / 1e9:g} GB")
    meta["sizes"] = sizes
    report = write_report(sections, meta, out_dir, notes=notes)
    files = {c: {k: _rel(v, out_dir) for k, v in s.get("files", {}).items()} for c, s in sections.items()}
    result = {**{k: v for k, v in doc.items() if k not in ("meta", "files", "sections", "headline")},
              "headline": headline(sections), "report": str(report),
              "sections": {c: {k: v for k, v in s.items() if k != "files"} for c, s in sections.items()}}
    write_json({**result, "meta": meta, "files": files}, path)
    return result, f"evaluation laid out from {', '.join(used.values())}; report written to {report}"
