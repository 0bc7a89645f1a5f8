"""Every policy by name and kind: ``register_policy(name, kind, factory)``, ``make_policy(name, **options)``.

As plants have ``plant.base.register_plant``: a policy module registers its
factory with one line at its end, and ``make_policy`` builds it by name. A
factory's keyword parameters are the policy's options, found by signature
inspection (``--set policy.KEY=VALUE`` on the command line); an unknown name, an
unknown option or a missing required one is a one-line ``ValueError`` listing
the choices, never a ``TypeError`` from inside a constructor.

The built-ins are listed below as module paths, not classes, so importing this
module imports no policy (``scidmz --help`` stays instant); a built-in's module
is imported the first time it is asked for. This module imports nothing beyond
the standard library at load time.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["register_policy", "make_policy", "policy_names", "policy_kind", "policy_options",
           "split_policy_overrides"]


@dataclass(frozen=True)
class _Entry:
    kind: str
    factory: Callable[..., Any]


_REGISTRY: dict[str, _Entry] = {}

#: name -> (kind, module that registers it). Modules, not classes: nothing is imported until asked for.
_BUILTIN: dict[str, tuple[str, str]] = {
    "trivial": ("rate", "scidmz.policies.rate.trivial"),
    "none": ("rate", "scidmz.policies.rate.trivial"),
    "pi": ("rate", "scidmz.policies.rate.pi"),
    "mlc": ("rate", "scidmz.policies.rate.mlc"),
    "pacing": ("host", "scidmz.policies.host.pacing"),
    "jenks": ("queue", "scidmz.policies.queue.jenks"),
    "abc": ("discipline", "scidmz.policies.discipline.abc"),
    "ffs": ("discipline", "scidmz.policies.discipline.ffs"),
}


def register_policy(name: str, kind: str, factory: Callable[..., Any]) -> None:
    """Make ``factory(**options)`` available as ``make_policy(name, **options)``.

    ``kind`` is one of ``scidmz.kinds.POLICY_KINDS``; the factory's keyword
    parameters are the policy's options.
    """
    from ..kinds import POLICY_KINDS  # numpy: only once a policy module registers

    if kind not in POLICY_KINDS:
        raise ValueError(f"policy '{name}': unknown kind '{kind}' (choose from {', '.join(POLICY_KINDS)})")
    builtin = _BUILTIN.get(name)
    if builtin is not None and builtin[0] != kind:
        raise ValueError(f"policy '{name}' is the built-in {builtin[0]} policy; a {kind} policy needs another name")
    if not callable(factory):
        raise TypeError(f"policy '{name}': factory must be callable, got {factory!r}")
    _REGISTRY[name] = _Entry(kind, factory)


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
