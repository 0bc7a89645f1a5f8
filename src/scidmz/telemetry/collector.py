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
  collector's clock is not an old one). active_flows = len(flow_vector), plus the flows that became
  active and ended within the period (ours: such a flow was there).
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
DataFrame (5-tuple with the address family, class, RTT, rate from
``af_bytes`` deltas, bytes since the flow became active, long-flow flag from
the Count-Min digest) for the queue-separation policies (Jenks).

The data plane is reached only through ``view.DataPlaneView`` (four calls:
``clock``, ``read_class_counters``, ``read_register``, ``drain_digests``),
so the software twin, the P4Runtime adapter and the BF Runtime adapter all
feed this same code. The arithmetic itself is ``control.py``'s, which the
twin's replay also runs inside its packet loop (``source.TelemetrySource``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..state import RTT_CAMPUS_ALPHA, STATE_FIELDS, NetworkState
from . import constants as C
from .twin.layout import A_BYTES, A_RTT, A_TS, AF_COLS, DF_KIND, DF_SLOT, DIGEST_FLOW_COLS
from .view import DataPlaneView

__all__ = ["Collector", "FLOW_COLUMNS", "DEFAULT_ALPHA", "state_of_row"]

# Smoothing factor of Algorithm 4: part of y's definition, so state.py's (ARCHITECTURE.md). The
# data planes (twin, P4 programs, eBPF programs) only keep each flow's latest sample; the
# smoothing is this control plane's alone, so every plant's rtt_campus is the same quantity
# as the fluid plant's and the testbed's kernel source's. (It was once 7/8, TCP's
# SRTT weight, so a P4 switch or `telemetry replay` smoothed more than the plants the models
# were trained on.)
DEFAULT_ALPHA = RTT_CAMPUS_ALPHA

FLOW_COLUMNS: tuple[str, ...] = (
    "src", "dst", "sport", "dport", "proto", "family", "cls", "slot", "rtt", "rate", "bytes", "long_flow",
)


def _clock_ns(view: DataPlaneView) -> int:
    """The view's clock in integer ns: exact where the view keeps it so (the twin), else rounded
    from its seconds (a switch's or the kernel's clock, read as a float)."""
    exact = getattr(view, "clock_ns", None)
    return int(exact()) if callable(exact) else round(view.clock() * 1e9)


def state_of_row(row: np.ndarray) -> tuple[NetworkState, dict[str, bool]]:
    """A ``control.close_period`` output row as (NetworkState, stale flags)."""
    y = NetworkState(float(row[0]), *(float(v) for v in row[1:8]))
    return y, {f: bool(row[8 + j]) for j, f in enumerate(STATE_FIELDS)}


