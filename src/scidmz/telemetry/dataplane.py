"""The software twin of the P4 telemetry data plane (MLC Algorithms 2, 5, 7; JENKS 3.1).

``SoftwareDataPlane`` keeps exactly the registers, tables and counters the
P4 programs in ``telemetry_p4/`` keep (sizes, CRC-32 layouts, widths and
thresholds from ``constants.py``) and updates them packet by packet with the
numba functions of ``algorithms.py`` (one per algorithm, by name), over the
parsed columns of ``parse.py``. It implements the ``view.DataPlaneView`` read
interface, so the collector reads it exactly as it reads a switch.

Per packet, in the pipeline order of the P4 programs:

1. Classify (Algorithm 2): class_lpm on the destination (outgoing) or, on a
   miss, on the source (incoming). Misses are counted ``unclassified``.
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
drains and resumes, so any batch size works with bounded memory.
"""

from __future__ import annotations

import ipaddress

import numpy as np

from . import constants as C
from .layout import STAT_NAMES, crc32_fields
from .view import parse_prefix

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


def _parse_prefixes(prefixes: list[str] | tuple[str, ...] | str | None) -> list[ipaddress.IPv4Network]:
    if prefixes is None:
        return []
    if isinstance(prefixes, str):
        prefixes = [x for x in prefixes.split(",") if x.strip()]
    return [parse_prefix(p) for p in prefixes]


