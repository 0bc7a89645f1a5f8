"""The eBPF maps as a ``DataPlaneView``, and the collector on top of them (MLC Algorithms 3, 4, 6, 8).

``EbpfView`` answers the collector's four calls (``telemetry/view.py``) from
the maps, so ``collector.Collector`` runs unchanged on the eBPF programs as
it does on the twin and on a switch:

* ``read_class_counters``: the egress-tap class counters of the per-CPU
  counter block, summed over CPUs;
* ``read_register``: the per-flow registers from the mmap'd ``af_table``
  (``af_ts``, ``af_bytes``, ``flow_rtt`` ... of the slots the collector
  tracks), ``qd_sum``/``qd_cnt`` from the counter block, ``qd_last`` and the
  tables for the equivalence checks;
* ``drain_digests``: no RTT digests (the programs add each sample to a
  per-class sum and count instead) and the flow digests from the ring buffer.

``EbpfCollector`` is the collector with one change: ``rtt_dtn`` is the
period's sum of DTN samples over their count, read from the counter block
(the twin's mean of the period's DTN RTT digests, without a digest per
sample). (Idle expiry compares ``af_ts`` with the period's clock in serial
arithmetic, because a live router stamps packets after the collector read
its clock; that lives in ``collector.Collector`` itself, for every view.)

``snapshot()`` reads the counter block once per period, so the period's
counters are read together.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ...state import NetworkState
from .. import constants as C
from ..collector import DEFAULT_ALPHA, Collector
from .layout import COUNTER_INDEX, ctr_cls
from .objects import EbpfObject

__all__ = ["EbpfView", "EbpfCollector"]

_RTT_SUM = [COUNTER_INDEX[f"rtt_sum_{c}"] for c in range(C.N_CLASSES)]
_RTT_CNT = [COUNTER_INDEX[f"rtt_cnt_{c}"] for c in range(C.N_CLASSES)]
_QD_SUM = [COUNTER_INDEX[f"qd_sum_{c}"] for c in range(C.N_CLASSES)]
_QD_CNT = [COUNTER_INDEX[f"qd_cnt_{c}"] for c in range(C.N_CLASSES)]
_AF_REGS = (C.REG_AF_SIG, C.REG_AF_TS, C.REG_AF_BYTES, C.REG_FLOW_RTT, C.REG_AF_MAX_EACK, C.REG_AF_RECOVER,
            C.REG_AF_COUNT, C.REG_AF_ACTIVE, C.REG_AF_RECOVER_FLAG)


class EbpfView:
    """``DataPlaneView`` over an ``EbpfObject``. ``clock``: seconds on the programs' clock
    (default CLOCK_MONOTONIC, which ``bpf_ktime_get_ns`` reads); a replay passes its own."""

    tick_ns = C.TS_TICK_NS

    def __init__(self, obj: EbpfObject, clock: Callable[[], float] = time.monotonic) -> None:
        self.obj = obj
        self._clock = clock
        self._ctr: np.ndarray | None = None

    def snapshot(self) -> np.ndarray:
        """Read the counter block (one syscall); the period's reads below use this copy."""
        self._ctr = self.obj.counters()
        return self._ctr

    @property
    def ctr(self) -> np.ndarray:
        return self._ctr if self._ctr is not None else self.snapshot()

    def clock(self) -> float:
        return float(self._clock())

    def read_class_counters(self) -> np.ndarray:
        c = self.ctr
        return np.array([[c[ctr_cls(C.TAP_EGRESS, k, 0)], c[ctr_cls(C.TAP_EGRESS, k, 1)]]
                         for k in range(C.N_CLASSES)], dtype=np.uint64)

    def class_counters(self, tap: int) -> np.ndarray:
        """(N_CLASSES, 2) [bytes, packets] at ``tap`` (the twin's ``cls_ctr[tap]``)."""
        c = self.ctr
        return np.array([[c[ctr_cls(tap, k, 0)], c[ctr_cls(tap, k, 1)]] for k in range(C.N_CLASSES)],
                        dtype=np.uint64)

    def rtt_aggregate(self) -> tuple[np.ndarray, np.ndarray]:
        """Per class: (sum of RTT samples in ticks, number of samples), cumulative."""
        c = self.ctr
        return c[_RTT_SUM].astype(np.int64), c[_RTT_CNT].astype(np.int64)

    def read_register(self, name: str, index: np.ndarray | None = None) -> np.ndarray:
        if name in _AF_REGS:
            arr = self.obj.table("af_table")[name]
        elif name == C.REG_QD_SUM:
            arr = self.ctr[_QD_SUM]
        elif name == C.REG_QD_CNT:
            arr = self.ctr[_QD_CNT] & np.uint64(C.TS_MASK)  # the twin's register is 32 bits wide
        elif name == C.REG_QD_LAST:
            arr = self.obj.array("qd_last")
        elif name in C.REG_RTT_STAGE or name == C.REG_QD_TABLE:
            if name == C.REG_QD_TABLE:
                cells = self.obj.table("qd_table")
            else:
                s = C.REG_RTT_STAGE.index(name)
                cells = self.obj.table("rtt_table")[s * C.RTT_STAGE_SIZE:(s + 1) * C.RTT_STAGE_SIZE]
            arr = (cells["sig"].astype(np.uint64) << np.uint64(32)) | cells["ts"]
        elif name in C.REG_CMS:
            r = C.REG_CMS.index(name)
            arr = self.obj.array("cms", np.dtype((np.uint32, 2))).reshape(-1)[r * C.CMS_COLS:(r + 1) * C.CMS_COLS]
        else:
            raise ValueError(f"unknown register {name!r}")
        arr = np.asarray(arr)
        if index is not None:
            arr = arr[np.asarray(index, dtype=np.int64)]
        return arr.astype(np.uint64)

    def drain_digests(self) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(0, dtype=C.DIGEST_RTT_DTYPE), self.obj.drain_events()

    def new_collector(self, alpha: float = DEFAULT_ALPHA, t0: float | None = None) -> EbpfCollector:
        """The collector for these maps (a plant that takes any view asks the view for it)."""
        return EbpfCollector(self, alpha, t0)


class EbpfCollector(Collector):
    """``Collector`` over an ``EbpfView``: RTT_DTN from the per-class sums (see module docstring)."""

    view: EbpfView

    def __init__(self, view: EbpfView, alpha: float = DEFAULT_ALPHA, t0: float | None = None) -> None:
        view.snapshot()
        super().__init__(view, alpha, t0)
        self._prev_rtt = view.rtt_aggregate()

    def sample(self) -> NetworkState:
        self.view.snapshot()
        return super().sample()

    def rtt_accumulators(self, rtt_d: np.ndarray) -> np.ndarray:
        """The period's per-class RTT (sum, count): deltas of the programs' cumulative sums."""
        rsum, rcnt = self.view.rtt_aggregate()
        acc = np.stack([rsum - self._prev_rtt[0], rcnt - self._prev_rtt[1]], axis=1)
        self._prev_rtt = (rsum, rcnt)
        return acc
