"""``scidmz evaluate``: the MLC paper's section 4 experiments on the same paired seeds."""

from __future__ import annotations

import argparse
import sys

from ..guard.options import Needs, declare_option_rules
from ._shared import (
    add_json_arg,
    add_model_args,
    add_plant_args,
    add_policy_file_args,
    add_scenario_args,
    add_seed_arg,
    add_tracking_arg,
    emit,
    plant_arg,
    policy_file_args,
    policy_file_rules,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ..policies.registry import policy_names

    p = sub.add_parser("evaluate", help="the MLC paper's section 4 experiments: MLC vs trivial TBF")
    add_scenario_args(p)
    add_model_args(p, gains_help="gains file of the first policy in --policies that runs from gains (from "
                                 "`scidmz tune`; default: the one shipped for the scenario, or attached to a "
                                 "models:/ --model)", model_note=" of the first policy in --policies that runs "
                                 "from a model (mlc)")
    p.add_argument("--trials", type=int, default=100, help="trials per experiment and policy (default 100)")
    p.add_argument("--experiments", default="all",
                   help="comma list of mrae,fct,utilization,sweep,short (default all)")
    p.add_argument("--quick", action="store_true", help="small sizes (30 s trials, 150 MB transfer)")
    add_seed_arg(p, what="seed of the trials")
    add_plant_args(p)
    p.add_argument("--out", default=None, help="write CSV, results.json and CDF plots to this directory")
    add_policy_file_args(p)
    p.add_argument("--policies", default="mlc",
                   help=f"comma list of {', '.join(policy_names())}, each against the trivial TBF on the "
                        "same paired trials (default mlc)")
    p.add_argument("--executor", default=None, metavar="SPEC",
                   help="where the trials run: local (default) | processes[:N] | dask://HOST:PORT (a batched plant)")
    add_tracking_arg(p)
    add_json_arg(p)
    p.set_defaults(func=cmd_evaluate)
    rules: dict[str, tuple[Needs, ...]] = {a.dest: () for a in p._actions if a.dest not in ("help", "func")}
    rules.update(policy_file_rules(_policy_names))  # --pi-gains in a run without pi used to be ignored
    declare_option_rules(p, rules)


def _policy_names(a: argparse.Namespace) -> list[str]:
    from ..evaluation.evaluate import policy_list

    return list(policy_list(a.policies))


def _files(a: argparse.Namespace, names: list[str]) -> dict[str, dict[str, str | None]]:
    """Each policy's given files: its ``--NAME-FILE`` flags, and ``--model``/``--gains`` for the first policy
    in ``names`` that runs from such a file (ours: the MLC study's short flags, mlc being the default
    policy); a ``--model``/``--gains`` no policy takes is one line."""
    from ..policies.registry import policy_files

    files = policy_file_args(a, names)
    for key in ("model", "gains"):
        value = getattr(a, key)
        if not value:
            continue
        first = next((n for n in names if key in policy_files(n)), None)
        if first is None:
            raise ValueError(f"--{key}: none of --policies ({','.join(names)}) runs from a {key}")
        if files[first].get(key):
            raise ValueError(f"--{key} and --{first}-{key} both name policy {first}'s {key}")
        files[first][key] = value
    return files


def cmd_evaluate(a: argparse.Namespace) -> int:
    import contextlib

    from ..evaluation.evaluate import check_request, evaluate
    from ..fileio import own_folder
    from ..scenario import resolve_scenario
    from .build import build_policies

    plant = plant_arg(a)

    # Cheap checks first (counts, experiments, names), then the one assembly builds the policies.
    names, _ = check_request(a.trials, a.experiments, a.policies, a.executor, plant)
    files = _files(a, names)
    sc = resolve_scenario(a.scenario, a.set)
    policies, found = build_policies(names, sc, files=files, tracking_uri=a.tracking_uri)
    # The run owns --out for its whole life (fileio.own_folder): a second run on it is refused.
    with own_folder(a.out, "--out", ["results.json"]) if a.out else contextlib.nullcontext():
        result, human = evaluate(
            scenario=sc, policies=policies, trials=a.trials, experiments=a.experiments,
            out=a.out, plant=plant, seed=a.seed, quick=a.quick, tracking_uri=a.tracking_uri,
            executor=a.executor, files=found,
            progress=sys.stderr.isatty(),
            command="scidmz " + " ".join(sys.argv[1:]) if sys.argv[1:2] == ["evaluate"] else None,
        )
    emit(result, a.json, human)
    return 0
