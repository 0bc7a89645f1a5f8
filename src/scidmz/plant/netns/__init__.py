"""The emulated Science DMZ testbed on real kernel TCP (root; network namespaces).

``Testbed`` builds the MLC paper's topology (section 3.1, Fig. 2) in network
namespaces; ``NetnsPlant`` is the real-time ``Plant`` on top of it. Heavy
parts (pyroute2) are imported only when a testbed is built.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NetnsPlant", "Testbed", "KernelCounterTelemetry"]


def __getattr__(name: str) -> Any:
    if name == "NetnsPlant":
        from .plant import NetnsPlant

        return NetnsPlant
    if name == "Testbed":
        from .topology import Testbed

        return Testbed
    if name == "KernelCounterTelemetry":
        from .kernel_telemetry import KernelCounterTelemetry

        return KernelCounterTelemetry
    raise AttributeError(name)
