"""The MLC paper's evaluation (Vega et al., section 4): every policy on the same seeded trials.

- ``mrae_experiment``      section 4.2, eq. (3), Fig. 10: set-point tracking over
  N trials of t_N = 120 s. The paper names no target signal; we use a seeded
  pseudo-random step target per trial (a new R*_DTN uniform in
  [target_low, target_high] x B_max every ``target_hold`` seconds, the same kind of
  signal the GA tunes on, section 3.3). ``target_hold >= duration`` gives one
  constant R*_DTN per trial instead.
- ``fct_experiment``       section 4.3, Fig. 11 and, from the same trials, Fig. 12
  (bottleneck utilisation rho, eq. (4), averaged while the transfer runs): a
  10 GB DTN transfer against the campus long flows, run until every trial's
  transfer finishes (bounded by ``fct_max_time``). The paper gives no target for
  it; Table 5's N_s = 100 row (trivial 174 s for 10 GB, i.e. ~460 Mbit/s)
  suggests R*_DTN = 500 Mbit/s, our default (``fct_target`` = 0.5 x B_max).
- ``sweep_experiment``     section 4.4, Table 5: the same FCT test with N_s campus
  streams, N_s in {1, 10, 100, 1000, 10000}; up to 100 hosts as in the testbed,
  more streams as parallel flows per host.
- ``short_flow_experiment`` section 4.5, Table 6, Fig. 14: one extra campus sender
  making Weibull short flows next to the long flows; median short-flow FCT.

The experiments are a registry (``EXPERIMENT_REGISTRY``, ``register_experiment``):
``run_experiments`` runs the ones asked for, in registry order. Every trial of one
policy runs in ONE batched plant (``evaluation.trials``; instance i uses seed + i),
so the policies see the same campus randomness trial for trial (paired trials).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...metrics import fct as fct_metric
from ...metrics import mrae, utilization
from ...plant.registry import PlantSpec
from ...policies.base import Policy
from ...scenario import Scenario
from ...signals import trial_steps
from ...state import Trace
from ..fct import ideal_fct
from ..results import current_meta, provenance, write_csv, write_json
from ..stats import BASELINE, by_policy, compare, paired, per_policy
from ..trials import run_trials, using_executor
from .plan import ExperimentPlan

__all__ = [
    "EXPERIMENTS",
    "EXPERIMENT_REGISTRY",
    "Experiment",
    "ExperimentPlan",
    "ExperimentResult",
    "register_experiment",
    "mrae_targets",
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
    """One experiment on one scenario: per-trial rows and the summary the report prints."""

    name: str
    scenario: str
    table: Any  # pandas.DataFrame, one row per (policy, trial[, n_s]) or per short flow
    summary: dict[str, Any]
    traces: dict[str, list[Trace]] = field(default_factory=dict, repr=False)
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "scenario": self.scenario, "summary": self.summary,
                "wall_s": self.wall_s}


def _dtn_fct(trace: Trace) -> float:
    """The DTN transfer's FCT from the plant's per-period ``dtn_fct`` column (NaN until done)."""
    if "dtn_fct" not in trace.df.columns:
        raise ValueError("the plant does not report 'dtn_fct'; the FCT experiments need it")
    v = trace.df["dtn_fct"].to_numpy(dtype=np.float64)
    fin = v[np.isfinite(v)]
    return float(fin[0]) if fin.size else math.nan


def _starved(df: Any) -> dict[str, int]:
    """Periods in which the testbed's CPU, not TCP, limited the result (netns ``info["starved"]``);
    nothing for plants that do not report it. Reports count them; a benchmark refuses them."""
    if "starved" not in df.columns:
        return {}
    return {"starved_periods": int(np.nansum(df["starved"].to_numpy(dtype=np.float64)))}


def _ideal_fct(plan: ExperimentPlan, target: float) -> float:
    # A DTN held exactly at R*_DTN finishes in this time: the FCT a perfect tracking controller
    # gets (the transfer is payload, the target a rate of frame bytes: ARCHITECTURE.md).
    return ideal_fct(plan.transfer, target)


# -- section 4.2: MRAE -----------------------------------------------------------


def mrae_targets(scenario: Scenario, plan: ExperimentPlan) -> np.ndarray:
    """(steps, trials) R*_DTN: seeded pseudo-random steps per trial (see the module doc); column i
    depends on (plan.seed, i) alone (``signals.trial_steps``), so runs of any size share trial i."""
    steps = int(round(plan.duration / scenario.period))
    hold = max(1, int(round(plan.target_hold / scenario.period)))
    return trial_steps(
        steps, plan.target_low * scenario.capacity, plan.target_high * scenario.capacity,
        hold=min(hold, steps), seed=plan.seed, trials=plan.trials,
    )


def _mrae_row(name: str, i: int, df: Any, capacity: float) -> dict[str, Any]:
    rd, rc = df["rate_dtn"].to_numpy(), df["rate_campus"].to_numpy()
    return {
        "policy": name, "trial": i, "mrae": mrae(df["target"].to_numpy(), rd),
        "utilization": float(np.mean(utilization(rd, rc, capacity))),
        "mean_target": float(df["target"].mean()), "mean_rate_dtn": float(rd.mean()),
        "mean_rate_campus": float(rc.mean()), "mean_u": float(df["u"].mean()), **_starved(df),
    }


def mrae_experiment(
    scenario: Scenario,
    policies: Mapping[str, Policy],
    plan: ExperimentPlan,
    plant: str | PlantSpec = "fluid",
    progress: bool = False,
) -> ExperimentResult:
    """Section 4.2 / eq. (3) / Fig. 10: MRAE of R_DTN vs R*_DTN per trial, every policy."""
    import pandas as pd

    t0 = time.perf_counter()
    sc = scenario.replace(duration=plan.duration, dtn={"transfer": None})
    tg = mrae_targets(sc, plan)
    skip = int(round(plan.skip / sc.period))
    rows: list[dict[str, Any]] = []
    traces: dict[str, list[Trace]] = {}
    for name, pol in policies.items():
        trs, _ = run_trials(sc, pol, tg, seed=plan.seed, plant=plant, progress=progress)
        traces[name] = trs
        rows += [_mrae_row(name, i, tr.df.iloc[skip:], sc.capacity) for i, tr in enumerate(trs)]
    table = pd.DataFrame(rows)
    summary: dict[str, Any] = per_policy(
        table, "mrae", utilization=lambda g: float(g["utilization"].mean()),
        mean_rate_dtn=lambda g: float(g["mean_rate_dtn"].mean()), mean_target=lambda g: float(g["mean_target"].mean()))
    if "starved_periods" in table:
        for name, g in table.groupby("policy", sort=False):
            summary[str(name)]["starved_periods"] = int(g["starved_periods"].sum())
    compare(summary, "mean", "reduction_pct")
    paired(summary, table, "mrae")
    summary["target_signal"] = (
        f"pseudo-random steps, R*_DTN ~ U[{plan.target_low:g}, {plan.target_high:g}] x B_max "
        f"every {min(plan.target_hold, plan.duration):g} s, seed {plan.seed} (trial i: column i)"
    )
    return ExperimentResult("mrae", sc.name, table, summary, traces, time.perf_counter() - t0)


# -- section 4.3: FCT and utilisation ----------------------------------------------


def _fct_rows(
    sc: Scenario, policies: Mapping[str, Policy], plan: ExperimentPlan, trials: int, plant: str | PlantSpec,
    progress: bool, extra: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, list[Trace]]]:
    steps = int(math.ceil(plan.fct_bound(sc) / sc.period))
    tg = np.full((steps, trials), plan.fct_target * sc.capacity)
    rows: list[dict[str, Any]] = []
    traces: dict[str, list[Trace]] = {}
    for name, pol in policies.items():
        trs, _ = run_trials(sc, pol, tg, seed=plan.seed, plant=plant, until_done=True, progress=progress)
        traces[name] = trs
        for i, tr in enumerate(trs):
            f = _dtn_fct(tr)
            df = tr.df if not math.isfinite(f) else tr.df[tr.df["t"] <= f + sc.dtn.start + sc.period]
            rho = utilization(df["rate_dtn"].to_numpy(), df["rate_campus"].to_numpy(), sc.capacity)
            rows.append({
                "policy": name, "trial": i, **(extra or {}), "fct": f, "finished": bool(math.isfinite(f)),
                "utilization": float(np.mean(rho)), "mean_rate_dtn": float(df["rate_dtn"].mean()),
                "mean_u": float(df["u"].mean()), **_starved(df),
            })
    return rows, traces


def _unfinished(g: Any) -> int:
    return int((~g["finished"]).sum())


def fct_experiment(
    scenario: Scenario,
    policies: Mapping[str, Policy],
    plan: ExperimentPlan,
    plant: str | PlantSpec = "fluid",
    progress: bool = False,
) -> tuple[ExperimentResult, ExperimentResult]:
    """Sections 4.3: FCT of the DTN transfer (Fig. 11) and utilisation rho (Fig. 12), same trials."""
    import pandas as pd

    t0 = time.perf_counter()
    sc = scenario.replace(dtn={"transfer": plan.transfer})
    rows, traces = _fct_rows(sc, policies, plan, plan.fct_trials or plan.trials, plant, progress)
    table = pd.DataFrame(rows)
    wall = time.perf_counter() - t0
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
    return (
        ExperimentResult("fct", sc.name, table, fct_sum, traces, wall),
        ExperimentResult("utilization", sc.name, table[["policy", "trial", "utilization"]].copy(), util_sum, {}, 0.0),
    )


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
    """Section 4.4 / Table 5: mean FCT of the DTN transfer and its reduction vs N_s."""
    import pandas as pd

    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    trials_used: dict[int, int] = {}
    for n_s in plan.ns_values:
        hosts, per_host = sweep_layout(n_s, max_hosts=max(scenario.campus.hosts, 1))
        sc = scenario.replace(
            dtn={"transfer": plan.transfer},
            campus={"hosts": hosts, "flows_per_host": per_host, "traffic": "long"},
        )
        # The plant's cost grows with trials x flows; keep N_s = 10000 affordable.
        trials_used[int(n_s)] = max(1, min(plan.ns_trials, plan.ns_max_flows // max(n_s, 1)))
        r, _ = _fct_rows(sc, policies, plan, trials_used[int(n_s)], plant, progress, extra={"n_s": int(n_s)})
        rows.extend(r)
    table = pd.DataFrame(rows)
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


def short_flow_experiment(
    scenario: Scenario,
    policies: Mapping[str, Policy],
    plan: ExperimentPlan,
    plant: str | PlantSpec = "fluid",
    progress: bool = False,
) -> ExperimentResult:
    """Section 4.5 / Table 6 / Fig. 14: FCT of one campus sender's Weibull short flows."""
    import pandas as pd

    t0 = time.perf_counter()
    sc = scenario.replace(
        duration=plan.short_duration, dtn={"transfer": None}, campus={"short_flow_senders": 1},
    )
    steps = int(round(plan.short_duration / sc.period))
    tg = np.full((steps, plan.short_trials), plan.fct_target * sc.capacity)
    frames = []
    for name, pol in policies.items():
        _, flows = run_trials(sc, pol, tg, seed=plan.seed, plant=plant, want_flows=True, progress=progress)
        df = _short_flows(flows)
        df.insert(0, "policy", name)
        frames.append(df)
    table = pd.concat(frames, ignore_index=True)
    summary: dict[str, Any] = per_policy(
        table, "fct", p90=lambda g: float(np.quantile(g["fct"], 0.9)) if len(g) else math.nan)
    compare(summary, "median", "median_reduction_pct")
    base = summary.get(BASELINE, {}).get("median", math.nan)
    for name, s in summary.items():
        if name != BASELINE and isinstance(s, dict):
            s["median_delta_s"] = s["median"] - base
    summary["target"] = plan.fct_target * sc.capacity
    summary["duration"] = plan.short_duration
    return ExperimentResult("short", sc.name, table, summary, {}, time.perf_counter() - t0)


