"""Drop-tail's NFQUEUE stage decider: accept every packet; the qdisc behind the stage is the FIFO."""

from __future__ import annotations

from typing import Any

import numpy as np

from .config import DropTailConfig


class Decider:
    """Every packet passes (the stage's own cost, ``--discipline pass``, is what remains)."""

    def __init__(self, config: dict[str, Any], link_bps: float, ingress_of: dict[int, int], seed: int,
                 max_sources: int) -> None:
        if config:
            DropTailConfig(**config)  # validates what was given (capacity_bps)

    def decide(self, src: int, t: float, nbytes: float) -> bool:
        return True

    def set_weights(self, w: np.ndarray) -> None:
        """A FIFO has no weights: nothing changes."""
