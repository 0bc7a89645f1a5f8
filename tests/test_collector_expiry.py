"""The collector's idle expiry (MLC Algorithm 4's timeout) in serial arithmetic, on any view.

A live data plane (the eBPF programs, a switch read over P4Runtime) stamps
packets after the collector read its clock, so a flow's ``af_ts`` can be a
little *newer* than the collector's "now". The plain ``(now - af_ts) mod
2^32`` makes that a 71-minute-old flow and drops it; the collector must keep
it, and still drop a flow idle for T_TH or more, also across the 32-bit wrap.
"""

from __future__ import annotations

import numpy as np
import pytest

from scidmz.telemetry import constants as C
from scidmz.telemetry.collector import Collector


class _View:
    """A ``DataPlaneView`` whose clock and ``af_ts`` the test sets."""

    tick_ns = C.TS_TICK_NS

    def __init__(self) -> None:
        self.now = 100.0
        self.af_ts = np.zeros(C.AF_TABLE_SIZE, dtype=np.uint64)
        self.pending = np.zeros(0, dtype=C.DIGEST_FLOW_DTYPE)

    def clock(self) -> float:
        return self.now

    def read_class_counters(self) -> np.ndarray:
        return np.zeros((C.N_CLASSES, 2), dtype=np.uint64)

    def read_register(self, name: str, index: np.ndarray | None = None) -> np.ndarray:
        if name == C.REG_AF_TS:
            arr = self.af_ts
        elif name in (C.REG_QD_SUM, C.REG_QD_CNT, C.REG_QD_LAST):
            arr = np.zeros(C.N_CLASSES, dtype=np.uint64)
        else:
            arr = np.zeros(C.AF_TABLE_SIZE, dtype=np.uint64)
        return arr if index is None else arr[np.asarray(index, dtype=np.int64)]

    def drain_digests(self) -> tuple[np.ndarray, np.ndarray]:
        out, self.pending = self.pending, np.zeros(0, dtype=C.DIGEST_FLOW_DTYPE)
        return np.zeros(0, dtype=C.DIGEST_RTT_DTYPE), out

    def new_flows(self, slots: list[int]) -> None:
        d = np.zeros(len(slots), dtype=C.DIGEST_FLOW_DTYPE)
        d["kind"] = C.DIGEST_NEW_FLOW
        d["slot"] = slots
        d["cls"] = C.CLASS_CAMPUS
        d["protocol"] = 6
        self.pending = d


def _ticks(t: float) -> int:
    return int(round(t / (C.TS_TICK_NS * 1e-9))) & C.TS_MASK


@pytest.mark.parametrize("now", [100.0, (1 << 32) * C.TS_TICK_NS * 1e-9 - 0.2])  # the second: 32-bit wrap
def test_a_stamp_newer_than_now_is_not_idle_and_an_old_one_is(now):
    v = _View()
    v.now = now
    col = Collector(v)
    v.new_flows([1, 2, 3, 4])
    v.af_ts[1] = _ticks(now + 0.003)  # stamped 3 ms after the collector's read: alive
    v.af_ts[2] = _ticks(now + 0.5)  # within the wrap window ahead: alive
    v.af_ts[3] = _ticks(now - 0.2)  # 200 ms old: alive (T_TH = 1 s)
    v.af_ts[4] = _ticks(now - 1.5)  # idle longer than T_TH: expired
    y = col.sample()
    assert sorted(col.flow_vector.tolist()) == [1, 2, 3]
    assert y.active_flows == 4  # flow 4 became active and ended within the period: it was there
    assert col.sample().active_flows == 3
