"""The rate lease: the controller must renew it, or the agent lifts its pacing (fail-open, ours).

A rate set through the API holds for ``periods`` control periods; each renewal
(``POST /renew``, or a new ``POST /rate``) starts them again. When they run out
the agent lifts every cap it set and logs one line. Fail-open is our choice: a
DTN left throttled by a dead controller loses science data for as long as
nobody notices, while a DTN running unpaced for a while only loses the campus
the share it had before scidmz (the state the admin started from); the
controller's own fallback keeps the campus at the trivial rate meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Lease"]


class Lease:
    """Expires ``periods`` x ``period`` seconds after the last grant or renewal."""

    def __init__(self, periods: int, period: float, clock: Callable[[], float] = time.monotonic) -> None:
        if periods < 1:
            raise ValueError(f"lease must last at least one period, got {periods}")
        self.periods = int(periods)
        self.period = float(period)
        self._clock = clock
        self._until: float | None = None

    def grant(self) -> None:
        self._until = self._clock() + self.periods * self.period

    def renew(self) -> bool:
        """Extend a held lease; False if there is none to extend (expired or never granted)."""
        if self._until is None:
            return False
        self.grant()
        return True

    def drop(self) -> None:
        self._until = None

    @property
    def held(self) -> bool:
        return self._until is not None

    def expired(self) -> bool:
        """True once, on the first check after the lease ran out (then it is no longer held)."""
        if self._until is not None and self._clock() >= self._until:
            self._until = None
            return True
        return False

    def remaining(self) -> float | None:
        return None if self._until is None else max(0.0, self._until - self._clock())
