"""Passive taps on BR1 feeding the software data plane: the testbed's default telemetry.

The MLC testbed (Vega et al., section 3.1, Fig. 2) puts optical passive taps
on BR1's links and feeds a P4 switch. Here ``tc`` ``mirred`` mirrors copy

* TAP_INGRESS: every frame entering BR1 from the campus (S1) and the DTN
  (S3) -- before the bottleneck queue -- and every frame entering BR1 from
  the WAN (the ACKs arriving back at the border router) to veth ``ti``;
* TAP_EGRESS: every frame leaving the bottleneck queue (BR2's WAN ingress,
  i.e. after BR1's TBF+FIFO and the wire) and every frame going back from
  the WAN towards the campus (BR2's WAN egress: the ACKs) to veth ``te``;

whose peers sit in the testbed's ``<prefix>-tap`` namespace, where the
telemetry issue's ``TelemetrySource.live`` reads them with AF_PACKET rings
(from a thread that has entered that namespace; ``setns`` is per thread)
and runs the software twin of the P4 program (Algorithms 2-8) on the real
mirrored packets, yielding y every T. Mirror hooks are ``clsact`` filters,
so BR1's bottleneck qdisc is untouched.

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

``DataplaneTelemetry`` also keeps a ``KernelCounterTelemetry`` running for
the plant's ground truth (bytes delivered per class) and as the fallback
when a data-plane sample does not arrive within T + 5 s (logged, and
reported in ``info["telemetry"]``).
"""

from __future__ import annotations

import ctypes
import logging
import math
import os
import queue
import threading
import time
from typing import Any

from ...state import RTT_CAMPUS_ALPHA, STATE_FIELDS, NetworkState
from .kernel_telemetry import KernelCounterTelemetry
from .procs import set_sysctls
from .topology import Testbed

__all__ = ["DataplaneTelemetry", "setup_mirrors"]

log = logging.getLogger("scidmz.testbed")

_CLSACT_INGRESS = 0xFFFFFFF2
_CLSACT_EGRESS = 0xFFFFFFF3
_CLONE_NEWNET = 0x40000000


def _mirror(ipr: Any, dev: str, hook: int, to: str) -> None:
    idx = ipr.link_lookup(ifname=dev)[0]
    tgt = ipr.link_lookup(ifname=to)[0]
    ipr.tc(
        "add-filter", "u32", idx, parent=hook, protocol=0x0003, target=0x10001, keys=["0x0/0x0+0"],
        action=[{"kind": "mirred", "direction": "egress", "action": "mirror", "ifindex": tgt}],
    )


def setup_mirrors(tb: Testbed) -> tuple[str, str, str]:
    """Create the tap namespace and the mirrors once per testbed; return (ns, egress, ingress) names."""
    from pyroute2 import IPRoute, netns

    tap_ns = tb.ns("tap")
    if tb.record is None:
        raise RuntimeError(f"testbed '{tb.prefix}' is not up")
    if tap_ns in tb.record.data["namespaces"]:
        return tap_ns, "te", "ti"
    tb.record.add("namespaces", tap_ns)
    netns.create(tap_ns)
    set_sysctls(tap_ns, {"net.ipv6.conf.all.disable_ipv6": 1, "net.ipv6.conf.default.disable_ipv6": 1})
    with IPRoute(netns=tb.ns("br1")) as br1, IPRoute(netns=tb.ns("br2")) as br2, IPRoute(netns=tap_ns) as tap:
        br1.link("add", ifname="ti", kind="veth", peer={"ifname": "ti", "net_ns_fd": tap_ns})
        br2.link("add", ifname="te", kind="veth", peer={"ifname": "te", "net_ns_fd": tap_ns})
        for ipr, name in ((br1, "ti"), (br2, "te"), (tap, "ti"), (tap, "te")):
            ipr.link("set", index=ipr.link_lookup(ifname=name)[0], state="up")
        for dev in ("campus", "dtn"):
            br1.tc("add", "clsact", br1.link_lookup(ifname=dev)[0])
            _mirror(br1, dev, _CLSACT_INGRESS, "ti")
        # ACKs re-entering the border router from the WAN: the far end of the RTT samples.
        br1.tc("add", "clsact", br1.link_lookup(ifname="wan")[0])
        _mirror(br1, "wan", _CLSACT_INGRESS, "ti")
        br2.tc("add", "clsact", br2.link_lookup(ifname="wan")[0])
        _mirror(br2, "wan", _CLSACT_INGRESS, "te")
        _mirror(br2, "wan", _CLSACT_EGRESS, "te")
    return tap_ns, "te", "ti"


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


class DataplaneTelemetry:
    """y every T from the software data plane on BR1's mirrored packets (see module docstring)."""

    # Capture rings: 1024 blocks of 64 KiB (64 MiB per ring, as before). The kernel retires
    # a block when it is full or when its timer fires (measured: every ~10 ms), so a
    # ring absorbs a reader stall of block_nr / (blocks retired per s). At 100 Mbit/s
    # a 256 KiB block never fills within 10 ms (a third used): 256 x 256 KiB retired
    # ~100 blocks/s and covered ~2.6 s. 64 KiB blocks fill: ~250 blocks/s at peak on
    # `testbed check`, so 1024 of them cover ~4.1 s (10 s at low rates), for ~5 % of a
    # core in the reader instead of ~3 %.
    def __init__(self, tb: Testbed, lateness: float = 0.05, block_nr: int = 1024, start_timeout: float = 30.0,
                 max_wait: float = 5.0, block_size: int = 1 << 16) -> None:
        from ...telemetry import constants as TC
        from ...telemetry.source import TelemetrySource, _warm_kernels

        self._rtt_tap = TC.TAP_INGRESS
        self.tb = tb
        self.name = "dataplane"
        self.period = tb.scenario.period
        self.max_wait = float(max_wait)
        self.tap_ns, self.egress, self.ingress = setup_mirrors(tb)
        _warm_kernels()  # compile/load numba kernels here, not inside the first period
        self.kernel = KernelCounterTelemetry(tb)
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
            _enter_netns(self.tap_ns)
            dtnr = self.tb.hosts["dtnr"].ip
            src = self._source_cls.live(
                self.egress, self.ingress, period=self.period,
                dtn_prefix=f"{dtnr}/32", remote_prefix="10.2.0.0/16",
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

    @property
    def udp_sources(self) -> int:
        return self.kernel.udp_sources if hasattr(self, "kernel") else 0

    @udp_sources.setter
    def udp_sources(self, n: int) -> None:
        if hasattr(self, "kernel"):
            self.kernel.udp_sources = n

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
        self.name = "dataplane"
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
        while the data plane has none. Columns as ``kernel_telemetry.FLOW_TABLE_COLUMNS`` less
        ``min_rtt`` (the data plane samples RTTs; a queue policy keeps its own windowed minimum);
        ``role`` is the sending host's kind (dtn | campus | short), from its address."""
        col = getattr(self._src, "collector", None)
        if col is None or self.name != "dataplane":
            return self.kernel.flows()
        # The collector thread may be mid-period: the table is a snapshot of whole arrays.
        df = col.flows()
        kind = {h.ip: h.role for h in self.tb.senders}
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
