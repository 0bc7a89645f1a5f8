"""The emulated Science DMZ testbed on real kernel TCP (root; network namespaces).

* ``spec.py``: the testbed as data (hosts, switches, links, addresses, routes,
  qdiscs, taps), derived from a ``Scenario``; no root, no side effects.
* ``build.py``, ``testbed.py``: the builder (namespaces, veths, qdiscs from a
  spec) and ``Testbed``, which runs it, records what it made and tears it
  down on every exit path; ``procs.py``, ``ovsd.py``, ``probe.py`` help it.
* ``traffic/``: one episode's senders (iperf3, our socket flows, ``[[flows]]``).
* ``stages/``: the user-space data-path stages (delay, NFQUEUE discipline).
* ``nfqlab.py``: a three-namespace lab for the NFQUEUE stage alone.
* ``plant.py``: ``NetnsPlant``, the real-time ``Plant``; ``sources.py``: how
  it composes its telemetry (the sources live in ``scidmz.telemetry``).
* ``manage/``: ``scidmz testbed up|down|status|check``, the registry of what
  testbeds made, the checks, the starvation monitor.

Heavy parts (pyroute2) are imported only when a testbed is built.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NetnsPlant", "Testbed", "TestbedSpec", "describe"]


def __getattr__(name: str) -> Any:
    if name == "NetnsPlant":
        from .plant import NetnsPlant

        return NetnsPlant
    if name == "Testbed":
        from .testbed import Testbed

        return Testbed
    if name in ("TestbedSpec", "describe"):
        from . import spec

        return getattr(spec, name)
    raise AttributeError(name)
