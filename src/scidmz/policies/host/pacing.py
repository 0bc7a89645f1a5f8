"""``pacing``: the DTN paced at its target by its own senders, the campus shaped at the rest.

The first thing a Science DMZ administrator tries (ESnet's host-tuning
guidance: cap a DTN's streams with ``fq maxrate`` / ``SO_MAX_PACING_RATE``):
every period T, each of the DTN's streams is capped at R*_DTN(t) / streams by
its sender's pacing rate, set live on the sockets when the target moves, and
the campus TBF is held at the trivial rate B_max - R*_DTN(t) (MLC section 3.7).
A paced DTN sends its share smoothly instead of in window bursts, which is
what a shallow bottleneck buffer punishes. Ours (the leaderboard compares it); not in the
papers.

What it needs: control of the DTN host itself (the plant capability
``HostPlant.set_pacing``): root or CAP_SYS_PTRACE on the DTN to reach its
sender's sockets (``actuators.pacing``), or a transfer tool that paces on
request; on real equipment the DTNs' ``scidmz agent`` s (``hardware`` with
``--dtn-agent``). The campus border alone, which the MLC needs, is not enough; a
plant without DTN-host control (``hardware`` without agents) refuses this policy.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ...scenario import Scenario
from ...state import History
from ..registry import register_policy

__all__ = ["PacingPolicy"]


class PacingPolicy:
    """DTN pacing = R*_DTN (its aggregate, frame bit/s); campus u = B_max - R*_DTN (name "pacing")."""

    name = "pacing"
    kind: Literal["host"] = "host"

    def __init__(self) -> None:
        self._scenario: Scenario | None = None

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        self._scenario = scenario

    def decide(self, history: History, target: np.ndarray) -> np.ndarray:
        """The DTN's aggregate pacing rate: the target itself (the plant shares it among the streams)."""
        self._need()
        return np.broadcast_to(np.asarray(target, dtype=np.float64), (history.batch,)).copy()

    def campus_rate(self, scenario: Scenario, target: np.ndarray) -> np.ndarray:
        """The trivial TBF for the campus: B_max - R*_DTN, within the shaper's [u_min, u_max]."""
        return np.clip(scenario.capacity - np.asarray(target, dtype=np.float64), scenario.u_min, scenario.u_max)

    def _need(self) -> Scenario:
        if self._scenario is None:
            raise RuntimeError("policy 'pacing' used before reset(scenario)")
        return self._scenario


register_policy("pacing", "host", PacingPolicy)
