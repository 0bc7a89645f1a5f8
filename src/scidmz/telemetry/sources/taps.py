"""``DataplaneTelemetry``: the software data plane on the testbed's passive taps (its default telemetry).

The MLC testbed (Vega et al., section 3.1, Fig. 2) puts optical passive taps
on BR1's links and feeds a P4 switch. Here ``tc`` ``mirred`` mirrors copy

* TAP_INGRESS: every frame entering BR1 from the campus (S1) and the DTN
  (S3) -- before the bottleneck queue -- and every frame entering BR1 from
  the WAN (the ACKs arriving back at the border router) to veth ``ti``;
* TAP_EGRESS: every frame leaving the bottleneck queue (BR2's WAN ingress,
  i.e. after BR1's TBF+FIFO and the wire) and every frame going back from
  the WAN towards the campus (BR2's WAN egress: the ACKs) to veth ``te``;

whose peers sit in the testbed's ``<prefix>-tap`` namespace (the plant's
builder makes the taps: ``plant/netns/build.py``, ``add_taps``), where
``TelemetrySource.live`` reads them with AF_PACKET rings (from a thread that
has entered that namespace; ``setns`` is per thread) and runs the software
twin of the P4 program (Algorithms 2-8) on the real mirrored packets,
yielding y every T. This module takes only plain data: the tap namespace
and veth names, the DTN and remote prefixes, the senders' roles.

Where RTT is measured (ARCHITECTURE.md: data packet arriving at the border
router -> the ACK covering it arriving back, *including* the bottleneck
queue): the twin matches SEQ/eACK on the ingress tap (``rtt_tap =
TAP_INGRESS``), whose data copies are taken before BR1's queue and whose
ACK copies are taken where the ACKs re-enter BR1. Matching on the egress
tap, as this module did first, timestamps the data *after* the queue and
so leaves the queuing delay out of ``rtt_dtn``/``rtt_campus``. Rates and
active flows stay on the egress tap (what left the bottleneck); queuing
delay pairs each packet's two copies (Algorithm 5). Rates count the
captured frame length: the Ethernet frame (14-byte header + IP packet).
Algorithm 4's campus-RTT smoothing uses the same alpha as the fluid plant
and the kernel source (``state.RTT_CAMPUS_ALPHA``), so the
three report one ``rtt_campus``.

``DataplaneTelemetry`` also keeps a kernel source (``kernel.py``, made by
the callable it is given, and closed with it) running for the plant's
ground truth (bytes delivered per class) and as the fallback when a
data-plane sample does not arrive within T + 5 s (logged, and reported in
``info["telemetry"]``).
"""

from __future__ import annotations

import ctypes
import logging
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...state import RTT_CAMPUS_ALPHA, STATE_FIELDS, NetworkState

__all__ = ["DataplaneTelemetry", "TapPoints"]

log = logging.getLogger("scidmz.testbed")

_CLONE_NEWNET = 0x40000000


