"""The control plane: MLC Algorithms 3, 4, 6 and 8 over any ``DataPlaneView``.

Once per control period T, ``Collector.sample()``:

* Algorithm 3 (rates): reads the ``class_bytes`` counters, takes the byte
  deltas since the previous read and divides by the *measured* dt of the
  data plane's clock: R = 8 * dB / dt, per class (DTN, campus).
* Algorithm 8 (active flows): drains the flow digests; ``new_flow`` attaches
  the flow (keyed by its flow-table slot, which is what the switch knows) to
  ``flow_vector``, ``timeout`` removes it. Flows whose ``af_ts`` register is
  older than T_TH are removed too (the switch only notices idleness when a
  packet arrives; ages in serial arithmetic, so a stamp newer than the
  collector's clock is not an old one). active_flows = len(flow_vector).
* Algorithm 4 (RTT): RTT_campus = mean of the ``flow_rtt`` registers of the
  campus flows in ``flow_vector`` (flows without a sample yet are skipped),
  smoothed RTT_campus <- alpha * RTT_campus + (1 - alpha) * mean (the first
  mean is taken as is). RTT_DTN = mean of the DTN RTT digests of the period
  (held when a period has none).
* Algorithm 6 (queuing delay): reads ``qd_sum``/``qd_cnt`` and reports the
  period's mean per class; with no sample in the period it falls back to
  Algorithm 6's plain read of ``qd_last``.

Values nobody has measured yet (no RTT sample, no queuing sample) are 0.0,
so a ``NetworkState`` is always finite.

``flows()`` returns the per-flow records of the last period as a pandas
DataFrame (5-tuple, class, RTT, rate from ``af_bytes`` deltas, bytes since
the flow became active, long-flow flag from the Count-Min digest) for the
queue-separation policies (Jenks).

The data plane is reached only through ``view.DataPlaneView`` (four calls:
``clock``, ``read_class_counters``, ``read_register``, ``drain_digests``),
so the software twin, the P4Runtime adapter and the BF Runtime adapter all
feed this same code.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import numpy as np

from ..state import STATE_FIELDS, NetworkState
from . import constants as C
from .view import DataPlaneView

__all__ = ["Collector", "FLOW_COLUMNS", "DEFAULT_ALPHA"]

# Smoothing factor of Algorithm 4. The paper names alpha but gives no value;
# 7/8 is the weight of TCP's own SRTT (RFC 6298), the usual choice for RTT.
DEFAULT_ALPHA = 0.875

FLOW_COLUMNS: tuple[str, ...] = (
    "src", "dst", "sport", "dport", "proto", "cls", "slot", "rtt", "rate", "bytes", "long_flow",
)


class Collector:
    """Turns data-plane reads into ``NetworkState`` samples (see module docstring)."""

    def __init__(self, view: DataPlaneView, alpha: float = DEFAULT_ALPHA, t0: float | None = None) -> None:
        if not 0.0 <= alpha < 1.0:
            raise ValueError(f"alpha must be in [0, 1), got {alpha}")
        self.view = view
        self.alpha = float(alpha)
        self.tick_s = view.tick_ns * 1e-9
        self._t_th_ticks = C.T_TH_US * 1000 // view.tick_ns
        self._prev_ctr = view.read_class_counters().astype(np.int64)
        self._prev_qd_sum = view.read_register(C.REG_QD_SUM).astype(np.int64)
        self._prev_qd_cnt = view.read_register(C.REG_QD_CNT).astype(np.int64)
        self._prev_clock = view.clock()
        self.t0 = self._prev_clock if t0 is None else float(t0)
        # flow_vector (Algorithms 4 and 8), stored per flow-table slot as arrays.
        n = C.AF_TABLE_SIZE
        self.active = np.zeros(n, dtype=bool)
        self._key = np.zeros((n, 5), dtype=np.int64)  # src, dst, sport, dport, proto
        self._cls = np.zeros(n, dtype=np.int64)
        self._prev_bytes = np.full(n, -1, dtype=np.int64)
        self._total = np.zeros(n, dtype=np.int64)
        self._rate = np.zeros(n)
        self._rtt = np.zeros(n)
        self.long_flows: set[tuple[int, int, int, int, int]] = set()
        self.rtt_campus = 0.0
        self._rtt_campus_init = False
        self.rtt_dtn = 0.0
        self.qdelay = [0.0] * C.N_CLASSES
        self.rtt_samples = 0
        # ARCHITECTURE.md: a variable with no fresh sample keeps its last value; its stale flag says so
        self.stale: dict[str, bool] = dict.fromkeys(STATE_FIELDS, False)
        self.last_rtt_digests = np.zeros(0, dtype=C.DIGEST_RTT_DTYPE)
        self.last_flow_digests = np.zeros(0, dtype=C.DIGEST_FLOW_DTYPE)

    # -- one period -------------------------------------------------------------
    def sample(self) -> NetworkState:
        v = self.view
        now = v.clock()
        dt = now - self._prev_clock
        # Algorithm 3
        ctr = v.read_class_counters().astype(np.int64)
        d_bytes = ctr[:, 0] - self._prev_ctr[:, 0]
        self._prev_ctr = ctr
        rates = (8.0 * d_bytes / dt) if dt > 0 else np.zeros(C.N_CLASSES)
        # Algorithm 8 (and the digests Algorithm 4 needs)
        rtt_d, flow_d = v.drain_digests()
        self.last_rtt_digests, self.last_flow_digests = rtt_d, flow_d
        self._apply_flow_digests(flow_d)
        self._expire_idle(now)
        if rtt_d.size:
            self.rtt_samples += int(rtt_d.size)
            dtn = rtt_d["rtt"][rtt_d["cls"] == C.CLASS_DTN]
            if dtn.size:
                self.rtt_dtn = float(dtn.astype(np.float64).mean()) * self.tick_s
        # Algorithm 4 (campus) and per-flow records
        slots = self._update_flows(dt)
        campus = slots[(self._cls[slots] == C.CLASS_CAMPUS) & (self._rtt[slots] > 0)]
        if campus.size:
            avg = float(self._rtt[campus].mean())
            if self._rtt_campus_init:
                self.rtt_campus = self.alpha * self.rtt_campus + (1.0 - self.alpha) * avg
            else:
                self.rtt_campus, self._rtt_campus_init = avg, True
        # Algorithm 6
        qs = v.read_register(C.REG_QD_SUM).astype(np.int64)
        qc = v.read_register(C.REG_QD_CNT).astype(np.int64)
        ql = v.read_register(C.REG_QD_LAST).astype(np.int64)
        dsum = qs - self._prev_qd_sum
        dcnt = (qc - self._prev_qd_cnt) & ((1 << C.QD_CNT_BITS) - 1)
        self._prev_qd_sum, self._prev_qd_cnt = qs, qc
        for c in (C.CLASS_DTN, C.CLASS_CAMPUS):
            self.qdelay[c] = (dsum[c] / dcnt[c] if dcnt[c] > 0 else float(ql[c])) * self.tick_s
        self._prev_clock = now
        self.stale = {
            "rate_dtn": dt <= 0, "rate_campus": dt <= 0,
            "rtt_dtn": not (rtt_d.size and bool(np.any(rtt_d["cls"] == C.CLASS_DTN))),
            "rtt_campus": not campus.size,
            "qdelay_dtn": not dcnt[C.CLASS_DTN] > 0, "qdelay_campus": not dcnt[C.CLASS_CAMPUS] > 0,
            "active_flows": False,
        }
        return NetworkState(
            t=now - self.t0,
            rate_dtn=float(rates[C.CLASS_DTN]),
            rate_campus=float(rates[C.CLASS_CAMPUS]),
            rtt_dtn=self.rtt_dtn,
            rtt_campus=self.rtt_campus,
            qdelay_dtn=self.qdelay[C.CLASS_DTN],
            qdelay_campus=self.qdelay[C.CLASS_CAMPUS],
            active_flows=float(slots.size),
        )

    @property
    def flow_vector(self) -> np.ndarray:
        """Flow-table slots of the flows currently in flow_vector."""
        return np.flatnonzero(self.active)

    def _apply_flow_digests(self, d: np.ndarray) -> None:
        if d.size == 0:
            return
        cols = [d[f].tolist() for f in ("kind", "slot", "cls", "src_addr", "dst_addr", "src_port", "dst_port",
                                        "protocol")]
        for kind, slot, cls, *key in zip(*cols, strict=True):  # in digest order: a flow may come and go
            if kind == C.DIGEST_NEW_FLOW:
                self.active[slot] = True
                self._key[slot] = key
                self._cls[slot] = cls
                self._prev_bytes[slot] = -1
                self._total[slot] = 0
                self._rate[slot] = 0.0
                self._rtt[slot] = 0.0
            elif kind == C.DIGEST_TIMEOUT and slot < C.AF_TABLE_SIZE:
                self.active[slot] = False
            elif kind == C.DIGEST_LONG_FLOW:
                self.long_flows.add(tuple(key))

    def _expire_idle(self, now: float) -> None:
        slots = np.flatnonzero(self.active)
        if slots.size == 0:
            return
        ts = self.view.read_register(C.REG_AF_TS, slots).astype(np.int64)
        now_t = int(round(now / self.tick_s)) & C.TS_MASK
        age = (now_t - ts) & C.TS_MASK
        # Serial arithmetic: an age in the upper half of the 32-bit tick space is a stamp *newer*
        # than `now` (a live data plane stamps packets after the collector read its clock), not a
        # 71-minute-old one. The twin never sees it (its clock is its newest packet); an active
        # flow is checked every period, long before a real age reaches 2^31 ticks.
        self.active[slots[(age >= self._t_th_ticks) & (age < 1 << (C.TS_BITS - 1))]] = False

    def _update_flows(self, dt: float) -> np.ndarray:
        slots = np.flatnonzero(self.active)
        if slots.size == 0:
            return slots
        b = self.view.read_register(C.REG_AF_BYTES, slots).astype(np.int64)
        r = self.view.read_register(C.REG_FLOW_RTT, slots).astype(np.int64)
        prev = self._prev_bytes[slots]
        seen = prev >= 0
        delta = (b - prev) & ((1 << C.AF_BYTES_BITS) - 1)
        self._total[slots] = np.where(seen, self._total[slots] + delta, b)
        self._rate[slots] = np.where(seen, 8.0 * delta / dt if dt > 0 else 0.0, 0.0)
        self._prev_bytes[slots] = b
        has = r > 0
        self._rtt[slots[has]] = r[has] * self.tick_s
        return slots

    # -- per-flow records ------------------------------------------------------------
    def flows(self) -> Any:
        """Per-flow records of the active flows, as a pandas DataFrame (``FLOW_COLUMNS``)."""
        import pandas as pd

        slots = np.flatnonzero(self.active)
        k = self._key[slots]
        longf = [tuple(x) in self.long_flows for x in k.tolist()] if self.long_flows else [False] * slots.size
        return pd.DataFrame({
            "src": [str(ipaddress.IPv4Address(int(a))) for a in k[:, 0]],
            "dst": [str(ipaddress.IPv4Address(int(a))) for a in k[:, 1]],
            "sport": k[:, 2], "dport": k[:, 3], "proto": k[:, 4],
            "cls": [C.CLASS_NAMES[c] for c in self._cls[slots]],
            "slot": slots, "rtt": self._rtt[slots], "rate": self._rate[slots], "bytes": self._total[slots],
            "long_flow": np.array(longf, dtype=bool),
        }, columns=list(FLOW_COLUMNS))
