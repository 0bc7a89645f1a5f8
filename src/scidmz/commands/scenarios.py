"""``scidmz scenarios``: list the built-in scenarios or show one in SI units."""

from __future__ import annotations

import argparse

from ._shared import add_json_arg, emit


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scenarios", help="list the built-in scenarios, or show one in SI units")
    p.add_argument("name", nargs="?", help="show this scenario (name or .toml path)")
    add_json_arg(p, "the scenario list or the scenario as JSON")
    p.set_defaults(func=cmd_scenarios)


def cmd_scenarios(a: argparse.Namespace) -> int:
    from ..scenario import builtin_names, load_scenario

    if a.name:
        sc = load_scenario(a.name)
        d = sc.to_dict()
        human = "\n".join(f"{k}: {v}" for k, v in d.items())
        emit({"scenario": d, "buffer_bytes": sc.buffer_bytes}, a.json, human)
    else:
        names = builtin_names()
        emit({"scenarios": names}, a.json, "\n".join(names))
    return 0
