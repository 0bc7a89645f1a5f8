"""The MLC paper's evaluation (Vega et al., section 4), run through the evaluation core.

Every trial is one of the core's units (``leaderboard.trialunits``): the core's trial plan
(``ExperimentPlan.core``: trial i of every policy has seed + i and target column i, a
function of (seed, i) alone), its ledger and its unit runner (batched on the fluid plant;
on a real-time plant trial-major on ONE testbed, the policies in a Williams order), and the
core's per-trial metrics (``trialunits.unit_metrics``). What this module adds is the
paper's layout of them:

- ``mrae_experiment``      section 4.2, eq. (3), Fig. 10: the core's MRAE trials (its
  seeded pseudo-random step target, ``trialunits.mrae_targets``).
- ``fct_experiment``       section 4.3, Fig. 11 and, from the same trials, Fig. 12
  (bottleneck utilisation rho, eq. (4), while the transfer runs): the core's FCT trials.
  The paper gives no target for it; Table 5's N_s = 100 row (trivial 174 s for 10 GB,
  i.e. ~460 Mbit/s) suggests R*_DTN = 500 Mbit/s, our default (``fct_target`` = 0.5 x B_max).
- ``sweep_experiment``     section 4.4, Table 5: the core's FCT trials with N_s campus
  streams, N_s in {1, 10, 100, 1000, 10000}; up to 100 hosts as in the testbed, more
  streams as parallel flows per host.
- ``short_flow_experiment`` section 4.5, Table 6, Fig. 14: the core's short-flow trials;
  the paper's figure is over the single short flows of all trials (their median and CDF).

The experiments are a registry (``EXPERIMENT_REGISTRY``, ``register_experiment``):
``run_experiments`` runs the core's trials of every experiment asked for in ONE core run
(one testbed on a real-time plant), then lays each out in registry order. Summaries and
paired tests are ``evaluation.stats``'.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...plant.registry import PlantSpec, plant_spec
from ...policies.base import Policy
from ...scenario import Scenario
from ...state import Trace
from ..fct import ideal_fct
from ..results import current_meta, provenance, write_csv, write_json
from ..stats import BASELINE, by_policy, compare, paired, per_policy
from ..trials import using_executor
from .plan import ExperimentPlan

__all__ = [
    "EXPERIMENTS",
    "EXPERIMENT_REGISTRY",
    "Experiment",
    "ExperimentPlan",
    "ExperimentResult",
    "register_experiment",
    "mrae_experiment",
    "fct_experiment",
    "sweep_experiment",
    "short_flow_experiment",
    "parse_experiments",
    "run_experiments",
    "sweep_layout",
    "write_results",
]


@dataclass
class ExperimentResult:
    """One experiment on one scenario: per-trial rows and the summary the report prints.
    ``traces``: each policy's first trial (the example trace a report draws), nothing more."""

    name: str
    scenario: str
    table: Any  # pandas.DataFrame, one row per (policy, trial[, n_s]) or per short flow
    summary: dict[str, Any]
    traces: dict[str, list[Trace]] = field(default_factory=dict, repr=False)
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "scenario": self.scenario, "summary": self.summary,
                "wall_s": self.wall_s}


# -- the core's trials ---------------------------------------------------------------


@dataclass
class CoreRun:
    """What one core run left: the ledger's unit lines the statistics use (per trial the run the
    validity rule chose, ``validity.select_runs``; a trial invalid for every policy left out),
    each policy's first trace per trial kind, the short-flow trials' single flows of those same
    units, and per trial kind the trials left out."""

    units: dict[tuple[str, str, int], Mapping[str, Any]]
    first: dict[str, dict[str, list[Trace]]]
    flows: list[Any]
    invalid: dict[str, list[int]] = field(default_factory=dict)
    #: whether a validity rule judged the trials (a real-time plant; the fluid plant is deterministic)
    judged: bool = False

    def rows(self, unit: str, policies: Sequence[str]) -> list[dict[str, Any]]:
        """One row per trial of ``unit``: policy, trial, seed, the core's metrics, starved periods."""
        out = []
        for (u, name, i), rec in sorted(self.units.items(), key=lambda kv: (list(policies).index(kv[0][1]),
                                                                             kv[0][2])):
            if u == unit:
                m = {k: (math.nan if v is None else v) for k, v in rec["metrics"].items()}
                out.append({"policy": name, "trial": i, "seed": rec["seed"], **m,
                            "starved_periods": int(rec.get("starved_periods") or 0)})
        return out

    def note_invalid(self, unit: str, summary: dict[str, Any]) -> None:
        """On a judged run, the trials of ``unit`` left out of every policy's statistics, in the summary."""
        if self.judged:
            summary["invalid_trials"] = list(self.invalid.get(unit, []))

    def wall(self, unit: str) -> float:
        return float(sum(r.get("wall_s") or 0.0 for (u, _, _), r in self.units.items() if u == unit))


