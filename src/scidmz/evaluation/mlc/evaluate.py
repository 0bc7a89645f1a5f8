"""The library side of ``scidmz evaluate``: chosen policies vs the trivial TBF on the section 4 experiments.

The policies arrive as objects: the command builds them through the one assembly
(``commands.build.build_policies``: names from the registry, the MLC's model and
gains, pi's gains); ``make_policies`` is the same for library callers whose
policies need no trained files (the disciplines study).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ...policies.base import Policy
from ...scenario import Scenario
from ..results import clean, provenance
from ..stats import BASELINE
from .experiments import ExperimentPlan, parse_experiments, run_experiments, write_results
from .tracking import EVALUATE_EXPERIMENT, log_results, tracked

__all__ = ["EVALUABLE", "evaluate", "check_request", "policy_list", "make_policies"]

#: Policies ``--policies`` may name; the trivial TBF always runs as the paired baseline.
EVALUABLE = ("mlc", "pi", "pacing", "jenks", "abc", "ffs", "none")


def policy_list(policies: str | Sequence[str]) -> list[str]:
    """``--policies`` as canonical names (a configuration ``pi+pacing`` is ``pacing+pi``), the trivial
    baseline last (added if missing); one line if unknown."""
    from ...policies.configuration import SEPARATOR, canonical_name

    names = [canonical_name(n) for n in (policies.split(",") if isinstance(policies, str) else policies)
             if n.strip()]
    if not names:
        raise ValueError("--policies needs at least one policy")
    unknown = [n for n in names if SEPARATOR not in n and n not in (*EVALUABLE, BASELINE)]
    if unknown:
        raise ValueError(f"--policies: unknown policy {unknown[0]!r} (choose from {', '.join(EVALUABLE)})")
    return [*dict.fromkeys(n for n in names if n != BASELINE), BASELINE]


def check_request(trials: int, experiments: str | Sequence[str] | None, policies: str | Sequence[str],
                  executor: str | None = None, plant: str = "fluid") -> tuple[list[str], tuple[str, ...]]:
    """Everything cheap to check before a policy is built: (policy names, experiments); one line each."""
    from ...executors import parse_executor
    from ...limits import check

    check("trials", trials, "--trials")  # limits.BOUNDS, before anything is allocated
    spec = parse_executor(executor)  # a bad spec is one line before any work
    if spec.kind != "local" and plant != "fluid":
        raise ValueError(f"--executor {executor} runs fluid-plant trials only; the {plant} plant runs in real "
                         "time, one testbed at a time")
    return policy_list(policies), parse_experiments(experiments)


def make_policies(names: Sequence[str]) -> dict[str, Policy]:
    """Registry policies that need no trained files, by name (the trivial baseline last)."""
    from ...policies.registry import make_policy

    return {n: make_policy(n) for n in policy_list(names)}


def _plan(trials: int, seed: int, quick: bool) -> ExperimentPlan:
    base = ExperimentPlan.quick(seed) if quick else ExperimentPlan(seed=seed)
    return replace(base, trials=int(trials), ns_trials=min(base.ns_trials, int(trials)),
                   short_trials=min(base.short_trials, int(trials)))


def evaluate(
    scenario: Scenario,
    policies: Mapping[str, Policy],
    trials: int = 100,
    experiments: str | Sequence[str] | None = None,
    out: str | None = None,
    plant: str = "fluid",
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
    ``make_policies``), e.g. ``mlc``, ``pi`` (the MLC's anti-windup PI without its
    model), ``pacing`` (the DTN's own streams paced at the target: a plant with
    DTN-host control), ``jenks`` (RTT queue separation at the border router, the
    DTN's queue given the target), ``abc`` / ``ffs`` (bottleneck disciplines
    weighted by the target), ``none``; the trivial TBF must be among them: it is
    the paired baseline. ``files``: the trained files each policy runs with
    (``{"mlc": {"model": ..., "gains": ...}, "pi": {"gains": ...}}``), recorded
    with the results.

    ``executor``: ``local`` (default), ``processes[:N]`` or ``dask://HOST:PORT``; the same
    trials with the same seeds, so the same numbers.

    The run is tracked with mlflow (experiment ``scidmz-evaluate``): parameters, the
    per-policy metrics, and the CSV/JSON/PNG files when ``out`` is given.
    """
    from ...executors import open_executor, parse_executor
    from ...tracking import file_sha256

    names = list(policies)
    exps = check_request(trials, experiments, names, executor, plant)[1]
    if BASELINE not in policies:
        raise ValueError(f"evaluate: the {BASELINE} baseline must be among the policies (paired comparison)")
    mlc = dict((files or {}).get("mlc") or {})
    model, gains = mlc.get("model"), mlc.get("gains")
    pi = {"pi_gains": str(((files or {}).get("pi") or {}).get("gains"))} if "pi" in policies else {}
    plan = _plan(trials, seed, quick)
    plan.check_for(scenario, plant)  # the largest batch, before a plant is allocated
    spec = parse_executor(executor)
    params = {"scenario": scenario.name, "model": str(model), "gains": str(gains), "plant": plant,
              "executor": spec.kind, "policies": ",".join(policies), "experiments": ",".join(exps), **plan.to_dict(),
              **pi}
    from pathlib import Path

    gp = None if gains is None else (Path(gains) / "gains.json" if Path(gains).is_dir() else Path(gains))
    t0 = time.perf_counter()
    cmd = command or f"scidmz evaluate {scenario.name} --policies {','.join(n for n in names if n != BASELINE)}"
    with (provenance(cmd),
          tracked(EVALUATE_EXPERIMENT, f"{scenario.name}-evaluate", params, tracking_uri, track) as run,
          open_executor(spec) as ex):
        results = run_experiments(scenario, policies, plan, exps, plant=plant, progress=progress and ex is None,
                                  executor=ex)
        # The files written, not the directory: --out may be a directory holding other things (the
        # working directory, mlruns itself), which must not be copied into the tracked run.
        written = write_results(results, out, scenario, plan) if out else {}
        log_results(run, clean({k: v.summary for k, v in results.items()}), written.values(),
                    {"gains_sha256": file_sha256(gp)} if gp is not None else None)
    out_json: dict[str, Any] = {
        "scenario": scenario.name, "model": str(model), "gains": str(gains), "trials": int(trials),
        **pi, "experiments": list(exps), "results": {k: v.summary for k, v in results.items()},
        "wall_s": time.perf_counter() - t0,
    }
    if out:
        out_json["out"] = str(out)
    from .report import headline_lines

    return clean(out_json), "\n".join(headline_lines(scenario.name, results))
