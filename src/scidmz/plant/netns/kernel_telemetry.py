"""``KernelCounterTelemetry``: the INTERIM telemetry source of the netns testbed, from kernel counters.

This is not the paper's passive P4 telemetry (Vega et al., section 3.2,
Algorithms 2-8); it stands in for it when the software data plane on
mirrored packets is unavailable, and stays as a fallback. Each of the seven
Table 3 variables comes from the kernel:

* ``rate_dtn`` / ``rate_campus``: bytes delivered past the bottleneck, from
  the TX byte counters of S2's switch ports towards DTN-r and towards
  r1..rN (one netlink dump in S2's namespace), over the period.
  Linux counts ``skb->len`` there, the Ethernet frame without preamble or
  FCS: ARCHITECTURE.md's frame bytes.
* ``qdelay_dtn`` / ``qdelay_campus``: the bottleneck's drop-tail FIFO is
  shared, so both are the per-packet mean sojourn of its packets: the
  backlog sampled every ``sample_every`` s, divided by B_max, weighted by
  the bytes the qdisc sent in the following sample interval (a packet that
  leaves in that interval waited behind about that backlog; an idle
  interval sends no packets and so does not count, as in Algorithm 5's
  per-packet mean).
* ``rtt_dtn`` / ``rtt_campus``: smoothed RTT (tcpi_rtt) of the senders'
  active TCP sockets, read with inet_diag (pyroute2 ``DiagSocket``, one per
  sender namespace, no processes); ``rtt_campus`` is an EWMA with ``alpha``.
  The senders' RTT includes the bottleneck queue, as ARCHITECTURE.md's does.
  It also includes the senders' access segment, which ARCHITECTURE.md's
  border-router RTT excludes: for the campus that is the shaper's queue on
  S1's uplink (up to its 50 ms latency), so the shaper's per-packet mean
  sojourn (its backlog / its rate, sampled like the bottleneck's) is taken
  off ``rtt_campus``; the veth hops left are tens of microseconds.
* ``active_flows``: TCP sockets whose acknowledged bytes grew by at least
  ``active_bytes`` in the period, plus running UDP CBR sources.

Ground truth for ``info``: bytes delivered per class, bottleneck drops, and
the inputs of the starvation check (``starvation.py``): the bottleneck's
sent bytes and minimum backlog in the period, and the DTN sockets' busy and
receive-window-limited shares of it (tcp_info chrono counters).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ...state import NetworkState
from ..fluid.constants import RTT_CAMPUS_ALPHA
from .topology import Testbed

__all__ = ["KernelCounterTelemetry", "FLOW_TABLE_COLUMNS"]

_ESTABLISHED = 1 << 1
_INET_DIAG_INFO = 1 << 1  # extension bit for tcp_info
_DATA_PORTS = (5201, 5300)
#: Columns of ``flows()``: what a queue policy reads (``policies.queue.jenks``), kernel truth per socket.
FLOW_TABLE_COLUMNS: tuple[str, ...] = (
    "src", "dst", "sport", "dport", "proto", "rtt", "min_rtt", "rate", "bytes", "long_flow", "role",
)
# The data plane's Count-Min threshold (telemetry constants): "long if its size is greater than 10MB".
_LONG_FLOW_BYTES = 10_000_000


def _ipv4(addr: Any) -> str:
    """inet_diag's address field (a string, or the first of four 32-bit words) as dotted IPv4."""
    if isinstance(addr, str):
        return addr
    return str(ipaddress.IPv4Address(int(addr[0] if isinstance(addr, list | tuple) else addr)))