def run_core(scenario: Scenario, policies: Mapping[str, Policy], plan: ExperimentPlan,
             experiments: tuple[str, ...], plant: str | PlantSpec = "fluid", progress: bool = False,
             fct_trials: int | None = None) -> CoreRun:
    """The core's trials of ``experiments`` for every policy (module docstring), through its trial
    plan, a ledger (in a temporary folder: a study's results file is its record) and its unit runner."""
    from ..leaderboard.ledger import Ledger
    from ..leaderboard.trialunits import (
        check_sizes,
        planned_units,
        run_batched,
        run_realtime,
        target_hashes,
    )

    spec = plant_spec(plant)
    core = plan.core(experiments, fct_trials)
    check_sizes(core, scenario)
    first: dict[str, dict[str, list[Trace]]] = {}
    # keyed by unit: a re-run of a trial replaces its flows, as its ledger line replaces the first run's
    flows: dict[tuple[str, str, int], Any] = {}

    def keep(unit: str, name: str, trial: int, trace: Trace, fl: Any) -> None:
        if trial == 0:
            first.setdefault(unit, {})[name] = [trace]
        if fl is not None:
            flows[(unit, name, trial)] = fl.assign(policy=name, instance=trial)

    header = {"scenario": scenario.name, "plant": spec.name, "plan": core.to_dict(),
              "targets": target_hashes(core, scenario), "policies": list(policies)}
    bar = _bar(len(planned_units(core, list(policies))), progress)
    tick = bar.update if bar is not None else None
    with tempfile.TemporaryDirectory(prefix="scidmz-mlc-") as tmp, Ledger.open(tmp, header, False) as ledger:
        try:
            if spec.realtime:
                run_realtime(scenario, policies, core, ledger, spec.name, tick, spec.options, keep)
            else:
                run_batched(scenario, policies, core, ledger, spec, tick, keep)
        finally:
            if bar is not None:
                bar.close()
        run = _judged(ledger.lines, core, list(policies), first, flows, plan.exclude_invalid)
        run.judged = spec.realtime and plan.exclude_invalid
        return run


def _judged(lines: Sequence[Mapping[str, Any]], core: Any, names: list[str], first: dict[str, dict[str, list[Trace]]],
            flows: Mapping[tuple[str, str, int], Any], exclude: bool) -> CoreRun:
    """The core run as the statistics see it, judged as the leaderboard judges (``select_runs``): per
    trial the run the rule chose; with ``exclude``, a trial invalid for every policy is left out of
    every policy's rows and flows (``--quick`` on a testbed keeps them: it checks the stages)."""
    from ..leaderboard.validity import select_runs

    chosen, bad, _ = select_runs(lines, core.validity, names)
    out = {u: set(t) for u, t in bad.items()} if exclude else {}
    units = {k: r for k, r in chosen.items() if k[2] not in out.get(k[0], set())}
    kept = [fl for k, fl in sorted(flows.items(), key=lambda kv: (kv[0][0], kv[0][2], names.index(kv[0][1])))
            if k in units]
    return CoreRun(units, first, kept, {u: sorted(t) for u, t in out.items()})


def _bar(total: int, progress: bool) -> Any:
    if not progress or not total:
        return None
    import sys

    from tqdm import tqdm

    return tqdm(total=total, desc="trials", unit="trial", file=sys.stderr)


def _ideal_fct(plan: ExperimentPlan, target: float) -> float:
    # A DTN held exactly at R*_DTN finishes in this time: the FCT a perfect tracking controller
    # gets (the transfer is payload, the target a rate of frame bytes: ARCHITECTURE.md).
    return ideal_fct(plan.transfer, target)


