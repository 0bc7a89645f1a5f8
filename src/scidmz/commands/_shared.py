"""What every command module shares: the scenario arguments and the ``--json`` output line."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..cli_guard import json_line

__all__ = ["add_scenario_args", "emit", "resolve_model_args", "MODEL_HELP"]

#: --model help: a directory or a registry reference.
MODEL_HELP = ("inverse-model directory (from `scidmz train`) or a registry reference models:/NAME/VERSION "
              "or models:/NAME@ALIAS (then --gains defaults to the gains `tune` attached to it)")


def emit(result: dict[str, Any], as_json: bool, human: str | None = None) -> None:
    """Print the human summary, and with ``--json`` one strict JSON object as stdout's last line."""
    if human and not as_json:
        print(human)
    if as_json:
        from ..state import json_default_lenient  # numpy: only when there is JSON to write

        if human:
            print(human, file=sys.stderr)
        print(json_line(result, default=json_default_lenient))


def add_scenario_args(p: argparse.ArgumentParser) -> None:
    """The positional scenario and the repeatable ``--set KEY=VALUE`` override."""
    p.add_argument("scenario", help="built-in scenario name (see `scidmz scenarios`) or a .toml file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario key, e.g. --set dtn.cca=bbr2 --set link.capacity=100M")


def resolve_model_args(a: argparse.Namespace) -> str | None:
    """Turn a ``models:/...`` ``--model`` into a local directory (and ``--gains`` when not given).

    Returns the registry reference (None for a plain path). Every command taking ``--model``
    calls this one function, so the registry works the same everywhere, the daemon included.
    """
    from ..tracking import is_model_uri, resolve_model

    ref = getattr(a, "model", None)
    if not is_model_uri(ref):
        return None
    a.model, gains = resolve_model(ref, getattr(a, "tracking_uri", None))
    if getattr(a, "gains", "absent") is None and gains:
        a.gains = gains
    return ref
