"""The hardware plant's host place: the DTNs paced through their agents (``HostPlant.set_pacing``).

``HostPlace`` is what ``hardware.HostHardwarePlant`` adds to a ``HardwarePlant``
when ``--dtn-agent URL`` is given: ``set_pacing(R)`` goes to the
``actuators.host_agent.AgentPacer`` (independently of ``step(u)``, which sets
the rate place's TBF or OVS port, so a configuration such as ``pacing+pi``
applies each member through its own place), every ``step`` renews the agents'
leases when no rate was set in that period, and ``close`` asks the agents to lift.
``open_host`` builds the pacer from the plant's options and checks every agent
(one line, exit 2) before the rate actuator or the telemetry is touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..scenario import Scenario

__all__ = ["HostPlace", "open_host"]


def open_host(scenario: Scenario, urls: Sequence[str] | str | None, tokens: Sequence[str] | str | None,
              shadow: bool = False) -> Any:
    """The ``AgentPacer`` for ``--dtn-agent`` URLs with their token files, every agent checked (its status
    answered with the token); None without URLs. ``shadow``: it records the rates and sets none.
    One-line ValueError / PermissionError (exit 2)."""
    from ..actuators.host_agent import AgentPacer, agent_token_files

    urls = [urls] if isinstance(urls, str) else list(urls or [])
    if not urls:
        if tokens:
            raise ValueError("--dtn-agent-token is for a --dtn-agent URL")
        return None
    host = AgentPacer(urls, agent_token_files(urls, tokens), scenario.period, shadow=shadow)
    host.check()
    return host


class HostPlace:
    """Mixin for a real-time plant with a ``host`` (``AgentPacer``): the ``HostPlant`` capability."""

    host: Any

    def set_pacing(self, rates: np.ndarray) -> None:
        """The DTNs' aggregate pacing rate (frame bit/s), split among their agents, from now on."""
        self._check_open()  # type: ignore[attr-defined]
        self.host.set_pacing(rates)

    def step(self, u: np.ndarray | float) -> Any:
        self.host.keep()  # a period without set_pacing (the controller's fallback) still renews the lease
        return super().step(u)  # type: ignore[misc]

    def host_status(self) -> list[dict[str, Any]]:
        """Each DTN agent: URL, the rate last set, the last error (None while it answers)."""
        return self.host.status()

    def close(self) -> None:
        was_closed = self._closed  # type: ignore[attr-defined]
        try:
            super().close()  # type: ignore[misc]
        finally:
            if not was_closed:
                self.host.close()