# -- section 4.2: MRAE -----------------------------------------------------------


def mrae_result(sc: Scenario, plan: ExperimentPlan, run: CoreRun, names: Sequence[str]) -> ExperimentResult:
    """Section 4.2 / eq. (3) / Fig. 10 from the core's MRAE trials: MRAE of R_DTN vs R*_DTN per trial."""
    import pandas as pd

    table = pd.DataFrame(run.rows("mrae", names))
    summary: dict[str, Any] = per_policy(
        table, "mrae", utilization=lambda g: float(g["utilization"].mean()),
        mean_rate_dtn=lambda g: float(g["mean_rate_dtn"].mean()), mean_target=lambda g: float(g["mean_target"].mean()),
        starved_periods=lambda g: int(g["starved_periods"].sum()))
    compare(summary, "mean", "reduction_pct")
    paired(summary, table, "mrae")
    summary["target_signal"] = (
        f"pseudo-random steps, R*_DTN ~ U[{plan.target_low:g}, {plan.target_high:g}] x B_max "
        f"every {min(plan.target_hold, plan.duration):g} s, seed {plan.seed} (trial i: drawn from (seed, i) alone)"
    )
    run.note_invalid("mrae", summary)
    return ExperimentResult("mrae", sc.name, table, summary, run.first.get("mrae", {}), run.wall("mrae"))


def mrae_experiment(
    scenario: Scenario,
    policies: Mapping[str, Policy],
    plan: ExperimentPlan,
    plant: str | PlantSpec = "fluid",
    progress: bool = False,
) -> ExperimentResult:
    """Section 4.2: the core's MRAE trials of every policy, laid out as the paper's Fig. 10."""
    run = run_core(scenario, policies, plan, ("mrae",), plant, progress)
    return mrae_result(scenario.replace(duration=plan.duration, dtn={"transfer": None}), plan, run, list(policies))


# -- section 4.3: FCT and utilisation ----------------------------------------------


def _unfinished(g: Any) -> int:
    return int((~g["finished"].astype(bool)).sum())


def fct_results(sc: Scenario, plan: ExperimentPlan, run: CoreRun, names: Sequence[str],
                ) -> tuple[ExperimentResult, ExperimentResult]:
    """Section 4.3 from the core's FCT trials: FCT of the DTN transfer (Fig. 11) and utilisation rho
    (Fig. 12), same trials."""
    import pandas as pd

    table = pd.DataFrame(run.rows("fct", names)).drop(columns=["fct_bound"], errors="ignore")
    fct_sum: dict[str, Any] = per_policy(table, "fct", unfinished=_unfinished)
    util_sum: dict[str, Any] = per_policy(table, "utilization")
    compare(fct_sum, "mean", "reduction_pct")
    compare(util_sum, "mean", "decrease_pct")
    paired(fct_sum, table, "fct")
    paired(util_sum, table, "utilization")
    target = plan.fct_target * sc.capacity
    info = {"target": target, "transfer": plan.transfer, "bound_s": plan.fct_bound(sc),
            "ideal_s": _ideal_fct(plan, target)}
    fct_sum.update(info)
    util_sum.update(info)
    run.note_invalid("fct", fct_sum)
    run.note_invalid("fct", util_sum)
    return (
        ExperimentResult("fct", sc.name, table, fct_sum, run.first.get("fct", {}), run.wall("fct")),
        ExperimentResult("utilization", sc.name, table[["policy", "trial", "utilization"]].copy(), util_sum, {}, 0.0),
    )


def fct_experiment(
    scenario: Scenario,
    policies: Mapping[str, Policy],
    plan: ExperimentPlan,
    plant: str | PlantSpec = "fluid",
    progress: bool = False,
) -> tuple[ExperimentResult, ExperimentResult]:
    """Section 4.3: the core's FCT trials of every policy, laid out as the paper's Figs. 11 and 12."""
    run = run_core(scenario, policies, plan, ("fct",), plant, progress)
    return fct_results(scenario, plan, run, list(policies))


# -- section 4.4: N_s sweep --------------------------------------------------------


