"""The ``Plant`` protocol: the network as a dynamical system y = P(u), Gymnasium-style.

A plant is always batched: it holds B independent instances (different u,
seeds or scenarios of the same shape) and ``step`` advances all of them by
one control period T. A single run is simply B = 1. ``reset``/``step``
return a ``StateBatch`` (the seven Table 3 variables per instance);
``info`` after a step holds the plant's ground truth for that period.

Alignment (ARCHITECTURE.md): ``step(u)`` applies u over [kT, (k+1)T) and
returns y_k measured at the end of that interval.

Beyond ``step(u)`` (the campus rate, which every plant applies), a plant
declares what else it can act on by implementing a capability ``Protocol``:
``QueuePlant`` (K queues and flow rules: queue policies), ``DisciplinePlant``
(a per-packet discipline inside the bottleneck: discipline policies) and
``HostPlant`` (the DTN's own pacing: host policies). The episode runner checks
the policy's kind against them once, when an episode is built
(``plant_capabilities``); ``scidmz.conformance.check_plant`` checks that a
plant really implements what it declares.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..scenario import Scenario
from ..state import N_STATE, STATE_FIELDS, NetworkState

# The registry is its own stdlib-only module, so that the command line's help lists the plants
# without importing numpy; it is re-exported here, where the plant protocol lives.
from .registry import (
    DEFAULT_PLANT,
    PLANT_KINDS,
    PlantSpec,
    check_batch_flows,
    check_plant_options,
    make_plant,
    plant_entry,
    plant_names,
    plant_spec,
    register_plant,
)

__all__ = ["StateBatch", "Plant", "QueuePlant", "DisciplinePlant", "HostPlant", "UnmeasuredPlant", "ValiditySource",
           "plant_capabilities",
           "CAPABILITIES", "capability_methods", "FLOW_COLUMNS", "FlowTable", "make_plant", "register_plant",
           "check_plant_options", "check_batch_flows", "PLANT_KINDS", "PlantSpec", "plant_spec", "plant_entry",
           "plant_names", "DEFAULT_PLANT"]

#: The columns every plant's per-flow table has (``Plant.flows()``): the 5-tuple, the
#: current RTT (s, includes the bottleneck queue; NaN without a sample), the rate over the
#: last period (bit/s) and the long-flow flag. Plants may add more (``min_rtt``, ``role``,
#: ``bytes``, ``name``, ...).
FLOW_COLUMNS: tuple[str, ...] = ("src", "dst", "sport", "dport", "proto", "rtt", "rate", "long_flow")

#: One instance's flow table: column name -> equal-length sequence (``FLOW_COLUMNS`` at least).
FlowTable = Mapping[str, Sequence[Any]]

@dataclass(frozen=True)
class StateBatch:
    """y(t) for B plant instances: ``t`` (s) and ``y`` of shape (B, 7) in Table 3 order."""

    t: float
    y: np.ndarray

    def __post_init__(self) -> None:
        if self.y.ndim != 2 or self.y.shape[1] != N_STATE:
            raise ValueError(f"StateBatch.y must have shape (B, {N_STATE}), got {self.y.shape}")

    @property
    def batch(self) -> int:
        return self.y.shape[0]

    def __getitem__(self, i: int) -> NetworkState:
        return NetworkState.from_vector(self.t, self.y[i])

    def column(self, name: str) -> np.ndarray:
        return self.y[:, STATE_FIELDS.index(name)]


@runtime_checkable
class Plant(Protocol):
    """What every backend (fluid, netns, hardware) provides."""

    scenario: Scenario
    batch: int

    @property
    def period(self) -> float: ...

    def reset(self, seed: int | None = None) -> StateBatch:
        """Start a new episode; instance i uses seed + i (or its own scenario seed)."""
        ...

    def step(self, u: np.ndarray | float) -> StateBatch:
        """Apply campus rate(s) u (bit/s, shape (B,) or scalar) for one period T."""
        ...

    @property
    def info(self) -> dict[str, Any]:
        """Ground truth of the last step (per-class bytes delivered/lost, finished flows...)."""
        ...

    def flows(self) -> list[FlowTable]:
        """The per-flow table of each instance (B of them) as of the last step, ``FLOW_COLUMNS`` at least.

        A plant that sees no flows returns B empty tables (every column of length 0).
        """
        ...

    def close(self) -> None:
        """Release everything the plant made (safe to call twice)."""
        ...

    def __enter__(self) -> Plant: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class QueuePlant(Plant, Protocol):
    """A plant whose bottleneck has K queues a queue policy configures (``QueueActuator``)."""

    def flows(self) -> list[FlowTable]: ...

    def apply_queues(self, configs: Any) -> None:
        """Load one ``QueueConfig`` per instance (a list), or one for all, before the next step."""
        ...


@runtime_checkable
class DisciplinePlant(Plant, Protocol):
    """A plant that runs a per-packet discipline inside its bottleneck (ABC, FFS)."""

    def set_discipline(self, config: Any) -> None:
        """Run the discipline ``config`` (``ABCConfig`` / ``FFSConfig``; None: none) from the next reset."""
        ...

    def set_discipline_weights(self, weights: np.ndarray) -> None:
        """Per-aggregate weights (B, aggregates) bit/s for the next step."""
        ...


@runtime_checkable
class HostPlant(Plant, Protocol):
    """A plant that paces the DTN's own streams (``SO_MAX_PACING_RATE`` on its sockets)."""

    def set_pacing(self, rates: np.ndarray) -> None:
        """The DTN's aggregate pacing rate per instance, (B,) bit/s, from the next step on."""
        ...


