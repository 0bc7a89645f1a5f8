"""The CLI's guard rails: one line for every refusal, checked destinations, strict JSON.

``cli`` uses these so that whatever an admin (or an attacker) types,
``scidmz`` answers with exit code 0, or 1/2 and exactly one line on stderr:

* ``OneLineArgumentParser``: argparse's usage errors in one line (argparse
  prints the usage block first); ``--help`` is where the usage lives.
* ``check_args``: before any work, every path option the command declares
  (``OUTPUTS``, ``INPUTS``; the empty string refused, implied siblings such
  as ``tune``'s ``X.tune/`` included, two options naming one file refused)
  is checked with :mod:`scidmz.fileio` (outputs: regular files or new paths
  only, writable, parents present unless ``--mkdir``; inputs: regular files,
  as a FIFO would block, ``/dev/zero`` would never end, a directory is not a
  file), and every count (``COUNTS``) against ``limits.BOUNDS``.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from .policies.registry import policy_file_flags

__all__ = ["OneLineArgumentParser", "add_mkdir_flags", "check_args", "guarded", "json_line",
           "finite_or_none", "OUTPUTS", "INPUTS", "COUNTS", "PlannedOutput", "planned_outputs", "command_of",
           "Needs", "declare_option_rules", "check_option_rules"]


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse with usage errors as one line: ``scidmz simulate: error: ... (see --help)``."""

    def error(self, message: str) -> NoReturn:
        msg = " ".join(str(message).split())
        self.exit(2, f"{self.prog}: error: {msg} (see {self.prog} --help)\n")


# -- the path policy: every path option of every command, declared here ---------------------------
#
# Each command (or "command subcommand") lists the options it writes (OUTPUTS) and reads (INPUTS)
# by argparse attribute, with a kind. ``check_args`` resolves and checks all of them before the
# command runs, so a bad path costs milliseconds and nothing is written: the empty string is
# refused (it is not "no output", and "" as a directory is the working directory), every
# sibling a kind implies is checked like the option itself (``tune --out X.json`` also writes
# ``X.tune/``), an append never follows a symlink, and two options naming the same file are
# refused. A new command (or a new option) adds one line here; ``tests/test_hardening_paths.py``
# fails for a path-like option that is not declared.
#
# Output kinds (``OUTPUT_KINDS``):
#   file   a result file: replaced atomically; a regular file or a new path (fileio.check_output_file)
#   plot   a figure: a file whose suffix is a format matplotlib writes (plots.FIGURE_FORMATS; none = PNG)
#   log    a file appended to: a regular file or a new path, never a symlink (fileio.open_append)
#   dir    a directory written into: a directory or a new path, never a symlink (fileio.check_output_dir)
#   model  a model directory replaced as a whole (fileio.check_model_destination)
#   gains  ``tune --out``: X.json and its sibling directory X.tune/, or a directory (tuning.run.tune_paths)
#   store  an mlflow tracking store (``--tracking-uri``, else $MLFLOW_TRACKING_URI, else ./mlruns): a
#          local path or file:/sqlite: URI is written, so it is checked (links to it are followed: a
#          store is configured, not typed per run); a server URI is not ours to check
# Input kinds: file (a regular file), dir (a directory), gains (a file, or a directory holding
# gains.json), model (a model directory, or a models:/NAME/VERSION reference: its syntax is
# checked), scenario (a built-in name, or a .toml file).
OUTPUTS: dict[str, dict[str, str]] = {
    "simulate": {"out": "file", "plot": "plot"},
    "identify": {"out": "file", "plot": "plot", "tracking_uri": "store"},
    "train": {"out": "model", "tracking_uri": "store"},
    "tune": {"out": "gains", "tracking_uri": "store"},
    "evaluate": {"out": "dir", "tracking_uri": "store"},
    "leaderboard": {"out": "dir", "tracking_uri": "store"},
    "reproduce": {"out": "dir", "tracking_uri": "store"},
    "control run": {"log": "log", "token_file": "file"},
    "telemetry replay": {"plot": "plot", "samples": "file"},
    "telemetry capture": {"plot": "plot"},
}
# Every policy's trained files (``--NAME-FILE``), from the policy registry: a "model" or "gains" file gets
# that kind's check, any other a regular file's.
_POLICY_FILES = {dest: file if file in ("model", "gains") else "file" for dest, (_, file) in policy_file_flags().items()}
INPUTS: dict[str, dict[str, str]] = {
    "simulate": {"scenario": "scenario", "model": "model", "gains": "gains"},
    "scenarios": {"name": "scenario"},
    "identify": {"scenario": "scenario"},
    "train": {"dataset": "file", "init": "dir"},
    "tune": {"scenario": "scenario", "model": "model"},
    "evaluate": {"scenario": "scenario", "model": "model", "gains": "gains", **_POLICY_FILES},
    "reproduce": {"notes": "file"},
    "telemetry replay": {"pcap": "file", "egress_pcap": "file", "ingress_pcap": "file"},
    "control run": {"scenario": "scenario", "model": "model", "gains": "gains", "config": "file"},
    "control set-target": {"token_file": "file"},
    "control status": {"token_file": "file"},
    "testbed up": {"scenario": "scenario"},
    "testbed check": {"scenario": "scenario"},
    "leaderboard": {"scenario": "scenario", **_POLICY_FILES},
}
#: Options whose help mentions files or paths but which are not paths (the declaration test reads this).
NOT_PATHS: dict[str, frozenset[str]] = {
    "control run": frozenset({"ovs_db", "api", "metrics_addr", "telemetry"}),
    "control set-target": frozenset({"api"}),
    "control status": frozenset({"api"}),
    "telemetry replay": frozenset({"start", "end"}),  # times within the capture
}
OUTPUT_KINDS = ("file", "plot", "log", "dir", "model", "gains", "store")
INPUT_KINDS = ("file", "dir", "gains", "model", "scenario")

