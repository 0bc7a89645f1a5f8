"""A command's options from a TOML file (``control run --config FILE``): the same names, flags win.

A service is configured by a file, not by a long ``ExecStart=`` line. The
file holds the command's own options under their long names (``token-file``
or ``token_file``), typed as TOML types::

    scenario = "testbed"
    plant = "hardware"
    telemetry = "ebpf:eth1,eth0"
    dev = "eth1"
    target = "600M"
    set = ["link.capacity=1G"]          # repeatable flags are lists
    shadow = true

``config_spec(parser)`` reads the options' kinds from the parser (repeatable,
on/off, integer, text) and makes every default None, so that
``apply_config`` can tell a flag given on the command line (it wins) from
one left out (the file's value, else the built-in default). Repeatable flags
add up, the file's first: ``--set`` given on the command line overrides the
file's setting of the same key. A key the command does not have, or a value
of the wrong type, is one line naming the key (exit 2).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["ConfigOption", "config_spec", "apply_config"]


@dataclass(frozen=True)
class ConfigOption:
    """One option a config file may set: its kind (``list | bool | int | str``) and built-in default."""

    kind: str
    default: Any


def _kind(action: argparse.Action) -> str:
    if isinstance(action, argparse._AppendAction):
        return "list"
    if isinstance(action, argparse._StoreTrueAction):
        return "bool"
    if action.type is int:
        return "int"
    return "str"


def config_spec(parser: argparse.ArgumentParser, exclude: Iterable[str] = ()) -> dict[str, ConfigOption]:
    """The options of ``parser`` a file may set (all but ``exclude`` and help); their defaults become
    None in the parser, so a flag left out is told from a flag given."""
    skip = {"help", *exclude}
    spec: dict[str, ConfigOption] = {}
    for action in parser._actions:
        if action.dest in skip or action.dest == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        spec[action.dest] = ConfigOption(_kind(action), action.default)
        parser.set_defaults(**{action.dest: None})
    return spec


def _typed(key: str, value: Any, kind: str, where: str) -> Any:
    if kind == "list":
        if isinstance(value, dict):  # set = { "dtn.cca" = "bbr" }
            value = [f"{k}={_text(key, v, where)}" for k, v in value.items()]
        if not isinstance(value, list):
            raise ValueError(f"{where}: '{key}' must be a list of strings, e.g. {key} = [\"KEY=VALUE\"]")
        return [_text(key, v, where) for v in value]
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{where}: '{key}' must be true or false, got {value!r}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: '{key}' must be an integer, got {value!r}")
        return value
    return _text(key, value, where)


def _text(key: str, value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{where}: '{key}' must be a string or a number, got {value!r}")
    return str(value)


def read_config(path: str, spec: dict[str, ConfigOption]) -> dict[str, Any]:
    """The file's options, checked against ``spec`` (one line naming the first bad key)."""
    from ..fileio import parse_toml, read_text_input

    where = f"config {path}"
    # parse_toml pre-scans the document (depth, keys, dotted-key parts, key length) before tomllib
    # builds it: a 60 kB file of long dotted keys took tomllib 3.5 GB.
    data = parse_toml(read_text_input(path, "config file", max_bytes=1 << 20), where)
    out: dict[str, Any] = {}
    for key, value in data.items():
        dest = key.replace("-", "_")
        if dest not in spec:
            raise ValueError(f"{where}: unknown key '{key}' (keys: "
                             f"{', '.join(sorted(k.replace('_', '-') for k in spec))})")
        out[dest] = _typed(key, value, spec[dest].kind, where)
    return out


def apply_config(a: argparse.Namespace, spec: dict[str, ConfigOption], path: str | None) -> argparse.Namespace:
    """Fill ``a``: each option from the command line if given, else from the file at ``path``, else
    its built-in default; repeatable options are the file's then the command line's."""
    file = read_config(path, spec) if path else {}
    for dest, opt in spec.items():
        cli = getattr(a, dest, None)
        if opt.kind == "list":
            setattr(a, dest, [*file.get(dest, []), *(cli or [])] or (opt.default or []))
        elif cli is None:
            setattr(a, dest, file.get(dest, opt.default))
    return a
