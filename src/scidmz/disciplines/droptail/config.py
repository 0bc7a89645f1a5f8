"""Drop-tail's configuration: nothing beyond the bottleneck's own capacity (its buffer is the link's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..base import BottleneckDiscipline


@dataclass(frozen=True)
class DropTailConfig(BottleneckDiscipline):
    """A plain FIFO at the bottleneck: every packet enters unless the buffer is full.

    The buffer is the bottleneck's own (the scenario's ``link.buffer``); the
    packet core (:func:`~scidmz.disciplines.droptail.core.droptail_run`) takes
    it as an argument.
    """

    kind: ClassVar[str] = "droptail"