def _short_flows(flows: Any) -> Any:
    """Finished short flows with their FCT from the plant's flow records."""
    import pandas as pd

    if flows is None:
        raise ValueError("the plant returned no flow records; the short-flow experiment needs them")
    df = pd.DataFrame(flows)
    for col in ("class", "kind"):
        if col in df.columns:
            df = df[df[col].astype(str) == "short"]
            break
    if "fct" not in df.columns:
        if {"start", "finish"} <= set(df.columns):
            df = df.assign(fct=fct_metric(df["start"].to_numpy(), df["finish"].to_numpy()))
        else:
            raise ValueError(f"flow records lack 'fct' or 'start'/'finish' (columns: {list(df.columns)})")
    df = df[np.isfinite(df["fct"].to_numpy(dtype=np.float64))]
    keep = [c for c in ("instance", "flow_id", "bytes", "size", "start", "finish", "fct") if c in df.columns]
    return df[keep].reset_index(drop=True)


# -- the registry ---------------------------------------------------------------------

RunFn = Callable[[Scenario, Mapping[str, Policy], ExperimentPlan, str, bool], dict[str, ExperimentResult]]


@dataclass(frozen=True)
class Experiment:
    """A registered experiment: ``run`` returns one ``ExperimentResult`` per name in ``gives``
    (the FCT trials also give the utilisation); ``describe`` is its progress line."""

    run: RunFn
    gives: tuple[str, ...]
    describe: Callable[[Scenario, ExperimentPlan], str]


