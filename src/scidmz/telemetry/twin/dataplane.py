"""The software twin of the P4 telemetry data plane (MLC Algorithms 2, 5, 7; JENKS 3.1).

``SoftwareDataPlane`` keeps exactly the registers, tables and counters the
P4 programs in ``telemetry_p4/`` keep (sizes, CRC-32 layouts, widths and
thresholds from ``constants.py``) and updates them packet by packet with the
numba functions of ``algorithms.py`` (one per algorithm, by name), over the
parsed columns of ``parse.py``. It implements the ``view.DataPlaneView`` read
interface, so the collector reads it exactly as it reads a switch.

Per packet, in the pipeline order of the P4 programs:

1. Classify (Algorithm 2): class_lpm on the destination (outgoing) or, on a
   miss, on the source (incoming); IPv4 and IPv6 in one 128-bit table.
   Misses are counted ``unclassified``.
2. Outgoing at ``TAP_EGRESS``: class byte/packet counters (Algorithm 2).
3. Outgoing: queuing delay (Algorithm 5): the ingress tap writes
   (signature, timestamp) into ``qd_table``; the egress tap reads and clears
   it and updates ``qd_last`` / ``qd_sum`` / ``qd_cnt`` of the class.
4. Outgoing TCP/UDP at ``TAP_EGRESS``: active-flow table (Algorithm 7, with
   the lazy idle/eviction rules of constants.py) and the Count-Min sketch
   (JENKS 3.1) with its 10 MB long-flow digest.
5. TCP at the RTT tap (egress by default): data segments store
   (FID, eACK) -> timestamp in the multi-stage table; incoming ACKs match,
   clear and emit an RTT digest, rejecting retransmission-ambiguous,
   duplicated and expired matches (constants.py "RTT").
6. FIN or RST (either direction, egress tap): flow removed (Algorithm 7).

The pipeline stops early when a digest buffer is nearly full; ``process``
drains and resumes, so any batch size works with bounded memory. A replay
uses ``process_periods`` instead: the same pipeline, closing each control
period inside the packet loop with the control plane's functions
(``control.py``), so its cost follows packets, not periods.
"""

from __future__ import annotations

import numpy as np

from .. import constants as C
from ..view import Network, lpm_entry, mapped, parse_prefixes
from .layout import (
    AF_COLS,
    AF_REGISTERS,
    DIGEST_FLOW_COLS,
    DIGEST_RTT_COLS,
    STAT_NAMES,
    crc32_fields,
)

__all__ = ["SoftwareDataPlane", "merge_taps", "crc32_fields", "STAT_NAMES"]


def merge_taps(*captures: np.ndarray) -> np.ndarray:
    """Interleave parsed packets of several taps by time (ingress before egress on ties)."""
    parts = [np.asarray(c) for c in captures if len(c)]
    if not parts:
        return captures[0] if captures else np.zeros(0)
    if len(parts) == 1:
        p = parts[0]
        ts = p["ts_ns"]
        return p if bool(np.all(ts[1:] >= ts[:-1])) else p[np.argsort(ts, kind="stable")]
    # A stable sort on time over the parts ordered by tap keeps ingress first on ties.
    parts.sort(key=lambda p: int(p["tap"].min()))
    allp = np.concatenate(parts)
    return allp[np.argsort(allp["ts_ns"], kind="stable")]