# -- counts: every count option, by command, and the ``limits.BOUNDS`` entry it is checked
# against before any work ("seed" is checked for every command that has one). ``leaderboard`` checks
# its own trials (2 to 10,000: a paired test needs two) in its plan, before any work, so is not here.
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
_COMMON_COUNTS = {"seed": "seed"}

_INPUT_NAMES = {"dataset": "dataset", "pcap": "capture", "egress_pcap": "capture", "ingress_pcap": "capture",
                "notes": "notes file", "gains": "gains file", "model": "model directory", "init": "model directory",
                "token_file": "control token file", "scenario": "scenario file", "name": "scenario file",
                **{dest: f"{name} " + ("model directory" if file == "model" else f"{file} file")
                   for dest, (name, file) in policy_file_flags().items()}}
_MKDIR_FOR = ("out", "plot", "log")


def command_of(args: argparse.Namespace) -> list[str]:
    """The keys a parsed command is declared under: ``["control run", "control"]``, ``["tune"]``."""
    cmd = getattr(args, "command", None) or ""
    sub = next((getattr(args, k) for k in ("control_command", "telemetry_command", "testbed_cmd")
                if getattr(args, k, None)), None)
    return [f"{cmd} {sub}", cmd] if sub else [cmd]


def _declared(table: dict[str, dict[str, str]], args: argparse.Namespace) -> dict[str, str]:
    for key in command_of(args):
        if key in table:
            return table[key]
    return {}


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


def _option(attr: str) -> str:
    return f"--{attr.replace('_', '-')}"


def _looks_like_path(s: str) -> bool:
    return os.sep in s or s.endswith(".toml") or os.path.lexists(s)


@dataclass(frozen=True)
class PlannedOutput:
    """One path a command will write: the option that names it (a sibling: "--out (X.tune/)"), the path
    and the check it gets (file, plot, log, dir, model, store_dir, store_file)."""

    option: str
    path: Path
    check: str


def planned_outputs(args: argparse.Namespace) -> list[PlannedOutput]:
    """Every path the parsed command will write, its siblings included (see OUTPUTS)."""
    out: list[PlannedOutput] = []
    for attr, kind in _declared(OUTPUTS, args).items():
        value = getattr(args, attr, None)
        if kind == "store":
            out += _store_outputs(value)
            continue
        if value is None or (kind == "log" and value == "-"):
            continue
        opt = _option(attr)
        _not_empty(value, opt)
        p = Path(value)
        if kind == "gains":
            from .tuning.run import tune_paths

            gains_file, tdir = tune_paths(p)
            if gains_file is not None:
                out.append(PlannedOutput(opt, gains_file, "file"))
                out.append(PlannedOutput(f"{opt} (its sibling {tdir.name}/)", tdir, "dir"))
            else:
                out.append(PlannedOutput(opt, tdir, "dir"))
        else:
            out.append(PlannedOutput(opt, p, kind))
    return out


def _store_outputs(uri: str | None) -> list[PlannedOutput]:
    from .tracking import local_store

    if uri is not None:
        _not_empty(uri, "--tracking-uri")  # "" would silently mean $MLFLOW_TRACKING_URI or ./mlruns
    store = local_store(uri)  # also refuses an unknown scheme, with one line
    if store is None:
        return []
    path, kind = store
    return [PlannedOutput("--tracking-uri" if uri else "the mlflow store", path, f"store_{kind}")]


def _not_empty(value: Any, opt: str) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{opt}: expected a path, got {value!r}")
    if value == "" or not value.strip():
        raise ValueError(f"{opt} {value!r}: empty path (give a file or directory name)")
    if "\x00" in value:
        raise ValueError(f"{opt}: a path cannot contain NUL bytes")


