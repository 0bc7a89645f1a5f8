"""``scidmz evaluate``: the MLC paper's section 4 experiments on the same paired seeds."""

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
    p = sub.add_parser("evaluate", help="the MLC paper's section 4 experiments: MLC vs trivial TBF")
    add_scenario_args(p)
    add_model_args(p, gains_help="gains JSON file (from `scidmz tune`); required unless --model is a registry "
                                 "reference with gains")
    p.add_argument("--trials", type=int, default=100, help="trials per experiment and policy (default 100)")
    p.add_argument("--experiments", default="all",
                   help="comma list of mrae,fct,utilization,sweep,short (default all)")
    p.add_argument("--quick", action="store_true", help="small sizes (30 s trials, 150 MB transfer)")
    add_seed_arg(p, what="seed of the trials")
    add_plant_args(p)
    p.add_argument("--out", default=None, help="write CSV, results.json and CDF plots to this directory")
    p.add_argument("--pi-gains", default=None, metavar="FILE",
                   help="gains JSON of policy pi (default: the pi gains shipped for the scenario)")
    p.add_argument("--policies", default="mlc",
                   help="comma list of mlc, pi, pacing, jenks, abc, ffs, none, each against the trivial TBF on the "
                        "same paired trials (default mlc)")
    p.add_argument("--executor", default=None, metavar="SPEC",
                   help="where the trials run: local (default) | processes[:N] | dask://HOST:PORT (fluid plant)")
    add_tracking_arg(p)
    add_json_arg(p)
    p.set_defaults(func=cmd_evaluate)


def cmd_evaluate(a: argparse.Namespace) -> int:
    import contextlib

    from ..evaluation.mlc.evaluate import check_request, evaluate
    from ..fileio import own_folder
    from ..scenario import resolve_scenario
    from .build import build_policies

    plant = plant_arg(a)

    # Cheap checks first (counts, experiments, names), then the one assembly builds the policies.
    names, _ = check_request(a.trials, a.experiments, a.policies, a.executor, plant)
    sc = resolve_scenario(a.scenario, a.set)
    resolve_model_args(a)
    policies, files = build_policies(names, sc, files={"mlc": {"model": a.model, "gains": a.gains},
                                                            "pi": {"gains": a.pi_gains}},
                                     tracking_uri=a.tracking_uri)
    # The run owns --out for its whole life (fileio.own_folder): a second run on it is refused.
    with own_folder(a.out, "--out", ["results.json"]) if a.out else contextlib.nullcontext():
        result, human = evaluate(
            scenario=sc, policies=policies, trials=a.trials, experiments=a.experiments,
            out=a.out, plant=plant, seed=a.seed, quick=a.quick, tracking_uri=a.tracking_uri,
            executor=a.executor, files=files,
            progress=sys.stderr.isatty(),
            command="scidmz " + " ".join(sys.argv[1:]) if sys.argv[1:2] == ["evaluate"] else None,
        )
    emit(result, a.json, human)
    return 0
