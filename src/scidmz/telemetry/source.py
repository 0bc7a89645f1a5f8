"""``TelemetrySource``: y(t) every T from the software data plane on pcaps or live taps.

Iterating a source yields one ``NetworkState`` per control period T; after
each, ``source.flows`` holds the collector's per-flow DataFrame and
``source.drops`` the per-reason drop counters (parser, capture file and,
live, the kernel's ``PACKET_STATISTICS``).

Replay (``from_pcaps``): the two tap captures are read a chunk at a time
(``pcap.iter_capture``; memory follows the chunk, not the file), merged by
time (ingress first on ties) and cut at the period boundaries
t0 + kT (t0 = first packet), so periods are paced by packet timestamps; the
data plane's clock is set to each boundary before the collector reads, so
Algorithm 3's dt is exactly T. ``realtime=True`` also sleeps so periods come
out at wall-clock pace. Only the egress (bottleneck) tap is required: it
carries rates, RTT and active flows; the ingress tap adds queuing delay.

Live (``live``): two AF_PACKET rings (``capture.RingCapture``) on the mirror
interfaces, kernel timestamps; packets are held for a short reordering
window (``lateness``) so that a packet's ingress copy is processed before its
egress copy even when the two rings are drained in the other order.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..state import NetworkState
from . import constants as C
from .collector import DEFAULT_ALPHA, Collector
from .dataplane import SoftwareDataPlane, merge_taps
from .parse import PACKET_DTYPE

__all__ = ["TelemetrySource"]


def _add(d: dict[str, int], more: dict[str, int]) -> None:
    for k, v in more.items():
        d[k] = d.get(k, 0) + int(v)


# Ours (issue 10): T below 1 ms is finer than any control loop here; the replay's work and
# memory grow with the number of periods, which a single bad timestamp could make huge.
MIN_PERIOD = 1e-3
MAX_PERIOD = 86400.0
MAX_REPLAY_PERIODS = 100_000


class TelemetrySource:
    """An iterator of ``NetworkState`` samples (one per period) from the software twin."""

    def __init__(self, dataplane: SoftwareDataPlane, period: float = 1.0, alpha: float = DEFAULT_ALPHA) -> None:
        if not (isinstance(period, int | float) and MIN_PERIOD <= period <= MAX_PERIOD):
            raise ValueError(f"period must be between {MIN_PERIOD * 1e3:g} ms and {MAX_PERIOD:g} s, got {period!r}")
        self.dp = dataplane
        self.period = float(period)
        self.alpha = alpha
        self.drops: dict[str, int] = {}
        self.packets_in = 0  # packets handed to the data plane so far (replay: every tap's)
        self.collector: Collector | None = None
        self._iter: Iterator[NetworkState] | None = None

    # -- constructors -----------------------------------------------------------
    @classmethod
    def from_pcaps(cls, egress: str, ingress: str | None = None, *, period: float = 1.0,
                   dtn_prefix: str | list[str] = C.DEFAULT_DTN_PREFIX,
                   remote_prefix: str | list[str] = C.DEFAULT_REMOTE_PREFIX,
                   alpha: float = DEFAULT_ALPHA, realtime: bool = False,
                   rtt_tap: int = C.TAP_EGRESS, chunk: int | None = None) -> TelemetrySource:
        from .pcap import CHUNK_PACKETS, iter_capture

        src = cls(SoftwareDataPlane(dtn_prefix, remote_prefix, rtt_tap=rtt_tap), period, alpha)
        # Both headers are checked here, before the first period is asked for.
        streams = [iter_capture(egress, tap=C.TAP_EGRESS, chunk=chunk or CHUNK_PACKETS)]
        if ingress is not None:
            streams.append(iter_capture(ingress, tap=C.TAP_INGRESS, chunk=chunk or CHUNK_PACKETS))
        src._iter = src._replay(src._merged(streams), realtime)
        return src

    @classmethod
    def live(cls, egress: str, ingress: str | None = None, *, period: float = 1.0,
             duration: float | None = None, dtn_prefix: str | list[str] = C.DEFAULT_DTN_PREFIX,
             remote_prefix: str | list[str] = C.DEFAULT_REMOTE_PREFIX, alpha: float = DEFAULT_ALPHA,
             lateness: float = 0.05, rtt_tap: int = C.TAP_EGRESS, **ring_kw: Any) -> TelemetrySource:
        src = cls(SoftwareDataPlane(dtn_prefix, remote_prefix, rtt_tap=rtt_tap), period, alpha)
        src._iter = src._live(egress, ingress, duration, lateness, ring_kw)
        return src

    def __iter__(self) -> Iterator[NetworkState]:
        if self._iter is None:
            raise RuntimeError("TelemetrySource needs from_pcaps(...) or live(...)")
        return self._iter

    @property
    def flows(self) -> Any:
        """Per-flow records (pandas DataFrame) as of the last period, or None before it."""
        return None if self.collector is None else self.collector.flows()

    def stats(self) -> dict[str, int]:
        return self.dp.stats_dict()

    # -- replay ---------------------------------------------------------------------
    def _merged(self, streams: list[Iterator[Any]]) -> Iterator[np.ndarray]:
        """Time-ordered batches of the taps' packets, merged a window at a time.

        A batch holds every buffered packet older than the horizon, the newest timestamp
        every unfinished tap has reached, so no later chunk can come before it (ties wait:
        ingress goes first on equal timestamps). Each chunk is sorted on arrival; a capture
        out of order by more than a chunk (``CHUNK_PACKETS``) is processed in arrival order
        beyond it (ours: bounded memory over a full sort of the file).
        """
        n = len(streams)
        bufs: list[np.ndarray] = [np.zeros(0, dtype=PACKET_DTYPE)] * n
        live = [True] * n

        def pull(j: int) -> None:
            for cap in streams[j]:
                _add(self.drops, cap.drops)
                if cap.packets.size:
                    both = np.concatenate([bufs[j], cap.packets]) if bufs[j].size else cap.packets
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
                    yield rest
                return
            horizon = min(int(bufs[j]["ts_ns"][-1]) for j in pending)
            parts = []
            for j in range(n):
                cut = int(np.searchsorted(bufs[j]["ts_ns"], horizon, side="left"))
                if cut:
                    parts.append(bufs[j][:cut])
                    bufs[j] = bufs[j][cut:]
            if parts:
                yield merge_taps(*parts)
            for j in pending:
                if int(bufs[j]["ts_ns"][-1]) == horizon:  # the taps that set the horizon read on
                    pull(j)

    def _replay(self, batches: Iterator[np.ndarray], realtime: bool) -> Iterator[NetworkState]:
        """Cut the merged packets at the period boundaries t0 + kT and sample after each."""
        dp = self.dp
        period_ns = int(round(self.period * 1e9))
        t0_ns: int | None = None
        col: Collector | None = None
        k = 0  # periods closed so far
        wall0 = time.monotonic()
        for pk in batches:
            ts = pk["ts_ns"]
            if t0_ns is None:
                t0_ns = int(ts[0])
                dp.advance_clock(t0_ns / 1e9)
                self.collector = col = Collector(dp, self.alpha, t0=t0_ns / 1e9)
            assert col is not None
            last = (int(ts[-1]) - t0_ns) // period_ns + 1
            if last > MAX_REPLAY_PERIODS:
                # Work follows the periods, so a far-off timestamp must not decide it.
                raise ValueError(
                    f"capture spans {(int(ts[-1]) - t0_ns) / 1e9:.6g} s = {last} periods of {self.period:g} s; "
                    f"at most {MAX_REPLAY_PERIODS} (a timestamp far off? or use a longer --period)")
            lo = 0
            while True:
                boundary = t0_ns + period_ns * (k + 1)
                hi = lo + int(np.searchsorted(ts[lo:], boundary, side="left"))
                dp.process(pk[lo:hi])
                self.packets_in += hi - lo
                lo = hi
                if lo == len(pk):
                    break
                k += 1
                yield self._close(boundary, k, wall0, realtime)
        if t0_ns is not None:  # the period holding the last packet
            k += 1
            yield self._close(t0_ns + period_ns * k, k, wall0, realtime)

    def _close(self, boundary_ns: int, k: int, wall0: float, realtime: bool) -> NetworkState:
        self.dp.advance_clock(boundary_ns / 1e9)
        if realtime:
            time.sleep(max(0.0, wall0 + k * self.period - time.monotonic()))
        assert self.collector is not None
        return self.collector.sample()

    # -- live -------------------------------------------------------------------------
    def _live(self, egress: str, ingress: str | None, duration: float | None, lateness: float,
              ring_kw: dict[str, Any]) -> Iterator[NetworkState]:
        from .capture import RingCapture

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
                        dp.process(pending[:n_ready])
                        pending = pending[n_ready:]
                    if remaining <= 0:
                        break
                # Process what is due for this period (everything up to the boundary).
                n_due = int(np.searchsorted(pending["ts_ns"], int(boundary * 1e9), side="left"))
                dp.process(pending[:n_due])
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


def _warm_kernels() -> None:
    """Compile/load every numba kernel of the live path on a throwaway packet (and pandas)."""
    import pandas  # noqa: F401  - the collector's first flows() would import it mid-capture

    from .capture import _walker
    from .parse import parse_frames
    from .synth import frame

    one = frame("10.0.0.1", "10.1.0.1", 1, 2, seq=1, flags="PA", payload=10)
    fr = np.frombuffer(one * 2, dtype=np.uint8).copy()
    # One frame and two: parse_frames writes into the strided field views of a
    # structured array, which numba types as contiguous ('C') when they hold one
    # element and as 'A' otherwise, and live blocks come in both sizes. Warming
    # only one left the other to compile in the reader thread after the rings
    # opened (1.3 s idle, several s under load, while the egress ring fills at
    # ~95 blocks/s at 100 Mbit/s: the testbed's taps_clean failures).
    for n in (1, 2):
        z = np.zeros(n, np.int64)
        _walker()(fr, 0, 0, 0, z, z, z, z)
        off = np.arange(n, dtype=np.int64) * len(one)
        ln = np.full(n, len(one), np.int64)
        pk = parse_frames(fr, off, ln, ln, 1, z, tap=C.TAP_EGRESS)
        SoftwareDataPlane().process(pk)
