"""The MLC paper's evaluation (Vega et al., section 4): each experiment runs every
policy (the MLC and the trivial TBF baseline, or any other ``Policy``) on the
same seeded trials and compares them.

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

Every trial of one policy runs in ONE batched plant (instance i uses seed + i),
so the policies see the same campus randomness trial for trial (paired trials).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..metrics import fct as fct_metric
from ..metrics import mrae, reduction_pct, utilization
from ..plant.base import make_plant
from ..plant.fluid.constants import WIRE_PER_PAYLOAD
from ..policies.base import Policy
from ..scenario import Scenario
from ..signals import random_steps
from ..state import Trace, json_default

__all__ = [
    "EXPERIMENTS",
    "ExperimentPlan",
    "ExperimentResult",
    "mrae_experiment",
    "fct_experiment",
    "sweep_experiment",
    "short_flow_experiment",
    "run_experiments",
    "sweep_layout",
    "evaluate",
]

EXPERIMENTS = ("mrae", "fct", "utilization", "sweep", "short")
BASELINE = "trivial"


@dataclass(frozen=True)
class ExperimentPlan:
    """Sizes of the section 4 experiments. Defaults are the paper's (100 trials, 120 s, 10 GB)."""

    trials: int = 100
    duration: float = 120.0  # s, t_N of eq. (3)
    target_low: float = 0.3  # x B_max
    target_high: float = 0.7  # x B_max
    target_hold: float = 30.0  # s between target steps (>= duration: constant per trial)
    skip: float = 0.0  # s of each MRAE trial left out of the metric (0 = the paper's t = 1..t_N)
    fct_target: float = 0.5  # x B_max, R*_DTN during the FCT, sweep and short-flow tests
    transfer: float = 10e9  # bytes, the DTN transfer of sections 4.3/4.4
    fct_trials: int | None = None  # None -> trials
    fct_max_time: float | None = None  # s; None -> 4 x the transfer time at R*_DTN, plus 60 s
    ns_values: tuple[int, ...] = (1, 10, 100, 1000, 10000)
    ns_trials: int = 10
    ns_max_flows: int = 20_000  # trials x N_s above this is cut to fewer trials (plant cost)
    short_duration: float = 600.0  # s, section 4.5 captured 600 s
    short_trials: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        def need(cond: bool, what: str) -> None:
            if not cond:
                raise ValueError(f"experiment plan: {what}")

        need(self.trials >= 1, f"trials must be >= 1, got {self.trials}")
        need(self.duration > 0, f"duration must be > 0, got {self.duration}")
        need(0 < self.target_low <= self.target_high <= 1, "need 0 < target_low <= target_high <= 1")
        need(self.target_hold > 0, "target_hold must be > 0")
        need(0 <= self.skip < self.duration, "skip must be in [0, duration)")
        need(0 < self.fct_target <= 1, "fct_target must be in (0, 1] x B_max")
        need(self.transfer > 0, "transfer must be > 0 bytes")
        need(self.fct_trials is None or self.fct_trials >= 1, "fct_trials must be >= 1")
        need(self.fct_max_time is None or self.fct_max_time > 0, "fct_max_time must be > 0")
        need(all(int(n) >= 1 for n in self.ns_values), "every N_s must be >= 1")
        need(self.ns_trials >= 1 and self.short_trials >= 1, "ns_trials and short_trials must be >= 1")
        need(self.short_duration > 0, "short_duration must be > 0")

    @classmethod
    def quick(cls, seed: int = 0) -> ExperimentPlan:
        """Small sizes for tests and ``--quick`` (meant for the small-* scenarios)."""
        return cls(
            trials=4, duration=30.0, target_hold=15.0, transfer=150e6, fct_max_time=120.0,
            ns_values=(1, 10, 100), ns_trials=2, short_duration=30.0, short_trials=2, seed=seed,
        )

    def fct_bound(self, scenario: Scenario) -> float:
        if self.fct_max_time is not None:
            return self.fct_max_time
        ideal = 8.0 * self.transfer / (self.fct_target * scenario.capacity)
        return 4.0 * ideal + 60.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ns_values"] = list(self.ns_values)
        return d


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


