"""ABC's NFQUEUE stage decider: the packet core in front of a virtual FIFO drained at the bottleneck rate.

Aggregates are source IPv4 addresses, or come from the stage's source map
(unmapped sources: the last aggregate). Q is a virtual FIFO drained at
``link_bps`` (:func:`.core.abc_fifo_packet` says why).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import SourceSlots
from .config import M_REF, ABCConfig, new_fifo, new_state
from .core import abc_fifo_packet


class Decider:
    """Per-packet verdicts of :func:`.core.abc_fifo_packet`; weights are the aggregates' R_r."""

    def __init__(self, config: dict[str, Any], link_bps: float, ingress_of: dict[int, int], seed: int,
                 max_sources: int) -> None:
        cfg = ABCConfig(**config)
        if not link_bps > 0:
            raise ValueError("abc needs the bottleneck rate behind the stage (--link-bps > 0) for its virtual FIFO")
        self._agg_of = dict(ingress_of)
        n_agg = max(self._agg_of.values()) + 1 if self._agg_of else max_sources
        if self._agg_of and cfg.ref_rates_bps and len(cfg.ref_rates_bps) != n_agg:
            raise ValueError(f"ref_rates_bps needs {n_agg} rates (one per aggregate of --ingress-of)")
        #: meters per aggregate (core layout: ``M_REF`` is the aggregate's R_r)
        self.meter, self._avg = new_state(n_agg, 0.0, cfg.ref_rates_bps if self._agg_of else ())
        self._p = cfg.params(0.0)
        self._vq = new_fifo(0.0)
        self._link = float(link_bps)
        self._sources = SourceSlots(max_sources)

    def slot(self, src: int) -> int:
        """The aggregate of source ``src``."""
        if self._agg_of:
            return self._agg_of.get(src, self.meter.shape[0] - 1)
        return self._sources(src)

    def decide(self, src: int, t: float, nbytes: float) -> bool:
        return abc_fifo_packet(self.meter, self._avg, self._p, self._vq, self.slot(src), t, nbytes, self._link)

    def set_weights(self, w: np.ndarray) -> None:
        """The aggregates' reference rates R_r (bit/s), the first ``len(w)`` of them."""
        if w.size > self.meter.shape[0]:
            raise ValueError(f"{w.size} weights for {self.meter.shape[0]} aggregates")
        self.meter[: w.size, M_REF] = w
