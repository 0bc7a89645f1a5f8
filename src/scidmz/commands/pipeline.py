"""``scidmz identify|train|tune``: the MLC pipeline's stages (MLC sections 3.3 and 3.5)."""

from __future__ import annotations

import argparse
import sys

from ._shared import (
    add_json_arg,
    add_model_args,
    add_plant_args,
    add_scenario_args,
    add_seed_arg,
    add_tracking_arg,
    emit,
    plant_arg,
    resolve_model_args,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ..policies.registry import policies_with_file

    p = sub.add_parser("identify", help="record an identification dataset (MLC section 3.5 excitation)")
    add_scenario_args(p)
    p.add_argument("--duration", required=True, help="recorded time, e.g. 28800 or 8h (the paper: 28800 s)")
    p.add_argument("--out", required=True, help="dataset path (.parquet)")
    add_seed_arg(p, what="excitation and plant seed")
    p.add_argument("--batch", type=int, default=None,
                   help="episodes run side by side in one batched plant (default 32 on the fluid plant, "
                        "1 on netns/hardware, which run in real time)")
    add_plant_args(p)
    p.add_argument("--plot", default=None, help="draw the excitation and the response (Fig. 7) to this PNG")
    add_tracking_arg(p)
    add_json_arg(p)
    p.set_defaults(func=cmd_identify)

    p = sub.add_parser("train", help="train the inverse ANN (MLC section 3.5, Fig. 8) on a dataset")
    p.add_argument("dataset", help="identification dataset (.parquet from `scidmz identify`)")
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--epochs", type=int, default=30, help="training epochs (default 30)")
    p.add_argument("--folds", type=int, default=5, help="k of k-fold cross-validation, 0 to skip (default 5)")
    add_seed_arg(p)
    p.add_argument("--register", default=None, metavar="NAME",
                   help="also register the model as a new version of NAME in the mlflow model registry")
    p.add_argument("--init", default=None, metavar="MODEL",
                   help="fine-tune this model directory on the dataset instead of training from scratch "
                        "(e.g. a fluid-plant model refined on a short testbed dataset; a tenth of its "
                        "learning rate, its scalers kept)")
    add_tracking_arg(p)
    add_json_arg(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("tune", help="GA-tune the MLC gains Kp, Ki, Kw (MLC section 3.3, Table 2), or pi's")
    add_scenario_args(p)
    # The policies tune tunes (tuning.run.tunable_policies), read here without importing numpy.
    p.add_argument("--policy", default="mlc", choices=policies_with_file("gains"),
                   help="mlc (default; needs --model) or pi (the MLC's anti-windup PI without its model; no --model)")
    add_model_args(p, gains_help=None,
                   model_note=" (policy mlc; with a registry reference the gains are attached to that version)")
    p.add_argument("--out", required=True, help="gains .json file, or a directory for gains + convergence")
    p.add_argument("--generations", type=int, default=100, help="GA generations (default 100, Table 2)")
    p.add_argument("--population", type=int, default=30, help="population / mating pool (default 30)")
    p.add_argument("--parents", type=int, default=15, help="parents mating (default 15)")
    p.add_argument("--episode", default="120", help="fitness episode length (default 120 s)")
    add_seed_arg(p)
    p.add_argument("--workers", type=int, default=0, help="process-pool workers per generation (default: in-process)")
    p.add_argument("--executor", default=None, metavar="SPEC",
                   help="where fitness chunks run: local | processes[:N] | dask://HOST:PORT (overrides --workers)")
    p.add_argument("--delta-u", type=float, default=None,
                   help="+-Delta_u saturator of Fig. 5 as a fraction of B_max (default 0.02)")
    p.add_argument("--limiter", choices=["band", "rate"], default="band",
                   help="centre of the +-Delta_u interval: the trivial rate (band) or u(t-T) (rate)")
    p.add_argument("--episodes", type=int, default=1, help="fitness episodes per individual (default 1, the paper's)")
    p.add_argument("--refine-plant", default=None, metavar="PLANT",
                   help="after the GA, detune its gains on this plant (e.g. netns, root): the GA's gains x each "
                        "--refine-factors, scored by IAE, the best kept (ours; see scidmz.tuning.refine)")
    p.add_argument("--refine-episodes", type=int, default=2, help="episodes per candidate when refining (default 2)")
    p.add_argument("--refine-factors", default=None, metavar="LIST",
                   help="comma list of scale factors tried (default 1,0.3,0.1,0.03)")
    add_tracking_arg(p)
    add_json_arg(p)
    p.set_defaults(func=cmd_tune)


def cmd_identify(a: argparse.Namespace) -> int:
    plant = plant_arg(a)
    from ..identification.record import record_dataset

    result, human = record_dataset(
        scenario=a.scenario, duration=a.duration, out=a.out, overrides=a.set, seed=a.seed, batch=a.batch,
        plant=plant, tracking_uri=a.tracking_uri, progress=sys.stderr.isatty(), plot=a.plot,
    )
    emit(result, a.json, human)
    return 0


def cmd_train(a: argparse.Namespace) -> int:
    from ..models.train import train_model

    if a.register is not None:  # a bad name must not cost a training run
        from ..tracking import check_model_name

        check_model_name(a.register, "--register")
    result, human = train_model(
        dataset=a.dataset, out=a.out, epochs=a.epochs, folds=a.folds, seed=a.seed,
        tracking_uri=a.tracking_uri, progress=sys.stderr.isatty(), init=a.init,
    )
    if a.register:
        import json

        from ..models.predictor import read_model_meta
        from ..tracking import register_model

        meta = read_model_meta(result["model"])
        reg = register_model(result["mlflow_run_id"], a.register, a.tracking_uri, tags={
            "scenario_fingerprint": json.dumps(meta.get("scenario_fingerprint"), sort_keys=True, default=str),
            "cv_relative_error": result.get("cv_relative_error"), "scenario": result.get("scenario"),
            "dtn_cca": result.get("dtn_cca"), "dataset_sha256": result.get("dataset_sha256"),
            "train_relative_error": result.get("train_relative_error"),
        })
        result["registered"] = reg
        human += f"; registered as {reg['uri']}"
    emit(result, a.json, human)
    return 0


def cmd_tune(a: argparse.Namespace) -> int:
    from ..fileio import own_folder
    from ..scenario import resolve_scenario
    from ..tuning.run import TuneSettings, plan_tune, tune_from_paths, tune_paths

    factors = None
    if a.refine_factors is not None:
        try:
            factors = [float(x) for x in a.refine_factors.split(",") if x.strip()]
        except ValueError:
            raise ValueError(f"--refine-factors: expected a comma list of numbers, got {a.refine_factors!r}") from None
    settings = dict(generations=a.generations, population=a.population, parents=a.parents, episode=a.episode,
                    seed=a.seed, workers=a.workers, executor=a.executor, delta_u=a.delta_u, limiter=a.limiter,
                    episodes=a.episodes, refine_plant=a.refine_plant, refine_episodes=a.refine_episodes,
                    refine_factors=factors)
    # Every setting is checked before the model is fetched or the GA starts: a bad one costs
    # milliseconds, not a download and minutes of GA.
    plan_tune(resolve_scenario(a.scenario, a.set), TuneSettings(**settings))
    ref = resolve_model_args(a)
    # The run owns the folder of its convergence files (X.tune/ beside X.json, or the --out
    # directory) for its whole life (fileio.own_folder): a second tune into it is refused.
    with own_folder(tune_paths(a.out)[1], "--out", ["gains.json", "result.json", "convergence.csv"]):
        result, human = tune_from_paths(
            scenario=a.scenario, model=a.model, out=a.out, overrides=a.set, policy=a.policy,
            tracking_uri=a.tracking_uri, progress=sys.stderr.isatty(),
            log=lambda m: print(m, file=sys.stderr, flush=True), **settings,
        )
    if ref is not None:  # the gains travel with the model version they were tuned for
        from ..tracking import attach_gains

        result["attached"] = attach_gains(ref, result["gains_file"], a.tracking_uri)
        human += f"; gains attached to {result['attached']['model']}"
    emit(result, a.json, human)
    return 0
