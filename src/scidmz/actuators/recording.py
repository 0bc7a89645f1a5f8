"""``RecordingActuator``: the shadow mode's actuator, which applies nothing and remembers what it was told.

``scidmz control run --shadow`` runs the whole loop -- telemetry,
policy, fallback rules -- on the real network and reports the u it would
apply, without touching any shaper. The plants take their actuator by
composition (a factory), so shadow mode gives them this one in place of the
TBF or the OVS QoS: nothing is created, no qdisc, no class, no OVSDB row,
and ``close`` has nothing to undo. Promoting to live is a restart without
``--shadow``.

It accepts the factory signatures of the actuators it stands in for
(``TbfActuator(dev, netns=, burst=, latency=)``, the hardware plant's
``(target, netns=)``) and validates rates as they do, so a policy output a
real shaper would refuse is refused here too (the loop then falls back, as
it would live).
"""

from __future__ import annotations

import math
from typing import Any

from .base import check_rate

__all__ = ["RecordingActuator"]

#: The largest rate recorded (any real shaper's limit is lower; ours: 1 Tbit/s).
_MAX_RATE = 1e12


class RecordingActuator:
    """A ``RateActuator`` that records commands and applies nothing (see module docstring)."""

    applies = False  # what a status page asks: does this actuator change the network?

    def __init__(self, target: str = "", netns: str | None = None, **_unused: Any) -> None:
        self.target = str(target)
        self.netns = netns
        self.last: float | None = None
        self.commands = 0

    def set_rate(self, bps: float) -> None:
        self.last = check_rate(bps, "shadow", _MAX_RATE, "1 Tbit/s")
        self.commands += 1

    def current_rate(self) -> float:
        """NaN: nothing is in force (the rate it would apply is ``last``)."""
        return math.nan

    def close(self) -> None:
        """Nothing was made, so nothing is undone."""

    def __repr__(self) -> str:
        where = f" on {self.target}" if self.target else ""
        return f"RecordingActuator({self.commands} commands{where}, nothing applied)"
