"""``scidmz simulate``: one episode of a policy on a plant, summarised."""

from __future__ import annotations

import argparse
import sys

from ._shared import MODEL_HELP, add_scenario_args, emit, resolve_model_args


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="run one episode of a policy on a plant and summarise it")
    add_scenario_args(p)
    p.add_argument("--policy", default="trivial", help="trivial | none | mlc | jenks | abc | ffs (default trivial)")
    p.add_argument("--plant", default="fluid", help="fluid (default) | netns | hardware")
    p.add_argument("--target", default=None,
                   help="DTN target rate R*_DTN, e.g. 600M (default: half the scenario's B_max)")
    p.add_argument("--duration", default=None, help="episode length, e.g. 120 or 120s (default: scenario's)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: scenario's)")
    p.add_argument("--model", default=None, help=MODEL_HELP + " (policy mlc)")
    p.add_argument("--gains", default=None, help="gains JSON file (policy mlc)")
    p.add_argument("--out", default=None, help="write the Trace as Parquet here")
    p.add_argument("--plot", default=None, help="draw y(t), u(t) and the target to this PNG")
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    p.set_defaults(func=cmd_simulate)


def cmd_simulate(a: argparse.Namespace) -> int:
    resolve_model_args(a)
    from ..evaluation.simulate import simulate

    result, human = simulate(
        scenario=a.scenario, overrides=a.set, policy=a.policy, plant=a.plant, target=a.target,
        duration=a.duration, seed=a.seed, model=a.model, gains=a.gains, out=a.out, plot=a.plot,
        progress=sys.stderr.isatty(),
    )
    emit(result, a.json, human)
    return 0
