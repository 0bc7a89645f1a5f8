"""FFS's NFQUEUE stage decider: a stream's first on-path node (labels set to the measured rate).

Streams are source IPv4 addresses; ingresses come from the stage's source map
(each mapped source its own local interface, as the paper's Mininet node with
equal matrix entries; unmapped: ingress 0). The random number each verdict
compares with gamma comes from the stage's seed.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from ..base import SourceSlots
from .config import FFSConfig
from .core import ffs_first_node_packet


class Decider:
    """Per-packet verdicts of :func:`.core.ffs_first_node_packet`; weights are the matrix column."""

    def __init__(self, config: dict[str, Any], link_bps: float, ingress_of: dict[int, int], seed: int,
                 max_sources: int) -> None:
        cfg = FFSConfig(**config)
        self._cap = cfg.capacity_bps
        self._st, self._ing = cfg.new_state(0.0)
        #: the fairness-matrix column (bit/s), as the core reads it
        self.matrix = cfg.matrix
        self._p = cfg.params()
        self._streams = np.zeros((max_sources, 2))
        self._ingress = dict(ingress_of)
        if any(not 0 <= v < len(cfg.matrix_col_bps) for v in self._ingress.values()):
            raise ValueError("ingress_of maps a source outside the fairness-matrix column")
        self._rng = random.Random(seed)
        self._sources = SourceSlots(max_sources)

    def decide(self, src: int, t: float, nbytes: float) -> bool:
        ok, _g = ffs_first_node_packet(self._st, self._ing, self._p, self.matrix, self._streams, self._sources(src),
                                       self._ingress.get(src, 0), t, nbytes, self._rng.random())
        return ok

    def set_weights(self, w: np.ndarray) -> None:
        """The fairness-matrix column, rescaled to the capacity."""
        if w.size != self.matrix.size:
            raise ValueError(f"{w.size} weights for a matrix column of {self.matrix.size}")
        self.matrix[:] = w / w.sum() * self._cap