class KernelCounterTelemetry:
    """Interim ``TelemetrySource`` for a built ``Testbed`` (see module docstring)."""

    name = "kernel"

    def __init__(
        self,
        tb: Testbed,
        sample_every: float = 0.1,
        alpha: float = RTT_CAMPUS_ALPHA,
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
        up_dev, up_ns = tb.uplink
        self._s1_sampler = IPRoute(netns=up_ns)
        self._up = self._s1_sampler.link_lookup(ifname=up_dev)[0]
        self._root_kind = "tbf"  # the bottleneck's root qdisc: the testbed's TBF, or a queue policy's HTB
        self._shaper: list[tuple[float, float]] = []  # (sojourn s, bytes sent since)
        self._shaper_prev = (0.0, self._shaper_read()[1])
        # One thread owns the inet_diag sockets: a pyroute2 DiagSocket made in one thread answers
        # nothing when queried from another (measured: empty socket lists), and the daemon steps
        # the plant on a new worker thread every period.
        self._diag_exec = ThreadPoolExecutor(max_workers=1, thread_name_prefix="inet-diag")

        def make() -> dict[str, Any]:
            socks = {}
            for h in tb.senders:
                netns.pushns(h.ns)
                try:
                    d = DiagSocket()
                    d.bind()
                finally:
                    netns.popns()
                socks[h.name] = d
            return socks

        self._diag: dict[str, Any] = self._diag_exec.submit(make).result()
        self._lock = threading.Lock()
        self._backlog: list[tuple[float, float]] = []  # (backlog bytes, bytes sent since)
        self._stop = threading.Event()
        self._prev_ports = self._port_bytes()
        _, self._prev_drops, self._prev_sent = self._qdisc()
        self._sampler_sent = self._prev_sent
        self._sampler_backlog = 0.0
        self._prev_chrono: dict[tuple, tuple[int, int, int]] = {}  # busy us, rwnd-limited us, periods seen
        self.last_senders: dict[str, float] = {}
        self._flow_rows: list[tuple] = []
        self._prev_t = time.monotonic()
        self._prev_acked: dict[tuple, int] = {}
        self._rtt_campus: float | None = None
        self._rtt_dtn: float | None = None
        self.udp_sources = 0
        # [[flows]] UDP senders sending now (set by the plant): listed in flows() from S2's counters.
        self.udp_hosts: list[Any] = []
        self._udp_bytes: dict[str, float] = {}
        self.last_info: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._sampler, name="kernel-telemetry", daemon=True)
        self._thread.start()

    # -- raw reads -------------------------------------------------------------------
    def _port_bytes(self) -> dict[str, int]:
        return {
            ln.get_attr("IFLA_IFNAME"): int(ln.get_attr("IFLA_STATS64")["tx_bytes"])
            for ln in self._sw2.get_links()
        }

    def _qdisc(self, ipr: Any = None) -> tuple[float, int, int]:
        """(backlog bytes, cumulative drops, cumulative bytes sent) of the bottleneck qdisc."""
        for q in (ipr or self._br1).get_qdiscs(index=self._wan):
            if q.get_attr("TCA_KIND") in ("tbf", "htb") and q["parent"] == 0xFFFFFFFF:
                self._root_kind = q.get_attr("TCA_KIND")
                st2 = q.get_attr("TCA_STATS2")
                st = st2.get_attr("TCA_STATS_QUEUE")
                basic = st2.get_attr("TCA_STATS_BASIC")
                return float(st["backlog"]), int(st["drops"]), int(basic["bytes"]) if basic else 0
        return 0.0, 0, 0

    def _shaper_read(self) -> tuple[float, int]:
        """(sojourn of the shaper's backlog in s, cumulative bytes sent) of the campus TBF on S1's uplink."""
        for q in self._s1_sampler.get_qdiscs(index=self._up):
            if q.get_attr("TCA_KIND") == "tbf" and q["parent"] == 0xFFFFFFFF:
                st2 = q.get_attr("TCA_STATS2")
                backlog = float(st2.get_attr("TCA_STATS_QUEUE")["backlog"])
                basic = st2.get_attr("TCA_STATS_BASIC")
                parms = q.get_attr("TCA_OPTIONS").get_attr("TCA_TBF_PARMS")
                rate = float(parms["rate"]) if parms else 0.0  # bytes/s
                return (backlog / rate if rate > 0 else 0.0), int(basic["bytes"]) if basic else 0
        return 0.0, 0

    def _sampler(self) -> None:
        while not self._stop.wait(self.sample_every):
            try:
                backlog, _, sent = self._qdisc(self._br1_sampler)
                soj, s_sent = self._shaper_read()
            except Exception:  # noqa: BLE001 - sockets closed during shutdown
                return
            with self._lock:
                self._shaper.append((self._shaper_prev[0], float(s_sent - self._shaper_prev[1])))
                self._shaper_prev = (soj, s_sent)
                # The backlog seen at the previous sample is what the bytes sent since waited behind.
                self._backlog.append((self._sampler_backlog, float(sent - self._sampler_sent)))
                self._sampler_backlog, self._sampler_sent = backlog, sent

    def _sock_stats(self) -> dict[str, list[Any]]:
        """Every sender's established TCP sockets with tcp_info (runs on the inet_diag thread)."""
        return {name: list(d.get_sock_stats(family=socket.AF_INET, states=_ESTABLISHED, extensions=_INET_DIAG_INFO))
                for name, d in self._diag.items()}

    def _tcp_flows(self, period: float) -> tuple[list[float], list[float], int]:
        """(DTN RTTs, campus RTTs, active flow count) over the senders' data sockets."""
        rtt_dtn: list[float] = []
        rtt_campus: list[float] = []
        active = 0
        seen: dict[tuple, int] = {}
        chrono: dict[tuple, tuple[int, int, int]] = {}
        busy: list[float] = []
        rwnd: list[float] = []
        rows: list[tuple] = []
        for name, msgs in self._diag_exec.submit(self._sock_stats).result().items():
            host = self.tb.hosts[name]
            for m in msgs:
                if m["idiag_dport"] not in _DATA_PORTS:
                    continue
                info = m.get_attr("INET_DIAG_INFO")
                if info is None:
                    continue
                key = (name, m["idiag_sport"], m["idiag_dport"])
                acked = int(info["tcpi_bytes_acked"])
                seen[key] = acked
                prev = self._prev_chrono.get(key)
                chrono[key] = (int(info.get("tcpi_busy_time") or 0), int(info.get("tcpi_rwnd_limited") or 0),
                               prev[2] + 1 if prev else 0)
                grew = acked - self._prev_acked.get(key, 0)
                min_rtt = int(info.get("tcpi_min_rtt") or 0) * 1e-6
                if acked >= self.active_bytes:
                    # The flow table lists every data flow (an iperf3 control connection never moves
                    # this much), also one starved in this period: a queue policy must still see it.
                    rows.append((host.ip, _ipv4(m["idiag_dst"]), int(m["idiag_sport"]), int(m["idiag_dport"]), 6,
                                 info["tcpi_rtt"] * 1e-6, min_rtt if min_rtt > 0 else float("nan"),
                                 grew * 8.0 / period, acked, acked > _LONG_FLOW_BYTES, host.role))
                if grew < self.active_bytes:
                    continue  # idle, or an iperf3 control connection
                active += 1
                # A socket's first full period includes its handshake and slow start: judged from the next.
                if host.kind == "dtn" and prev is not None and prev[2] >= 1:
                    busy.append((chrono[key][0] - prev[0]) * 1e-6 / period)
                    rwnd.append((chrono[key][1] - prev[1]) * 1e-6 / period)
                rtt = info["tcpi_rtt"] * 1e-6
                (rtt_dtn if host.kind == "dtn" else rtt_campus).append(rtt)
        with self._lock:
            self._flow_rows = rows
        self._prev_acked = seen
        self._prev_chrono = chrono
        self.last_senders = (
            {"dtn_busy": float(np.mean(busy)), "dtn_rwnd_limited": float(np.mean(rwnd))} if busy else {}
        )
        return rtt_dtn, rtt_campus, active

    # -- the TelemetrySource side -----------------------------------------------------
    def sample(self, t: float) -> NetworkState:
        """y over the interval since the previous ``sample`` call, stamped ``t``."""
        now = time.monotonic()
        dt = max(now - self._prev_t, 1e-6)
        ports = self._port_bytes()
        backlog_now, drops, sent = self._qdisc()
        with self._lock:
            samples = self._backlog or [(backlog_now, 0.0)]
            self._backlog = []
            shaper = self._shaper
            self._shaper = []
        d_bytes = {k: ports.get(k, 0) - self._prev_ports.get(k, 0) for k in ports}
        dtn_b = max(d_bytes.get("qd", 0), 0)
        campus_b = sum(max(v, 0) for k, v in d_bytes.items() if k.startswith("q") and k != "qd")
        bl = np.array([b for b, _ in samples])
        w = np.array([x for _, x in samples])
        # Per-packet mean: weighted by what left; an interval in which nothing left has no packets.
        mean_backlog = float(np.average(bl, weights=w)) if w.sum() > 0 else float(bl.mean())
        qdelay = mean_backlog * 8.0 / self.capacity
        rtt_d, rtt_c, active = self._tcp_flows(dt)
        self._udp_rows(d_bytes, dt)
        base_c = self.tb.scenario.campus.rtt
        base_d = self.tb.dtn.rtt
        if rtt_d:
            self._rtt_dtn = float(np.mean(rtt_d))
        shaper_delay = 0.0
        if shaper:
            sj = np.array([a for a, _ in shaper])
            sw = np.array([b for _, b in shaper])
            shaper_delay = float(np.average(sj, weights=sw)) if sw.sum() > 0 else float(sj.mean())
        if rtt_c:
            # The border router sees the campus RTT without the shaper's queue in front of it.
            # srtt lags the shaper's queue a little, so the difference is floored at the path's base RTT.
            floor = min((h.rtt for h in self.tb.senders if h.kind != "dtn"), default=0.0)
            m = max(float(np.mean(rtt_c)) - shaper_delay, floor)
            self._rtt_campus = m if self._rtt_campus is None else self.alpha * m + (1 - self.alpha) * self._rtt_campus
        self.last_info = {
            "dtn_bytes": float(dtn_b),
            "campus_bytes": float(campus_b),
            "bottleneck_drops": float(drops - self._prev_drops),
            "interval": dt,
            "bottleneck": {"sent_bytes": float(sent - self._prev_sent), "backlog_min": float(bl.min()),
                           "interval": dt, "kind": self._root_kind},
            "senders": dict(self.last_senders),
            "shaper_delay": shaper_delay,
            # bytes delivered to each receiver in the period, by S2 port (qd: DTN-r, q<i>: r<i>)
            "port_bytes": {k: float(max(v, 0)) for k, v in d_bytes.items() if k.startswith("q")},
        }
        self._prev_ports, self._prev_drops, self._prev_t, self._prev_sent = ports, drops, now, sent
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

    def _udp_rows(self, d_bytes: dict[str, int], period: float) -> None:
        """Flow-table rows for the running [[flows]] UDP senders: the sender's UDP socket (its ports,
        by udp_diag) with what their receiver's S2 port delivered; UDP has no RTT, so NaN."""
        if not self.udp_hosts:
            return
        hosts = list(self.udp_hosts)

        def socks() -> dict[str, list[tuple[int, int]]]:
            return {h.name: [(int(m["idiag_sport"]), int(m["idiag_dport"]))
                             for m in self._diag[h.name].get_sock_stats(family=socket.AF_INET, protocol=17)]
                    for h in hosts}

        ports = self._diag_exec.submit(socks).result()
        rows = []
        for h in hosts:
            got = float(max(d_bytes.get(self.tb.s2_port(h.peer), 0), 0))
            total = self._udp_bytes[h.name] = self._udp_bytes.get(h.name, 0.0) + got
            for sport, dport in ports.get(h.name, []):
                if dport in _DATA_PORTS:
                    rows.append((h.ip, self.tb.hosts[h.peer].ip, sport, dport, 17, float("nan"), float("nan"),
                                 got * 8.0 / period, total, total > _LONG_FLOW_BYTES, h.role))
        if rows:
            with self._lock:
                self._flow_rows = [*self._flow_rows, *rows]

    def flows(self) -> dict[str, list[Any]]:
        """The TCP data flows as of the last period (``FLOW_TABLE_COLUMNS``), from tcp_info.

        Kernel truth per sender socket: ``rtt`` is the smoothed RTT (incl. every
        queue on the path), ``min_rtt`` the kernel's windowed minimum, ``rate``
        the bytes acknowledged over the period, ``long_flow`` the data plane's
        10 MB rule on the bytes acknowledged so far, ``role`` the sender's kind
        (dtn | campus | short). UDP senders have no socket state: the ``[[flows]]`` UDP
        senders the plant names in ``udp_hosts`` are listed (ports from udp_diag) with what S2
        delivered to their receivers and no RTT; the campus hosts' UDP CBR is not (ours: the data-plane table lists
        every UDP flow).
        """
        with self._lock:
            rows = list(self._flow_rows)
        return {c: [r[i] for r in rows] for i, c in enumerate(FLOW_TABLE_COLUMNS)}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        for s in (self._sw2, self._br1, self._br1_sampler, self._s1_sampler):
            try:
                s.close()
            except Exception:  # noqa: BLE001 - namespace may already be gone
                pass

        def close_diag() -> None:
            for d in self._diag.values():
                try:
                    d.close()
                except Exception:  # noqa: BLE001 - namespace may already be gone
                    pass

        self._diag_exec.submit(close_diag).result()
        self._diag_exec.shutdown(wait=True)
        self._diag.clear()
