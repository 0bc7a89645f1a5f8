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

__all__ = ["StateBatch", "Plant", "make_plant", "register_plant", "PLANT_KINDS"]

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


@dataclass(frozen=True)
class _Backend:
    cls: type
    max_batch: int | None


_REGISTRY: dict[str, _Backend] = {}

#: Where each built-in backend lives; importing the module registers it. This
#: table names modules, not classes, so ``scidmz --help`` imports no backend.
_BUILTIN_MODULES = {
    "fluid": "scidmz.plant.fluid.plant",
    "netns": "scidmz.plant.netns.plant",
    "hardware": "scidmz.plant.hardware",
}
PLANT_KINDS = tuple(_BUILTIN_MODULES)


def register_plant(name: str, cls: type, max_batch: int | None = None) -> None:
    """Make ``cls(scenario, [batch=B,] **options)`` available as ``make_plant(name, ...)``.

    ``max_batch=1``: a real-time backend; its constructor takes no ``batch``.
    """
    _REGISTRY[name] = _Backend(cls, max_batch)


def make_plant(kind: str, scenario: Scenario, batch: int = 1, **kwargs: Any) -> Plant:
    """Build a plant backend by name; a backend module is imported only when asked for.

    Unknown names and unknown options are one-line ``ValueError`` s, never a
    ``TypeError`` from deep inside a constructor.
    """
    import importlib
    import inspect

    if kind not in _REGISTRY and kind in _BUILTIN_MODULES:
        importlib.import_module(_BUILTIN_MODULES[kind])
    backend = _REGISTRY.get(kind)
    if backend is None:
        names = sorted(set(_REGISTRY) | set(_BUILTIN_MODULES))
        raise ValueError(f"unknown plant '{kind}' (choose from {', '.join(names)})")
    if backend.max_batch is not None and batch > backend.max_batch:
        raise ValueError(f"the {kind} plant runs in real time and supports batch<={backend.max_batch} only")
    sig = inspect.signature(backend.cls)
    opts = [n for n, p in sig.parameters.items() if n not in ("scenario", "batch") and p.kind is not p.VAR_POSITIONAL]
    unknown = [k for k in kwargs if k not in opts]
    if unknown:
        raise ValueError(f"plant '{kind}' has no option '{unknown[0]}' (options: {', '.join(opts)})")
    if backend.max_batch is None:
        return backend.cls(scenario, batch=batch, **kwargs)
    return backend.cls(scenario, **kwargs)
