"""Options a command does not use are refused, not ignored.

A command whose options apply only in some of its modes (``reproduce PAPER``, ``leaderboard --merge`` /
``--render-only``, the per-policy ``--NAME-FILE`` flags) declares, with ``declare_option_rules`` at the
end of its ``add_parser``, every option's conditions; ``check_args`` refuses an option given (a value
other than its default) whose condition fails, with one line, before any work. Declaring is total: every
option of such a command is named, with conditions or as always used, so a new option cannot be
silently ignored (``declare_option_rules`` fails at parser build time otherwise). A command that
declares nothing uses every option it parses in every mode (``tests/test_cli_options.py`` checks which
commands have modes).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import BadInput
from .paths import option_name

__all__ = ["Needs", "declare_option_rules", "check_option_rules"]


@dataclass(frozen=True)
class Needs:
    """One condition of an option: ``test(args)`` must hold for it to be used; ``says`` completes
    "--OPTION ..." in the refusal, e.g. "goes with reproduce mlc only"."""

    test: Callable[[argparse.Namespace], bool]
    says: str


#: Parser bookkeeping that is not an option a user gives.
_NOT_OPTIONS = frozenset({"help", "func", "prepare", "option_rules", "mkdir", "command", "version"})


def declare_option_rules(p: argparse.ArgumentParser, rules: dict[str, tuple[Needs, ...]]) -> None:
    """Declare when each option of ``p`` applies (``()``: always); every option must be declared."""
    defaults = {a.dest: a.default for a in p._actions if a.dest not in _NOT_OPTIONS}
    missing = sorted(set(defaults) - set(rules))
    stale = sorted(set(rules) - set(defaults))
    if missing or stale:
        raise AssertionError(f"{p.prog}: options without a declared use {missing}, declared but absent {stale}")
    p.set_defaults(option_rules=(rules, defaults))


def check_option_rules(args: argparse.Namespace) -> None:
    """Refuse every given option whose declared condition fails (one line naming them)."""
    declared = getattr(args, "option_rules", None)
    if declared is None:
        return
    rules, defaults = declared
    refused = []
    for dest, needs in rules.items():
        if getattr(args, dest, None) == defaults[dest]:
            continue
        failed = next((n for n in needs if not n.test(args)), None)
        if failed is not None:
            refused.append(f"{option_name(dest) if dest != 'scenario' else 'SCENARIO'} {failed.says}")
    if refused:
        raise BadInput("; ".join(refused))
