"""Counts: every count option, by command, and the ``limits.BOUNDS`` entry it is checked against
before any work (``--seed`` is checked for every command that has one).

``leaderboard`` checks its own trials (2 to 10,000: a paired test needs two) in its plan, before
any work, so is not here.
"""

from __future__ import annotations

import argparse

from .paths import declared, option_name

__all__ = ["COUNTS", "COMMON_COUNTS", "check_counts"]

COUNTS: dict[str, dict[str, str]] = {
    "evaluate": {"trials": "trials"},
    "reproduce": {"trials": "trials", "fct_trials": "fct_trials", "ns_trials": "ns_trials",
                  "short_trials": "short_trials", "ns_max_flows": "ns_max_flows", "generations": "generations",
                  "population": "population", "epochs": "epochs", "cv_folds": "folds"},
    "identify": {"batch": "batch"},
    "train": {"epochs": "epochs", "folds": "folds"},
    "tune": {"generations": "generations", "population": "population", "parents": "parents",
             "episodes": "episodes", "workers": "workers", "refine_episodes": "refine_episodes"},
}
#: Counts every command that has the option shares.
COMMON_COUNTS = {"seed": "seed"}


def check_counts(args: argparse.Namespace) -> None:
    """Refuse (one line naming the option) a declared count of the parsed command outside its bound."""
    from ..limits import check

    for attr, key in {**COMMON_COUNTS, **declared(COUNTS, args)}.items():
        value = getattr(args, attr, None)
        if value is not None:
            check(key, value, option_name(attr))
