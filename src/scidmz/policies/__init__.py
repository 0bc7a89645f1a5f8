"""Policies deciding the campus rate: trivial TBF, no shaping, and (elsewhere) the MLC."""

from __future__ import annotations

from typing import Any

from .base import Policy
from .trivial import NoShapingPolicy, TrivialPolicy

__all__ = ["Policy", "TrivialPolicy", "NoShapingPolicy", "make_policy", "POLICY_NAMES"]

POLICY_NAMES = ("trivial", "none", "mlc", "jenks", "abc", "ffs")


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