class SoftwareDataPlane:
    """The twin: registers, tables, counters and digests of the P4 program, in NumPy.

    ``dtn_prefixes`` (DTN-r host(s), usually one /32) and ``remote_prefixes``
    (remote network) are the class_lpm entries; the longest match wins.
    ``rtt_tap`` chooses where data and ACKs are matched (default the
    bottleneck/egress tap, as in MLC 3.4.2).
    """

    def __init__(self, dtn_prefixes: list[str] | str | None = (C.DEFAULT_DTN_PREFIX,),
                 remote_prefixes: list[str] | str | None = (C.DEFAULT_REMOTE_PREFIX,),
                 tick_ns: int = C.TS_TICK_NS, rtt_tap: int = C.TAP_EGRESS,
                 digest_capacity: int = 1 << 16) -> None:
        if tick_ns <= 0:
            raise ValueError(f"tick_ns must be > 0, got {tick_ns}")
        if rtt_tap not in (C.TAP_INGRESS, C.TAP_EGRESS):
            raise ValueError(f"rtt_tap must be {C.TAP_INGRESS} or {C.TAP_EGRESS}, got {rtt_tap}")
        entries = [(n, C.CLASS_DTN) for n in _parse_prefixes(dtn_prefixes)]
        entries += [(n, C.CLASS_CAMPUS) for n in _parse_prefixes(remote_prefixes)]
        if not entries:
            raise ValueError("class_lpm needs at least one prefix (--dtn-prefix / --remote-prefix)")
        if len(entries) > C.CLASS_LPM_SIZE:
            raise ValueError(f"class_lpm holds {C.CLASS_LPM_SIZE} entries, got {len(entries)}")
        entries.sort(key=lambda e: -e[0].prefixlen)
        self.lpm = entries
        self.tick_ns = int(tick_ns)
        self.rtt_tap = int(rtt_tap)
        self._params = np.array([C.C_TH, C.T_TH_US * 1000 // tick_ns, C.RTT_TIMEOUT_US * 1000 // tick_ns,
                                 C.QD_TIMEOUT_US * 1000 // tick_ns, C.LONG_FLOW_BYTES], dtype=np.int64)
        u32 = np.uint32
        self.cls_ctr = np.zeros((C.N_TAPS, C.N_CLASSES, 2), dtype=np.int64)
        self.regs: dict[str, np.ndarray] = {
            "rtt_sig": np.zeros((C.RTT_STAGES, C.RTT_STAGE_SIZE), u32),
            "rtt_ts": np.zeros((C.RTT_STAGES, C.RTT_STAGE_SIZE), u32),
            C.REG_AF_SIG: np.zeros(C.AF_TABLE_SIZE, u32),
            C.REG_AF_COUNT: np.zeros(C.AF_TABLE_SIZE, np.uint16),
            C.REG_AF_TS: np.zeros(C.AF_TABLE_SIZE, u32),
            C.REG_AF_ACTIVE: np.zeros(C.AF_TABLE_SIZE, np.uint8),
            C.REG_AF_BYTES: np.zeros(C.AF_TABLE_SIZE, u32),
            C.REG_FLOW_RTT: np.zeros(C.AF_TABLE_SIZE, u32),
            C.REG_AF_MAX_EACK: np.zeros(C.AF_TABLE_SIZE, u32),
            C.REG_AF_RECOVER: np.zeros(C.AF_TABLE_SIZE, u32),
            C.REG_AF_RECOVER_FLAG: np.zeros(C.AF_TABLE_SIZE, np.uint8),
            "qd_sig": np.zeros(C.QD_TABLE_SIZE, u32),
            "qd_ts": np.zeros(C.QD_TABLE_SIZE, u32),
            C.REG_QD_LAST: np.zeros(C.N_CLASSES, u32),
            C.REG_QD_SUM: np.zeros(C.N_CLASSES, np.int64),  # int64: numba mixes uint64+int64 as float
            C.REG_QD_CNT: np.zeros(C.N_CLASSES, u32),
            "cms": np.zeros((C.CMS_ROWS, C.CMS_COLS), u32),
        }
        self.stats = np.zeros(len(STAT_NAMES), dtype=np.int64)
        self._rtt_buf = np.zeros((digest_capacity, len(C.DIGEST_RTT_FIELDS)), dtype=np.int64)
        self._flow_buf = np.zeros((digest_capacity, len(C.DIGEST_FLOW_FIELDS)), dtype=np.int64)
        self._rtt_chunks: list[np.ndarray] = []
        self._flow_chunks: list[np.ndarray] = []
        self._last_ts = np.zeros(1, dtype=np.int64)
        self._clock_ns = 0
        self.packets = 0

    # -- classification (class_lpm) ----------------------------------------------
    def classify(self, addr: np.ndarray) -> np.ndarray:
        """LPM of IPv4 addresses (uint32) onto class ids (0 = miss)."""
        a = np.asarray(addr, dtype=np.uint32)
        out = np.zeros(a.shape, dtype=np.uint8)
        for net, cls in self.lpm:  # longest first: the first hit wins
            m = np.uint32(int(net.netmask))
            hit = ((a & m) == np.uint32(int(net.network_address))) & (out == 0)
            out[hit] = cls
        return out

    # -- processing ----------------------------------------------------------------
    def process(self, pk: np.ndarray) -> None:
        """Run a time-ordered batch of parsed packets (``parse.PACKET_DTYPE``) through the pipeline."""
        n = int(pk.shape[0])
        if n == 0:
            return
        from .algorithms import process_packets  # numba: loaded on the first batch, not on import

        r = self.regs
        cols = tuple(np.ascontiguousarray(pk[f]) for f in
                     ("ts_ns", "tap", "kind", "flags", "src", "dst", "proto", "ip_id", "sport", "dport",
                      "seq", "ack", "payload", "frame_len"))
        cd = self.classify(pk["dst"])
        cs = self.classify(pk["src"])
        af = (r[C.REG_AF_SIG], r[C.REG_AF_COUNT], r[C.REG_AF_TS], r[C.REG_AF_ACTIVE], r[C.REG_AF_BYTES],
              r[C.REG_FLOW_RTT], r[C.REG_AF_MAX_EACK], r[C.REG_AF_RECOVER], r[C.REG_AF_RECOVER_FLAG])
        qd = (r["qd_sig"], r["qd_ts"], r[C.REG_QD_LAST], r[C.REG_QD_SUM], r[C.REG_QD_CNT])
        n_rtt = np.zeros(1, np.int64)
        n_flow = np.zeros(1, np.int64)
        digests = (self._rtt_buf, n_rtt, self._flow_buf, n_flow)
        i = 0
        while i < n:
            i = process_packets(i, cols, cd, cs, self.tick_ns, self.rtt_tap, self._params,
                                self.cls_ctr, (r["rtt_sig"], r["rtt_ts"]),
                                af, qd, r["cms"], self.stats, digests, self._last_ts)
            if n_rtt[0]:
                self._rtt_chunks.append(self._rtt_buf[: n_rtt[0]].copy())
            if n_flow[0]:
                self._flow_chunks.append(self._flow_buf[: n_flow[0]].copy())
            n_rtt[0] = 0
            n_flow[0] = 0
        self.packets += n
        self._clock_ns = max(self._clock_ns, int(self._last_ts[0]))

    def advance_clock(self, t_s: float) -> None:
        """Move the data-plane clock to ``t_s`` (never backwards): the replay's period boundary."""
        self._clock_ns = max(self._clock_ns, int(round(t_s * 1e9)))

    # -- DataPlaneView -----------------------------------------------------------------
    def clock(self) -> float:
        return self._clock_ns / 1e9

    def read_class_counters(self) -> np.ndarray:
        return self.cls_ctr[C.TAP_EGRESS].astype(np.uint64)

    def read_register(self, name: str, index: np.ndarray | None = None) -> np.ndarray:
        r = self.regs
        if name in C.REG_RTT_STAGE:
            s = C.REG_RTT_STAGE.index(name)
            arr = (r["rtt_sig"][s].astype(np.uint64) << np.uint64(32)) | r["rtt_ts"][s]
        elif name == C.REG_QD_TABLE:
            arr = (r["qd_sig"].astype(np.uint64) << np.uint64(32)) | r["qd_ts"]
        elif name in C.REG_CMS:
            arr = r["cms"][C.REG_CMS.index(name)]
        elif name in r:
            arr = r[name]
        else:
            raise ValueError(f"unknown register {name!r}")
        arr = np.asarray(arr)
        if index is not None:
            arr = arr[np.asarray(index, dtype=np.int64)]
        return arr.astype(np.uint64)

    def drain_digests(self) -> tuple[np.ndarray, np.ndarray]:
        rtt = _to_struct(self._rtt_chunks, C.DIGEST_RTT_DTYPE)
        flow = _to_struct(self._flow_chunks, C.DIGEST_FLOW_DTYPE)
        self._rtt_chunks, self._flow_chunks = [], []
        return rtt, flow

    def stats_dict(self) -> dict[str, int]:
        return {k: int(v) for k, v in zip(STAT_NAMES, self.stats, strict=True)}

    def occupancy(self) -> dict[str, float]:
        """Fraction of occupied cells per table (for the benchmark)."""
        r = self.regs
        return {
            "rtt_stages": [float(np.count_nonzero(r["rtt_sig"][s])) / C.RTT_STAGE_SIZE
                           for s in range(C.RTT_STAGES)],
            "af_table": float(np.count_nonzero(r[C.REG_AF_SIG])) / C.AF_TABLE_SIZE,
            "qd_table": float(np.count_nonzero(r["qd_sig"])) / C.QD_TABLE_SIZE,
        }


def _to_struct(chunks: list[np.ndarray], dtype: list[tuple[str, str]]) -> np.ndarray:
    arr = np.concatenate(chunks) if chunks else np.zeros((0, len(dtype)), dtype=np.int64)
    out = np.zeros(arr.shape[0], dtype=dtype)
    for j, (name, _) in enumerate(dtype):
        out[name] = arr[:, j]
    return out