class Collector:
    """Turns data-plane reads into ``NetworkState`` samples (see module docstring)."""

    def __init__(self, view: DataPlaneView, alpha: float = DEFAULT_ALPHA, t0: float | None = None, *,
                 t0_ns: int | None = None) -> None:
        if not 0.0 <= alpha < 1.0:
            raise ValueError(f"alpha must be in [0, 1), got {alpha}")
        from .controlplane import new_state

        self.view = view
        self.alpha = float(alpha)
        self.tick_s = view.tick_ns * 1e-9
        self._t_th_ticks = C.T_TH_US * 1000 // view.tick_ns
        clock_ns = _clock_ns(view)
        # t0 in integer ns (``t0_ns``, a replay's first packet) or from seconds (a live clock)
        self.t0_ns = int(t0_ns) if t0_ns is not None else clock_ns if t0 is None else round(float(t0) * 1e9)
        self.t0 = self.t0_ns / 1e9
        # The flow_vector and the scalars of Algorithms 3, 4, 6, 8 (control.new_state).
        self.state = new_state(int(view.tick_ns), self.alpha, self.t0_ns, clock_ns,
                               view.read_class_counters().astype(np.int64)[:, 0],
                               view.read_register(C.REG_QD_SUM).astype(np.int64),
                               view.read_register(C.REG_QD_CNT).astype(np.int64))
        self.long_flows: set[tuple[int, ...]] = set()
        self.rtt_samples = 0
        # ARCHITECTURE.md: a variable with no fresh sample keeps its last value; its stale flag says so
        self.stale: dict[str, bool] = dict.fromkeys(STATE_FIELDS, False)
        self.last_rtt_digests = np.zeros(0, dtype=C.DIGEST_RTT_DTYPE)
        self.last_flow_digests = np.zeros(0, dtype=C.DIGEST_FLOW_DTYPE)
        self._af = np.zeros((C.AF_TABLE_SIZE, AF_COLS), np.uint32)  # a switch's per-slot reads
        self._out = np.zeros((1, 16))

    # -- one period -------------------------------------------------------------
    def sample(self) -> NetworkState:
        """One period: read the data plane through the view, then ``control``'s arithmetic."""
        from .controlplane import apply_flow_digests, close_period

        v = self.view
        fs, ff, alist, ci, cf = self.state
        now = _clock_ns(v)
        ctr = v.read_class_counters().astype(np.int64)[:, 0]
        rtt_d, flow_d = v.drain_digests()
        self.last_rtt_digests, self.last_flow_digests = rtt_d, flow_d
        rows = flow_rows(flow_d)
        apply_flow_digests(fs, ff, alist, ci, rows, 0, rows.shape[0])
        self.note_long_flows(rows)
        acc = self.rtt_accumulators(rtt_d)
        self.rtt_samples += int(acc[:, 1].sum())
        slots = alist[: ci[0]].copy()
        if slots.size:  # the switch's per-flow registers of the flows in flow_vector
            self._af[slots, A_TS] = v.read_register(C.REG_AF_TS, slots)
            self._af[slots, A_BYTES] = v.read_register(C.REG_AF_BYTES, slots)
            self._af[slots, A_RTT] = v.read_register(C.REG_FLOW_RTT, slots)
        close_period(fs, ff, alist, ci, cf, now, ctr, v.read_register(C.REG_QD_SUM).astype(np.int64),
                     v.read_register(C.REG_QD_CNT).astype(np.int64), v.read_register(C.REG_QD_LAST).astype(np.int64),
                     self._af, acc, self._t_th_ticks, self._out, 0)
        y, self.stale = state_of_row(self._out[0])
        return y

    def rtt_accumulators(self, rtt_d: np.ndarray) -> np.ndarray:
        """(N_CLASSES, 2) int64: per class, the (sum in ticks, count) of the period's RTT samples.

        From the period's RTT digests; a data plane that sums its samples itself (eBPF)
        overrides this with its sums.
        """
        acc = np.zeros((C.N_CLASSES, 2), np.int64)
        if rtt_d.size:
            cls = rtt_d["cls"].astype(np.int64)
            ok = cls < C.N_CLASSES
            np.add.at(acc[:, 0], cls[ok], rtt_d["rtt"].astype(np.int64)[ok])
            np.add.at(acc[:, 1], cls[ok], 1)
        return acc

    def note_long_flows(self, rows: np.ndarray) -> None:
        """Long-flow digests (JENKS 3.1) mark their flow key (``DIGEST_FLOW_COLS`` rows)."""
        longs = rows[rows[:, DF_KIND] == C.DIGEST_LONG_FLOW]
        for r in longs[:, 1:8].tolist():
            self.long_flows.add(tuple(r))

    @property
    def flow_vector(self) -> np.ndarray:
        """Flow-table slots of the flows currently in flow_vector (ascending)."""
        fs, _, alist, ci, _ = self.state
        return np.sort(alist[: ci[0]])

    # -- per-flow records ------------------------------------------------------------
    def flow_records(self) -> list[dict[str, Any]]:
        """Per-flow records of the active flows (``FLOW_COLUMNS``), without pandas."""
        from .controlplane import F_CLS, F_SRC_HI, F_TOTAL, FF_RATE, FF_RTT
        from .twin.parse import addr_text

        fs, ff, _, _, _ = self.state
        slots = self.flow_vector
        k = fs[slots, F_SRC_HI:F_SRC_HI + 7]  # src hi, lo, dst hi, lo, sport, dport, proto
        words = k[:, :4].view(np.uint64).tolist()
        out = []
        for j, (key, w) in enumerate(zip(k.tolist(), words, strict=True)):
            src = addr_text(w[0], w[1])
            out.append({
                "src": src, "dst": addr_text(w[2], w[3]), "sport": key[4], "dport": key[5], "proto": key[6],
                "family": 6 if ":" in src else 4, "cls": C.CLASS_NAMES[int(fs[slots[j], F_CLS])],
                "slot": int(slots[j]), "rtt": float(ff[slots[j], FF_RTT]), "rate": float(ff[slots[j], FF_RATE]),
                "bytes": int(fs[slots[j], F_TOTAL]), "long_flow": tuple(key) in self.long_flows,
            })
        return out

    def flows(self) -> Any:
        """Per-flow records of the active flows, as a pandas DataFrame (``FLOW_COLUMNS``)."""
        import pandas as pd

        recs = self.flow_records()
        df = pd.DataFrame({c: [r[c] for r in recs] for c in FLOW_COLUMNS}, columns=list(FLOW_COLUMNS))
        for c, t in (("sport", np.int64), ("dport", np.int64), ("proto", np.int64), ("family", np.int64),
                     ("slot", np.int64), ("rtt", np.float64), ("rate", np.float64), ("bytes", np.int64),
                     ("long_flow", bool)):
            df[c] = df[c].astype(t)
        return df


def flow_rows(d: np.ndarray) -> np.ndarray:
    """Flow digests (``DIGEST_FLOW_DTYPE``) as the int64 rows ``control`` reads (``DIGEST_FLOW_COLS``)."""
    out = np.zeros((d.size, len(DIGEST_FLOW_COLS)), np.int64)
    for j, (name, _) in enumerate(C.DIGEST_FLOW_DTYPE):
        out[:, j] = d[name].astype(np.uint64).view(np.int64)
    return out


assert DIGEST_FLOW_COLS[DF_SLOT] == "slot"