class SoftwareDataPlane:
    """The twin: registers, tables, counters and digests of the P4 program, in NumPy.

    ``dtn_prefixes`` (DTN-r host(s), usually one /32 or /128) and ``remote_prefixes``
    (remote network(s)), IPv4 or IPv6, are the class_lpm entries; the longest match
    wins. ``rtt_tap`` chooses where data and ACKs are matched (default the
    bottleneck/egress tap, as in MLC 3.4.2). ``rtt_timeout`` (s): an ACK matching data
    older than this gives no sample (the switch's ``RTT_TIMEOUT_US``, fixed when the
    P4 program is compiled, is the default).
    """

    def __init__(self, dtn_prefixes: list[str] | str | None = (C.DEFAULT_DTN_PREFIX,),
                 remote_prefixes: list[str] | str | None = (C.DEFAULT_REMOTE_PREFIX,),
                 tick_ns: int = C.TS_TICK_NS, rtt_tap: int = C.TAP_EGRESS,
                 digest_capacity: int = 1 << 16, rtt_timeout: float = C.RTT_TIMEOUT_US * 1e-6) -> None:
        if tick_ns <= 0:
            raise ValueError(f"tick_ns must be > 0, got {tick_ns}")
        if rtt_tap not in (C.TAP_INGRESS, C.TAP_EGRESS):
            raise ValueError(f"rtt_tap must be {C.TAP_INGRESS} or {C.TAP_EGRESS}, got {rtt_tap}")
        if not 0 < rtt_timeout * 1e9 / tick_ns < 1 << 31:
            raise ValueError(f"RTT timeout must be above one tick and below 2^31 ticks "
                             f"({(1 << 31) * tick_ns / 1e9:.0f} s), got {rtt_timeout!r} s")
        entries: list[tuple[Network, int]] = [(n, C.CLASS_DTN) for n in parse_prefixes(dtn_prefixes)]
        entries += [(n, C.CLASS_CAMPUS) for n in parse_prefixes(remote_prefixes)]
        if not entries:
            raise ValueError("class_lpm needs at least one prefix (--dtn-prefix / --remote-prefix)")
        if len(entries) > C.CLASS_LPM_SIZE:
            raise ValueError(f"class_lpm holds {C.CLASS_LPM_SIZE} entries, got {len(entries)}")
        entries.sort(key=lambda e: -mapped(e[0])[1])
        self.lpm = entries
        self._lpm = np.array([[*lpm_entry(n), cls] for n, cls in entries], dtype=np.uint64).view(np.int64)
        self.tick_ns = int(tick_ns)
        self.rtt_tap = int(rtt_tap)
        self.rtt_timeout = float(rtt_timeout)
        self._params = np.array([C.C_TH, C.T_TH_US * 1000 // tick_ns, int(round(rtt_timeout * 1e9)) // tick_ns,
                                 C.QD_TIMEOUT_US * 1000 // tick_ns, C.LONG_FLOW_BYTES], dtype=np.int64)
        u32 = np.uint32
        self.cls_ctr = np.zeros((C.N_TAPS, C.N_CLASSES, 2), dtype=np.int64)
        # layout.py: one row per active-flow slot, a (sig, ts) pair per RTT / queuing-delay cell
        self.af = np.zeros((C.AF_TABLE_SIZE, AF_COLS), u32)
        self.rtt = np.zeros((C.RTT_STAGES, C.RTT_STAGE_SIZE, 2), u32)
        self.qtab = np.zeros((C.QD_TABLE_SIZE, 2), u32)
        self.cms = np.zeros((C.CMS_ROWS, C.CMS_COLS), u32)
        self.regs: dict[str, np.ndarray] = {name: self.af[:, j] for j, name in enumerate(AF_REGISTERS)}
        self.regs[C.REG_QD_LAST] = np.zeros(C.N_CLASSES, u32)
        self.regs[C.REG_QD_SUM] = np.zeros(C.N_CLASSES, np.int64)  # int64: numba mixes uint64+int64 as float
        self.regs[C.REG_QD_CNT] = np.zeros(C.N_CLASSES, u32)
        self.regs[C.REG_CLASS_STRIP] = np.zeros(C.N_CLASSES, np.uint64)  # stays 0: cls_ctr counts measured frames
        self.stats = np.zeros(len(STAT_NAMES), dtype=np.int64)
        self._rtt_buf = np.empty((digest_capacity, len(DIGEST_RTT_COLS)), dtype=np.int64)
        self._flow_buf = np.empty((digest_capacity, len(DIGEST_FLOW_COLS)), dtype=np.int64)
        self._n_rtt = np.zeros(1, np.int64)
        self._n_flow = np.zeros(1, np.int64)
        self._rtt_chunks: list[np.ndarray] = []
        self._flow_chunks: list[np.ndarray] = []
        self._last_ts = np.zeros(1, dtype=np.int64)
        self._rtt_acc = np.zeros((C.N_CLASSES, 2), np.int64)
        self._kst = np.zeros(5, np.int64)
        self._clock_ns = 0
        self.packets = 0

    # -- processing ----------------------------------------------------------------
    def _run(self, pk: np.ndarray, start: int, col: tuple[np.ndarray, ...], period_ns: int, close_upto: int,
             t_out: np.ndarray) -> int:
        from .algorithms import process_packets  # numba: loaded on the first batch, not on import

        r = self.regs
        i = process_packets(start, pk, self._lpm, self.tick_ns, self.rtt_tap, self._params, self.cls_ctr,
                            self.rtt, self.af, (self.qtab, r[C.REG_QD_LAST], r[C.REG_QD_SUM], r[C.REG_QD_CNT]),
                            self.cms, self.stats, (self._rtt_buf, self._n_rtt, self._flow_buf, self._n_flow),
                            self._last_ts, self._rtt_acc, col, self._kst, period_ns, close_upto, t_out)
        # a filled buffer is handed over as is and replaced by a fresh one (no copy)
        if self._n_rtt[0]:
            self._rtt_chunks.append(self._rtt_buf[: self._n_rtt[0]])
            self._rtt_buf = np.empty_like(self._rtt_buf)
        if self._n_flow[0]:
            self._flow_chunks.append(self._flow_buf[: self._n_flow[0]])
            self._flow_buf = np.empty_like(self._flow_buf)
        self._n_rtt[0] = 0
        self._n_flow[0] = 0
        return int(i)

    def process(self, pk: np.ndarray) -> None:
        """Run a time-ordered batch of parsed packets (``parse.PACKET_DTYPE``) through the pipeline."""
        n = int(pk.shape[0])
        if n == 0:
            return
        pk = np.ascontiguousarray(pk)
        col = _NO_COLLECTOR
        i = 0
        while i < n:
            i = self._run(pk, i, col, 0, 0, _NO_ROWS)
        self.packets += n
        self._clock_ns = max(self._clock_ns, int(self._last_ts[0]))

    def start_periods(self, first_boundary_ns: int) -> None:
        """Prepare ``process_periods``: the first control period ends at ``first_boundary_ns``."""
        self._kst[:] = 0
        self._kst[0] = first_boundary_ns
        self._rtt_acc[:] = 0

    def process_periods(self, pk: np.ndarray, col: tuple[np.ndarray, ...], period_ns: int,
                        close_upto: int) -> np.ndarray:
        """Run ``pk`` and close every control period whose boundary comes before a packet or is
        at most ``close_upto`` (ns), with the control plane's own functions on ``col``
        (``control.new_state``), inside the packet loop. Returns one row per closed period:
        ``control.OUT_COLS`` columns, then the number of RTT digests produced up to its end
        (counting from ``start_periods``; the digests wait in ``take_digests``)."""
        n = int(pk.shape[0])
        pk = np.ascontiguousarray(pk)
        rows: list[np.ndarray] = []
        todo = max(1, (close_upto - int(self._kst[0])) // period_ns + 2) if close_upto >= self._kst[0] else 1
        t_out = np.empty((min(todo + n, 1 << 16), 16), np.float64)
        i = 0
        while True:
            self._kst[1] = 0
            i = self._run(pk, i, col, period_ns, close_upto, t_out)
            if self._kst[1]:
                rows.append(t_out[: self._kst[1]].copy())
            if i >= n and self._kst[0] > close_upto:
                break
        self.packets += n
        self._clock_ns = max(self._clock_ns, int(self._last_ts[0]))
        if not rows:
            return np.zeros((0, 16), np.float64)
        return rows[0] if len(rows) == 1 else np.concatenate(rows)

    def take_digests(self) -> tuple[np.ndarray, np.ndarray]:
        """The digest rows (``layout.DIGEST_RTT_COLS`` / ``DIGEST_FLOW_COLS``) since the last call."""
        rtt, flow = _joined(self._rtt_chunks, len(DIGEST_RTT_COLS)), _joined(self._flow_chunks, len(DIGEST_FLOW_COLS))
        self._rtt_chunks, self._flow_chunks = [], []
        return rtt, flow

    def advance_clock(self, t_s: float) -> None:
        """Move the data-plane clock to ``t_s`` (never backwards): the replay's period boundary."""
        self.advance_clock_ns(int(round(t_s * 1e9)))

    def advance_clock_ns(self, t_ns: int) -> None:
        """``advance_clock`` in integer ns (a replay's boundaries are exact in it)."""
        self._clock_ns = max(self._clock_ns, int(t_ns))

    # -- DataPlaneView -----------------------------------------------------------------
    def clock(self) -> float:
        return self._clock_ns / 1e9

    def clock_ns(self) -> int:
        """The clock in integer ns (the collector's periods are exact in it)."""
        return self._clock_ns

    def read_class_counters(self) -> np.ndarray:
        return self.cls_ctr[C.TAP_EGRESS].astype(np.uint64)

    def read_register(self, name: str, index: np.ndarray | None = None) -> np.ndarray:
        r = self.regs
        if name in C.REG_RTT_STAGE:
            cells = self.rtt[C.REG_RTT_STAGE.index(name)]
            arr = (cells[:, 0].astype(np.uint64) << np.uint64(32)) | cells[:, 1]
        elif name == C.REG_QD_TABLE:
            arr = (self.qtab[:, 0].astype(np.uint64) << np.uint64(32)) | self.qtab[:, 1]
        elif name in C.REG_CMS:
            arr = self.cms[C.REG_CMS.index(name)]
        elif name in r:
            arr = r[name]
        else:
            raise ValueError(f"unknown register {name!r}")
        arr = np.asarray(arr)
        if index is not None:
            arr = arr[np.asarray(index, dtype=np.int64)]
        return arr.astype(np.uint64)

    def drain_digests(self) -> tuple[np.ndarray, np.ndarray]:
        rtt, flow = self.take_digests()
        return _to_struct(rtt, C.DIGEST_RTT_DTYPE), _to_struct(flow, C.DIGEST_FLOW_DTYPE)

    def stats_dict(self) -> dict[str, int]:
        return {k: int(v) for k, v in zip(STAT_NAMES, self.stats, strict=True)}

    def occupancy(self) -> dict[str, float]:
        """Fraction of occupied cells per table (for the benchmark)."""
        return {
            "rtt_stages": [float(np.count_nonzero(self.rtt[s, :, 0])) / C.RTT_STAGE_SIZE
                           for s in range(C.RTT_STAGES)],
            "af_table": float(np.count_nonzero(self.af[:, 0])) / C.AF_TABLE_SIZE,
            "qd_table": float(np.count_nonzero(self.qtab[:, 0])) / C.QD_TABLE_SIZE,
        }


# process_packets' control-period arguments when no collector rides along (``process``)
_NO_COLLECTOR = (np.zeros((1, 16), np.int64), np.zeros((1, 2)), np.zeros(1, np.int64), np.zeros(16, np.int64),
                 np.zeros(16))
_NO_ROWS = np.zeros((1, 16))


def _joined(chunks: list[np.ndarray], cols: int) -> np.ndarray:
    if not chunks:
        return np.zeros((0, cols), np.int64)
    return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)


def _to_struct(rows: np.ndarray, dtype: list[tuple[str, str]]) -> np.ndarray:
    out = np.zeros(rows.shape[0], dtype=dtype)
    for j, (name, _) in enumerate(dtype):
        out[name] = rows[:, j].view(np.uint64) if rows.dtype == np.int64 else rows[:, j]
    return out
