"""The ``Policy`` protocol: decide the campus rate u(t) from the history and the DTN target.

Policies are batched like plants: ``decide`` gets a ``History`` over B
instances and a target per instance, and returns B rates in bit/s. The MLC,
the trivial TBF baseline and every other policy implement it, so every
experiment runs any policy on any plant.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ..scenario import Scenario
from ..state import History

__all__ = ["Policy"]


@runtime_checkable
class Policy(Protocol):
    name: str

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        """Forget any internal state before a new episode of ``batch`` instances."""
        ...

    def decide(self, history: History, target: np.ndarray) -> np.ndarray:
        """Return u (shape (B,), bit/s) to apply over the next period."""
        ...
