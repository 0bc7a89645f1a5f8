"""The three policy kinds of ARCHITECTURE.md ("Three kinds of policy, one runner").

- ``Policy`` (rate policy): decides u(t), the campus uplink rate, every T from
  the history and the DTN target; applied by a ``RateActuator``. Batched like
  plants: ``decide`` gets a ``History`` over B instances and a target per
  instance and returns B rates in bit/s (``trivial``, ``mlc``).
- ``QueuePolicy``: decides K queues (rate, ceil, buffer) and flow -> queue
  rules every epoch from the history, the target and the per-flow table
  (``plant.flows()``); returns a ``QueueConfig`` that the plant's
  ``QueueActuator`` applies as one batch (``jenks``).
- ``BottleneckDiscipline``: decides per packet inside the bottleneck (drop or
  forward); configured once from the scenario and the target, then run by the
  plant (fluid kernel, data-path stage, P4 program) (``droptail``, ``abc``,
  ``ffs``).

The episode runner (``scidmz.runner``) runs a rate or a queue policy on any
plant; a discipline is part of the plant's configuration.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from ..scenario import Scenario
from ..state import History

__all__ = ["Policy", "QueuePolicy", "BottleneckDiscipline"]


@runtime_checkable
class Policy(Protocol):
    name: str

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        """Forget any internal state before a new episode of ``batch`` instances."""
        ...

    def decide(self, history: History, target: np.ndarray) -> np.ndarray:
        """Return u (shape (B,), bit/s) to apply over the next period."""
        ...


@runtime_checkable
class QueuePolicy(Protocol):
    """Decides a ``QueueConfig`` each epoch; the runner hands it to ``plant.apply_queues``."""

    name: str
    kind: Literal["queue"]

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        """Forget any internal state before a new episode of ``batch`` instances."""
        ...

    def decide(self, history: History, target: np.ndarray, flows: Any) -> Any:
        """Return the ``QueueConfig`` (queues and flow -> queue rules) for the next epoch.

        ``flows`` is the plant's per-flow table (``plant.flows()``).
        """
        ...


@runtime_checkable
class BottleneckDiscipline(Protocol):
    """A per-packet decision inside the bottleneck, configured from the scenario and the target.

    The runner loads ``configure(scenario)`` into the plant before its reset
    (``plant.set_discipline``) and, every period, the per-aggregate weights the
    admin's target implies (``plant.set_discipline_weights``); the shaper stays
    open (u_max).
    """

    name: str
    kind: Literal["discipline"]

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        """Forget any internal state before a new episode of ``batch`` instances."""
        ...

    def configure(self, scenario: Scenario) -> Any:
        """The discipline configuration the plant loads (``ABCConfig`` / ``FFSConfig``)."""
        ...

    def weights(self, scenario: Scenario, target: np.ndarray) -> np.ndarray:
        """(B, aggregates) bit/s for the next period: ABC reference rates / FFS matrix column."""
        ...
