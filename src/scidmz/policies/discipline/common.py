"""What the ABC and FFS policies share: the per-aggregate shares of the target, the policy shell.

Our choice (the papers do not treat a Science DMZ): each share is kept at >= 1 %
of the link so a target at an edge never gives an aggregate weight 0 (an FFS
entry of 0 would starve it for good).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ...scenario import Scenario

__all__ = ["DisciplineShell", "shares", "MIN_SHARE"]

MIN_SHARE = 0.01


def shares(scenario: Scenario, target: np.ndarray, capacity: float) -> np.ndarray:
    """(B, 2) bit/s: the DTN's share of ``capacity`` by its target (aggregate 0), the rest (1)."""
    t = np.clip(np.asarray(target, dtype=np.float64) / scenario.capacity, MIN_SHARE, 1.0 - MIN_SHARE)
    return np.column_stack([t * capacity, (1.0 - t) * capacity])


class DisciplineShell:
    """``kind``, ``reset`` and ``repr`` of a discipline policy; subclasses add ``configure``/``weights``."""

    kind: Literal["discipline"] = "discipline"
    name = "discipline"

    def __init__(self) -> None:
        self._batch = 1

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        self._batch = int(batch)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
