"""``TelemetrySource``: y(t) every T from the software data plane on pcaps or live taps.

Iterating a source yields one ``NetworkState`` per control period T; after
each, ``source.flows`` holds the collector's per-flow DataFrame and
``source.drops`` the per-reason drop counters (parser, capture file and,
live, the kernel's ``PACKET_STATISTICS``).

Replay (``from_pcaps``): the two tap captures are read a chunk at a time
(``pcap.iter_capture``; memory follows the chunk, not the file), merged by
time (ingress first on ties) and cut at the period boundaries t0 + kT (t0 =
first packet), so periods are paced by packet timestamps and Algorithm 3's dt
is exactly T. The periods are closed inside the data plane's packet loop
(``SoftwareDataPlane.process_periods``) with the collector's own arithmetic
(``control.py``), so a replay costs per packet, not per period; ``batches()``
hands them out as arrays (``PeriodBatch``), with each period's RTT samples.
``realtime=True`` sleeps so periods come out at wall-clock pace. Only the
egress (bottleneck) tap is required: it carries rates, RTT and active flows;
the ingress tap adds queuing delay. Packets can be restricted to a time
window (``window``) or cleared of far-off timestamps (``skip_outliers``),
with a count (``outside_window``, ``outlier``).

Live (``live``): two AF_PACKET rings (``capture.RingCapture``) on the mirror
interfaces, kernel timestamps; packets are held for a short reordering
window (``lateness``) so that a packet's ingress copy is processed before its
egress copy even when the two rings are drained in the other order.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...state import NetworkState
from .. import constants as C
from ..collector import DEFAULT_ALPHA, Collector, state_of_row
from .dataplane import SoftwareDataPlane, merge_taps
from .layout import DIGEST_RTT_COLS
from .parse import PACKET_DTYPE, REASONS

__all__ = ["TelemetrySource", "PeriodBatch", "OUTLIER_GAP_S"]


def _add(d: dict[Any, int], more: dict[Any, int]) -> None:
    for k, v in more.items():
        d[k] = d.get(k, 0) + int(v)


# Ours: T below 1 ms is finer than any control loop here. The number of periods
# is bounded (their cost is small now, but their output is not), so a single bad
# timestamp cannot ask for a billion of them.
MIN_PERIOD = 1e-3
MAX_PERIOD = 86400.0
MAX_REPLAY_PERIODS = 1_000_000
#: ``skip_outliers``: timestamps are split where a whole hour holds no packet (ours: far
#: above any idle gap of a transfer, far below the years a bad clock or a corrupt record
#: puts between a stray packet and the rest), and only the part with most packets is kept.
OUTLIER_GAP_S = 3600


@dataclass
class PeriodBatch:
    """Consecutive periods of a replay as arrays.

    ``rows``: one row per period, ``control.OUT_COLS`` columns (t, the seven y
    fields, their seven stale flags); ``rtt``: the RTT digest rows
    (``layout.DIGEST_RTT_COLS``) of these periods, oldest first; ``rtt_end[j]``: the
    end of period j's samples in ``rtt`` (period j has ``rtt[rtt_end[j-1]:rtt_end[j]]``).
    """

    rows: np.ndarray
    rtt: np.ndarray
    rtt_end: np.ndarray

    def states(self) -> list[NetworkState]:
        return [state_of_row(r)[0] for r in self.rows]


class TelemetrySource:
    """An iterator of ``NetworkState`` samples (one per period) from the software twin."""

    def __init__(self, dataplane: SoftwareDataPlane, period: float = 1.0, alpha: float = DEFAULT_ALPHA) -> None:
        if not (isinstance(period, int | float) and MIN_PERIOD <= period <= MAX_PERIOD):
            raise ValueError(f"period must be between {MIN_PERIOD * 1e3:g} ms and {MAX_PERIOD:g} s, got {period!r}")
        self.dp = dataplane
        self.period = float(period)
        self.alpha = alpha
        self.drops: dict[str, int] = {}
        self.drop_bytes: dict[str, int] = {}
        self.linktypes: dict[int, int] = {}
        self.records = 0  # capture records read (replay), every tap's
        self.wire_bytes = 0
        self.clock_steps = 0  # times a capture's clock stepped back (replay), and the largest step
        self.clock_back_ns = 0
        self.packets_in = 0  # packets handed to the data plane so far (replay: every tap's)
        self.collector: Collector | None = None
        self._iter: Iterator[NetworkState] | None = None
        self._batches: Iterator[PeriodBatch] | None = None

    # -- constructors -----------------------------------------------------------
    @classmethod
    def from_pcaps(cls, egress: str, ingress: str | None = None, *, period: float = 1.0,
                   dtn_prefix: str | list[str] = C.DEFAULT_DTN_PREFIX,
                   remote_prefix: str | list[str] = C.DEFAULT_REMOTE_PREFIX,
                   alpha: float = DEFAULT_ALPHA, realtime: bool = False,
                   rtt_tap: int = C.TAP_EGRESS, chunk: int | None = None,
                   rtt_timeout: float = C.RTT_TIMEOUT_US * 1e-6,
                   window: tuple[Any, Any] = (None, None),
                   skip_outliers: bool = False) -> TelemetrySource:
        """Replay tap captures. ``window``: (start, end), each None, ns since the epoch, or
        ("abs", ns) / ("rel", ns after the first packet replayed); ``skip_outliers``: drop
        packets far off in time (``OUTLIER_GAP_S``); both counted."""
        from ..sources.pcap import CHUNK_PACKETS, iter_capture

        dp = SoftwareDataPlane(dtn_prefix, remote_prefix, rtt_tap=rtt_tap, rtt_timeout=rtt_timeout)
        src = cls(dp, period, alpha)
        paths = [egress] if ingress is None else [egress, ingress]
        # Both headers are checked here, before the first period is asked for.
        streams = [iter_capture(p, tap=t, chunk=chunk or CHUNK_PACKETS)
                   for p, t in zip(paths, (C.TAP_EGRESS, C.TAP_INGRESS), strict=False)]
        body = _main_body(paths) if skip_outliers else None
        first = body[0] if body else None
        if any(isinstance(w, tuple) and w[0] == "rel" for w in window):
            first = max(first or 0, _first_time(egress) if body is None else _first_time(egress, body))
        lo, hi = (w if w is None or isinstance(w, int) else (w[1] if w[0] == "abs" else first + w[1])
                  for w in window)
        if lo is not None and hi is not None and hi <= lo:
            raise ValueError("--end must be after --start")
        keep = [(lo, hi, "outside_window")] if lo is not None or hi is not None else []
        if body is not None:  # the outliers first, then the window inside the main body
            keep.insert(0, (*body, "outlier"))
        src._batches = src._replay(src._merged(streams, keep))
        src._iter = src._states(realtime)
        return src

    @classmethod
    def live(cls, egress: str, ingress: str | None = None, *, period: float = 1.0,
             duration: float | None = None, dtn_prefix: str | list[str] = C.DEFAULT_DTN_PREFIX,
             remote_prefix: str | list[str] = C.DEFAULT_REMOTE_PREFIX, alpha: float = DEFAULT_ALPHA,
             lateness: float = 0.05, rtt_tap: int = C.TAP_EGRESS,
             rtt_timeout: float = C.RTT_TIMEOUT_US * 1e-6, **ring_kw: Any) -> TelemetrySource:
        dp = SoftwareDataPlane(dtn_prefix, remote_prefix, rtt_tap=rtt_tap, rtt_timeout=rtt_timeout)
        src = cls(dp, period, alpha)
        src._iter = src._live(egress, ingress, duration, lateness, ring_kw)
        return src

    def __iter__(self) -> Iterator[NetworkState]:
        if self._iter is None:
            raise RuntimeError("TelemetrySource needs from_pcaps(...) or live(...)")
        return self._iter

    def batches(self) -> Iterator[PeriodBatch]:
        """A replay's periods as arrays, a batch at a time (instead of iterating states)."""
        if self._batches is None:
            raise RuntimeError("batches() is for replays (TelemetrySource.from_pcaps)")
        batches, self._batches = self._batches, None
        if batches is None:
            raise RuntimeError("a replay can be consumed once")
        return batches

    @property
    def flows(self) -> Any:
        """Per-flow records (pandas DataFrame) as of the last period, or None before it."""
        return None if self.collector is None else self.collector.flows()

    def stats(self) -> dict[str, int]:
        return self.dp.stats_dict()

    # -- replay ---------------------------------------------------------------------
    def _count(self, cap: Any) -> None:
        _add(self.drops, cap.drops)
        _add(self.drop_bytes, cap.drop_bytes)
        _add(self.linktypes, cap.linktypes)
        self.records += int(cap.packets.size)
        self.wire_bytes += int(cap.wire_bytes)
        self.clock_steps += int(getattr(cap, "clock_steps", 0))
        self.clock_back_ns = max(self.clock_back_ns, int(getattr(cap, "clock_back_ns", 0)))

    def _kept(self, cap: Any, keep: list[tuple[int | None, int | None, str]]) -> np.ndarray:
        """A chunk's packets after the time filters (each (lo, hi, reason) of ``keep``, counted), sorted."""
        self._count(cap)
        pk = cap.packets
        for lo, hi, why in keep:
            if not pk.size:
                break
            ts = pk["ts_ns"]
            ok = np.ones(pk.size, bool)
            if lo is not None:
                ok &= ts >= lo
            if hi is not None:
                ok &= ts < hi
            if not ok.all():
                gone = pk[~ok]
                _add(self.drops, {why: gone.size})
                _add(self.drop_bytes, {why: int(gone["frame_len"].sum())})
                pk = pk[ok]
        ts = pk["ts_ns"]
        return pk if bool(np.all(ts[1:] >= ts[:-1])) else pk[np.argsort(ts, kind="stable")]

    def _merged(self, streams: list[Iterator[Any]],
                keep: list[tuple[int | None, int | None, str]]) -> Iterator[tuple[np.ndarray, int | None]]:
        """Time-ordered batches of the taps' packets, merged a window at a time, with their horizon.

        A batch holds every buffered packet older than the horizon, the newest timestamp
        every unfinished tap has reached, so no later chunk can come before it (ties wait:
        ingress goes first on equal timestamps); the horizon is None after the last batch.
        Each chunk is sorted on arrival; a capture out of order by more than a chunk
        (``CHUNK_PACKETS``) is processed in arrival order beyond it (ours: bounded memory
        over a full sort of the file). Packets outside each (lo, hi, reason) of ``keep``
        are dropped and counted under its reason.
        """
        n = len(streams)
        if n == 1:  # one tap: nothing to wait for, a chunk is complete up to its newest packet
            prev: np.ndarray | None = None
            for cap in streams[0]:
                pk = self._kept(cap, keep)
                if pk.size:
                    if prev is not None:
                        yield prev, int(prev["ts_ns"][-1])
                    prev = pk
            if prev is not None:
                yield prev, None
            return
        bufs: list[np.ndarray] = [np.zeros(0, dtype=PACKET_DTYPE)] * n
        live = [True] * n

        def pull(j: int) -> None:
            for cap in streams[j]:
                pk = self._kept(cap, keep)
                if pk.size:
                    both = np.concatenate([bufs[j], pk]) if bufs[j].size else pk
                    ts = both["ts_ns"]
                    bufs[j] = both if bool(np.all(ts[1:] >= ts[:-1])) else both[np.argsort(ts, kind="stable")]
                    return
            live[j] = False

        for j in range(n):
            pull(j)
        while True:
            pending = [j for j in range(n) if live[j]]
            if not pending:
                rest = merge_taps(*bufs)
                if len(rest):
                    yield rest, None
                return
            horizon = min(int(bufs[j]["ts_ns"][-1]) for j in pending)
            parts = []
            for j in range(n):
                cut = int(np.searchsorted(bufs[j]["ts_ns"], horizon, side="left"))
                if cut:
                    parts.append(bufs[j][:cut])
                    bufs[j] = bufs[j][cut:]
            if parts:
                yield merge_taps(*parts), horizon
            for j in pending:
                if int(bufs[j]["ts_ns"][-1]) == horizon:  # the taps that set the horizon read on
                    pull(j)

    def _replay(self, batches: Iterator[tuple[np.ndarray, int | None]]) -> Iterator[PeriodBatch]:
        """Run each merged batch through the data plane, closing the periods it completes."""
        dp = self.dp
        period_ns = int(round(self.period * 1e9))
        t0_ns: int | None = None
        col: Collector | None = None
        pending = np.zeros((0, len(DIGEST_RTT_COLS)), np.int64)  # RTT samples of the open period
        base = 0  # the data plane's count of RTT digests before pending[0]
        last_ns = 0
        for pk, horizon in batches:
            if t0_ns is None:
                if not pk.size:
                    continue
                t0_ns = int(pk["ts_ns"][0])
                dp.advance_clock_ns(t0_ns)
                self.collector = col = Collector(dp, self.alpha, t0_ns=t0_ns)
                dp.start_periods(t0_ns + period_ns)
            assert col is not None
            if pk.size:
                last_ns = int(pk["ts_ns"][-1])
            periods = (last_ns - t0_ns) // period_ns + 1
            # the period holding the last packet closes at the end; before, every period up to
            # the horizon (which another tap's newest packet may have put far ahead)
            upto = horizon if horizon is not None else t0_ns + period_ns * periods
            span = max(last_ns, upto) - t0_ns
            if span // period_ns + 1 > MAX_REPLAY_PERIODS:
                from ..sources.pcap import (
                    CaptureInputError,  # the capture's content: exit 1, as its other refusals
                )

                raise CaptureInputError(
                    f"capture spans {span / 1e9:.6g} s = {span // period_ns + 1} periods of {self.period:g} s; "
                    f"at most {MAX_REPLAY_PERIODS} (a timestamp far off? use --skip-outliers or --start/--end, "
                    "or a longer --period)")
            rows = dp.process_periods(pk, col.state, period_ns, upto)
            self.packets_in += int(pk.size)
            rtt, flow = dp.take_digests()
            col.note_long_flows(flow)
            col.rtt_samples += int(rtt.shape[0])
            pending = np.concatenate([pending, rtt]) if pending.size else rtt
            if rows.shape[0]:
                ends = rows[:, 15].astype(np.int64) - base
                out, pending = pending[: ends[-1]], pending[ends[-1]:]
                base += int(ends[-1])
                dp.advance_clock_ns(t0_ns + round(rows[-1, 0] * 1e9))  # t = an exact ns count / 1e9
                col.stale = state_of_row(rows[-1])[1]
                yield PeriodBatch(rows=rows[:, :15], rtt=out, rtt_end=ends)

    def _states(self, realtime: bool) -> Iterator[NetworkState]:
        wall0 = time.monotonic()
        k = 0
        for b in self.batches():
            for y in b.states():
                k += 1
                if realtime:
                    time.sleep(max(0.0, wall0 + k * self.period - time.monotonic()))
                yield y

    # -- live -------------------------------------------------------------------------
    def _live(self, egress: str, ingress: str | None, duration: float | None, lateness: float,
              ring_kw: dict[str, Any]) -> Iterator[NetworkState]:
        from ..sources.capture import RingCapture

        dp = self.dp
        _warm_kernels()  # load the numba kernels before the rings start filling
        rings = [RingCapture(egress, tap=C.TAP_EGRESS, **ring_kw)]
        try:
            if ingress is not None:
                rings.append(RingCapture(ingress, tap=C.TAP_INGRESS, **ring_kw))
            late_ns = int(lateness * 1e9)
            pending = np.zeros(0, dtype=PACKET_DTYPE)
            start = time.time()
            start_ns = int(start * 1e9)
            dp.advance_clock(start)
            self.collector = col = Collector(dp, self.alpha, t0=start)
            k = 0
            while duration is None or (k + 1) * self.period <= duration + 1e-9:
                boundary = start + (k + 1) * self.period
                # Wait until the boundary plus the reordering window, so the
                # period's last packets from both rings are in before it closes.
                while True:
                    remaining = boundary + lateness - time.time()
                    batch = [r.poll(timeout=max(0.0, min(remaining, 0.05))) for r in rings]
                    if k == 0:  # frames the rings caught before the first period began
                        batch = [b[b["ts_ns"] >= start_ns] for b in batch]
                    if any(b.size for b in batch):
                        pending = merge_taps(pending, *batch)
                    cutoff = min(int((time.time() - lateness) * 1e9), int(boundary * 1e9) - 1)
                    if late_ns and pending.size:
                        n_ready = int(np.searchsorted(pending["ts_ns"], cutoff, side="right"))
                        self._live_process(pending[:n_ready])
                        pending = pending[n_ready:]
                    if remaining <= 0:
                        break
                # Process what is due for this period (everything up to the boundary).
                n_due = int(np.searchsorted(pending["ts_ns"], int(boundary * 1e9), side="left"))
                self._live_process(pending[:n_due])
                pending = pending[n_due:]
                dp.advance_clock(boundary)
                y = col.sample()
                self.drops = {}
                for r in rings:
                    _add(self.drops, r.drops())
                k += 1
                yield y
        finally:
            for r in rings:
                r.close()

    def _live_process(self, pk: np.ndarray) -> None:
        self.dp.process(pk)
        self.packets_in += int(pk.size)
        self.records += int(pk.size)
        self.wire_bytes += int(pk["frame_len"].sum())


