"""The control plane: MLC Algorithms 3, 4, 6 and 8 over any ``DataPlaneView``.

Once per control period T, ``Collector.sample()``:

* Algorithm 3 (rates): reads the ``class_bytes`` counters, takes the byte
  deltas since the previous read and divides by the *measured* dt of the
  data plane's clock: R = 8 * dB / dt, per class (DTN, campus).
* Algorithm 8 (active flows): drains the flow digests; ``new_flow`` attaches
  the flow (keyed by its flow-table slot, which is what the switch knows) to
  ``flow_vector``, ``timeout`` removes it. Flows whose ``af_ts`` register is
  older than T_TH are removed too (the switch only notices idleness when a
  packet arrives). active_flows = len(flow_vector).
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
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..state import NetworkState
from . import constants as C
from .view import DataPlaneView

__all__ = ["Collector", "FLOW_COLUMNS", "DEFAULT_ALPHA"]

# Smoothing factor of Algorithm 4. The paper names alpha but gives no value;
# 7/8 is the weight of TCP's own SRTT (RFC 6298), the usual choice for RTT.
DEFAULT_ALPHA = 0.875

FLOW_COLUMNS: tuple[str, ...] = (
    "src", "dst", "sport", "dport", "proto", "cls", "slot", "rtt", "rate", "bytes", "long_flow",
)


@dataclass
class _Flow:
    src: int
    dst: int
    sport: int
    dport: int
    proto: int
    cls: int
    prev_bytes: int = -1
    total: int = 0
    rate: float = 0.0
    rtt: float = 0.0


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
        self.flow_vector: dict[int, _Flow] = {}
        self.long_flows: set[tuple[int, int, int, int, int]] = set()
        self.rtt_campus = 0.0
        self._rtt_campus_init = False
        self.rtt_dtn = 0.0
        self.qdelay = [0.0] * C.N_CLASSES
        self.rtt_samples = 0
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
        self._update_flows(dt)
        campus = [f.rtt for f in self.flow_vector.values() if f.cls == C.CLASS_CAMPUS and f.rtt > 0]
        if campus:
            avg = float(np.mean(campus))
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
        return NetworkState(
            t=now - self.t0,
            rate_dtn=float(rates[C.CLASS_DTN]),
            rate_campus=float(rates[C.CLASS_CAMPUS]),
            rtt_dtn=self.rtt_dtn,
            rtt_campus=self.rtt_campus,
            qdelay_dtn=self.qdelay[C.CLASS_DTN],
            qdelay_campus=self.qdelay[C.CLASS_CAMPUS],
            active_flows=float(len(self.flow_vector)),
        )

    def _apply_flow_digests(self, d: np.ndarray) -> None:
        for row in d:  # flow events only: a handful per period
            kind, slot = int(row["kind"]), int(row["slot"])
            key = (int(row["src_addr"]), int(row["dst_addr"]), int(row["src_port"]), int(row["dst_port"]),
                   int(row["protocol"]))
            if kind == C.DIGEST_NEW_FLOW:
                self.flow_vector[slot] = _Flow(*key, cls=int(row["cls"]))
            elif kind == C.DIGEST_TIMEOUT:
                self.flow_vector.pop(slot, None)
            elif kind == C.DIGEST_LONG_FLOW:
                self.long_flows.add(key)

    def _expire_idle(self, now: float) -> None:
        if not self.flow_vector:
            return
        slots = np.fromiter(self.flow_vector.keys(), dtype=np.int64)
        ts = self.view.read_register(C.REG_AF_TS, slots).astype(np.int64)
        now_t = int(round(now / self.tick_s)) & C.TS_MASK
        age = (now_t - ts) & C.TS_MASK
        for s in slots[age >= self._t_th_ticks]:
            self.flow_vector.pop(int(s), None)

    def _update_flows(self, dt: float) -> None:
        if not self.flow_vector:
            return
        slots = np.fromiter(self.flow_vector.keys(), dtype=np.int64)
        b = self.view.read_register(C.REG_AF_BYTES, slots).astype(np.int64)
        r = self.view.read_register(C.REG_FLOW_RTT, slots).astype(np.int64)
        for s, nb, rt in zip(slots.tolist(), b.tolist(), r.tolist(), strict=True):
            f = self.flow_vector[s]
            if f.prev_bytes >= 0:
                delta = (nb - f.prev_bytes) & ((1 << C.AF_BYTES_BITS) - 1)
                f.total += delta
                f.rate = 8.0 * delta / dt if dt > 0 else 0.0
            else:
                f.total = nb
            f.prev_bytes = nb
            if rt:
                f.rtt = rt * self.tick_s

    # -- per-flow records ------------------------------------------------------------
    def flows(self) -> Any:
        """Per-flow records of the active flows, as a pandas DataFrame (``FLOW_COLUMNS``)."""
        import pandas as pd

        rows = []
        for slot, f in sorted(self.flow_vector.items()):
            key = (f.src, f.dst, f.sport, f.dport, f.proto)
            rows.append((str(ipaddress.IPv4Address(f.src)), str(ipaddress.IPv4Address(f.dst)), f.sport,
                         f.dport, f.proto, C.CLASS_NAMES[f.cls], slot, f.rtt, f.rate, f.total,
                         key in self.long_flows))
        return pd.DataFrame(rows, columns=list(FLOW_COLUMNS))
