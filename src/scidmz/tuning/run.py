"""``scidmz tune``: GA tuning of the MLC gains from a model directory, tracked with mlflow."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..scenario import Scenario

__all__ = ["tune_from_paths"]


def tune_from_paths(
    scenario: str | Scenario,
    model: str,
    out: str,
    overrides: list[str] | None = None,
    generations: int = 100,
    population: int = 30,
    parents: int = 15,
    episode: str | float = 120.0,
    seed: int = 0,
    workers: int = 0,
    executor: str | None = None,
    delta_u: float | None = None,
    limiter: str = "band",
    episodes: int = 1,
    tracking_uri: str | None = None,
    track: bool = True,
    progress: bool = False,
    refine_plant: str | None = None,
    refine_episodes: int = 2,
    refine_factors: Sequence[float] | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], str]:
    """Run ``tuning.ga.tune`` and write the gains.

    ``out`` ending in ``.json`` -> just the gains file (convergence files next
    to it as ``<stem>.convergence.csv/png``); otherwise a directory with
    gains.json, convergence.csv, convergence.png and result.json.
    ``workers`` > 1 spreads each generation over a process pool; ``executor``
    (``local``, ``processes[:N]``, ``dask://HOST:PORT``; see ``scidmz.executors``)
    chooses where each generation's fitness chunks run, with the same result.
    ``refine_plant`` (e.g. ``netns``): then detune the GA's gains on that plant
    (``tuning.refine``: ``refine_episodes`` episodes per factor of ``refine_factors``)
    and write the chosen ones; the GA's own stay in the file's ``info.refine``.
    """
    from ..executors import ExecutorSpec, open_executor, parse_executor
    from ..models.predictor import load_predictor
    from ..policies.rate.mlc import DEFAULT_DELTA_U, LIMITERS
    from ..scenario import resolve_scenario
    from ..tracking import tracked_run
    from ..units import parse_time
    from .ga import tune

    sc = resolve_scenario(scenario, overrides)
    ep = parse_time(episode, what="--episode")
    try:  # the scenario's limits (finite, duration/period) apply to the fitness episode, before any work
        sc.replace(duration=ep)
    except ValueError as exc:
        raise ValueError(f"--episode {episode}: {exc}") from None
    du = DEFAULT_DELTA_U if delta_u is None else float(delta_u)
    if not 0 < du <= 1:
        raise ValueError(f"--delta-u must be a fraction of B_max in (0, 1], got {delta_u}")
    if limiter not in LIMITERS:
        raise ValueError(f"--limiter must be one of {', '.join(LIMITERS)}, got {limiter!r}")
    if executor is not None:
        spec = parse_executor(executor)
    else:
        spec = ExecutorSpec("processes", workers) if workers and workers > 1 else ExecutorSpec("local")
    predictor = load_predictor(model)
    out_path = Path(out)
    params = {
        "scenario": sc.name, "dtn_cca": sc.dtn.cca, "model": str(model),
        "model_dataset_sha256": predictor.meta.get("dataset_sha256"), "generations": generations,
        "population": population, "parents": parents, "crossover": 0.9, "mutation": 0.1,
        "episode": ep, "seed": seed, "workers": workers, "executor": spec.kind, "delta_u": du, "limiter": limiter,
        "episodes_per_individual": episodes,
        **({"refine_plant": refine_plant, "refine_episodes": refine_episodes} if refine_plant else {}),
    }
    if refine_plant is not None:
        from ..plant.base import PLANT_KINDS

        if refine_plant not in PLANT_KINDS:
            raise ValueError(f"--refine-plant: unknown plant '{refine_plant}' (choose from {', '.join(PLANT_KINDS)})")
        if refine_episodes < 1:
            raise ValueError(f"--refine-episodes must be >= 1, got {refine_episodes}")

    def work(run: Any | None) -> dict[str, Any]:
        with open_executor(spec) as ex:
            res = tune(sc, predictor, generations=generations, population=population, parents=parents,
                       episode=ep, seed=seed, executor=ex, progress=progress, delta_u=du,
                       limiter=limiter, episodes=episodes)
        if refine_plant is not None:
            from .refine import DETUNE_FACTORS, refine_gains

            rr = refine_gains(sc, predictor, res.gains, plant=refine_plant, episodes=refine_episodes, episode=ep,
                              seed=seed, factors=refine_factors or DETUNE_FACTORS, log=log)
            res.info["refine"] = {**rr.info, "factor": rr.factor, "candidates": rr.rows}
            res.gains = rr.gains
        if out_path.suffix == ".json":
            tdir = out_path.with_name(out_path.stem + ".tune")
            res.save(tdir)
            res.gains.save(out_path, extra={"best_iae": res.best_iae, **res.info})
            gains_file = out_path
        else:
            tdir = res.save(out_path)
            gains_file = tdir / "gains.json"
        doc = {
            "gains": res.gains.to_dict(), "gains_file": str(gains_file), "dir": str(tdir),
            "best_iae": res.best_iae, "curve": res.curve, **res.info,
        }
        if run is not None:
            run.log_metrics({"best_iae": res.best_iae, "kp": res.gains.kp, "ki": res.gains.ki,
                             "kw": res.gains.kw, "seconds": res.info["seconds"]})
            run.log_metric_series("best_iae_per_generation", res.curve)
            run.log_artifact(tdir, artifact_path="tune")
            doc["mlflow_run_id"] = run.run_id
        return doc

    if track:
        with tracked_run("scidmz-tune", f"tune-{sc.name}", params, tracking_uri) as run:
            doc = work(run)
    else:
        doc = work(None)
    g = doc["gains"]
    ref = doc.get("refine")
    human = (
        f"GA ({generations} generations x {population}): Kp={g['kp']:.3f} Ki={g['ki']:.3f} Kw={g['kw']:.3f}, "
        f"best IAE {doc['best_iae'] / 1e9:.2f} Gbit, {doc['seconds']:.1f} s -> {doc['gains_file']}"
        + (f" (refined on {ref['plant']}: the GA's gains x {ref['factor']:g})" if ref else "")
    )
    return doc, human
