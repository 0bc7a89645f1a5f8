"""The ``scidmz`` command line: argument parsing only, the work lives in the library.

Each command group registers its parser in one ``_add_*`` function listed in
``_GROUPS`` and dispatches to a library function through ``func``. Imports
of anything heavy happen inside the handlers, so ``scidmz --help`` is
instant. Every command that produces results takes ``--json`` and then
prints one JSON object as the last line of stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["main", "build_parser"]


def _emit(result: dict[str, Any], as_json: bool, human: str | None = None) -> None:
    if human and not as_json:
        print(human)
    if as_json:
        if human:
            print(human, file=sys.stderr)
        print(json.dumps(result, default=_json_default))


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def _add_common_scenario(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="built-in scenario name (see `scidmz scenarios`) or a .toml file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario key, e.g. --set dtn.cca=bbr2 --set link.capacity=100M")


# -- simulate ------------------------------------------------------------------


def _add_simulate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="run one episode of a policy on a plant and summarise it")
    _add_common_scenario(p)
    p.add_argument("--policy", default="trivial", help="trivial | none | mlc (default trivial)")
    p.add_argument("--plant", default="fluid", help="fluid (default) | netns | hardware")
    p.add_argument("--target", default="600M", help="DTN target rate R*_DTN, e.g. 600M (default 600M)")
    p.add_argument("--duration", default=None, help="episode length, e.g. 120 or 120s (default: scenario's)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: scenario's)")
    p.add_argument("--model", default=None, help="inverse-model directory (policy mlc)")
    p.add_argument("--gains", default=None, help="gains JSON file (policy mlc)")
    p.add_argument("--out", default=None, help="write the Trace as Parquet here")
    p.add_argument("--plot", default=None, help="draw y(t), u(t) and the target to this PNG")
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    p.set_defaults(func=_cmd_simulate)


def _cmd_simulate(a: argparse.Namespace) -> int:
    from .evaluation.simulate import simulate

    result, human = simulate(
        scenario=a.scenario, overrides=a.set, policy=a.policy, plant=a.plant, target=a.target,
        duration=a.duration, seed=a.seed, model=a.model, gains=a.gains, out=a.out, plot=a.plot,
        progress=not a.json and sys.stderr.isatty(),
    )
    _emit(result, a.json, human)
    return 0


# -- scenarios -------------------------------------------------------------------


def _add_scenarios(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scenarios", help="list the built-in scenarios, or show one in SI units")
    p.add_argument("name", nargs="?", help="show this scenario (name or .toml path)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_scenarios)


def _cmd_scenarios(a: argparse.Namespace) -> int:
    from .scenario import builtin_names, load_scenario

    if a.name:
        sc = load_scenario(a.name)
        d = sc.to_dict()
        human = "\n".join(f"{k}: {v}" for k, v in d.items())
        _emit({"scenario": d, "buffer_bytes": sc.buffer_bytes}, a.json, human)
    else:
        names = builtin_names()
        _emit({"scenarios": names}, a.json, "\n".join(names))
    return 0


# -- evaluate / reproduce (MLC paper, section 4) ------------------------------------


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="the MLC paper's section 4 experiments: MLC vs trivial TBF")
    _add_common_scenario(p)
    p.add_argument("--model", required=True, help="inverse-model directory (from `scidmz train`)")
    p.add_argument("--gains", required=True, help="gains JSON file (from `scidmz tune`)")
    p.add_argument("--trials", type=int, default=100, help="trials per experiment and policy (default 100)")
    p.add_argument("--experiments", default="all",
                   help="comma list of mrae,fct,utilization,sweep,short (default all)")
    p.add_argument("--quick", action="store_true", help="small sizes (30 s trials, 150 MB transfer)")
    p.add_argument("--seed", type=int, default=0, help="seed of the trials (default 0)")
    p.add_argument("--plant", default="fluid", help="fluid (default) | netns | hardware")
    p.add_argument("--out", default=None, help="write CSV, results.json and CDF plots to this directory")
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    p.set_defaults(func=_cmd_evaluate)


def _cmd_evaluate(a: argparse.Namespace) -> int:
    from .evaluation.experiments import evaluate

    result, human = evaluate(
        scenario=a.scenario, model=a.model, gains=a.gains, trials=a.trials, experiments=a.experiments,
        out=a.out, overrides=a.set, plant=a.plant, seed=a.seed, quick=a.quick,
        progress=not a.json and sys.stderr.isatty(),
    )
    _emit(result, a.json, human)
    return 0


def _add_reproduce(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="rerun a paper's whole chain and write a report")
    p.add_argument("paper", choices=["mlc"], help="mlc: identify, train, tune, evaluate (CUBIC and BBRv2)")
    p.add_argument("--quick", action="store_true", help="tiny sizes on small scenarios (CI, < 2 min)")
    p.add_argument("--out", default=None, help="report directory (default reports/mlc, or reports/mlc-quick)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tracking-uri", default=None, help="mlflow store (default ./mlruns or $MLFLOW_TRACKING_URI)")
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    p.set_defaults(func=_cmd_reproduce)


def _cmd_reproduce(a: argparse.Namespace) -> int:
    from .evaluation.reproduce import reproduce_mlc

    out = a.out or ("reports/mlc-quick" if a.quick else "reports/mlc")
    cmd = "scidmz " + " ".join(sys.argv[1:]) if sys.argv[1:2] == ["reproduce"] else None
    result, human = reproduce_mlc(out=out, quick=a.quick, tracking_uri=a.tracking_uri, seed=a.seed,
                                  command=cmd, progress=sys.stderr.isatty())
    _emit(result, a.json, human)
    return 0


# -- identify / train / tune (MLC paper, sections 3.3 and 3.5) -------------------------


def _add_mlc_pipeline(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("identify", help="record an identification dataset (MLC section 3.5 excitation)")
    _add_common_scenario(p)
    p.add_argument("--duration", required=True, help="recorded time, e.g. 28800 or 8h (the paper: 28800 s)")
    p.add_argument("--out", required=True, help="dataset path (.parquet)")
    p.add_argument("--seed", type=int, default=0, help="excitation and plant seed (default 0)")
    p.add_argument("--batch", type=int, default=32, help="episodes run side by side in one batched plant (default 32)")
    p.add_argument("--plant", default="fluid", help="fluid (default) | netns | hardware")
    p.add_argument("--tracking-uri", default=None, help="mlflow store (default ./mlruns or $MLFLOW_TRACKING_URI)")
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    p.set_defaults(func=_cmd_identify)

    p = sub.add_parser("train", help="train the inverse ANN (MLC section 3.5, Fig. 8) on a dataset")
    p.add_argument("dataset", help="identification dataset (.parquet from `scidmz identify`)")
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--epochs", type=int, default=30, help="training epochs (default 30)")
    p.add_argument("--folds", type=int, default=5, help="k of k-fold cross-validation, 0 to skip (default 5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tracking-uri", default=None, help="mlflow store (default ./mlruns or $MLFLOW_TRACKING_URI)")
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("tune", help="GA-tune the MLC gains Kp, Ki, Kw (MLC section 3.3, Table 2)")
    _add_common_scenario(p)
    p.add_argument("--model", required=True, help="inverse-model directory (from `scidmz train`)")
    p.add_argument("--out", required=True, help="gains .json file, or a directory for gains + convergence")
    p.add_argument("--generations", type=int, default=100, help="GA generations (default 100, Table 2)")
    p.add_argument("--population", type=int, default=30, help="population / mating pool (default 30)")
    p.add_argument("--parents", type=int, default=15, help="parents mating (default 15)")
    p.add_argument("--episode", default="120", help="fitness episode length (default 120 s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=0, help="process-pool workers per generation (default: in-process)")
    p.add_argument("--tracking-uri", default=None, help="mlflow store (default ./mlruns or $MLFLOW_TRACKING_URI)")
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    p.set_defaults(func=_cmd_tune)


def _cmd_identify(a: argparse.Namespace) -> int:
    from .identification.record import record_dataset

    result, human = record_dataset(
        scenario=a.scenario, duration=a.duration, out=a.out, overrides=a.set, seed=a.seed, batch=a.batch,
        plant=a.plant, tracking_uri=a.tracking_uri, progress=not a.json and sys.stderr.isatty(),
    )
    _emit(result, a.json, human)
    return 0


def _cmd_train(a: argparse.Namespace) -> int:
    from .models.train import train_model

    result, human = train_model(
        dataset=a.dataset, out=a.out, epochs=a.epochs, folds=a.folds, seed=a.seed,
        tracking_uri=a.tracking_uri, progress=not a.json and sys.stderr.isatty(),
    )
    _emit(result, a.json, human)
    return 0


def _cmd_tune(a: argparse.Namespace) -> int:
    from .tuning.run import tune_from_paths

    result, human = tune_from_paths(
        scenario=a.scenario, model=a.model, out=a.out, overrides=a.set, generations=a.generations,
        population=a.population, parents=a.parents, episode=a.episode, seed=a.seed, workers=a.workers,
        tracking_uri=a.tracking_uri, progress=not a.json and sys.stderr.isatty(),
    )
    _emit(result, a.json, human)
    return 0


_GROUPS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_simulate,
    _add_scenarios,
    _add_evaluate,
    _add_reproduce,
    _add_mlc_pipeline,
]


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="scidmz",
        description="Keep a Science DMZ DTN at its target rate while campus traffic shares the WAN bottleneck.",
    )
    parser.add_argument("--version", action="version", version=f"scidmz {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in _GROUPS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("scidmz: interrupted", file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError, PermissionError, RuntimeError) as exc:
        # Bad input gets one clear line, not a traceback.
        print(f"scidmz: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
