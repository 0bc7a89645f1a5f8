"""The library side of ``scidmz evaluate``: chosen policies vs the trivial TBF on the section 4 experiments.

The policies arrive as objects: the command builds them through the one assembly
(``commands.build.build_policies``: names from the registry, each with the trained
files its registry entry declares); ``make_policies`` is the same for library
callers whose policies need no trained files (the disciplines study).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..plant.registry import PlantSpec, plant_spec
from ..policies.base import Policy
from ..scenario import Scenario
from .mlc.experiments import ExperimentPlan, parse_experiments, run_experiments, write_results
from .mlc.tracking import EVALUATE_EXPERIMENT, log_results, tracked
from .results import clean, provenance
from .stats import BASELINE

__all__ = ["evaluate", "check_request", "policy_list", "make_policies"]


def policy_list(policies: str | Sequence[str]) -> list[str]:
    """``--policies`` as canonical names (a configuration ``pi+pacing`` is ``pacing+pi``), the trivial
    baseline last (added if missing); one line if unknown. Any policy of the registry may be named, and
    any configuration of them (``policies.configuration`` checks each member)."""
    from ..policies.configuration import canonical_name

    names = [n.strip() for n in (policies.split(",") if isinstance(policies, str) else policies) if n.strip()]
    if not names:
        raise ValueError("--policies needs at least one policy")
    try:
        names = [canonical_name(n) for n in names]
    except ValueError as exc:
        raise ValueError(f"--policies: {exc}") from None
    return [*dict.fromkeys(n for n in names if n != BASELINE), BASELINE]


def check_request(trials: int, experiments: str | Sequence[str] | None, policies: str | Sequence[str],
                  executor: str | None = None, plant: str | PlantSpec = "fluid") -> tuple[list[str], tuple[str, ...]]:
    """Everything cheap to check before a policy is built: (policy names, experiments); one line each."""
    from ..executors import parse_executor
    from ..limits import check

    check("trials", trials, "--trials")  # limits.BOUNDS, before anything is allocated
    if trials < 2:
        # the core's trial plan's rule, said in the command's own words
        raise ValueError(f"--trials must be >= 2 (a paired test needs two trials), got {trials}")
    spec = parse_executor(executor)  # a bad spec is one line before any work
    if spec.kind != "local" and plant_spec(plant).realtime:
        raise ValueError(f"--executor {executor} runs batched-plant trials only; the {plant} plant runs in real "
                         "time, one testbed at a time")
    return policy_list(policies), parse_experiments(experiments)


def make_policies(names: Sequence[str]) -> dict[str, Policy]:
    """Registry policies that need no trained files, by name (the trivial baseline last)."""
    from ..policies.registry import make_policy

    return {n: make_policy(n) for n in policy_list(names)}


def _plan(trials: int, seed: int, quick: bool) -> ExperimentPlan:
    base = ExperimentPlan.quick(seed) if quick else ExperimentPlan(seed=seed)
    return replace(base, trials=int(trials), ns_trials=min(base.ns_trials, int(trials)),
                   short_trials=min(base.short_trials, int(trials)))


def _file_params(files: Mapping[str, Mapping[str, str]] | None, names: Sequence[str]) -> dict[str, str]:
    """The trained files of the evaluated policies as flat parameters, ``{policy}_{file}`` (``pi_gains``)."""
    return {f"{n}_{f}": str(path) for n, fs in (files or {}).items() if n in names for f, path in fs.items()}


def _file_hashes(files: Mapping[str, str]) -> dict[str, str]:
    """SHA-256 of each trained file that is a file (a gains JSON; a directory holding gains.json)."""
    from pathlib import Path

    from ..tracking import file_sha256

    out = {}
    for key, path in files.items():
        p = Path(path)
        p = p / "gains.json" if p.is_dir() else p
        if p.is_file():
            out[f"{key}_sha256"] = file_sha256(p)
    return out


def evaluate(
    scenario: Scenario,
    policies: Mapping[str, Policy],
    trials: int = 100,
    experiments: str | Sequence[str] | None = None,
    out: str | None = None,
    plant: str | PlantSpec = "fluid",
    seed: int = 0,
    quick: bool = False,
    progress: bool = False,
    tracking_uri: str | None = None,
    track: bool = True,
    executor: str | None = None,
    command: str | None = None,
    files: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[dict[str, Any], str]:
    """The chosen policies vs trivial on the chosen experiments; returns (JSON summary, human lines).

    ``policies``: name -> policy object (``commands.build.build_policies`` or
    ``make_policies``), any of the registry's, e.g. ``mlc``, ``pi`` (the MLC's
    anti-windup PI without its model), ``pacing`` (the DTN's own streams paced at
    the target: a plant with DTN-host control), ``jenks`` (RTT queue separation at
    the border router), ``abc`` / ``ffs`` (bottleneck disciplines weighted by the
    target), ``none``; the trivial TBF must be among them: it is the paired
    baseline. ``files``: the trained files each policy runs with
    (``{"pi": {"gains": ...}}``), recorded with the results as ``{policy}_{file}``.

    ``executor``: ``local`` (default), ``processes[:N]`` or ``dask://HOST:PORT``; the same
    trials with the same seeds, so the same numbers.

    The run is tracked with mlflow (experiment ``scidmz-evaluate``): parameters, the
    per-policy metrics, and the CSV/JSON/PNG files when ``out`` is given.
    Validate, then run, then write, then track: each a function below.
    """
    spec = plant_spec(plant)
    names = list(policies)
    exps, plan = _validate(scenario, policies, trials, experiments, spec, seed, quick, executor)
    params = {"scenario": scenario.name, "plant": spec.name, "executor": _executor_kind(executor),
              "policies": ",".join(policies), "experiments": ",".join(exps), **plan.to_dict(),
              **_file_params(files, names)}
    t0 = time.perf_counter()
    cmd = command or f"scidmz evaluate {scenario.name} --policies {','.join(n for n in names if n != BASELINE)}"
    with (provenance(cmd),
          tracked(EVALUATE_EXPERIMENT, f"{scenario.name}-evaluate", params, tracking_uri, track) as run):
        results = _run(scenario, policies, plan, exps, spec, executor, progress)
        # The files written, not the directory: --out may be a directory holding other things (the
        # working directory, mlruns itself), which must not be copied into the tracked run.
        written = write_results(results, out, scenario, plan) if out else {}
        log_results(run, clean({k: v.summary for k, v in results.items()}), written.values(),
                    _file_hashes(_file_params(files, names)) or None)
    return _summary(scenario, results, trials, exps, files, names, time.perf_counter() - t0, out)


def _validate(scenario: Scenario, policies: Mapping[str, Policy], trials: int,
              experiments: str | Sequence[str] | None, plant: PlantSpec, seed: int, quick: bool,
              executor: str | None) -> tuple[tuple[str, ...], ExperimentPlan]:
    """Everything bad input can be, one line each, before any plant: the request, the baseline, the plan."""
    exps = check_request(trials, experiments, list(policies), executor, plant)[1]
    if BASELINE not in policies:
        raise ValueError(f"evaluate: the {BASELINE} baseline must be among the policies (paired comparison)")
    plan = _plan(trials, seed, quick)
    plan.check_for(scenario, plant)  # the largest batch, before a plant is allocated
    return exps, plan


def _executor_kind(executor: str | None) -> str:
    from ..executors import parse_executor

    return parse_executor(executor).kind


def _run(scenario: Scenario, policies: Mapping[str, Policy], plan: ExperimentPlan, exps: tuple[str, ...],
         plant: PlantSpec, executor: str | None, progress: bool) -> dict[str, Any]:
    """The experiments on the executor (``local``: in this process, with a progress bar)."""
    from ..executors import open_executor, parse_executor

    with open_executor(parse_executor(executor)) as ex:
        return run_experiments(scenario, policies, plan, exps, plant=plant, progress=progress and ex is None,
                               executor=ex)


def _summary(scenario: Scenario, results: Mapping[str, Any], trials: int, exps: tuple[str, ...],
             files: Mapping[str, Mapping[str, str]] | None, names: Sequence[str], wall: float,
             out: str | None) -> tuple[dict[str, Any], str]:
    """The JSON summary and the human headline lines."""
    from .mlc.report import headline_lines

    out_json: dict[str, Any] = {
        "scenario": scenario.name, "trials": int(trials), **_file_params(files, names),
        "experiments": list(exps), "results": {k: v.summary for k, v in results.items()}, "wall_s": wall,
    }
    if out:
        out_json["out"] = str(out)
    return clean(out_json), "\n".join(headline_lines(scenario.name, results))
