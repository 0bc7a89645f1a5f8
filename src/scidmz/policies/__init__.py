"""Policies deciding the campus rate: trivial TBF, no shaping, and (elsewhere) the MLC."""

from __future__ import annotations

from typing import Any

from .base import Policy
from .trivial import NoShapingPolicy, TrivialPolicy

__all__ = ["Policy", "TrivialPolicy", "NoShapingPolicy", "make_policy", "POLICY_NAMES", "split_policy_overrides"]

POLICY_NAMES = ("trivial", "none", "mlc", "jenks", "abc", "ffs")
#: Policies configured with ``--set policy.KEY=VALUE``.
CONFIGURABLE = ("jenks", "abc", "ffs")


def split_policy_overrides(policy: str, overrides: list[str] | None) -> tuple[list[str], dict[str, Any]]:
    """``--set`` items -> (the scenario's, the policy's options): ``policy.KEY=VALUE`` configures the
    policy (e.g. ``policy.queues=4`` for jenks), everything else the scenario. One-line error when
    the policy takes no options."""
    from ..scenario import parse_override

    items = [o.strip() for o in overrides or []]
    scen = [o for o in items if not o.startswith("policy.")]
    opts = dict(parse_override(o[len("policy."):]) for o in items if o.startswith("policy."))
    if opts and policy not in CONFIGURABLE:
        raise ValueError(f"policy '{policy}' takes no policy.* options (got {', '.join(sorted(opts))})")
    return scen, opts


def make_policy(name: str, **kwargs: Any) -> Policy:
    """Build a policy by name. ``mlc`` needs ``model=`` and ``gains=`` (paths or objects)."""
    if name == "trivial":
        return TrivialPolicy()
    if name == "none":
        return NoShapingPolicy()
    if name == "mlc":
        from ..controller.mlc import MLCPolicy

        return MLCPolicy.from_paths(**kwargs)
    if name == "jenks":
        from .jenks import JenksParams, JenksPolicy

        try:
            params = JenksParams(**kwargs)
        except TypeError:
            known = ", ".join(JenksParams.__dataclass_fields__)
            raise ValueError(f"policy jenks: unknown option among {sorted(kwargs)} (options: {known})") from None
        return JenksPolicy(params)
    if name in ("abc", "ffs"):
        from .discipline import ABCPolicy, FFSPolicy

        cls = ABCPolicy if name == "abc" else FFSPolicy
        try:
            return cls(**kwargs)
        except TypeError:
            raise ValueError(f"policy {name}: unknown option among {sorted(kwargs)}") from None
    raise ValueError(f"unknown policy '{name}' (choose from {', '.join(POLICY_NAMES)})")
