"""scidmz: keep a Science DMZ DTN at its target rate while campus traffic shares the WAN bottleneck.

Kept import-light on purpose: heavy dependencies (TensorFlow, PyGAD, mlflow,
pyroute2, numba) load inside the modules that need them, and the names below
load on first use (PEP 562), so ``scidmz --help`` imports neither NumPy nor
pydantic.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._version import __version__

__all__ = ["Scenario", "load_scenario", "NetworkState", "History", "Trace", "STATE_FIELDS", "__version__"]

_LAZY = {"Scenario": "scenario", "load_scenario": "scenario", "NetworkState": "state", "History": "state",
         "Trace": "state", "STATE_FIELDS": "state"}

if TYPE_CHECKING:
    from .scenario import Scenario, load_scenario
    from .state import STATE_FIELDS, History, NetworkState, Trace


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'scidmz' has no attribute {name!r}")
