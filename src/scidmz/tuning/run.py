"""``scidmz tune``: GA tuning of the MLC's gains from a model directory, or of ``pi``'s, tracked with mlflow.

In steps, each readable on its own: ``TuneSettings`` (the flags) are checked
against the scenario into a ``TunePlan`` (``plan_tune``: one-line errors before
any work); ``run_tune`` runs the GA (``tuning.ga.tune``) and, if asked, the
refinement on another plant (``tuning.refine``); ``write_tune`` writes the
gains and the convergence files; ``tune_from_paths`` chains them inside an
optional mlflow run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..scenario import Scenario

__all__ = ["TuneSettings", "TunePlan", "plan_tune", "run_tune", "tune_paths", "write_tune", "tune_from_paths",
           "tunable_policies"]


def tunable_policies() -> tuple[str, ...]:
    """The policies ``scidmz tune`` tunes: those whose registry entry runs from a ``gains`` file, the
    anti-windup PI's gains of Fig. 5 (``policies.rate.antiwindup``), with or without a ``model``
    (the inverse ANN the loop then runs). Ours: the file names are the contract."""
    from ..policies.registry import policies_with_file

    return policies_with_file("gains")


@dataclass(frozen=True)
class TuneSettings:
    """The knobs of ``scidmz tune`` as given (``episode`` may be ``"120s"``).

    ``workers`` > 1 spreads each generation over a process pool; ``executor``
    (``local``, ``processes[:N]``, ``dask://HOST:PORT``; see ``scidmz.executors``)
    chooses where each generation's fitness chunks run, with the same result
    (it wins over ``workers``). ``delta_u``: the +-Delta_u saturator as a
    fraction of B_max (None: ``DEFAULT_DELTA_U``). ``refine_plant`` (e.g.
    ``netns``): after the GA, detune its gains on that plant (``tuning.refine``:
    ``refine_episodes`` episodes per factor of ``refine_factors``).
    """

    generations: int = 100
    population: int = 30
    parents: int = 15
    episode: str | float = 120.0
    seed: int = 0
    workers: int = 0
    executor: str | None = None
    delta_u: float | None = None
    limiter: str = "band"
    episodes: int = 1
    refine_plant: str | None = None
    refine_episodes: int = 2
    refine_factors: Sequence[float] | None = None


@dataclass(frozen=True)
class TunePlan:
    """``TuneSettings`` checked against a scenario: SI values and the executor's spec."""

    scenario: Scenario
    settings: TuneSettings
    episode: float  # s
    delta_u: float  # fraction of B_max
    executor: Any  # executors.ExecutorSpec


def plan_tune(scenario: Scenario, settings: TuneSettings) -> TunePlan:
    """Check ``settings`` (one-line ``ValueError`` each) before any work."""
    from ..executors import ExecutorSpec, parse_executor
    from ..limits import check
    from ..policies.rate.antiwindup import DEFAULT_DELTA_U, LIMITERS
    from ..units import parse_time
    from .ga import _check_ga_args

    s = settings
    for key, value in (("generations", s.generations), ("population", s.population), ("parents", s.parents),
                       ("episodes", s.episodes), ("workers", s.workers), ("seed", s.seed)):
        check(key, value, f"--{key}")
    _check_ga_args(s.generations, s.population, s.parents, 0.9, 0.1, ({"low": 0, "high": 1},) * 3)
    ep = parse_time(s.episode, what="--episode")
    try:  # the scenario's limits (finite, duration/period) apply to the fitness episode
        scenario.replace(duration=ep)
    except ValueError as exc:
        raise ValueError(f"--episode {s.episode}: {exc}") from None
    if round(ep / scenario.period) < 3:
        raise ValueError(f"--episode {s.episode}: a fitness episode must last at least 3 periods "
                         f"({3 * scenario.period:g} s on scenario '{scenario.name}')")
    du = DEFAULT_DELTA_U if s.delta_u is None else float(s.delta_u)
    if not 0 < du <= 1:
        raise ValueError(f"--delta-u must be a fraction of B_max in (0, 1], got {s.delta_u}")
    if s.limiter not in LIMITERS:
        raise ValueError(f"--limiter must be one of {', '.join(LIMITERS)}, got {s.limiter!r}")
    if s.executor is not None:
        spec = parse_executor(s.executor)
    else:
        spec = ExecutorSpec("processes", s.workers) if s.workers and s.workers > 1 else ExecutorSpec("local")
    if s.refine_plant is not None:
        from ..plant.registry import plant_names

        if s.refine_plant not in plant_names():
            raise ValueError(f"--refine-plant: unknown plant '{s.refine_plant}' (choose from {', '.join(plant_names())})")
        check("refine_episodes", s.refine_episodes, "--refine-episodes")
        if s.refine_factors is not None:
            _check_factors(s.refine_factors)
    elif s.refine_factors is not None:
        raise ValueError("--refine-factors goes with --refine-plant")
    return TunePlan(scenario, s, ep, du, spec)


def tune_params(plan: TunePlan, model: str | None, predictor: Any) -> dict[str, Any]:
    """The mlflow parameters of a tuning run (``model``/``predictor`` None: policy pi)."""
    s, sc = plan.settings, plan.scenario
    return {
        "scenario": sc.name, "dtn_cca": sc.dtn.cca, "policy": "mlc" if predictor is not None else "pi",
        "model": str(model),
        "model_dataset_sha256": predictor.meta.get("dataset_sha256") if predictor is not None else None,
        "generations": s.generations,
        "population": s.population, "parents": s.parents, "crossover": 0.9, "mutation": 0.1,
        "episode": plan.episode, "seed": s.seed, "workers": s.workers, "executor": plan.executor.kind,
        "delta_u": plan.delta_u, "limiter": s.limiter, "episodes_per_individual": s.episodes,
        **({"refine_plant": s.refine_plant, "refine_episodes": s.refine_episodes} if s.refine_plant else {}),
    }


def _check_factors(factors: Sequence[float]) -> None:
    """The refinement's scale factors, checked before the GA (they were checked only after it)."""
    from ..limits import check

    check("refine_factors", len(factors), "--refine-factors (how many)")
    if any(not (isinstance(f, int | float) and math.isfinite(f) and f >= 0) for f in factors):
        raise ValueError(f"--refine-factors must be finite numbers >= 0, got {list(factors)}")


def run_tune(plan: TunePlan, predictor: Any, progress: bool = False,
             log: Callable[[str], None] | None = None) -> Any:
    """The GA (MLC section 3.3) and, with ``refine_plant``, the refinement; returns the ``TuneResult``.

    ``predictor`` None tunes ``pi``. A refinement's chosen gains replace the GA's; the
    GA's own stay in ``info.refine``.
    """
    from ..executors import open_executor
    from .ga import tune

    s = plan.settings
    with open_executor(plan.executor) as ex:
        res = tune(plan.scenario, predictor, generations=s.generations, population=s.population,
                   parents=s.parents, episode=plan.episode, seed=s.seed, executor=ex, progress=progress,
                   delta_u=plan.delta_u, limiter=s.limiter, episodes=s.episodes)
    if s.refine_plant is not None:
        from .refine import DETUNE_FACTORS, refine_gains

        rr = refine_gains(plan.scenario, predictor, res.gains, plant=s.refine_plant, episodes=s.refine_episodes,
                          episode=plan.episode, seed=s.seed, factors=s.refine_factors or DETUNE_FACTORS, log=log)
        res.info["refine"] = {**rr.info, "factor": rr.factor, "candidates": rr.rows}
        res.gains = rr.gains
    return res


def tune_paths(out: str | Path) -> tuple[Path | None, Path]:
    """What ``write_tune`` writes for ``out``: (gains file or None, directory of the convergence files).

    ``X.json`` -> (``X.json``, its sibling ``X.tune/``); anything else -> (None, ``out`` as a
    directory holding gains.json). The CLI's path policy (``guard.paths.OUTPUTS``, kind ``gains``)
    checks both before the GA starts.
    """
    out_path = Path(out)
    if out_path.suffix == ".json":
        return out_path, out_path.with_name(out_path.stem + ".tune")
    return None, out_path


def write_tune(res: Any, out: str | Path) -> tuple[Path, Path]:
    """Write the result; returns (gains file, directory of the convergence files).

    ``out`` ending in ``.json`` -> just the gains file, the convergence files next to
    it in ``<stem>.tune/``; otherwise a directory with gains.json, convergence.csv,
    convergence.png and result.json (``tune_paths``).
    """
    gains_file, tdir = tune_paths(out)
    if gains_file is not None:
        res.save(tdir)
        res.gains.save(gains_file, extra={"best_iae": res.best_iae, **res.info})
        return gains_file, tdir
    tdir = res.save(tdir)
    return tdir / "gains.json", tdir


def _check_policy(policy: str, model: str | None) -> None:
    """A tunable policy, with a model exactly when it runs from one (its registry entry); one line."""
    from ..policies.registry import policy_files

    tunable = tunable_policies()
    if policy not in tunable:
        raise ValueError(f"--policy: only {' and '.join(tunable)} have tuned gains, got {policy!r}")
    runs_model = "model" in policy_files(policy)
    if runs_model and not model:
        raise ValueError(f"policy {policy} needs --model DIR (its inverse model)")
    if model and not runs_model:
        raise ValueError(f"policy {policy} takes no --model (it runs without an inverse model)")


def tune_from_paths(
    scenario: str | Scenario,
    model: str | None,
    out: str,
    overrides: list[str] | None = None,
    *,
    policy: str = "mlc",
    tracking_uri: str | None = None,
    track: bool = True,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
    **settings: Any,
) -> tuple[dict[str, Any], str]:
    """Tune the gains for ``model`` on ``scenario`` and write them to ``out`` (``write_tune``).

    ``policy``: ``mlc`` (needs ``model``, the inverse-model directory) or ``pi`` (no model:
    the MLC's loop around the trivial rate, ``policies.rate.pi``).
    ``settings``: ``TuneSettings`` fields (``generations``, ``population``, ...).
    Returns (JSON-able result, human summary); tracked in mlflow (experiment
    ``scidmz-tune``) unless ``track`` is False.
    """
    from ..models.predictor import load_predictor
    from ..scenario import resolve_scenario
    from ..tracking import optional_run

    unknown = sorted(set(settings) - set(asdict(TuneSettings())))
    if unknown:
        raise TypeError(f"tune_from_paths: unknown setting(s) {', '.join(unknown)}")
    _check_policy(policy, model)
    sc = resolve_scenario(scenario, overrides)
    plan = plan_tune(sc, TuneSettings(**settings))
    predictor = load_predictor(model) if model else None
    with optional_run(track, "scidmz-tune", f"tune-{sc.name}", tune_params(plan, model, predictor),
                      tracking_uri) as run:
        res = run_tune(plan, predictor, progress, log)
        gains_file, tdir = write_tune(res, out)
        doc = {"gains": res.gains.to_dict(), "gains_file": str(gains_file), "dir": str(tdir),
               "best_iae": res.best_iae, "curve": res.curve, **res.info}
        if run is not None:
            run.log_metrics({"best_iae": res.best_iae, "kp": res.gains.kp, "ki": res.gains.ki,
                             "kw": res.gains.kw, "seconds": res.info["seconds"]})
            run.log_metric_series("best_iae_per_generation", res.curve)
            # The files the GA wrote, not the directory: tune --out DIR may name a directory holding
            # other things (the working directory, mlruns itself), never copied into the run.
            for name in res.FILES:
                run.log_artifact(tdir / name, artifact_path="tune")
            doc["mlflow_run_id"] = run.run_id
    return doc, _human(plan, doc)


def _human(plan: TunePlan, doc: dict[str, Any]) -> str:
    g, s, ref = doc["gains"], plan.settings, doc.get("refine")
    return (
        f"{doc.get('policy', 'mlc')}: GA ({s.generations} generations x {s.population}): Kp={g['kp']:.3f} Ki={g['ki']:.3f} Kw={g['kw']:.3f}, "
        f"best IAE {doc['best_iae'] / 1e9:.2f} Gbit, {doc['seconds']:.1f} s -> {doc['gains_file']}"
        + (f" (refined on {ref['plant']}: the GA's gains x {ref['factor']:g})" if ref else "")
    )
