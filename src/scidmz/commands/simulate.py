"""``scidmz simulate``: one episode of a policy on a plant, summarised."""

from __future__ import annotations

import argparse
import sys

from ._shared import (
    add_json_arg,
    add_model_args,
    add_plant_args,
    add_policy_arg,
    add_scenario_args,
    add_seed_arg,
    emit,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="run one episode of a policy on a plant and summarise it")
    add_scenario_args(p, policy=True)
    add_policy_arg(p)
    add_plant_args(p)
    p.add_argument("--target", default=None,
                   help="DTN target rate R*_DTN, e.g. 600M (default: half the scenario's B_max)")
    p.add_argument("--duration", default=None, help="episode length, e.g. 120 or 120s (default: scenario's)")
    add_seed_arg(p, default=None)
    add_model_args(p)
    p.add_argument("--out", default=None, help="write the Trace as Parquet here")
    p.add_argument("--plot", default=None, help="draw y(t), u(t) and the target to this PNG")
    add_json_arg(p)
    p.set_defaults(func=cmd_simulate)


def cmd_simulate(a: argparse.Namespace) -> int:
    from ..evaluation.simulate import simulate
    from ._shared import plant_arg
    from .build import build_run

    run = build_run(a.scenario, overrides=a.set, policy=a.policy, plant=plant_arg(a), target=a.target,
                    duration=a.duration, seed=a.seed, model=a.model, gains=a.gains)
    result, human = simulate(run.scenario, run.policy, run.target, plant=run.plant, out=a.out, plot=a.plot,
                             progress=sys.stderr.isatty())
    emit(result, a.json, human)
    return 0