def sweep_layout(n_streams: int, max_hosts: int = 100) -> tuple[int, int]:
    """(hosts, flows_per_host) for N_s campus streams: the testbed's <= 100 hosts, then more flows each."""
    n = int(n_streams)
    if n < 1:
        raise ValueError(f"N_s must be >= 1, got {n_streams}")
    hosts = min(n, max_hosts)
    if n % hosts:
        raise ValueError(f"N_s = {n} is not a multiple of {hosts} hosts")
    return hosts, n // hosts


def sweep_experiment(
    scenario: Scenario,
    policies: Mapping[str, Policy],
    plan: ExperimentPlan,
    plant: str | PlantSpec = "fluid",
    progress: bool = False,
) -> ExperimentResult:
    """Section 4.4 / Table 5: the core's FCT trials per N_s campus layout; mean FCT and its reduction."""
    import pandas as pd

    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    trials_used: dict[int, int] = {}
    for n_s in plan.ns_values:
        hosts, per_host = sweep_layout(n_s, max_hosts=max(scenario.campus.hosts, 1))
        sc = scenario.replace(campus={"hosts": hosts, "flows_per_host": per_host, "traffic": "long"})
        # The plant's cost grows with trials x flows; keep N_s = 10000 affordable (two trials at
        # least: a paired test needs two).
        trials_used[int(n_s)] = max(2, min(plan.ns_trials, plan.ns_max_flows // max(n_s, 1)))
        run = run_core(sc, policies, plan, ("fct",), plant, progress, fct_trials=trials_used[int(n_s)])
        rows.extend({**r, "n_s": int(n_s)} for r in run.rows("fct", list(policies)))
    table = pd.DataFrame(rows).drop(columns=["fct_bound"], errors="ignore")
    summary: dict[str, Any] = {"rows": []}
    for n_s in plan.ns_values:
        per = per_policy(table[table["n_s"] == n_s], "fct", unfinished=_unfinished)
        compare(per, "mean", "reduction_pct")
        summary["rows"].append({"n_s": int(n_s), "trials": trials_used[int(n_s)], **per})
    summary["target"] = plan.fct_target * scenario.capacity
    summary["transfer"] = plan.transfer
    summary["ideal_s"] = _ideal_fct(plan, summary["target"])
    return ExperimentResult("sweep", scenario.name, table, summary, {}, time.perf_counter() - t0)


# -- section 4.5: short flows --------------------------------------------------------


def short_result(sc: Scenario, plan: ExperimentPlan, run: CoreRun, names: Sequence[str]) -> ExperimentResult:
    """Section 4.5 / Table 6 / Fig. 14 from the core's short-flow trials: the FCTs of one campus
    sender's Weibull short flows, over the single flows of every trial (the paper's median and
    CDF), and a paired test of each policy's per-trial medians (the core's metric) against the
    baseline's."""
    import pandas as pd

    if not run.flows:
        raise ValueError("the plant returned no short flows; the short-flow experiment needs them")
    df = pd.concat(run.flows, ignore_index=True)
    df = df[np.isfinite(df["fct"].to_numpy(dtype=np.float64))]
    keep = [c for c in ("policy", "instance", "flow_id", "bytes", "size", "start", "finish", "fct") if c in df.columns]
    table = df[keep].reset_index(drop=True)
    summary: dict[str, Any] = per_policy(
        table, "fct", p90=lambda g: float(np.quantile(g["fct"], 0.9)) if len(g) else math.nan)
    compare(summary, "median", "median_reduction_pct")
    paired(summary, pd.DataFrame(run.rows("short", names)), "short_fct_median")
    base = summary.get(BASELINE, {}).get("median", math.nan)
    for name, s in summary.items():
        if name != BASELINE and isinstance(s, dict):
            s["median_delta_s"] = s["median"] - base
    summary["target"] = plan.fct_target * sc.capacity
    summary["duration"] = plan.short_duration
    run.note_invalid("short", summary)
    return ExperimentResult("short", sc.name, table, summary, {}, run.wall("short"))


def short_flow_experiment(
    scenario: Scenario,
    policies: Mapping[str, Policy],
    plan: ExperimentPlan,
    plant: str | PlantSpec = "fluid",
    progress: bool = False,
) -> ExperimentResult:
    """Section 4.5: the core's short-flow trials of every policy, laid out as Table 6 and Fig. 14."""
    return short_result(scenario, plan, run_core(scenario, policies, plan, ("short",), plant, progress),
                        list(policies))


# -- the registry ---------------------------------------------------------------------

#: ``layout(scenario, plan, core run, policy names)``: the experiment's results from the core's trials.
Layout = Callable[[Scenario, ExperimentPlan, CoreRun, Sequence[str]], dict[str, ExperimentResult]]
#: ``run(scenario, policies, plan, plant, progress)``: an experiment that runs trials of its own.
RunFn = Callable[[Scenario, Mapping[str, Policy], ExperimentPlan, Any, bool], dict[str, ExperimentResult]]


@dataclass(frozen=True)
class Experiment:
    """A registered experiment: ``gives`` the results it makes (the FCT trials also give the
    utilisation); either the core's ``unit`` of trials with its ``layout``, or its own ``run`` (the
    N_s sweep: the core's trials on other campus layouts); ``describe`` is its progress line."""

    gives: tuple[str, ...]
    describe: Callable[[Scenario, ExperimentPlan], str]
    unit: str | None = None
    layout: Layout | None = None
    run: RunFn | None = None


#: name -> Experiment, in the order ``run_experiments`` lays them out.
EXPERIMENT_REGISTRY: dict[str, Experiment] = {}
#: Every result name an ``--experiments`` list may ask for, in registry order.
EXPERIMENTS: tuple[str, ...] = ()


def register_experiment(name: str, describe: Callable[[Scenario, ExperimentPlan], str],
                        gives: tuple[str, ...] | None = None, unit: str | None = None,
                        layout: Layout | None = None, run: RunFn | None = None) -> None:
    """Add an experiment (``Experiment``); ``gives`` (default ``(name,)``) are the results it makes."""
    global EXPERIMENTS
    if (unit is None or layout is None) == (run is None):
        raise ValueError(f"experiment {name}: give either a core unit with its layout, or a run")
    EXPERIMENT_REGISTRY[name] = Experiment(tuple(gives or (name,)), describe, unit, layout, run)
    EXPERIMENTS = tuple(dict.fromkeys(g for e in EXPERIMENT_REGISTRY.values() for g in e.gives))


register_experiment(
    "mrae", lambda sc, plan: f"MRAE: {plan.trials} trials x {plan.duration:g} s per policy", unit="mrae",
    layout=lambda sc, plan, run, names: {"mrae": mrae_result(
        sc.replace(duration=plan.duration, dtn={"transfer": None}), plan, run, names)})
register_experiment(
    "fct", lambda sc, plan: (f"FCT/utilisation: {plan.fct_trials or plan.trials} trials, "
                             f"{plan.transfer / 1e9:g} GB transfer per policy"),
    gives=("fct", "utilization"), unit="fct",
    layout=lambda sc, plan, run, names: dict(zip(("fct", "utilization"), fct_results(sc, plan, run, names),
                                                 strict=True)))
register_experiment(
    "sweep", lambda sc, plan: f"N_s sweep {list(plan.ns_values)}",
    run=lambda sc, pols, plan, plant, prog: {"sweep": sweep_experiment(sc, pols, plan, plant, prog)})
register_experiment(
    "short", lambda sc, plan: f"short flows: {plan.short_trials} trials x {plan.short_duration:g} s", unit="short",
    layout=lambda sc, plan, run, names: {"short": short_result(sc, plan, run, names)})


def parse_experiments(spec: str | Sequence[str] | None) -> tuple[str, ...]:
    """'mrae,fct' -> ('mrae', 'fct'); None or 'all' -> every experiment. One-line error if unknown, and
    for an empty list: ``--experiments ""`` used to run everything, the opposite of what it says."""
    if spec is None:
        return EXPERIMENTS
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    if not items:
        raise ValueError(f"--experiments {spec!r}: no experiment named (choose from all, {', '.join(EXPERIMENTS)})")
    if items == ["all"]:
        return EXPERIMENTS
    bad = [s for s in items if s not in EXPERIMENTS]
    if bad:
        raise ValueError(f"unknown experiment(s) {', '.join(bad)} (choose from {', '.join(EXPERIMENTS)})")
    return tuple(dict.fromkeys(items))


def _core_groups(exps: tuple[str, ...], plant: str | PlantSpec) -> list[tuple[str, ...]]:
    """The core runs ``exps`` need: one; on a real-time plant the short-flow trials in a run of their
    own, as the leaderboard runs them (their extra sender is another testbed)."""
    if not exps:
        return []
    if plant_spec(plant).realtime and "short" in exps and len(exps) > 1:
        return [tuple(e for e in exps if e != "short"), ("short",)]
    return [exps]


def run_experiments(
    scenario: Scenario,
    policies: Mapping[str, Policy],
    plan: ExperimentPlan,
    experiments: Sequence[str] = EXPERIMENTS,
    out_dir: str | os.PathLike[str] | None = None,
    plant: str | PlantSpec = "fluid",
    progress: bool = False,
    log: Callable[[str], None] | None = None,
    executor: Any = None,
) -> dict[str, ExperimentResult]:
    """Run the chosen experiments; with ``out_dir`` write CSV per experiment, results.json and PNGs.

    The core's trials of every chosen experiment run in one core run (``run_core``; on a real-time
    plant one testbed for all of them), then each experiment lays its results out.
    ``executor`` (a ``concurrent.futures.Executor``, e.g. from ``executors.open_executor``): the
    batched trials are cut into chunks run there, with the same seeds per trial.
    """
    wanted = set(parse_experiments(list(experiments)))
    say = log or (lambda _m: None)
    chosen = [e for e in EXPERIMENT_REGISTRY.values() if not wanted.isdisjoint(e.gives)]
    core_exps = tuple(g for e in chosen if e.unit is not None for g in e.gives)
    results: dict[str, ExperimentResult] = {}
    with provenance(f"python: run_experiments({scenario.name!r}, ...)"), using_executor(executor):
        for exp in chosen:
            say(f"[{scenario.name}] {exp.describe(scenario, plan)}")
        runs = {group: run_core(scenario, policies, plan, group, plant, progress)
                for group in _core_groups(core_exps, plant)}
        for exp in chosen:
            if exp.layout is not None:
                run = next(r for g, r in runs.items() if exp.gives[0] in g)
                got = exp.layout(scenario, plan, run, list(policies))
            else:
                assert exp.run is not None
                got = exp.run(scenario, policies, plan, plant, progress)
            results.update({k: v for k, v in got.items() if k in wanted})
        if out_dir is not None:
            write_results(results, out_dir, scenario, plan)
    return results


# -- written to disk ---------------------------------------------------------------------

#: result -> (file, column, x label, the paper's figure)
_CDFS = {
    "mrae": ("mrae_cdf.png", "mrae", "MRAE", "Fig. 10"),
    "fct": ("fct_cdf.png", "fct", "DTN FCT [s]", "Fig. 11"),
    "utilization": ("utilization_cdf.png", "utilization", "bottleneck utilisation rho", "Fig. 12"),
    "short": ("short_fct_cdf.png", "fct", "short-flow FCT [s]", "Fig. 14"),
}


def write_results(
    results: Mapping[str, ExperimentResult],
    out_dir: str | os.PathLike[str],
    scenario: Scenario,
    plan: ExperimentPlan,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """CSV per experiment, ``results.json`` (summaries, plan, ``meta``) and the CDF/sweep plots.

    ``meta``: the results file's provenance (``evaluation.results``); default: the current
    ``provenance`` record's (``run_experiments`` opens one when the caller has not).
    """
    from ...plots import plot_cdfs, plot_sweep, save_figure

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    for name, res in results.items():
        files[f"{name}.csv"] = str(write_csv(res.table, out / f"{name}.csv"))
    label = f"{scenario.name} (DTN {scenario.dtn.cca})"
    for name, (fname, col, xlabel, fig) in _CDFS.items():
        if name in results:
            drawn = plot_cdfs(by_policy(results[name].table, col), xlabel, f"{fig}: {label}")
            files[fname] = str(save_figure(drawn, out / fname))
    if "sweep" in results:
        drawn = plot_sweep(results["sweep"].summary["rows"], f"Table 5 / Fig. 13: {label}")
        files["sweep.png"] = str(save_figure(drawn, out / "sweep.png"))
    payload = {
        "meta": dict(meta) if meta is not None else current_meta(),
        "scenario": scenario.to_dict(), "plan": plan.to_dict(),
        "results": {k: v.to_json() for k, v in results.items()}, "files": sorted(files),
    }
    files["results.json"] = str(write_json(payload, out / "results.json"))
    return files

