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


_GROUPS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_simulate,
    _add_scenarios,
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
