"""``check_args``: everything the parsed command is declared to read, write and count, checked
before any work, so a bad option costs milliseconds and nothing is written."""

from __future__ import annotations

import argparse

from .counts import check_counts
from .options import check_option_rules
from .paths import check_inputs, check_outputs

__all__ = ["check_args"]


def check_args(args: argparse.Namespace) -> None:
    """Check the parsed command before it runs.

    Order: the options the command would not use (``options.check_option_rules``), the command's own defaults (a ``prepare`` hook, e.g. reproduce's default --out), counts
    (``counts.COUNTS``, ``limits.BOUNDS``), inputs, outputs with their siblings, then aliases
    (``paths.OUTPUTS``, ``paths.INPUTS``). Every refusal is one ``ValueError`` line naming the option.
    """
    from .. import fileio

    fileio.set_make_parents(bool(getattr(args, "mkdir", False)))
    check_option_rules(args)
    prepare = getattr(args, "prepare", None)
    if prepare is not None:
        prepare(args)
    check_counts(args)
    check_outputs(args, check_inputs(args))