def _enter_netns(ns: str) -> None:
    """Move the *calling thread* into namespace ``ns`` (setns(2) is per thread)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {ns}: {os.strerror(err)}")
    finally:
        os.close(fd)


@dataclass(frozen=True)
class TapPoints:
    """Where the data plane reads, and what it needs to know of the network: plain data."""

    ns: str  # namespace holding the tap veths
    egress: str  # veth with the copies of what left the bottleneck (and of the ACKs going back)
    ingress: str  # veth with the copies of what entered the border router (and of the ACKs arriving back)
    period: float  # T, s
    dtn_prefix: str  # the DTN's receiver, e.g. "10.2.0.2/32": its flows are the DTN class
    remote_prefix: str  # the far side of the WAN, e.g. "10.2.0.0/16"
    roles: Mapping[str, str]  # sender address -> dtn | campus | short (the flow table's role column)


class DataplaneTelemetry:
    """y every T from the software data plane on BR1's mirrored packets (see module docstring).

    ``kernel``: a callable making the kernel-counter source (``kernel.KernelCounterTelemetry``)
    that runs beside it for ground truth and as the fallback; it is closed with this source.
    """

    name = "dataplane"

    # Capture rings: 1024 blocks of 64 KiB (64 MiB per ring, as before). The kernel retires
    # a block when it is full or when its timer fires (measured: every ~10 ms), so a
    # ring absorbs a reader stall of block_nr / (blocks retired per s). At 100 Mbit/s
    # a 256 KiB block never fills within 10 ms (a third used): 256 x 256 KiB retired
    # ~100 blocks/s and covered ~2.6 s. 64 KiB blocks fill: ~250 blocks/s at peak on
    # `testbed check`, so 1024 of them cover ~4.1 s (10 s at low rates), for ~5 % of a
    # core in the reader instead of ~3 %.
    def __init__(self, points: TapPoints, kernel: Callable[[], Any], lateness: float = 0.05, block_nr: int = 1024,
                 start_timeout: float = 30.0, max_wait: float = 5.0, block_size: int = 1 << 16) -> None:
        from .. import constants as TC
        from ..twin.source import TelemetrySource, _warm_kernels

        self._rtt_tap = TC.TAP_INGRESS
        self.points = points
        self.period = points.period
        self.max_wait = float(max_wait)
        _warm_kernels()  # compile/load numba kernels here, not inside the first period
        self.kernel = kernel()
        self.drops: dict[str, int] = {}
        self.last_info: dict[str, Any] = {}
        self._q: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._err: BaseException | None = None
        self._source_cls = TelemetrySource
        self._lateness = lateness
        self._ring_kw = {"block_nr": block_nr, "block_size": block_size}
        self._src: Any = None
        self._thread = threading.Thread(target=self._run, name="dataplane-telemetry", daemon=True)
        self._thread.start()
        if not self._ready.wait(start_timeout) or self._err is not None:
            self.close()
            raise RuntimeError(f"data-plane telemetry did not start: {self._err or 'timeout'}")
        # The source's periods start when its rings are open (collector.t0, wall
        # clock); the plant aligns its period boundaries to that instant.
        deadline = time.monotonic() + start_timeout
        while getattr(self._src, "collector", None) is None:
            if self._err is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"data-plane telemetry did not start: {self._err or 'timeout'}")
            time.sleep(0.005)
        self.start_mono = time.monotonic() - (time.time() - float(self._src.collector.t0))

    def _run(self) -> None:
        try:
            p = self.points
            _enter_netns(p.ns)
            src = self._source_cls.live(
                p.egress, p.ingress, period=self.period, dtn_prefix=p.dtn_prefix, remote_prefix=p.remote_prefix,
                lateness=self._lateness, rtt_tap=self._rtt_tap, alpha=RTT_CAMPUS_ALPHA, **self._ring_kw,
            )
            self._src = src
            it = iter(src)
            self._ready.set()
            for k, y in enumerate(it, 1):
                col = src.collector
                self._q.put((k, y, dict(src.drops), dict(col.stale) if col is not None else {}))
                if self._stop.is_set():
                    break
        except BaseException as exc:  # noqa: BLE001 - reported to the plant, which falls back
            self._err = exc
            self._ready.set()
            self._q.put(None)

    def set_udp(self, flows: Sequence[str], sources: int) -> None:
        """The running UDP senders, for the kernel source (the data plane sees UDP flows itself)."""
        if hasattr(self, "kernel"):
            self.kernel.set_udp(flows, sources)

    def sample(self, t: float) -> NetworkState:
        """The data plane's y for the period ending at ``t`` (kernel counters if it is late or failed)."""
        if t <= 0:
            return self.kernel.sample(t)
        # Ground truth is read at the boundary itself, before waiting for the data plane.
        ks = self.kernel.sample(t)
        self.last_info = dict(self.kernel.last_info)
        # Samples carry their period index, so a late one is never taken for the next period.
        want = int(round(t / self.period))
        deadline = time.monotonic() + self.period + self.max_wait
        item = None
        while True:
            try:
                item = self._q.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                item = None
                break
            if item is None or item[0] >= want:
                break
        if item is None:
            if self.name == "dataplane":
                log.warning("data-plane telemetry %s at t=%.1f s; using kernel counters",
                            f"failed ({self._err})" if self._err else "sample late", t)
            self.name = "kernel-fallback"
            return ks
        _, y, self.drops, stale = item
        for f, flag in stale.items():
            self.last_info[f"stale_{f}"] = float(flag)
        # Kernel truth for the same period, next to the data plane's y (tests and checks compare them).
        self.last_info["kernel_y"] = ks.as_vector()
        self.last_info["tap_drops"] = float(self.drops.get("kernel_drops", 0))
        vals = {}
        for f in STATE_FIELDS:
            v = float(getattr(y, f))
            # A period without any RTT/queue sample leaves the twin's value undefined;
            # the kernel's reading stands in for that field only.
            vals[f] = v if math.isfinite(v) else float(getattr(ks, f))
        return NetworkState(t=float(t), **vals)

    def flows(self) -> dict[str, list[Any]]:
        """The data plane's per-flow table (the collector's, as of its last period), or the kernel's
        while the data plane has none. Columns as ``kernel.FLOW_TABLE_COLUMNS`` less
        ``min_rtt`` (the data plane samples RTTs; a queue policy keeps its own windowed minimum);
        ``role`` is the sending host's kind (dtn | campus | short), from its address."""
        col = getattr(self._src, "collector", None)
        if col is None or self.name != "dataplane":
            return self.kernel.flows()
        # The collector thread may be mid-period: the table is a snapshot of whole arrays.
        df = col.flows()
        kind = self.points.roles
        src = df["src"].tolist()
        return {
            "src": src, "dst": df["dst"].tolist(), "sport": df["sport"].tolist(), "dport": df["dport"].tolist(),
            "proto": df["proto"].tolist(), "rtt": df["rtt"].tolist(), "rate": df["rate"].tolist(),
            "bytes": df["bytes"].tolist(), "long_flow": df["long_flow"].tolist(),
            "role": [kind.get(a, "campus") for a in src],
        }

    def latest_drops(self) -> dict[str, int]:
        """Drain queued samples and return the newest capture/parser drop counters."""
        while True:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                self.drops = item[2]
        return dict(self.drops)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.period + 2.0)
        if hasattr(self, "kernel"):
            self.kernel.close()
