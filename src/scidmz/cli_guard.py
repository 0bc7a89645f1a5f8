"""The CLI's guard rails (issue 10): one line for every refusal, checked destinations, strict JSON.

``cli`` uses these so that whatever an admin (or an attacker) types,
``scidmz`` answers with exit code 0, or 1/2 and exactly one line on stderr:

* ``OneLineArgumentParser``: argparse's usage errors in one line (argparse
  prints the usage block first); ``--help`` is where the usage lives.
* ``check_paths``: before any work, output paths are checked with
  :mod:`scidmz.fileio` (regular files or new paths only, writable, parents
  present unless ``--mkdir``) and input paths must be regular files (a FIFO
  would block, ``/dev/zero`` would never end, a directory is not a file).
* ``guarded``: maps exceptions to one line and an exit code -- bad input
  (``ValueError``, missing files, permissions) 2, runtime failures
  (``OSError``, ``RuntimeError``, ``MemoryError``) 1, anything else 1 as an
  "internal error" (``SCIDMZ_DEBUG=1`` shows the traceback).
* ``json_line``: ``--json`` output is strict JSON; non-finite numbers become
  ``null`` (``Infinity``/``NaN`` are not JSON).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["OneLineArgumentParser", "add_mkdir_flags", "check_paths", "guarded", "json_line", "finite_or_none"]


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse with usage errors as one line: ``scidmz simulate: error: ... (see --help)``."""

    def error(self, message: str) -> NoReturn:
        msg = " ".join(str(message).split())
        self.exit(2, f"{self.prog}: error: {msg} (see {self.prog} --help)\n")


# Destinations per command: attribute -> kind ("file", "dir", "model", "file_or_dir", "log").
OUTPUTS: dict[str, dict[str, str]] = {
    "simulate": {"out": "file", "plot": "file"},
    "identify": {"out": "file", "plot": "file"},
    "train": {"out": "model"},
    "tune": {"out": "file_or_dir"},
    "evaluate": {"out": "dir"},
    "leaderboard": {"out": "dir"},
    "reproduce": {"out": "dir"},
    "control": {"log": "log", "token_file": "file"},
}
# Inputs that must be regular files (or directories where noted).
INPUTS: dict[str, dict[str, str]] = {
    "train": {"dataset": "file"},
    "telemetry": {"pcap": "file", "egress_pcap": "file", "ingress_pcap": "file"},
    "reproduce": {"notes": "file"},
    "simulate": {"model": "dir", "gains": "file_or_dir"},
    "evaluate": {"model": "dir", "gains": "file_or_dir"},
    "leaderboard": {"mlc_model": "dir", "mlc_gains": "file_or_dir", "pi_gains": "file_or_dir"},
    "tune": {"model": "dir"},
    "control": {"model": "dir", "gains": "file_or_dir"},
}
_INPUT_NAMES = {"dataset": "dataset", "pcap": "capture", "egress_pcap": "capture", "ingress_pcap": "capture",
                "notes": "notes file", "gains": "gains file", "model": "model directory",
                "mlc_model": "mlc model directory", "mlc_gains": "mlc gains file", "pi_gains": "pi gains file"}
_MKDIR_FOR = ("out", "plot", "log")