def _first_time(path: str, within: tuple[int, int] | None = None) -> int:
    """The capture's first timestamp (ns; inside ``within`` if given), from its record headers."""
    from ..sources.pcap import iter_times

    for ts in iter_times(path):
        if within is not None:
            ts = ts[(ts >= within[0]) & (ts < within[1])]
        if ts.size:
            return int(ts.min())
    return 0


def _main_body(paths: list[str]) -> tuple[int, int]:
    """The time window [lo, hi) of the largest run of packets with no ``OUTLIER_GAP_S``-long
    empty stretch between them, over all captures (a pass over the record headers only)."""
    from ..sources.pcap import iter_times

    gap = OUTLIER_GAP_S * 1_000_000_000
    counts: dict[int, int] = {}
    for p in paths:
        for ts in iter_times(p):
            if ts.size:
                b, c = np.unique(ts // gap, return_counts=True)
                for k, v in zip(b.tolist(), c.tolist(), strict=True):
                    counts[k] = counts.get(k, 0) + v
    if not counts:
        return 0, 0
    bins = sorted(counts)
    best, run, run_start = (0, bins[0], bins[0]), 0, bins[0]
    for j, b in enumerate(bins):
        if j and b != bins[j - 1] + 1:
            run, run_start = 0, b
        run += counts[b]
        if run > best[0]:
            best = (run, run_start, b)
    return best[1] * gap, (best[2] + 1) * gap


def _warm_kernels() -> None:
    """Compile/load every numba kernel of the live path on a throwaway packet (and pandas)."""
    import pandas  # noqa: F401  - the collector's first flows() would import it mid-capture

    from ..sources.capture import _walker
    from ..sources.fragments import Reassembler
    from ..sources.synth import frame
    from .parse import parse_frames

    # the ring's fragment reassembly, on a GRE fragment (its kernel runs only when one comes)
    piece = np.frombuffer(frame("192.0.2.1", "192.0.2.2", proto=47, payload=64, frag=0x2000), dtype=np.uint8)
    at, n1 = np.zeros(1, np.int64), np.full(1, piece.size, np.int64)
    Reassembler().feed(piece, at, n1, n1, np.ones(1, np.int64), at, parse_frames(piece, at, n1, n1, 1, at))

    one = frame("10.0.0.1", "10.1.0.1", 1, 2, seq=1, flags="PA", payload=10)
    fr = np.frombuffer(one * 2, dtype=np.uint8).copy()
    # One frame and two: blocks of both sizes come from the rings; warming both keeps
    # any compilation out of the reader thread after the rings opened (the testbed's
    # taps_clean failures: a first-time compile stalled the reader for seconds).
    for n in (1, 2):
        z = np.zeros(n, np.int64)
        _walker()(fr, 0, 0, 0, z, z, z, z)
        off = np.arange(n, dtype=np.int64) * len(one)
        ln = np.full(n, len(one), np.int64)
        pk = parse_frames(fr, off, ln, ln, 1, z, tap=C.TAP_EGRESS)
        dp = SoftwareDataPlane()
        dp.process(pk)
        Collector(dp).sample()


assert REASONS.index("outlier") > 0 and REASONS.index("outside_window") > 0
