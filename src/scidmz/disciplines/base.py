"""``BottleneckDiscipline``: the configuration side shared by ABC and FFS.

A discipline decides per packet, at the bottleneck egress, whether the packet
enters the queue. Configurations are frozen dataclasses validated on
construction; every problem is one line naming the field (the CLI turns
:class:`DisciplineConfigError` into exit 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np


class DisciplineConfigError(ValueError):
    """A discipline parameter is out of range (message: one line)."""


def check_positive(name: str, value: float) -> float:
    """Return ``value`` as float if finite and > 0, else raise a one-line error."""
    v = float(value)
    if not math.isfinite(v) or v <= 0.0:
        raise DisciplineConfigError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def check_at_least(name: str, value: float, low: float, unit: str) -> float:
    """Return ``value`` as float if finite and >= ``low``, else a one-line error."""
    v = float(value)
    if not math.isfinite(v) or v < low:
        raise DisciplineConfigError(f"{name} must be >= {low:g} {unit}, got {value!r}")
    return v


def check_labels(name: str, values: np.ndarray) -> np.ndarray:
    """FFS packet labels are rates: finite and > 0 (0 or NaN is a one-line error)."""
    a = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(a) | (a <= 0.0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DisciplineConfigError(
            f"label {name} must be a finite rate > 0; packet {i} has {a.flat[i]!r}"
        )
    return a


@dataclass(frozen=True)
class BottleneckDiscipline:
    """Base of every discipline configuration.

    ``capacity_bps`` is the egress capacity the discipline enforces (SI: bit/s).
    Subclasses set ``kind`` and validate their own fields in ``__post_init__``
    after calling this one.
    """

    kind: ClassVar[str] = "base"
    capacity_bps: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "capacity_bps", check_positive("capacity_bps", self.capacity_bps))
