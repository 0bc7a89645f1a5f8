"""FFS at the bottleneck, the DTN ingress's fairness-matrix entry = its target (``ffs``).

Flow-fair scheduling (Wyss et al.; the decision core is ``scidmz.disciplines.ffs``).
Our configuration (the paper does not treat a Science DMZ): the fairness-matrix
column ``M = (target, C - target)`` with ``C = capacity_frac x B_max`` (1.0:
FFS-C100, 0.85: FFS-C85 of Table III); labels initialised at the first node (f = r).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...scenario import Scenario
from ..registry import register_policy
from .common import DisciplineShell, shares

__all__ = ["FFSPolicy"]


class FFSPolicy(DisciplineShell):
    """FFS at the bottleneck, the DTN ingress's matrix entry = its target (module docstring)."""

    name = "ffs"

    def __init__(self, capacity_frac: float = 1.0, exact: bool = False) -> None:
        super().__init__()
        if not 0.0 < float(capacity_frac) <= 1.0:
            raise ValueError(f"policy ffs: capacity_frac must be in (0, 1], got {capacity_frac!r}")
        self.capacity_frac = float(capacity_frac)
        self.exact = bool(exact)

    def configure(self, scenario: Scenario) -> Any:
        from ...disciplines.ffs import FFSConfig

        c = self.capacity_frac * scenario.capacity
        return FFSConfig(capacity_bps=c, matrix_col_bps=(c / 2.0, c / 2.0))

    def weights(self, scenario: Scenario, target: np.ndarray) -> np.ndarray:
        return shares(scenario, target, self.capacity_frac * scenario.capacity)


register_policy("ffs", "discipline", FFSPolicy)