def _check_output(o: PlannedOutput) -> None:
    from . import fileio

    if o.check == "plot":
        from .plots import check_figure_path

        check_figure_path(o.path, o.option)
        fileio.check_output_file(o.path, o.option)
    elif o.check == "file" or o.check == "store_file":
        fileio.check_output_file(o.path, o.option)
    elif o.check == "log":
        if o.path.is_symlink():
            raise fileio.DestinationError(f"{o.option} {o.path}: is a symlink; a log is appended to and "
                                          "appends never follow links")
        fileio.check_output_file(o.path, o.option)
    elif o.check == "dir":
        fileio.check_output_dir(o.path, o.option)
    elif o.check == "store_dir":
        fileio.check_output_dir(o.path, o.option, follow_links=True)
    elif o.check == "model":
        fileio.check_model_destination(o.path, o.option)
    else:  # pragma: no cover - OUTPUT_KINDS and this function change together
        raise AssertionError(f"unknown output check {o.check!r}")


def _check_input(attr: str, kind: str, value: Any) -> list[tuple[str, Path]]:
    """Check one input option; returns the (option, file) pairs it reads, for the alias check."""
    from . import fileio

    opt = _option(attr) if attr not in ("scenario", "name", "dataset", "pcap") else attr.upper()
    what = _INPUT_NAMES.get(attr, attr)
    _not_empty(value, opt)
    if kind == "scenario":
        if _looks_like_path(value) and os.path.lexists(value):
            return [(opt, fileio.check_input_file(value, what))]
        return []
    if kind == "model":
        from .tracking import check_model_ref, is_model_uri

        if is_model_uri(value):
            check_model_ref(value)
            return []
        kind = "dir"
    p = Path(value)
    if kind == "file" or (kind == "gains" and not p.is_dir()):
        return [(opt, fileio.check_input_file(p, what))]
    if kind in ("dir", "gains") and p.exists() and not p.is_dir():
        raise ValueError(f"{what} {p}: not a directory")
    return []


def _identity(path: Path, follow: bool) -> set[tuple[Any, ...]]:
    """Keys under which two options name the same file: the resolved parent and name, and the inode."""
    keys: set[tuple[Any, ...]] = {("path", os.path.realpath(path.parent), path.name)}
    if follow:
        keys.add(("path", os.path.realpath(path)))
    try:
        st = os.stat(path) if follow else os.lstat(path)
        keys.add(("inode", st.st_dev, st.st_ino))
    except OSError:
        pass
    return keys


def _check_aliases(outputs: list[PlannedOutput], inputs: list[tuple[str, Path]]) -> None:
    """Refuse two options naming the same file (``--out p.png --plot p.png``; ``--out`` = an input)."""
    seen: dict[tuple[Any, ...], str] = {}
    for o in outputs:
        if o.check.startswith("store"):
            continue
        keys = _identity(o.path, follow=False)
        clash = next((seen[k] for k in keys if k in seen), None)
        if clash is not None:
            raise ValueError(f"{clash} and {o.option} name the same path {o.path}; give each its own")
        for k in keys:
            seen[k] = o.option
    for opt, p in inputs:
        keys = _identity(p, follow=True)
        clash = next((seen[k] for k in keys if k in seen), None)
        if clash is not None:
            raise ValueError(f"{clash} {p} is also the input {opt}; write the result elsewhere")


def _check_counts(args: argparse.Namespace) -> None:
    from .limits import check

    for attr, key in {**_COMMON_COUNTS, **_declared(COUNTS, args)}.items():
        value = getattr(args, attr, None)
        if value is not None:
            check(key, value, _option(attr))


def check_args(args: argparse.Namespace) -> None:
    """Everything the parsed command is declared to read, write and count, checked before any work.

    Order: the options the command would not use (``check_option_rules``), the command's own
    defaults (a ``prepare`` hook, e.g. reproduce's default --out), counts
    (``COUNTS``, ``limits.BOUNDS``), inputs, outputs with their siblings, then aliases. Every
    refusal is one ``ValueError`` line naming the option.
    """
    from . import fileio

    fileio.set_make_parents(bool(getattr(args, "mkdir", False)))
    check_option_rules(args)
    prepare = getattr(args, "prepare", None)
    if prepare is not None:
        prepare(args)
    _check_counts(args)
    inputs: list[tuple[str, Path]] = []
    for attr, kind in _declared(INPUTS, args).items():
        value = getattr(args, attr, None)
        if value is not None:
            inputs += _check_input(attr, kind, value)
    outputs = planned_outputs(args)
    for o in outputs:
        _check_output(o)
    _check_aliases(outputs, inputs)



# -- options a command does not use are refused, not ignored ------------------------------------------
#
# A command whose options apply only in some of its modes (``reproduce PAPER``, ``leaderboard --merge`` /
# ``--render-only``, the per-policy ``--NAME-FILE`` flags) declares, with ``declare_option_rules`` at the
# end of its ``add_parser``, every option's conditions; ``check_args`` refuses an option given (a value
# other than its default) whose condition fails, with one line, before any work. Declaring is total: every
# option of such a command is named, with conditions or as always used, so a new option cannot be
# silently ignored (``declare_option_rules`` fails at parser build time otherwise). A command that
# declares nothing uses every option it parses in every mode (``tests/test_cli_options.py`` checks which
# commands have modes).


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
            refused.append(f"{_option(dest) if dest != 'scenario' else 'SCENARIO'} {failed.says}")
    if refused:
        raise ValueError("; ".join(refused))


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
