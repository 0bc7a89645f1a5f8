"""``KernelCounterTelemetry``: the INTERIM telemetry source of the netns testbed, from kernel counters.

This is not the paper's passive P4 telemetry (Vega et al., section 3.2,
Algorithms 2-8); it stands in for it when the software data plane on
mirrored packets is unavailable, and stays as a fallback. Each of the seven
Table 3 variables comes from the kernel:

* ``rate_dtn`` / ``rate_campus``: bytes delivered past the bottleneck, from
  the TX byte counters of S2's switch ports towards DTN-r and towards
  r1..rN (one netlink dump in S2's namespace), over the period.
* ``qdelay_dtn`` / ``qdelay_campus``: the bottleneck's drop-tail FIFO is
  shared, so both are backlog / B_max of BR1's WAN qdisc, averaged over
  samples taken every ``sample_every`` s during the period.
* ``rtt_dtn`` / ``rtt_campus``: smoothed RTT (tcpi_rtt) of the senders'
  active TCP sockets, read with inet_diag (pyroute2 ``DiagSocket``, one per
  sender namespace, no processes); ``rtt_campus`` is an EWMA with ``alpha``.
* ``active_flows``: TCP sockets whose acknowledged bytes grew by at least
  ``active_bytes`` in the period, plus running UDP CBR sources.

Ground truth for ``info``: bytes delivered per class, bottleneck drops.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import numpy as np

from ...state import NetworkState
from .topology import Testbed

__all__ = ["KernelCounterTelemetry"]

_ESTABLISHED = 1 << 1
_INET_DIAG_INFO = 1 << 1  # extension bit for tcp_info
_DATA_PORTS = (5201, 5300)


class KernelCounterTelemetry:
    """Interim ``TelemetrySource`` for a built ``Testbed`` (see module docstring)."""

    name = "kernel"

    def __init__(
        self,
        tb: Testbed,
        sample_every: float = 0.1,
        alpha: float = 0.5,
        active_bytes: float = 15e3,
    ) -> None:
        from pyroute2 import DiagSocket, IPRoute, netns

        self.tb = tb
        self.alpha = float(alpha)
        self.active_bytes = float(active_bytes)
        self.sample_every = float(sample_every)
        self.capacity = tb.scenario.capacity
        self._sw2 = IPRoute(netns=tb.ns("sw2"))
        self._br1 = IPRoute(netns=tb.ns("br1"))
        self._wan = self._br1.link_lookup(ifname="wan")[0]
        # pyroute2 sockets are not thread-safe: the sampler thread gets its own.
        self._br1_sampler = IPRoute(netns=tb.ns("br1"))
        self._diag: dict[str, Any] = {}
        for h in tb.senders:
            netns.pushns(h.ns)
            try:
                d = DiagSocket()
                d.bind()
            finally:
                netns.popns()
            self._diag[h.name] = d
        self._lock = threading.Lock()
        self._backlog: list[float] = []
        self._stop = threading.Event()
        self._prev_ports = self._port_bytes()
        self._prev_drops = self._qdisc()[1]
        self._prev_t = time.monotonic()
        self._prev_acked: dict[tuple, int] = {}
        self._rtt_campus: float | None = None
        self._rtt_dtn: float | None = None
        self.udp_sources = 0
        self.last_info: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._sampler, name="kernel-telemetry", daemon=True)
        self._thread.start()

    # -- raw reads -------------------------------------------------------------------
    def _port_bytes(self) -> dict[str, int]:
        return {
            ln.get_attr("IFLA_IFNAME"): int(ln.get_attr("IFLA_STATS64")["tx_bytes"])
            for ln in self._sw2.get_links()
        }

    def _qdisc(self, ipr: Any = None) -> tuple[float, int]:
        """(backlog bytes, cumulative drops) of the bottleneck qdisc."""
        for q in (ipr or self._br1).get_qdiscs(index=self._wan):
            if q.get_attr("TCA_KIND") in ("tbf", "htb") and q["parent"] == 0xFFFFFFFF:
                st = q.get_attr("TCA_STATS2").get_attr("TCA_STATS_QUEUE")
                return float(st["backlog"]), int(st["drops"])
        return 0.0, 0

    def _sampler(self) -> None:
        while not self._stop.wait(self.sample_every):
            try:
                backlog, _ = self._qdisc(self._br1_sampler)
            except Exception:  # noqa: BLE001 - sockets closed during shutdown
                return
            with self._lock:
                self._backlog.append(backlog)

    def _tcp_flows(self, period: float) -> tuple[list[float], list[float], int]:
        """(DTN RTTs, campus RTTs, active flow count) over the senders' data sockets."""
        rtt_dtn: list[float] = []
        rtt_campus: list[float] = []
        active = 0
        seen: dict[tuple, int] = {}
        for name, d in self._diag.items():
            host = self.tb.hosts[name]
            for m in d.get_sock_stats(family=socket.AF_INET, states=_ESTABLISHED, extensions=_INET_DIAG_INFO):
                if m["idiag_dport"] not in _DATA_PORTS:
                    continue
                info = m.get_attr("INET_DIAG_INFO")
                if info is None:
                    continue
                key = (name, m["idiag_sport"], m["idiag_dport"])
                acked = int(info["tcpi_bytes_acked"])
                seen[key] = acked
                grew = acked - self._prev_acked.get(key, 0)
                if grew < self.active_bytes:
                    continue  # idle, or an iperf3 control connection
                active += 1
                rtt = info["tcpi_rtt"] * 1e-6
                (rtt_dtn if host.kind == "dtn" else rtt_campus).append(rtt)
        self._prev_acked = seen
        return rtt_dtn, rtt_campus, active

    # -- the TelemetrySource side -----------------------------------------------------
    def sample(self, t: float) -> NetworkState:
        """y over the interval since the previous ``sample`` call, stamped ``t``."""
        now = time.monotonic()
        dt = max(now - self._prev_t, 1e-6)
        ports = self._port_bytes()
        backlog_now, drops = self._qdisc()
        with self._lock:
            backlog = self._backlog or [backlog_now]
            self._backlog = []
        d_bytes = {k: ports.get(k, 0) - self._prev_ports.get(k, 0) for k in ports}
        dtn_b = max(d_bytes.get("qd", 0), 0)
        campus_b = sum(max(v, 0) for k, v in d_bytes.items() if k.startswith("q") and k != "qd")
        qdelay = float(np.mean(backlog)) * 8.0 / self.capacity
        rtt_d, rtt_c, active = self._tcp_flows(dt)
        base_c = self.tb.scenario.campus.rtt
        base_d = self.tb.dtn.rtt
        if rtt_d:
            self._rtt_dtn = float(np.mean(rtt_d))
        if rtt_c:
            m = float(np.mean(rtt_c))
            self._rtt_campus = m if self._rtt_campus is None else self.alpha * m + (1 - self.alpha) * self._rtt_campus
        self.last_info = {
            "dtn_bytes": float(dtn_b),
            "campus_bytes": float(campus_b),
            "bottleneck_drops": float(drops - self._prev_drops),
            "interval": dt,
        }
        self._prev_ports, self._prev_drops, self._prev_t = ports, drops, now
        return NetworkState(
            t=float(t),
            rate_dtn=dtn_b * 8.0 / dt,
            rate_campus=campus_b * 8.0 / dt,
            # Before any flow is active the idle path's RTT is the base RTT plus the queue.
            rtt_dtn=self._rtt_dtn if self._rtt_dtn is not None else base_d + qdelay,
            rtt_campus=self._rtt_campus if self._rtt_campus is not None else base_c + qdelay,
            qdelay_dtn=qdelay,
            qdelay_campus=qdelay,
            active_flows=float(active + self.udp_sources),
        )

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        for s in (self._sw2, self._br1, self._br1_sampler, *self._diag.values()):
            try:
                s.close()
            except Exception:  # noqa: BLE001 - namespace may already be gone
                pass
        self._diag.clear()