#: name -> Experiment, in the order ``run_experiments`` runs them.
EXPERIMENT_REGISTRY: dict[str, Experiment] = {}
#: Every result name an ``--experiments`` list may ask for, in registry order.
EXPERIMENTS: tuple[str, ...] = ()


def register_experiment(name: str, run: RunFn, describe: Callable[[Scenario, ExperimentPlan], str],
                        gives: tuple[str, ...] | None = None) -> None:
    """Add an experiment; ``gives`` (default ``(name,)``) are the results it makes from one run."""
    global EXPERIMENTS
    EXPERIMENT_REGISTRY[name] = Experiment(run, tuple(gives or (name,)), describe)
    EXPERIMENTS = tuple(dict.fromkeys(g for e in EXPERIMENT_REGISTRY.values() for g in e.gives))


register_experiment(
    "mrae", lambda sc, pols, plan, plant, prog: {"mrae": mrae_experiment(sc, pols, plan, plant, prog)},
    lambda sc, plan: f"MRAE: {plan.trials} trials x {plan.duration:g} s per policy")
register_experiment(
    "fct", lambda sc, pols, plan, plant, prog: dict(zip(("fct", "utilization"),
                                                         fct_experiment(sc, pols, plan, plant, prog), strict=True)),
    lambda sc, plan: (f"FCT/utilisation: {plan.fct_trials or plan.trials} trials, "
                      f"{plan.transfer / 1e9:g} GB transfer per policy"),
    gives=("fct", "utilization"))
register_experiment(
    "sweep", lambda sc, pols, plan, plant, prog: {"sweep": sweep_experiment(sc, pols, plan, plant, prog)},
    lambda sc, plan: f"N_s sweep {list(plan.ns_values)}")
register_experiment(
    "short", lambda sc, pols, plan, plant, prog: {"short": short_flow_experiment(sc, pols, plan, plant, prog)},
    lambda sc, plan: f"short flows: {plan.short_trials} trials x {plan.short_duration:g} s")


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

    ``executor`` (a ``concurrent.futures.Executor``, e.g. from ``executors.open_executor``): the
    trials of every experiment are cut into chunks run there, with the same seeds per trial.
    """
    wanted = set(parse_experiments(list(experiments)))
    say = log or (lambda _m: None)
    results: dict[str, ExperimentResult] = {}
    with provenance(f"python: run_experiments({scenario.name!r}, ...)"), using_executor(executor):
        for exp in EXPERIMENT_REGISTRY.values():
            if wanted.isdisjoint(exp.gives):
                continue
            say(f"[{scenario.name}] {exp.describe(scenario, plan)}")
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

