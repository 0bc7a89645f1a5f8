"""The ``Plant`` protocol: the network as a dynamical system y = P(u), Gymnasium-style.

A plant is always batched: it holds B independent instances (different u,
seeds or scenarios of the same shape) and ``step`` advances all of them by
one control period T. A single run is simply B = 1. ``reset``/``step``
return a ``StateBatch`` (the seven Table 3 variables per instance);
``info`` after a step holds the plant's ground truth for that period.

Alignment (ARCHITECTURE.md): ``step(u)`` applies u over [kT, (k+1)T) and
returns y_k measured at the end of that interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..scenario import Scenario
from ..state import N_STATE, STATE_FIELDS, NetworkState

__all__ = ["StateBatch", "Plant", "make_plant", "PLANT_KINDS"]

PLANT_KINDS = ("fluid", "netns", "hardware")


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

    def close(self) -> None: ...

    def __enter__(self) -> Plant: ...

    def __exit__(self, *exc: object) -> None: ...


def make_plant(kind: str, scenario: Scenario, batch: int = 1, **kwargs: Any) -> Plant:
    """Build a plant backend by name; heavy backends are imported only when asked for."""
    if kind == "fluid":
        from .fluid import FluidPlant

        return FluidPlant(scenario, batch=batch, **kwargs)
    if kind == "netns":
        from .netns import NetnsPlant

        if batch != 1:
            raise ValueError("the netns plant runs in real time and supports batch=1 only")
        return NetnsPlant(scenario, **kwargs)
    if kind == "hardware":
        from .hardware import HardwarePlant

        if batch != 1:
            raise ValueError("the hardware plant supports batch=1 only")
        return HardwarePlant(scenario, **kwargs)
    raise ValueError(f"unknown plant '{kind}' (choose from {', '.join(PLANT_KINDS)})")