def add_mkdir_flags(parser: argparse.ArgumentParser) -> None:
    """Give every (sub)command that writes a result ``--mkdir`` (create missing parent directories)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                add_mkdir_flags(sub)
    dests = {a.dest for a in parser._actions}
    if any(d in dests for d in _MKDIR_FOR) and "mkdir" not in dests:
        parser.add_argument("--mkdir", action="store_true",
                            help="create missing parent directories of the output paths")


def _looks_like_path(s: str) -> bool:
    return os.sep in s or s.endswith(".toml") or os.path.lexists(s)


def check_paths(args: argparse.Namespace) -> None:
    """Refuse bad input and output paths of the parsed command before any work (one line each)."""
    from . import fileio

    fileio.set_make_parents(bool(getattr(args, "mkdir", False)))
    cmd = getattr(args, "command", None) or ""
    scen = getattr(args, "scenario", None) or (getattr(args, "name", None) if cmd == "scenarios" else None)
    if isinstance(scen, str) and _looks_like_path(scen) and os.path.lexists(scen):
        fileio.check_input_file(scen, "scenario file")
    for attr, kind in INPUTS.get(cmd, {}).items():
        value = getattr(args, attr, None)
        if not value or not isinstance(value, str):
            continue
        p = Path(value)
        if kind == "file" or (kind == "file_or_dir" and not p.is_dir()):
            fileio.check_input_file(p, _INPUT_NAMES.get(attr, attr))
        elif kind == "dir" and p.exists() and not p.is_dir():
            raise ValueError(f"{_INPUT_NAMES.get(attr, attr)} {p}: not a directory")
    for attr, kind in OUTPUTS.get(cmd, {}).items():
        value = getattr(args, attr, None)
        if not value or not isinstance(value, str):
            continue
        what = f"--{attr.replace('_', '-')}"
        if kind in ("file", "log"):
            fileio.check_output_file(value, what)
        elif kind == "dir":
            fileio.check_output_dir(value, what)
        elif kind == "model":
            fileio.check_model_destination(value, what)
        elif kind == "file_or_dir":
            p = Path(value)
            if p.suffix == ".json" or (os.path.lexists(p) and not p.is_dir()):
                fileio.check_output_file(p, what)
            else:
                fileio.check_output_dir(p, what)


def _one_line(exc: BaseException) -> str:
    msg = " ".join(str(exc).split()) or type(exc).__name__
    if len(msg) > 500:
        msg = msg[:500] + "..."
    return msg


def guarded(func: Callable[[], int]) -> int:
    """Run ``func``; turn any exception into one line on stderr and an exit code (see module doc)."""
    try:
        return int(func() or 0)
    except KeyboardInterrupt:
        print("scidmz: interrupted", file=sys.stderr)
        return 130
    except ModuleNotFoundError as exc:
        # A missing optional dependency is an install problem: one line naming the extra.
        print(f"scidmz: error: {missing_extra_message(exc)}", file=sys.stderr)
        return 1
    except (ValueError, FileNotFoundError, PermissionError, NotADirectoryError, IsADirectoryError,
            TypeError, OverflowError) as exc:
        if os.environ.get("SCIDMZ_DEBUG") and not isinstance(exc, ValueError):
            raise
        # Bad input: one clear line. (TypeError/OverflowError come from odd values
        # reaching code that did not expect them; they are still reported as bad input.)
        print(f"scidmz: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except MemoryError:
        print("scidmz: error: out of memory (the input asks for more than this machine has)", file=sys.stderr)
        return 1
    except (OSError, RuntimeError) as exc:
        print(f"scidmz: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback
        if os.environ.get("SCIDMZ_DEBUG"):
            raise
        print(f"scidmz: internal error: {type(exc).__name__}: {_one_line(exc)} "
              "(SCIDMZ_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 1


def finite_or_none(o: Any) -> Any:
    """``o`` with every non-finite float (also NumPy's) replaced by None, recursively."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: finite_or_none(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [finite_or_none(v) for v in o]
    if type(o).__module__ == "numpy":
        try:
            import numpy as np

            if isinstance(o, np.ndarray):
                return finite_or_none(o.tolist())
            if isinstance(o, np.floating):
                return finite_or_none(float(o))
            if isinstance(o, np.integer):
                return int(o)
            if isinstance(o, np.bool_):
                return bool(o)
        except ImportError:  # pragma: no cover
            pass
    return o


def json_line(result: Any, default: Callable[[Any], Any] | None = None) -> str:
    """Strict JSON for ``--json``: non-finite numbers as null, never ``Infinity``/``NaN``."""
    # Round trip: ``default`` may itself produce non-finite floats.
    text = json.dumps(finite_or_none(result), default=default)
    return json.dumps(json.loads(text, parse_constant=lambda c: None), allow_nan=False)


#: Top-level module -> the pyproject extra that installs it.
EXTRA_OF_MODULE = {
    "tensorflow": "ml", "keras": "ml", "pygad": "ml", "sklearn": "ml", "mlflow": "ml",
    "pyroute2": "testbed", "ovsdbapp": "testbed", "prometheus_client": "testbed", "fastapi": "testbed",
    "uvicorn": "testbed", "starlette": "testbed", "netfilterqueue": "datapath",
    "dpkt": "telemetry", "grpc": "telemetry", "p4": "telemetry", "google": "telemetry", "thrift": "telemetry",
    "jenkspy": "baselines", "gymnasium": "rl", "dask": "distributed", "distributed": "distributed",
    "statsmodels": "stats",
}


def missing_extra_message(exc: ModuleNotFoundError) -> str:
    """One line naming the missing module and the extra that installs it."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(top)
    if extra is None:
        return f"missing Python module '{top or exc}'"
    if extra == "datapath":
        return (f"missing Python module '{top}': apt-get install libnetfilter-queue-dev, then "
                f"pip install 'scidmz[{extra}]'")
    return f"missing Python module '{top}': install the '{extra}' extra (pip install 'scidmz[{extra}]')"
