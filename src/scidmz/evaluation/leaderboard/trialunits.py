"""The leaderboard's trials ("units": one trial kind x policy x trial), each recorded once finished.

Fluid plant (``run_batched``): every policy's remaining trials of one kind run in one
batched plant (``evaluation.trials.run_trials``; trial i uses seed + i and target column
i, so a resumed run's trials equal an uninterrupted run's), in chunks of at most
``CHUNK`` trials, each chunk's lines written when it finishes.

Real-time plants (``run_realtime``, netns): trial-major order, for trial i every
policy once in the order of row i of a Williams design (``policy_order``; ours: every
policy takes every place in the order equally often and follows every other policy
equally often, so neither slow drift of the machine nor what the previous unit left
behind falls on one policy; a plain rotation kept each policy behind the same one), on ONE plant kept up for the whole run: the plant's ``reset`` returns it to
its default (its own bottleneck, no queues, no discipline stage unless the policy
sets one, no pacing) and ``set_scenario`` switches between the trial kinds' scenarios
(an unlimited DTN, the fixed transfer, one short-flow sender) on the same testbed.
An interrupted trial (Ctrl-C, SIGTERM, an error) writes no line; the plant's context
manager tears the testbed down.

Validity (``validity``): where the plant exposes a ``validity_signals`` source (netns),
each unit's line records the machine's signals (a calibration probe just before the unit,
CPU pressure and the delay stage's lateness during it). Once every policy ran trial i of a
kind, the trial is judged by the plan's rule; if any unit breaks it, all policies run trial
i again (same seed, same target), the lines appended with ``rerun`` + 1, up to
``max_reruns`` times. A resumed run finishes a re-run the interruption cut short.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Container, Iterable, Mapping
from typing import Any

import numpy as np

from ...metrics import mrae, utilization
from ...plant.base import make_plant
from ...policies.base import Policy
from ...scenario import Scenario
from ...state import Trace
from ..results import note_run
from ..trials import run_trials
from .ledger import Ledger
from .plan import LeaderboardPlan
from .validity import ValidityRule

__all__ = ["CHUNK", "check_sizes", "targets", "target_hashes", "unit_metrics", "run_batched", "run_realtime",
           "planned_units", "todo_count", "realtime_order", "policy_order", "trial_groups", "next_run"]

#: Fluid trials per batched plant: bounds memory and how much an interruption loses.
CHUNK = 50


def check_sizes(plan: LeaderboardPlan, scenario: Scenario) -> None:
    """Refuse (one line) a plan whose derived sizes exceed ``limits.BOUNDS`` before anything is
    allocated: each trial kind's simulated seconds per trial (an FCT trial's bound grows with
    ``plan.transfer`` / the target rate: 10 TB at a small share ran 74 simulated days), its periods,
    and periods x trials (its targets array: 10 TB x 400 trials asked for 20.5 GB)."""
    from ...limits import check

    for unit in plan.units:
        seconds = plan.fct_bound(scenario) if unit == "fct" else \
            plan.short_duration if unit == "short" else plan.duration
        what = f"leaderboard {unit} trial"
        if unit == "fct" and plan.fct_max_time is None:
            what += (f" (4 x plan.transfer {plan.transfer:g} bytes at plan.fct_target "
                     f"{plan.fct_target:g} x B_max + 60 s; lower plan.transfer or set plan.fct_max_time)")
        check("trial_seconds", seconds, f"{what}: simulated seconds")
        steps = int(math.ceil(seconds / scenario.period - 1e-9))
        check("steps", steps, f"{what}: periods ({seconds:g} s / T = {scenario.period:g} s)")
        check("trial_cells", steps * plan.count(unit), f"{what}: periods x {plan.count(unit)} trials")


def targets(unit: str, sc: Scenario, plan: LeaderboardPlan) -> np.ndarray:
    """(steps, trials) R*_DTN of one trial kind: the MLC evaluation's stepping targets for MRAE
    (column i: trial i), ``fct_target`` x B_max for the FCT and short-flow trials. The sizes are
    checked first (``check_sizes``)."""
    check_sizes(plan, sc)
    if unit == "mrae":
        from ..mlc.experiments import mrae_targets

        return mrae_targets(sc, plan)  # type: ignore[arg-type]  # reads the same fields as ExperimentPlan's
    steps = int(math.ceil((plan.fct_bound(sc) if unit == "fct" else plan.short_duration) / sc.period - 1e-9))
    return np.full((steps, plan.count(unit)), plan.fct_target * sc.capacity)


def target_hashes(plan: LeaderboardPlan, scenario: Scenario) -> dict[str, list[str]]:
    """Per trial kind, one ``signals.signal_sha256`` per trial of the plan's target signal (trial i at
    index i): the ledger header records them, and a resume, merge or re-check compares them, so two
    runs that claim trial i tracked the same target are checked to have done so."""
    from ...signals import signal_sha256

    out = {}
    for unit in plan.units:
        tg = targets(unit, plan.variant(scenario, unit), plan)
        out[unit] = [signal_sha256(tg[:, i]) for i in range(tg.shape[1])]
    return out


def _starved(df: Any) -> int:
    """Periods the machine, not TCP, limited (netns ``info["starved"]``); 0 where not reported."""
    return int(np.nansum(df["starved"].to_numpy(dtype=np.float64))) if "starved" in df.columns else 0


def _starved_by(df: Any) -> dict[str, int]:
    """Starved periods per symptom (netns ``info["starved_by"]``, a bit per
    ``manage.starvation.SYMPTOMS``), so a ledger says why its trials were dropped; {} where not reported."""
    if "starved_by" not in df.columns:
        return {}
    from ...plant.netns.manage.starvation import SYMPTOMS

    mask = np.nan_to_num(df["starved_by"].to_numpy(dtype=np.float64)).astype(np.int64)
    counts = {name: int(((mask >> bit) & 1).sum()) for bit, name in enumerate(SYMPTOMS)}
    return {name: n for name, n in counts.items() if n}


def unit_metrics(unit: str, trace: Trace, sc: Scenario, plan: LeaderboardPlan, short: Any = None) -> dict[str, Any]:
    """One finished trial's ledger fields (``metrics``, ``starved_periods``, ``starved_by``, ``periods``).

    mrae: MRAE of R_DTN vs R*_DTN over the trial (eq. (3)), and its mean utilisation.
    fct: the DTN transfer's FCT (None if unfinished within the bound), rho while it ran;
    its periods (and starved periods) are those until the transfer finished.
    short: the median FCT of the trial's finished short flows (``short``: their FCTs).
    """
    df = trace.df
    rd, rc = df["rate_dtn"].to_numpy(), df["rate_campus"].to_numpy()
    run = df  # the periods the trial counts: an FCT trial ends with its transfer (a batch may go on)
    if unit == "mrae":
        m = {"mrae": mrae(df["target"].to_numpy(), rd), "utilization": float(np.mean(utilization(rd, rc, sc.capacity))),
             "mean_rate_dtn": float(rd.mean()), "mean_target": float(df["target"].mean())}
    elif unit == "fct":
        if "dtn_fct" not in df.columns:
            raise ValueError("the plant does not report 'dtn_fct'; the FCT trials need it")
        col = df["dtn_fct"].to_numpy(dtype=np.float64)
        fin = col[np.isfinite(col)]
        f = float(fin[0]) if fin.size else math.nan
        run = df if not math.isfinite(f) else df[df["t"] <= f + sc.dtn.start + sc.period]
        rho = utilization(run["rate_dtn"].to_numpy(), run["rate_campus"].to_numpy(), sc.capacity)
        m = {"fct": f, "finished": bool(math.isfinite(f)), "fct_bound": plan.fct_bound(sc),
             "utilization": float(np.mean(rho)), "mean_rate_dtn": float(run["rate_dtn"].mean())}
    else:
        v = np.asarray(short if short is not None else [], dtype=np.float64)
        v = v[np.isfinite(v)]
        m = {"short_fct_median": float(np.median(v)) if v.size else math.nan, "short_flows": int(v.size)}
    return {"metrics": m, "starved_periods": _starved(run), "starved_by": _starved_by(run), "periods": len(run)}


def _short_fcts(records: Any, instance: int) -> np.ndarray:
    """FCTs of one instance's finished short flows, from a plant's ``flow_records()``."""
    import pandas as pd

    if records is None:
        raise ValueError("the plant returned no flow records; the short-flow trials need them")
    df = pd.DataFrame(records)
    if "class" in df.columns:
        df = df[df["class"].astype(str) == "short"]
    if "instance" in df.columns:
        df = df[df["instance"] == instance]
    if "fct" not in df.columns:
        raise ValueError(f"flow records lack 'fct' (columns: {list(df.columns)})")
    return df["fct"].to_numpy(dtype=np.float64)


def _runs(todo: list[int], chunk: int) -> list[tuple[int, int]]:
    """Contiguous [lo, hi) runs of the sorted trial indices ``todo``, at most ``chunk`` long."""
    out: list[tuple[int, int]] = []
    for i in todo:
        if out and out[-1][1] == i and i - out[-1][0] < chunk:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


def planned_units(plan: LeaderboardPlan, names: list[str]) -> set[tuple[str, str, int]]:
    """Every unit (trial kind, policy, trial) the plan names: a ledger counts these and no other."""
    return {(u, n, i) for u in plan.units for n in names for i in range(plan.count(u, n))}


def todo_count(plan: LeaderboardPlan, names: list[str], ledger: Ledger) -> int:
    """Units of the plan not yet in the ledger, and those of a re-run already begun or due (``next_run``)."""
    first = sum(1 for u in plan.units for n in names for i in range(plan.count(u, n)) if (u, n, i) not in ledger.done)
    runs = _runs_by_trial(ledger.lines)
    more = 0
    for i, unit, order in trial_groups(plan, names):
        if (unit, i) in runs:
            r, left = next_run(runs[(unit, i)], order, plan.validity)
            more += len(left) if r > 0 else 0
    return first + more


def trial_groups(plan: LeaderboardPlan, names: list[str]) -> list[tuple[int, str, list[str]]]:
    """(trial, kind, the policies that run it in ``policy_order``), trial-major: what is judged together."""
    out = []
    for i in range(max(plan.count(u) for u in plan.units)):
        for u in plan.units:
            if i < plan.count(u):
                out.append((i, u, [n for n in policy_order(names, i) if i < plan.count(u, n)]))
    return out


def _runs_by_trial(lines: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], dict[int, dict[str, Mapping[str, Any]]]]:
    """(kind, trial) -> re-run counter -> policy -> its line."""
    from .validity import rerun_of

    out: dict[tuple[str, int], dict[int, dict[str, Mapping[str, Any]]]] = {}
    for r in lines:
        out.setdefault((str(r["unit"]), int(r["trial"])), {}).setdefault(rerun_of(r), {})[str(r["policy"])] = r
    return out


def next_run(runs: Mapping[int, Mapping[str, Mapping[str, Any]]], order: list[str],
             rule: ValidityRule) -> tuple[int, list[str]]:
    """(the re-run counter, the policies still to run in it) of one trial given its runs so far:
    the latest run's missing policies; else, if a unit of it breaks ``rule`` and re-runs are left,
    a new run of every policy; else (valid, or re-runs used up) no policy."""
    if not runs:
        return 0, list(order)
    r = max(runs)
    left = [n for n in order if n not in runs[r]]
    if left:
        return r, left
    if r < rule.max_reruns and any(rule.breaks(line.get("validity")) for line in runs[r].values()):
        return r + 1, list(order)
    return r, []


Tick = Callable[[int], None]


def policy_order(names: list[str], trial: int) -> list[str]:
    """The policies' order in ``trial``: row ``trial`` of a Williams design (module docstring): the
    first row 0, 1, n-1, 2, n-2, ..., row k adds k (mod n); with an odd n the rows' mirror images
    follow, as one square balances who-follows-whom only for an even n."""
    n = len(names)
    if n == 0:
        return []
    first = [0] + [(j + 1) // 2 if j % 2 else n - j // 2 for j in range(1, n)]
    k = trial % (n if n % 2 == 0 else 2 * n)
    row = [(x + k % n) % n for x in first]
    return [names[x] for x in (row if k < n else row[::-1])]


def realtime_order(plan: LeaderboardPlan, names: list[str], done: Container[tuple[str, str, int]],
                   ) -> list[tuple[int, str, str]]:
    """The (trial, unit, policy) still to run on a real-time plant: trial-major, the policies in
    ``policy_order(names, trial)``, each policy up to its own count (``plan.count(unit, policy)``)."""
    return [(i, u, n) for i in range(max(plan.count(u) for u in plan.units))
            for u in plan.units if i < plan.count(u)
            for n in policy_order(names, i)
            if i < plan.count(u, n) and (u, n, i) not in done]


def run_batched(scenario: Scenario, policies: Mapping[str, Policy], plan: LeaderboardPlan, ledger: Ledger,
                plant: str = "fluid", tick: Tick | None = None) -> None:
    """Every remaining unit on a batched plant (module docstring); ``tick(n)`` after n units."""
    for unit in plan.units:
        sc = plan.variant(scenario, unit)
        tg = targets(unit, sc, plan)
        for name, pol in policies.items():
            todo = [i for i in range(plan.count(unit, name)) if (unit, name, i) not in ledger.done]
            for lo, hi in _runs(todo, CHUNK):
                t0 = time.perf_counter()
                trs, flows = run_trials(sc, pol, tg[:, lo:hi], seed=plan.seed + lo, plant=plant,
                                        until_done=unit == "fct", want_flows=unit == "short")
                share = (time.perf_counter() - t0) / (hi - lo)  # a batch's wall time, shared by its trials
                for k, tr in enumerate(trs):
                    short = _short_fcts(flows, k) if unit == "short" else None
                    ledger.append(unit, name, lo + k, {"seed": plan.seed + lo + k, "wall_s": share,
                                                       **unit_metrics(unit, tr, sc, plan, short)})
                if tick is not None:
                    tick(hi - lo)


def run_realtime(scenario: Scenario, policies: Mapping[str, Policy], plan: LeaderboardPlan, ledger: Ledger,
                 plant: str = "netns", tick: Tick | None = None, plant_options: Mapping[str, Any] | None = None,
                 ) -> None:
    """Every remaining unit on one real-time plant, trial-major, the policies in ``policy_order``; an
    invalid trial run again for every policy (module docstring)."""
    runs = _runs_by_trial(ledger.lines)
    groups = [(i, u, order) for i, u, order in trial_groups(plan, list(policies))
              if next_run(runs.get((u, i), {}), order, plan.validity)[1]]
    if not groups:
        return
    variants = {u: plan.variant(scenario, u) for u in plan.units}
    tgs = {u: targets(u, variants[u], plan) for u in plan.units}
    with make_plant(plant, variants[groups[0][1]], **dict(plant_options or {})) as pl:
        switch = getattr(pl, "set_scenario", None)
        if switch is None and len(plan.units) > 1:
            raise ValueError(f"the {plant} plant cannot switch between trial kinds on one testbed; "
                             "run one kind per leaderboard (--experiments)")
        for i, unit, order in groups:
            if switch is not None:
                switch(variants[unit])
            while True:
                mine = _runs_by_trial(r for r in ledger.lines if r["unit"] == unit and r["trial"] == i)
                rerun, left = next_run(mine.get((unit, i), {}), order, plan.validity)
                if not left:
                    break
                for name in left:
                    _run_unit(pl, plant, policies[name], name, unit, i, rerun, variants[unit], tgs[unit][:, i],
                              plan, ledger)
                    if tick is not None:
                        tick(1)


def _run_unit(pl: Any, plant: str, policy: Policy, name: str, unit: str, i: int, rerun: int, sc: Scenario,
              target: np.ndarray, plan: LeaderboardPlan, ledger: Ledger) -> None:
    """One unit on a real-time plant, with its machine signals where the plant records them: the
    calibration probe just before it, then CPU pressure and stage lateness while it runs."""
    from ...runner import run_episode

    source = getattr(pl, "validity_signals", None)
    signals: dict[str, Any] = {}
    if source is not None:
        t_probe = time.perf_counter()
        signals.update(source.probe())
        # the probe's own time, so a unit's overhead beyond its episode can be read off the ledger
        signals["probe_wall_s"] = time.perf_counter() - t_probe
        source.begin()
    note_run(sc, plant, pl)
    t0 = time.perf_counter()
    trs = run_episode(pl, policy, target, seed=plan.seed + i, until_done=unit == "fct", meta={"plant": plant})
    wall = time.perf_counter() - t0
    if source is not None:
        signals.update(source.end())
    short = _short_fcts(pl.flow_records(), 0) if unit == "short" else None
    ledger.append(unit, name, i, {"seed": plan.seed + i, "wall_s": wall, **unit_metrics(unit, trs[0], sc, plan, short),
                                  **({"validity": signals} if source is not None else {})}, rerun=rerun)
