"""Every policy by name and kind: ``register_policy(name, kind, factory)``, ``make_policy(name, **options)``.

As plants have ``plant.base.register_plant``: a policy module registers its
factory with one line at its end, and ``make_policy`` builds it by name. A
factory's keyword parameters are the policy's options, found by signature
inspection (``--set policy.KEY=VALUE`` on the command line); an unknown name, an
unknown option or a missing required one is a one-line ``ValueError`` listing
the choices, never a ``TypeError`` from inside a constructor.

A policy that runs from trained files (a model directory, a gains file) also
registers their resolver: ``register_policy(name, kind, factory, files=resolve)``,
where ``resolve(scenario, *, NAME=None, ...)`` returns ``{NAME: path}`` for the
files given (None: the ones shipped for the scenario), checked, and each NAME is
a factory option. ``policy_files(name)`` lists the NAMEs; the commands read it
for their per-policy flags (``--NAME-FILE``, e.g. ``--pi-gains``), the path
checks and the assembly (``commands.build.trained_files``). No other module
keeps a list of policies or of their files.

The built-ins are listed below as module paths, not classes, so importing this
module imports no policy (``scidmz --help`` stays instant); a built-in's module
is imported the first time it is asked for, and its registration must agree
with the kind and file names listed here. This module imports nothing beyond
the standard library at load time.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = ["register_policy", "make_policy", "policy_names", "policy_kind", "policy_options",
           "split_policy_overrides", "policy_files", "resolve_policy_files", "policy_file_flags",
           "ranked_policies", "policies_with_file"]


@dataclass(frozen=True)
class _Entry:
    kind: str
    factory: Callable[..., Any]
    files: Callable[..., dict[str, str]] | None = None
    ranked: bool = True


_REGISTRY: dict[str, _Entry] = {}


class _Builtin(NamedTuple):
    kind: str
    module: str
    files: tuple[str, ...] = ()
    ranked: bool = True


#: name -> (kind, module that registers it, its trained files, ranked by default). Modules, not
#: classes: nothing is imported until asked for; the file names are here so the commands' flags
#: need no import. In the order the leaderboard ranks them by default.
_BUILTIN: dict[str, _Builtin] = {
    "trivial": _Builtin("rate", "scidmz.policies.rate.trivial"),
    "pi": _Builtin("rate", "scidmz.policies.rate.pi", ("gains",)),
    "pacing": _Builtin("host", "scidmz.policies.host.pacing"),
    "mlc": _Builtin("rate", "scidmz.policies.rate.mlc", ("model", "gains")),
    "jenks": _Builtin("queue", "scidmz.policies.queue.jenks"),
    "abc": _Builtin("discipline", "scidmz.policies.discipline.abc"),
    "ffs": _Builtin("discipline", "scidmz.policies.discipline.ffs"),
    # No shaping at all: a reference for the studies, not a way of serving the DTN.
    "none": _Builtin("rate", "scidmz.policies.rate.trivial", ranked=False),
}


def register_policy(name: str, kind: str, factory: Callable[..., Any],
                    files: Callable[..., dict[str, str]] | None = None, *, ranked: bool = True) -> None:
    """Make ``factory(**options)`` available as ``make_policy(name, **options)``.

    ``kind`` is one of ``scidmz.kinds.POLICY_KINDS``; the factory's keyword
    parameters are the policy's options. ``files``: the resolver of the policy's
    trained files, ``files(scenario, *, NAME=None, ...) -> {NAME: path}`` (given
    paths, or the ones shipped for the scenario; one-line error if none or
    unreadable); each NAME must be a factory option. ``ranked``: a way of serving
    the DTN, which ``scidmz leaderboard`` runs by default (``ranked_policies``).
    """
    from ..kinds import POLICY_KINDS  # numpy: only once a policy module registers

    if kind not in POLICY_KINDS:
        raise ValueError(f"policy '{name}': unknown kind '{kind}' (choose from {', '.join(POLICY_KINDS)})")
    builtin = _BUILTIN.get(name)
    if builtin is not None and builtin[0] != kind:
        raise ValueError(f"policy '{name}' is the built-in {builtin[0]} policy; a {kind} policy needs another name")
    if not callable(factory):
        raise TypeError(f"policy '{name}': factory must be callable, got {factory!r}")
    names = _file_names(files)
    if builtin is not None and (names, ranked) != (builtin.files, builtin.ranked):
        raise ValueError(f"policy '{name}': its files {names} or ranking differ from the built-in's")
    missing = [n for n in names if n not in inspect.signature(factory).parameters]
    if missing:
        raise ValueError(f"policy '{name}': trained file '{missing[0]}' is not an option of its factory")
    _REGISTRY[name] = _Entry(kind, factory, files, ranked)


def _file_names(files: Callable[..., Any] | None) -> tuple[str, ...]:
    if files is None:
        return ()
    return tuple(n for n, p in inspect.signature(files).parameters.items() if p.kind is p.KEYWORD_ONLY)


def policy_files(name: str) -> tuple[str, ...]:
    """The trained files policy ``name`` runs from (factory options, e.g. ``("model", "gains")``); () for
    none. Imports nothing for a built-in; one-line ValueError if unknown."""
    if name in _REGISTRY:
        return _file_names(_REGISTRY[name].files)
    if name in _BUILTIN:
        return _BUILTIN[name].files
    raise ValueError(f"unknown policy '{name}' (choose from {', '.join(policy_names())})")


def ranked_policies() -> tuple[str, ...]:
    """The policies ``scidmz leaderboard`` runs by default: every registered way of serving the DTN."""
    return tuple(n for n in policy_names()
                 if (_REGISTRY[n].ranked if n in _REGISTRY else _BUILTIN[n].ranked))


def policies_with_file(file: str) -> tuple[str, ...]:
    """The policies that run from a trained file named ``file`` (e.g. ``gains``: those ``scidmz tune`` tunes)."""
    return tuple(n for n in policy_names() if file in policy_files(n))


def policy_file_flags() -> dict[str, tuple[str, str]]:
    """Every policy's trained files as command-line options: argparse dest (``NAME_FILE``, the flag
    ``--NAME-FILE``, e.g. ``pi_gains``) -> (policy, file). Imports no policy."""
    return {f"{n}_{f}".replace("-", "_"): (n, f) for n in policy_names() for f in policy_files(n)}


def resolve_policy_files(name: str, scenario: Any, **given: str | None) -> dict[str, str]:
    """Policy ``name``'s trained files on ``scenario`` as factory options: ``given`` ones (None: not
    given) or those shipped for it, by the policy's own resolver. A file the policy does not run
    from is one line naming the policies that do; a policy without files gives {}."""
    names = policy_files(name)
    extra = [k for k, v in given.items() if v and k not in names]
    if extra:
        takers = [n for n in policy_names() if extra[0] in policy_files(n)]
        raise ValueError(f"policy {name} takes no --{extra[0]} (only {' and '.join(takers) or 'none'} run from "
                         f"one)")
    if not names:
        return {}
    resolve = _entry(name).files
    return {} if resolve is None else resolve(scenario, **{k: given.get(k) or None for k in names})


def policy_names(kind: str | None = None) -> tuple[str, ...]:
    """Built-in and registered policy names (built-ins first), optionally of one kind only."""
    names = dict.fromkeys([*_BUILTIN, *_REGISTRY])
    return tuple(n for n in names if kind is None or policy_kind(n) == kind)


def policy_kind(name: str) -> str:
    """The kind of policy ``name`` (no import for a built-in); one-line ValueError if unknown."""
    if name in _REGISTRY:
        return _REGISTRY[name].kind
    if name in _BUILTIN:
        return _BUILTIN[name][0]
    raise ValueError(f"unknown policy '{name}' (choose from {', '.join(policy_names())})")


def _entry(name: str) -> _Entry:
    if name not in _REGISTRY and name in _BUILTIN:
        importlib.import_module(_BUILTIN[name][1])
        if name not in _REGISTRY:
            raise RuntimeError(f"module {_BUILTIN[name][1]} did not register policy '{name}'")
    entry = _REGISTRY.get(name)
    if entry is None:
        raise ValueError(f"unknown policy '{name}' (choose from {', '.join(policy_names())})")
    return entry


def policy_options(name: str) -> dict[str, inspect.Parameter]:
    """The options of policy ``name``: its factory's named parameters (imports a built-in's module)."""
    sig = inspect.signature(_entry(name).factory)
    return {n: p for n, p in sig.parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def make_policy(name: str, **options: Any) -> Any:
    """Build policy ``name`` with ``options``; one-line ValueError for an unknown name or option."""
    entry = _entry(name)
    known = policy_options(name)
    _check_options(name, known, options, "options")
    missing = [k for k, p in known.items() if p.default is p.empty and k not in options]
    if missing:
        raise ValueError(f"policy '{name}' needs {', '.join(missing)}")
    return entry.factory(**options)


def split_policy_overrides(policy: str, overrides: list[str] | None) -> tuple[list[str], dict[str, Any]]:
    """``--set`` items -> (the scenario's, the policy's options).

    ``policy.KEY=VALUE`` configures the policy (e.g. ``policy.queues=4`` for
    jenks), everything else the scenario. One-line error for an unknown policy
    or an option it does not take.
    """
    from ..scenario import parse_override

    items = [o.strip() for o in overrides or []]
    scen = [o for o in items if not o.startswith("policy.")]
    opts = dict(parse_override(o[len("policy."):]) for o in items if o.startswith("policy."))
    if opts:
        _check_options(policy, policy_options(policy), opts, "policy.* options")
    else:
        policy_kind(policy)  # an unknown name is one line here too
    return scen, opts


def _check_options(name: str, known: dict[str, inspect.Parameter], given: dict[str, Any], what: str) -> None:
    if given and not known:
        raise ValueError(f"policy '{name}' takes no {what} (got {', '.join(sorted(given))})")
    unknown = [k for k in given if k not in known]
    if unknown:
        raise ValueError(f"policy '{name}': unknown option '{unknown[0]}' (options: {', '.join(known)})")
