"""The library side of ``scidmz evaluate``: chosen policies vs the trivial TBF on the section 4 experiments."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...policies.base import Policy
from ...scenario import Scenario
from ..results import clean, provenance
from ..stats import BASELINE
from .experiments import ExperimentPlan, parse_experiments, run_experiments, write_results
from .tracking import EVALUATE_EXPERIMENT, log_results, tracked

__all__ = ["EVALUABLE", "evaluate", "load_mlc_policy"]

#: Policies ``--policies`` may name; the trivial TBF always runs as the paired baseline.
EVALUABLE = ("mlc", "jenks", "abc", "ffs", "none")


def load_mlc_policy(model: str | os.PathLike[str], gains: str | os.PathLike[str]) -> Policy:
    """The MLC from a model directory and a gains JSON, with one-line errors for bad paths."""
    from ...policies.rate.mlc import Gains, MLCPolicy

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


def _policy_names(policies: str | Sequence[str]) -> list[str]:
    names = [n.strip() for n in (policies.split(",") if isinstance(policies, str) else policies) if n.strip()]
    if not names:
        raise ValueError("--policies needs at least one policy")
    unknown = [n for n in names if n not in (*EVALUABLE, BASELINE)]
    if unknown:
        raise ValueError(f"--policies: unknown policy {unknown[0]!r} (choose from {', '.join(EVALUABLE)})")
    return names


def _build_policies(names: list[str], sc: Scenario, model: str | None,
                    gains: str | None) -> tuple[dict[str, Policy], str | None, str | None]:
    """The named policies and the trivial baseline (last); the MLC's model and gains as resolved."""
    from ...policies import TrivialPolicy, make_policy

    pols: dict[str, Policy] = {}
    for n in names:
        if n == "mlc":
            from ...policies.rate.mlc import mlc_files

            model, gains = mlc_files(sc, model, gains)
            pols["mlc"] = load_mlc_policy(model, gains)
        elif n != BASELINE:
            pols[n] = make_policy(n)
    pols[BASELINE] = TrivialPolicy()
    return pols, model, gains


def _plan(trials: int, seed: int, quick: bool) -> ExperimentPlan:
    base = ExperimentPlan.quick(seed) if quick else ExperimentPlan(seed=seed)
    return replace(base, trials=int(trials), ns_trials=min(base.ns_trials, int(trials)),
                   short_trials=min(base.short_trials, int(trials)))


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
    command: str | None = None,
) -> tuple[dict[str, Any], str]:
    """The chosen policies vs trivial on the chosen experiments; returns (JSON summary, human lines).

    ``policies``: any of ``mlc`` (needs ``model`` and ``gains``), ``jenks`` (RTT queue
    separation at the border router, the DTN's queue given the target), ``abc`` / ``ffs``
    (bottleneck disciplines weighted by the target, fluid plant), ``none``; the
    trivial TBF is always run as the paired baseline.

    ``executor``: ``local`` (default), ``processes[:N]`` or ``dask://HOST:PORT``; the same
    trials with the same seeds, so the same numbers.

    The run is tracked with mlflow (experiment ``scidmz-evaluate``): parameters, the
    per-policy metrics, and the CSV/JSON/PNG files when ``out`` is given.
    """
    from ...executors import open_executor, parse_executor
    from ...limits import check
    from ...scenario import resolve_scenario
    from ...tracking import file_sha256

    check("trials", trials, "--trials")
    spec = parse_executor(executor)  # a bad spec is one line before any work
    if spec.kind != "local" and plant != "fluid":
        raise ValueError(f"--executor {executor} runs fluid-plant trials only; the {plant} plant runs in real "
                         "time, one testbed at a time")
    exps = parse_experiments(experiments)
    names = _policy_names(policies)
    sc = resolve_scenario(scenario, overrides)
    plan = _plan(trials, seed, quick)
    plan.check_for(sc, plant)  # before the policies load a model or a plant exists
    pols, model, gains = _build_policies(names, sc, model, gains)
    params = {"scenario": sc.name, "model": str(model), "gains": str(gains), "plant": plant, "executor": spec.kind,
              "policies": ",".join(pols), "experiments": ",".join(exps), **plan.to_dict()}
    gp = None if gains is None else (Path(gains) / "gains.json" if Path(gains).is_dir() else Path(gains))
    t0 = time.perf_counter()
    cmd = command or f"scidmz evaluate {sc.name} --policies {','.join(names)}"
    with (provenance(cmd), tracked(EVALUATE_EXPERIMENT, f"{sc.name}-evaluate", params, tracking_uri, track) as run,
          open_executor(spec) as ex):
        results = run_experiments(sc, pols, plan, exps, plant=plant, progress=progress and ex is None, executor=ex)
        # The files written, not the directory: --out may be a directory holding other things (the
        # working directory, mlruns itself), which must not be copied into the run (issue 29).
        files = write_results(results, out, sc, plan) if out else {}
        log_results(run, clean({k: v.summary for k, v in results.items()}), files.values(),
                    {"gains_sha256": file_sha256(gp)} if gp is not None else None)
    out_json: dict[str, Any] = {
        "scenario": sc.name, "model": str(model), "gains": str(gains), "trials": int(trials),
        "experiments": list(exps), "results": {k: v.summary for k, v in results.items()},
        "wall_s": time.perf_counter() - t0,
    }
    if out:
        out_json["out"] = str(out)
    from .report import headline_lines

    return clean(out_json), "\n".join(headline_lines(sc.name, results))