@runtime_checkable
class UnmeasuredPlant(Plant, Protocol):
    """A plant whose telemetry passes some packets on without measuring them (the eBPF programs:
    tunnels, too-deep header stacks, parse failures) and counts them."""

    def unmeasured(self) -> dict[str, int]:
        """Packets passed on unmeasured since the plant was built, by reason (cumulative; {}: none)."""
        ...


class ValiditySource(Protocol):
    """Signals of the machine a real-time plant runs on, which no policy moves: what a leaderboard judges
    a trial's validity by (``evaluation.leaderboard.validity``). A plant that records them exposes one
    as ``validity_signals`` (the netns plant: ``plant.netns.manage.validity``; a deterministic plant has
    none). Each value is a number, or None where the source could not read it (never guessed)."""

    def probe(self) -> dict[str, Any]:
        """A short calibration of the testbed between episodes (e.g. ``probe_service``)."""
        ...

    def begin(self) -> None:
        """Start measuring an episode."""
        ...

    def end(self) -> dict[str, Any]:
        """The signals since ``begin`` (e.g. ``cpu_pressure``, ``stage_late_mean_s``)."""
        ...


#: Policy kind -> the capability Protocol a plant needs to run it (rate: every plant).
CAPABILITIES: dict[str, type] = {"host": HostPlant, "queue": QueuePlant, "discipline": DisciplinePlant}


def capability_methods(proto: type) -> tuple[str, ...]:
    """The methods a capability Protocol adds (its own public methods, e.g. ``flows``, ``apply_queues``)."""
    return tuple(n for n, v in vars(proto).items() if not n.startswith("_") and callable(v))


def plant_capabilities(plant: Any) -> tuple[str, ...]:
    """The policy kinds ``plant`` can run: ``rate`` always, then each kind whose capability
    Protocol it implements. Checked once per episode by the runner.

    Only the capability's methods are looked up: ``isinstance`` on a runtime Protocol
    would also evaluate properties such as ``info``, which a plant may only have after
    ``reset``.
    """
    return ("rate", *(kind for kind, proto in CAPABILITIES.items()
                      if all(callable(getattr(plant, m, None)) for m in capability_methods(proto))))