# -- running trials --------------------------------------------------------------


#: Plants that run in real time hold one instance; their trials run one after another.
MAX_BATCH: dict[str, int] = {"netns": 1, "hardware": 1}


#: Where ``run_trials`` sends its trial chunks (``run_experiments(executor=...)`` sets it for the
#: experiments it runs); None: in this process.
_TRIAL_EXECUTOR: ContextVar[Any] = ContextVar("scidmz_trial_executor", default=None)


def run_trials(
    scenario: Scenario,
    policy: Policy,
    targets: np.ndarray,
    seed: int,
    plant: str = "fluid",
    until_done: bool = False,
    want_flows: bool = False,
    progress: bool = False,
) -> tuple[list[Trace], Any]:
    """Run ``policy`` with one plant instance per column of ``targets`` (steps, B); trial i uses seed + i.

    All trials run in one batched plant when the backend allows it (``MAX_BATCH``
    otherwise splits them into consecutive runs, same seeds). With ``until_done``
    the loop stops early once every instance's DTN transfer has finished
    (``info['dtn_fct']`` finite), so a bounded FCT run costs only what it needs.
    Returns one ``Trace`` per instance and, if ``want_flows``, the plant's
    ``flow_records()`` (finished flows, incl. short flows; ``instance`` = trial).
    """
    tg = np.asarray(targets, dtype=np.float64)
    if tg.ndim != 2:
        raise ValueError(f"targets must have shape (steps, trials), got {tg.shape}")
    for v in (float(tg.min()), float(tg.max())):
        scenario.check_target(v)
    limit = MAX_BATCH.get(plant, tg.shape[1])
    executor = _TRIAL_EXECUTOR.get()
    if executor is not None:
        from ..executors import executor_width

        # Trial i keeps seed + i whichever chunk runs it, so the results equal the local run's.
        limit = min(limit, -(-tg.shape[1] // executor_width(executor)))
    if tg.shape[1] <= limit:
        return _run_batch(scenario, policy, tg, seed, plant, until_done, want_flows, progress)
    import pandas as pd

    starts = list(range(0, tg.shape[1], limit))
    args = [(scenario, policy, tg[:, j : j + limit], seed + j, plant, until_done, want_flows, False) for j in starts]
    if executor is not None:
        futures = [executor.submit(_run_batch, *a) for a in args]
        chunks = [f.result() for f in futures]
    else:
        chunks = [_run_batch(*a[:-1], progress) for a in args]
    traces: list[Trace] = []
    frames = []
    for j, (trs, fl) in zip(starts, chunks, strict=True):
        for i, tr in enumerate(trs):
            tr.meta.update({"instance": j + i, "seed": seed})
        traces.extend(trs)
        if fl is not None:
            fl = pd.DataFrame(fl).copy()
            if "instance" in fl.columns:
                fl["instance"] = fl["instance"] + j
            frames.append(fl)
    return traces, (pd.concat(frames, ignore_index=True) if frames else None)


def _run_batch(
    scenario: Scenario,
    policy: Policy,
    tg: np.ndarray,
    seed: int,
    plant: str,
    until_done: bool,
    want_flows: bool,
    progress: bool,
) -> tuple[list[Trace], Any]:
    from ..runner import run_episode

    flows = None
    with make_plant(plant, scenario, batch=tg.shape[1]) as pl:
        traces = run_episode(pl, policy, tg, seed, until_done=until_done, progress=progress, meta={"plant": plant})
        if want_flows:
            flows = pl.flow_records()
    return traces, flows


def _stats(values: Sequence[float]) -> dict[str, float]:
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"n": 0, "mean": math.nan, "std": math.nan, "median": math.nan, "ci95": math.nan}
    from scipy import stats

    std = float(v.std(ddof=1)) if v.size > 1 else 0.0
    # Half-width of the 95 % interval of the mean from Student's t (n - 1 degrees of freedom):
    # 1.96 s/sqrt(n) is the normal limit and is 35 % too narrow at n = 4 (t = 3.18).
    half = float(stats.t.ppf(0.975, v.size - 1) * std / math.sqrt(v.size)) if v.size > 1 else math.nan
    return {"n": int(v.size), "mean": float(v.mean()), "std": std, "median": float(np.median(v)), "ci95": half}


def _compare(summary: dict[str, Any], key: str, out: str) -> None:
    """Add ``out`` = reduction % of every policy's mean ``key`` vs the trivial baseline."""
    base = summary.get(BASELINE, {}).get(key)
    if base is None or not math.isfinite(base) or base == 0:
        return
    for name, s in summary.items():
        if name != BASELINE and isinstance(s, dict) and math.isfinite(s.get(key, math.nan)):
            s[out] = reduction_pct(base, s[key])


def _paired(summary: dict[str, Any], table: Any, col: str, key: str = "trial") -> None:
    """Paired Wilcoxon signed-rank p-value of each policy vs trivial over the same trials (same seeds)."""
    from scipy.stats import wilcoxon

    base = table[table["policy"] == BASELINE].set_index(key)[col]
    for name, s in summary.items():
        if name == BASELINE or not isinstance(s, dict):
            continue
        other = table[table["policy"] == name].set_index(key)[col]
        both = np.column_stack([base.reindex(other.index).to_numpy(dtype=float), other.to_numpy(dtype=float)])
        both = both[np.all(np.isfinite(both), axis=1)]
        diff = both[:, 0] - both[:, 1]
        s["paired_n"] = int(len(diff))
        s["paired_wins"] = int(np.sum(diff > 0))  # trials where this policy is lower than trivial
        if len(diff) >= 2 and np.any(diff != 0):
            s["paired_p"] = float(wilcoxon(both[:, 0], both[:, 1]).pvalue)
        else:
            s["paired_p"] = math.nan


def _dtn_fct(trace: Trace) -> float:
    """The DTN transfer's FCT from the plant's per-period ``dtn_fct`` column (NaN until done)."""
    if "dtn_fct" not in trace.df.columns:
        raise ValueError("the plant does not report 'dtn_fct'; the FCT experiments need it")
    v = trace.df["dtn_fct"].to_numpy(dtype=np.float64)
    fin = v[np.isfinite(v)]
    return float(fin[0]) if fin.size else math.nan


# -- section 4.2: MRAE -----------------------------------------------------------


def mrae_targets(scenario: Scenario, plan: ExperimentPlan) -> np.ndarray:
    """(steps, trials) R*_DTN: seeded pseudo-random steps per trial (see the module doc)."""
    steps = int(round(plan.duration / scenario.period))
    hold = max(1, int(round(plan.target_hold / scenario.period)))
    return random_steps(
        steps, plan.target_low * scenario.capacity, plan.target_high * scenario.capacity,
        hold=min(hold, steps), seed=plan.seed, batch=plan.trials,
    )


def mrae_experiment(
    scenario: Scenario,
    policies: Mapping[str, Policy],
    plan: ExperimentPlan,
    plant: str = "fluid",
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
        for i, tr in enumerate(trs):
            df = tr.df.iloc[skip:]
            rd, rc = df["rate_dtn"].to_numpy(), df["rate_campus"].to_numpy()
            rows.append({
                "policy": name, "trial": i, "mrae": mrae(df["target"].to_numpy(), rd),
                "utilization": float(np.mean(utilization(rd, rc, sc.capacity))),
                "mean_target": float(df["target"].mean()), "mean_rate_dtn": float(rd.mean()),
                "mean_rate_campus": float(rc.mean()), "mean_u": float(df["u"].mean()), **_starved(df),
            })
    table = pd.DataFrame(rows)
    summary: dict[str, Any] = {
        name: {**_stats(g["mrae"]), "utilization": float(g["utilization"].mean()),
               "mean_rate_dtn": float(g["mean_rate_dtn"].mean()), "mean_target": float(g["mean_target"].mean()),
               **({"starved_periods": int(g["starved_periods"].sum())} if "starved_periods" in g else {})}
        for name, g in table.groupby("policy", sort=False)
    }
    _compare(summary, "mean", "reduction_pct")
    _paired(summary, table, "mrae")
    summary["target_signal"] = (
        f"pseudo-random steps, R*_DTN ~ U[{plan.target_low:g}, {plan.target_high:g}] x B_max "
        f"every {min(plan.target_hold, plan.duration):g} s, seed {plan.seed} (trial i: column i)"
    )
    return ExperimentResult("mrae", sc.name, table, summary, traces, time.perf_counter() - t0)


# -- section 4.3: FCT and utilisation ----------------------------------------------


def _fct_rows(
    sc: Scenario, policies: Mapping[str, Policy], plan: ExperimentPlan, trials: int, plant: str,
    progress: bool, extra: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, list[Trace]]]:
    bound = plan.fct_bound(sc)
    steps = int(math.ceil(bound / sc.period))
    target = plan.fct_target * sc.capacity
    tg = np.full((steps, trials), target)
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


def _starved(df: Any) -> dict[str, int]:
    """Periods in which the testbed's CPU, not TCP, limited the result (netns ``info["starved"]``);
    nothing for plants that do not report it. Reports count them; a benchmark refuses them."""
    if "starved" not in df.columns:
        return {}
    return {"starved_periods": int(np.nansum(df["starved"].to_numpy(dtype=np.float64)))}


def fct_experiment(
    scenario: Scenario,
    policies: Mapping[str, Policy],
    plan: ExperimentPlan,
    plant: str = "fluid",
    progress: bool = False,
) -> tuple[ExperimentResult, ExperimentResult]:
    """Sections 4.3: FCT of the DTN transfer (Fig. 11) and utilisation rho (Fig. 12), same trials."""
    import pandas as pd

    t0 = time.perf_counter()
    sc = scenario.replace(dtn={"transfer": plan.transfer})
    trials = plan.fct_trials or plan.trials
    rows, traces = _fct_rows(sc, policies, plan, trials, plant, progress)
    table = pd.DataFrame(rows)
    wall = time.perf_counter() - t0
    fct_sum: dict[str, Any] = {}
    util_sum: dict[str, Any] = {}
    for name, g in table.groupby("policy", sort=False):
        fct_sum[name] = {**_stats(g["fct"]), "unfinished": int((~g["finished"]).sum())}
        util_sum[name] = _stats(g["utilization"])
    _compare(fct_sum, "mean", "reduction_pct")
    _compare(util_sum, "mean", "decrease_pct")
    _paired(fct_sum, table, "fct")
    _paired(util_sum, table, "utilization")
    target = plan.fct_target * sc.capacity
    # A DTN held exactly at R*_DTN finishes in ideal_s: the FCT a perfect tracking controller gets
    # (the transfer is payload, the target a rate of frame bytes: ARCHITECTURE.md).
    info = {"target": target, "transfer": plan.transfer, "bound_s": plan.fct_bound(sc),
            "ideal_s": 8.0 * plan.transfer * WIRE_PER_PAYLOAD / target}
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
    plant: str = "fluid",
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
        trials = max(1, min(plan.ns_trials, plan.ns_max_flows // max(n_s, 1)))
        trials_used[int(n_s)] = trials
        r, _ = _fct_rows(sc, policies, plan, trials, plant, progress, extra={"n_s": int(n_s)})
        rows.extend(r)
    table = pd.DataFrame(rows)
    summary: dict[str, Any] = {"rows": []}
    for n_s in plan.ns_values:
        sub = table[table["n_s"] == n_s]
        per: dict[str, Any] = {
            name: {**_stats(g["fct"]), "unfinished": int((~g["finished"]).sum())}
            for name, g in sub.groupby("policy", sort=False)
        }
        _compare(per, "mean", "reduction_pct")
        summary["rows"].append({"n_s": int(n_s), "trials": trials_used[int(n_s)], **per})
    summary["target"] = plan.fct_target * scenario.capacity
    summary["transfer"] = plan.transfer
    summary["ideal_s"] = 8.0 * plan.transfer * WIRE_PER_PAYLOAD / summary["target"]
    return ExperimentResult("sweep", scenario.name, table, summary, {}, time.perf_counter() - t0)


# -- section 4.5: short flows --------------------------------------------------------


def short_flow_experiment(
    scenario: Scenario,
    policies: Mapping[str, Policy],
    plan: ExperimentPlan,
    plant: str = "fluid",
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
    summary: dict[str, Any] = {}
    for name, g in table.groupby("policy", sort=False):
        s = _stats(g["fct"])
        summary[name] = {**s, "p90": float(np.quantile(g["fct"], 0.9)) if len(g) else math.nan}
    _compare(summary, "median", "median_reduction_pct")
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


# -- all of them, written to disk ------------------------------------------------------


def parse_experiments(spec: str | Sequence[str] | None) -> tuple[str, ...]:
    """'mrae,fct' -> ('mrae', 'fct'); None or 'all' -> every experiment. One-line error if unknown."""
    if spec is None:
        return EXPERIMENTS
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    if not items or items == ["all"]:
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
    plant: str = "fluid",
    progress: bool = False,
    log: Callable[[str], None] | None = None,
    executor: Any = None,
) -> dict[str, ExperimentResult]:
    """Run the chosen experiments; with ``out_dir`` write CSV per experiment, results.json and PNGs.

    ``executor`` (a ``concurrent.futures.Executor``, e.g. from ``executors.open_executor``): the
    trials of every experiment are cut into chunks run there, with the same seeds per trial.
    """
    token = _TRIAL_EXECUTOR.set(executor)
    try:
        return _run_experiments(scenario, policies, plan, experiments, out_dir, plant, progress, log)
    finally:
        _TRIAL_EXECUTOR.reset(token)


def _run_experiments(
    scenario: Scenario,
    policies: Mapping[str, Policy],
    plan: ExperimentPlan,
    experiments: Sequence[str],
    out_dir: str | os.PathLike[str] | None,
    plant: str,
    progress: bool,
    log: Callable[[str], None] | None,
) -> dict[str, ExperimentResult]:
    exps = parse_experiments(list(experiments))
    say = log or (lambda _m: None)
    results: dict[str, ExperimentResult] = {}
    if "mrae" in exps:
        say(f"[{scenario.name}] MRAE: {plan.trials} trials x {plan.duration:g} s per policy")
        results["mrae"] = mrae_experiment(scenario, policies, plan, plant, progress)
    if "fct" in exps or "utilization" in exps:
        say(f"[{scenario.name}] FCT/utilisation: {plan.fct_trials or plan.trials} trials, "
            f"{plan.transfer / 1e9:g} GB transfer per policy")
        f, u = fct_experiment(scenario, policies, plan, plant, progress)
        if "fct" in exps:
            results["fct"] = f
        if "utilization" in exps:
            results["utilization"] = u
    if "sweep" in exps:
        say(f"[{scenario.name}] N_s sweep {list(plan.ns_values)}")
        results["sweep"] = sweep_experiment(scenario, policies, plan, plant, progress)
    if "short" in exps:
        say(f"[{scenario.name}] short flows: {plan.short_trials} trials x {plan.short_duration:g} s")
        results["short"] = short_flow_experiment(scenario, policies, plan, plant, progress)
    if out_dir is not None:
        write_results(results, out_dir, scenario, plan)
    return results


def write_results(
    results: Mapping[str, ExperimentResult],
    out_dir: str | os.PathLike[str],
    scenario: Scenario,
    plan: ExperimentPlan,
) -> dict[str, str]:
    """CSV per experiment, ``results.json`` (summaries + plan) and the CDF/sweep plots."""
    from ..plots import plot_cdfs, save_figure

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    for name, res in results.items():
        files[f"{name}.csv"] = str(_write_csv(res.table, out / f"{name}.csv"))
    label = f"{scenario.name} (DTN {scenario.dtn.cca})"
    cdfs = {  # result -> (file, x label, figure of the papers)
        "mrae": ("mrae_cdf.png", "mrae", "MRAE", "Fig. 10"),
        "fct": ("fct_cdf.png", "fct", "DTN FCT [s]", "Fig. 11"),
        "utilization": ("utilization_cdf.png", "utilization", "bottleneck utilisation rho", "Fig. 12"),
        "short": ("short_fct_cdf.png", "fct", "short-flow FCT [s]", "Fig. 14"),
    }
    for name, (fname, col, xlabel, fig) in cdfs.items():
        if name in results:
            drawn = plot_cdfs(_by_policy(results[name].table, col), xlabel, f"{fig}: {label}")
            files[fname] = str(save_figure(drawn, out / fname))
    if "sweep" in results:
        files["sweep.png"] = str(plot_sweep(results["sweep"], out / "sweep.png", f"Table 5 / Fig. 13: {label}"))
    payload = {
        "scenario": scenario.to_dict(), "plan": plan.to_dict(),
        "results": {k: v.to_json() for k, v in results.items()}, "files": sorted(files),
    }
    files["results.json"] = str(write_json(payload, out / "results.json"))
    return files


def _by_policy(table: Any, col: str) -> dict[str, np.ndarray]:
    return {str(n): g[col].to_numpy(dtype=np.float64) for n, g in table.groupby("policy", sort=False)}


def plot_sweep(res: ExperimentResult, path: str | os.PathLike[str], title: str = "") -> Path:
    """Mean DTN FCT per N_s and policy (Fig. 13 / Table 5), error bars = 95% CI, saved to ``path``."""
    from ..plots import plot_sweep as draw
    from ..plots import save_figure

    return save_figure(draw(res.summary["rows"], title), path)


def _atomic_write(path: Path, write: Callable[[str], None]) -> Path:
    from ..fileio import atomic_path

    with atomic_path(path) as tmp:
        write(str(tmp))
    return Path(path)


def _write_csv(df: Any, path: Path) -> Path:
    return _atomic_write(path, lambda tmp: df.to_csv(tmp, index=False))


def _clean(o: Any) -> Any:
    """NaN/inf -> None so the JSON is strict (json.dumps would write bare NaN)."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_clean(v) for v in o]
    if isinstance(o, float | np.floating):
        return float(o) if math.isfinite(o) else None
    if isinstance(o, np.integer):
        return int(o)
    return o


def write_json(payload: Any, path: str | os.PathLike[str]) -> Path:
    text = json.dumps(_clean(payload), indent=2, default=json_default)
    return _atomic_write(Path(path), lambda tmp: Path(tmp).write_text(text + "\n"))


# -- `scidmz evaluate` -----------------------------------------------------------------


def load_mlc_policy(model: str | os.PathLike[str], gains: str | os.PathLike[str]) -> Policy:
    """The MLC from a model directory and a gains JSON, with one-line errors for bad paths."""
    from ..policies.rate.mlc import Gains, MLCPolicy

    mp, gp = Path(model), Path(gains)
    if not mp.exists():
        raise FileNotFoundError(f"model directory not found: {mp}")
    if not mp.is_dir():
        raise ValueError(f"--model must be a model directory (from `scidmz train`), got a file: {mp}")
    if not gp.exists():
        raise FileNotFoundError(f"gains file not found: {gp}")
    # Gains first: a bad gains file is reported even when the model is also wrong.
    g = Gains.load(gp)
    return MLCPolicy.from_paths(model=str(mp), gains=g)


def _tracked_metrics(results: Mapping[str, ExperimentResult]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, res in results.items():
        if name == "sweep":
            for row in res.summary.get("rows", []):
                for pol, v in row.items():
                    if isinstance(v, dict):
                        out[f"sweep_fct_ns{row['n_s']}_{pol}"] = v.get("mean", math.nan)
            continue
        key = "median" if name == "short" else "mean"
        for pol, v in res.summary.items():
            if isinstance(v, dict):
                out[f"{name}_{key}_{pol}"] = v.get(key, math.nan)
    return out


def evaluate(
    scenario: str | Scenario,
    model: str | None,
    gains: str | None,
    trials: int = 100,
    experiments: str | Sequence[str] | None = None,
    out: str | None = None,
    overrides: list[str] | None = None,
    plant: str = "fluid",
    seed: int = 0,
    quick: bool = False,
    progress: bool = False,
    tracking_uri: str | None = None,
    track: bool = True,
    executor: str | None = None,
    policies: str | Sequence[str] = ("mlc",),
) -> tuple[dict[str, Any], str]:
    """The library side of ``scidmz evaluate``: the chosen policies vs trivial on the chosen experiments.

    ``policies``: any of ``mlc`` (needs ``model`` and ``gains``), ``jenks`` (RTT queue
    separation at the border router, the DTN's queue given the target), ``abc`` / ``ffs``
    (bottleneck disciplines weighted by the target, fluid plant), ``none``; the
    trivial TBF is always run as the paired baseline.

    ``executor``: ``local`` (default), ``processes[:N]`` or ``dask://HOST:PORT``; the same
    trials with the same seeds, so the same numbers.

    The run is tracked with mlflow (experiment ``scidmz-evaluate``): parameters, the
    per-policy metrics, and the CSV/JSON/PNG files when ``out`` is given.
    """
    from ..policies import TrivialPolicy
    from ..scenario import resolve_scenario

    if int(trials) < 1:
        raise ValueError(f"--trials must be >= 1, got {trials}")
    from ..executors import open_executor, parse_executor

    spec = parse_executor(executor)  # a bad spec is one line before any work
    if spec.kind != "local" and plant != "fluid":
        raise ValueError(f"--executor {executor} runs fluid-plant trials only; the {plant} plant runs in real "
                         "time, one testbed at a time")
    exps = parse_experiments(experiments)
    names = [n.strip() for n in (policies.split(",") if isinstance(policies, str) else policies) if n.strip()]
    unknown = [n for n in names if n not in ("mlc", "jenks", "abc", "ffs", "none", BASELINE)]
    if unknown or not names:
        raise ValueError(f"--policies: unknown policy {unknown[0]!r} (choose from mlc, jenks, abc, ffs, none)"
                         if unknown
                         else "--policies needs at least one policy")
    sc = resolve_scenario(scenario, overrides)
    from ..policies import make_policy

    pols: dict[str, Policy] = {}
    for n in names:
        if n == "mlc":
            from ..policies.rate.mlc import mlc_files

            model, gains = mlc_files(sc, model, gains)
            pols["mlc"] = load_mlc_policy(model, gains)
        elif n != BASELINE:
            pols[n] = make_policy(n)
    pols[BASELINE] = TrivialPolicy()
    base = ExperimentPlan.quick(seed) if quick else ExperimentPlan(seed=seed)
    plan = replace(base, trials=int(trials), ns_trials=min(base.ns_trials, int(trials)),
                   short_trials=min(base.short_trials, int(trials)))
    from contextlib import nullcontext

    from ..tracking import file_sha256, tracked_run

    params = {"scenario": sc.name, "model": str(model), "gains": str(gains), "plant": plant, "executor": spec.kind,
              "policies": ",".join(pols),
              "experiments": ",".join(exps), **plan.to_dict()}
    gp = None if gains is None else (Path(gains) / "gains.json" if Path(gains).is_dir() else Path(gains))
    t0 = time.perf_counter()
    ctx = tracked_run("scidmz-evaluate", f"{sc.name}-evaluate", params, tracking_uri) if track else nullcontext()
    with ctx as run, open_executor(spec) as ex:
        results = run_experiments(sc, pols, plan, exps, out_dir=out,
                                  plant=plant, progress=progress and ex is None, executor=ex)
        if run is not None:
            if gp is not None:
                run.set_tags({"gains_sha256": file_sha256(gp)})
            run.log_metrics(_tracked_metrics(results))
            if out:
                run.log_artifact(out, artifact_path="results")
    out_json: dict[str, Any] = {
        "scenario": sc.name, "model": str(model), "gains": str(gains), "trials": int(trials),
        "experiments": list(exps), "results": {k: v.summary for k, v in results.items()},
        "wall_s": time.perf_counter() - t0,
    }
    if out:
        out_json["out"] = str(out)
    from .report import headline_lines

    return _clean(out_json), "\n".join(headline_lines(sc.name, results))
