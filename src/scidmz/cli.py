"""The ``scidmz`` command line: argument parsing only, the work lives in the library.

Each command lives in its own ``scidmz.commands`` module, which registers its
parser (``add_parser``) and dispatches to a library function through ``func``;
``reproduce`` and the daemon call those same functions. Imports
of anything heavy happen inside the handlers, so ``scidmz --help`` is
instant. Every command that produces results takes ``--json`` and then
prints one JSON object as the last line of stdout.
"""

from __future__ import annotations

import argparse
import os
import sys

from .commands import (
    agent,
    control,
    evaluate,
    leaderboard,
    pipeline,
    reproduce,
    scenarios,
    simulate,
    telemetry,
    testbed,
)
from .guard.check import check_args
from .guard.exitcodes import guarded
from .guard.parser import OneLineArgumentParser
from .guard.paths import add_mkdir_flags

__all__ = ["main", "build_parser"]


#: The command modules, in ``scidmz --help`` order.
_COMMANDS = (simulate, scenarios, telemetry, evaluate, leaderboard, reproduce, pipeline, control, agent, testbed)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = OneLineArgumentParser(
        prog="scidmz",
        description="Keep a Science DMZ DTN at its target rate while campus traffic shares the WAN bottleneck.",
    )
    parser.add_argument("--version", action="version", version=f"scidmz {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _COMMANDS:
        module.add_parser(sub)
    add_mkdir_flags(parser)
    return parser


def _quiet_frameworks() -> None:
    """Silence TensorFlow/absl/oneDNN start-up chatter (INFO/WARNING/ERROR log lines, not exceptions).

    Only defaults: an exported TF_CPP_MIN_LOG_LEVEL wins. Numerics are untouched
    (TF_ENABLE_ONEDNN_OPTS is left alone, so the same seed gives the same model).
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("ABSL_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("GLOG_minloglevel", "3")


def main(argv: list[str] | None = None) -> int:
    _quiet_frameworks()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        print("scidmz: error: a command is required (see scidmz --help)", file=sys.stderr)
        return 2
    # Every declared path and count is checked before any work; every failure is one line (scidmz.guard).
    return guarded(lambda: (check_args(args), args.func(args))[1])


if __name__ == "__main__":
    sys.exit(main())
