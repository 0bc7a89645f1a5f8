"""The path policy: every path option of every command, declared here and checked before any work.

Each command (or "command subcommand") lists the options it writes (OUTPUTS) and reads (INPUTS)
by argparse attribute, with a kind. ``check_args`` resolves and checks all of them before the
command runs, so a bad path costs milliseconds and nothing is written: the empty string is
refused (it is not "no output", and "" as a directory is the working directory), every
sibling a kind implies is checked like the option itself (``tune --out X.json`` also writes
``X.tune/``), an append never follows a symlink, and two options naming the same file are
refused. A new command (or a new option) adds one line here; ``tests/test_hardening_paths.py``
fails for a path-like option that is not declared.

Output kinds (``OUTPUT_KINDS``):
  file   a result file: replaced atomically; a regular file or a new path (fileio.check_output_file)
  plot   a figure: a file whose suffix is a format matplotlib writes (plots.FIGURE_FORMATS; none = PNG)
  log    a file appended to: a regular file or a new path, never a symlink (fileio.open_append)
  dir    a directory written into: a directory or a new path, never a symlink (fileio.check_output_dir)
  model  a model directory replaced as a whole (fileio.check_model_destination)
  gains  ``tune --out``: X.json and its sibling directory X.tune/, or a directory (tuning.run.tune_paths)
  store  an mlflow tracking store (``--tracking-uri``, else $MLFLOW_TRACKING_URI, else ./mlruns): a
         local path or file:/sqlite: URI is written, so it is checked (links to it are followed: a
         store is configured, not typed per run); a server URI is not ours to check
Input kinds: file (a regular file), dir (a directory), gains (a file, or a directory holding
gains.json), model (a model directory, or a models:/NAME/VERSION reference: its syntax is
checked), scenario (a built-in name, or a .toml file).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..policies.registry import policy_file_flags

__all__ = ["OUTPUTS", "INPUTS", "NOT_PATHS", "OUTPUT_KINDS", "INPUT_KINDS", "PlannedOutput", "planned_outputs",
           "add_mkdir_flags", "command_of", "declared", "option_name", "check_inputs", "check_outputs"]

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
    "agent": {"token_file": "file", "state_dir": "dir"},
}
# Every policy's trained files (``--NAME-FILE``), from the policy registry: a "model" or "gains" file gets
# that kind's check, any other a regular file's.
_POLICY_FILES = {dest: file if file in ("model", "gains") else "file" for dest, (_, file) in policy_file_flags().items()}
_PLANT_FILES = {"dtn_agent_token": "file"}  # the hardware plant's host place: the DTN agents' token files
INPUTS: dict[str, dict[str, str]] = {
    "simulate": {"scenario": "scenario", "model": "model", "gains": "gains", **_PLANT_FILES},
    "scenarios": {"name": "scenario"},
    "identify": {"scenario": "scenario", **_PLANT_FILES},
    "train": {"dataset": "file", "init": "dir"},
    "tune": {"scenario": "scenario", "model": "model"},
    "evaluate": {"scenario": "scenario", "model": "model", "gains": "gains", **_POLICY_FILES, **_PLANT_FILES},
    "reproduce": {"notes": "file"},
    "telemetry replay": {"pcap": "file", "egress_pcap": "file", "ingress_pcap": "file"},
    "control run": {"scenario": "scenario", "model": "model", "gains": "gains", "config": "file", "p4_pipeline": "dir",
                    **_PLANT_FILES},
    "control set-target": {"token_file": "file"},
    "control status": {"token_file": "file"},
    "testbed up": {"scenario": "scenario"},
    "testbed check": {"scenario": "scenario"},
    "leaderboard": {"scenario": "scenario", **_POLICY_FILES},
    "agent": {"config": "file"},
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

_INPUT_NAMES = {"dataset": "dataset", "pcap": "capture", "egress_pcap": "capture", "ingress_pcap": "capture",
                "notes": "notes file", "gains": "gains file", "model": "model directory", "init": "model directory",
                "token_file": "control token file", "dtn_agent_token": "agent token file", "scenario": "scenario file", "name": "scenario file",
                **{dest: f"{name} " + ("model directory" if file == "model" else f"{file} file")
                   for dest, (name, file) in policy_file_flags().items()}}
_MKDIR_FOR = ("out", "plot", "log")


def command_of(args: argparse.Namespace) -> list[str]:
    """The keys a parsed command is declared under: ``["control run", "control"]``, ``["tune"]``."""
    cmd = getattr(args, "command", None) or ""
    sub = next((getattr(args, k) for k in ("control_command", "telemetry_command", "testbed_cmd")
                if getattr(args, k, None)), None)
    return [f"{cmd} {sub}", cmd] if sub else [cmd]


def declared(table: dict[str, dict[str, str]], args: argparse.Namespace) -> dict[str, str]:
    """The entry of ``table`` (OUTPUTS, INPUTS, COUNTS) the parsed command is declared under."""
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


def option_name(attr: str) -> str:
    """The command-line spelling of an argparse attribute: ``token_file`` -> ``--token-file``."""
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
    for attr, kind in declared(OUTPUTS, args).items():
        value = getattr(args, attr, None)
        if kind == "store":
            out += _store_outputs(value)
            continue
        if value is None or (kind == "log" and value == "-"):
            continue
        opt = option_name(attr)
        _not_empty(value, opt)
        p = Path(value)
        if kind == "gains":
            from ..tuning.run import tune_paths

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
    from ..tracking import local_store

    if uri is not None:
        _not_empty(uri, "--tracking-uri")  # "" would silently mean $MLFLOW_TRACKING_URI or ./mlruns
    store = local_store(uri)  # also refuses an unknown scheme, with one line
    if store is None:
        return []
    path, kind = store
    return [PlannedOutput("--tracking-uri" if uri else "the mlflow store", path, f"store_{kind}")]


def _not_empty(value: Any, opt: str) -> None:
    if not isinstance(value, str):
        raise BadInput(f"{opt}: expected a path, got {value!r}")
    if value == "" or not value.strip():
        raise BadInput(f"{opt} {value!r}: empty path (give a file or directory name)")
    if "\x00" in value:
        raise BadInput(f"{opt}: a path cannot contain NUL bytes")


def _check_output(o: PlannedOutput) -> None:
    from .. import fileio

    if o.check == "plot":
        from ..plots import check_figure_path

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
    from .. import fileio

    opt = option_name(attr) if attr not in ("scenario", "name", "dataset", "pcap") else attr.upper()
    what = _INPUT_NAMES.get(attr, attr)
    _not_empty(value, opt)
    if kind == "scenario":
        if _looks_like_path(value) and os.path.lexists(value):
            return [(opt, fileio.check_input_file(value, what))]
        return []
    if kind == "model":
        from ..tracking import check_model_ref, is_model_uri

        if is_model_uri(value):
            check_model_ref(value)
            return []
        kind = "dir"
    p = Path(value)
    if kind == "file" or (kind == "gains" and not p.is_dir()):
        return [(opt, fileio.check_input_file(p, what))]
    if kind in ("dir", "gains") and p.exists() and not p.is_dir():
        raise BadInput(f"{what} {p}: not a directory")
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
            raise BadInput(f"{clash} and {o.option} name the same path {o.path}; give each its own")
        for k in keys:
            seen[k] = o.option
    for opt, p in inputs:
        keys = _identity(p, follow=True)
        clash = next((seen[k] for k in keys if k in seen), None)
        if clash is not None:
            raise BadInput(f"{clash} {p} is also the input {opt}; write the result elsewhere")


def check_inputs(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """Check every declared input of the parsed command; returns the (option, file) pairs it reads."""
    inputs: list[tuple[str, Path]] = []
    for attr, kind in declared(INPUTS, args).items():
        value = getattr(args, attr, None)
        for one in value if isinstance(value, list) else () if value is None else (value,):  # repeatable
            inputs += _check_input(attr, kind, one)
    return inputs


def check_outputs(args: argparse.Namespace, inputs: list[tuple[str, Path]]) -> None:
    """Check every path the parsed command will write (siblings included), then that no two options
    name the same file and no output is one of the ``inputs``."""
    outputs = planned_outputs(args)
    for o in outputs:
        _check_output(o)
    _check_aliases(outputs, inputs)
