"""The four policy kinds of ARCHITECTURE.md ("Four places to act, four policy kinds, one runner").

An admin can serve the DTN in four places; each is a kind of policy with its own
``Protocol`` here, and each kind needs a plant capability (``plant.base``) to be
applied:

| kind | decides | plant capability |
|---|---|---|
| ``rate`` (``RatePolicy``) | u, the campus uplink rate, every T | every ``Plant`` (``step(u)``) |
| ``host`` (``HostPolicy``) | the DTN streams' pacing rate, every T | ``HostPlant.set_pacing`` |
| ``queue`` (``QueuePolicy``) | K queues and flow -> queue rules, every epoch | ``QueuePlant.flows/apply_queues`` |
| ``discipline`` (``DisciplinePolicy``) | per packet, inside the bottleneck | ``DisciplinePlant`` |

Every policy has a ``name`` (its registry name), a ``kind`` (one of
``POLICY_KINDS``) and ``reset(scenario, batch)``; what it decides and how the
episode runner (``scidmz.runner.Episode``) applies it depends on the kind.
Everything is batched over B plant instances: targets are (B,) bit/s.

A *configuration* (``scidmz.policies.configuration``) runs several policies at
once, at most one per kind; ``policy_places`` reads any policy's members by
place, so the runner, the conformance suite and the evaluation treat a single
policy and a configuration alike.

These protocols sit at the bottom layer so that the runner (below ``policies/``)
and the conformance suite can name them; policy authors import them from
``scidmz.policies.base``, which re-exports them.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

import numpy as np

from .scenario import Scenario
from .state import History

__all__ = ["POLICY_KINDS", "PolicyKind", "RatePolicy", "HostPolicy", "QueuePolicy", "DisciplinePolicy", "Policy",
           "policy_places"]

PolicyKind: TypeAlias = Literal["rate", "host", "queue", "discipline"]
POLICY_KINDS: tuple[PolicyKind, ...] = ("rate", "host", "queue", "discipline")


@runtime_checkable
class RatePolicy(Protocol):
    """Decides u(t), the campus uplink rate, every T (``trivial``, ``none``, ``mlc``).

    The runner checks the proposal (one line on a non-finite value), clips it to
    the scenario's [u_min, u_max] and hands it to ``plant.step(u)``.
    """

    name: str
    kind: Literal["rate"]

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        """Forget any internal state before a new episode of ``batch`` instances."""
        ...

    def decide(self, history: History, target: np.ndarray) -> np.ndarray:
        """u (shape (B,), bit/s) to apply over the next period."""
        ...


@runtime_checkable
class HostPolicy(Protocol):
    """Paces the DTN's own streams every T (``SO_MAX_PACING_RATE`` on its sockets).

    ``decide`` returns the DTN's pacing rate per instance: the aggregate over its
    streams, in bit/s (the plant spreads it over the streams). ``campus_rate``
    is the campus uplink rate u the policy keeps meanwhile (e.g. the shaper
    wide open, u_max); the runner applies the pacing through
    ``plant.set_pacing`` and u through ``plant.step``.
    """

    name: str
    kind: Literal["host"]

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        """Forget any internal state before a new episode of ``batch`` instances."""
        ...

    def decide(self, history: History, target: np.ndarray) -> np.ndarray:
        """The DTN's pacing rate (shape (B,), bit/s) for the next period."""
        ...

    def campus_rate(self, scenario: Scenario, target: np.ndarray) -> np.ndarray:
        """u (shape (B,), bit/s), the campus uplink rate kept while the DTN is paced."""
        ...


@runtime_checkable
class QueuePolicy(Protocol):
    """Decides K queues (rate, ceil, buffer) and flow -> queue rules every epoch (``jenks``).

    The runner reads the plant's per-flow table (``plant.flows()``), hands it to
    ``decide`` and loads the result with ``plant.apply_queues``; the campus shaper
    stays open (u_max): the queues share the uplink.
    """

    name: str
    kind: Literal["queue"]

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        """Forget any internal state before a new episode of ``batch`` instances."""
        ...

    def decide(self, history: History, target: np.ndarray, flows: Any) -> Any:
        """One ``QueueConfig`` per instance (a list) for the next epoch, from ``flows`` (``plant.flows()``)."""
        ...


@runtime_checkable
class DisciplinePolicy(Protocol):
    """A per-packet decision inside the bottleneck, configured from the scenario and the target.

    ``abc``, ``ffs``. The runner loads ``configure(scenario)`` into the plant
    before its reset (``plant.set_discipline``) and, every period, the
    per-aggregate weights the target implies (``plant.set_discipline_weights``);
    the campus shaper stays open (u_max).
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


#: Any policy, whatever its kind (the runner dispatches on ``policy.kind``).
Policy: TypeAlias = RatePolicy | HostPolicy | QueuePolicy | DisciplinePolicy


def policy_places(policy: Any) -> dict[str, Any]:
    """A policy's members by place: a configuration's ``members`` (kind -> policy, canonical order),
    else ``{policy.kind: policy}`` (the kind unchecked: ``runner.check_runnable`` checks it)."""
    members = getattr(policy, "members", None)
    if isinstance(members, dict):
        return dict(members)
    return {getattr(policy, "kind", None): policy}
