"""Baselines of the MLC paper's comparison scenario (section 3.7).

``TrivialPolicy`` (``trivial``): the fixed TBF a campus administrator would set,
u = B_max - R*_DTN(t). ``NoShapingPolicy`` (``none``): the shaper wide open (u = u_max).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ...scenario import Scenario
from ...state import History
from ..registry import register_policy

__all__ = ["TrivialPolicy", "NoShapingPolicy"]


class TrivialPolicy:
    """u(t) = B_max - R*_DTN(t), clipped to the shaper's [u_min, u_max] (MLC section 3.7)."""

    name = "trivial"
    kind: Literal["rate"] = "rate"

    def __init__(self) -> None:
        self._scenario: Scenario | None = None

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        self._scenario = scenario

    def decide(self, history: History, target: np.ndarray) -> np.ndarray:
        s = self._need()
        return np.clip(s.link.capacity - np.asarray(target, dtype=np.float64), s.u_min, s.u_max)

    def _need(self) -> Scenario:
        if self._scenario is None:
            raise RuntimeError(f"policy '{self.name}' used before reset(scenario)")
        return self._scenario


class NoShapingPolicy(TrivialPolicy):
    """No campus shaping: the TBF rate stays at its maximum."""

    name = "none"

    def decide(self, history: History, target: np.ndarray) -> np.ndarray:
        s = self._need()
        return np.full(history.batch, s.u_max)


register_policy("trivial", "rate", TrivialPolicy)
register_policy("none", "rate", NoShapingPolicy, ranked=False)
