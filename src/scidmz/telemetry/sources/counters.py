"""``KernelCounterTelemetry``: y from kernel counters and tcp_info, on the netns testbed (interim source).

This is not the paper's passive P4 telemetry (Vega et al., section 3.2,
Algorithms 2-8); it stands in for it when the software data plane on
mirrored packets is unavailable, and stays as a fallback. Each of the seven
Table 3 variables comes from the kernel:

* ``rate_dtn`` / ``rate_campus``: bytes delivered past the bottleneck, from
  the TX byte counters of the delivery switch's ports (S2's, towards DTN-r
  and towards r1..rN; one netlink dump in its namespace), over the period.
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
the inputs of the plant's starvation check: the bottleneck's
sent bytes and minimum backlog in the period, and the DTN sockets' busy and
receive-window-limited shares of it (tcp_info chrono counters).

What it reads is plain data (``KernelPoints``: namespace and device names,
addresses, B_max), so the source knows no plant; the netns plant derives
the points from its testbed description (``plant/netns/sources.py``).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...state import ACTIVE_BYTES, RTT_CAMPUS_ALPHA, NetworkState

__all__ = ["KernelCounterTelemetry", "KernelPoints", "Sender", "FLOW_TABLE_COLUMNS"]

_ESTABLISHED = 1 << 1
_INET_DIAG_INFO = 1 << 1  # extension bit for tcp_info
_DATA_PORTS = (5201, 5300)
#: Columns of ``flows()``: what a queue policy reads (``policies.queue.jenks``), kernel truth per socket.
FLOW_TABLE_COLUMNS: tuple[str, ...] = (
    "src", "dst", "sport", "dport", "proto", "rtt", "min_rtt", "rate", "bytes", "long_flow", "role",
)
# The data plane's Count-Min threshold (telemetry constants): "long if its size is greater than 10MB".
_LONG_FLOW_BYTES = 10_000_000


@dataclass(frozen=True)
class Sender:
    """One sending host, as the kernel source sees it."""

    name: str
    ns: str  # its network namespace (its sockets are read there)
    ip: str
    role: str  # dtn | campus | short: the class its bytes and RTTs count in
    rtt: float  # configured base RTT of its path, s
    port: str  # the delivery switch's port towards its receiver (counts what it delivered)
    dst: str  # its receiver's address


@dataclass(frozen=True)
class KernelPoints:
    """Where the kernel source reads: plain names and numbers, no plant object."""

    senders: tuple[Sender, ...]
    capacity: float  # B_max, bit/s
    bottleneck: tuple[str, str]  # (device, namespace) whose root qdisc is the bottleneck
    shaper: tuple[str, str]  # (device, namespace) of the campus shaper's TBF
    delivery_ns: str  # namespace of the switch whose ports' TX counters are bytes delivered per receiver
    rtt_dtn: float  # base RTTs, reported (plus the queue) before any flow is active
    rtt_campus: float


def _ipv4(addr: Any) -> str:
    """inet_diag's address field (a string, or the first of four 32-bit words) as dotted IPv4."""
    if isinstance(addr, str):
        return addr
    return str(ipaddress.IPv4Address(int(addr[0] if isinstance(addr, list | tuple) else addr)))


def _weighted_mean(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    """(mean of the values weighted by what left after each, minimum value) of (value, weight) pairs.

    Per-packet mean: an interval in which nothing left has no packets (plain mean if none left at all).
    """
    v = np.array([a for a, _ in pairs])
    w = np.array([b for _, b in pairs])
    return (float(np.average(v, weights=w)) if w.sum() > 0 else float(v.mean())), float(v.min())


class _Qdiscs:
    """Netlink reads of the delivery ports, the bottleneck qdisc and the shaper (one socket set per thread:
    pyroute2 sockets are not thread-safe)."""

    def __init__(self, pts: KernelPoints) -> None:
        from pyroute2 import IPRoute

        dev, ns = pts.bottleneck
        self.delivery = IPRoute(netns=pts.delivery_ns)
        self.router = IPRoute(netns=ns)
        self.wan = self.router.link_lookup(ifname=dev)[0]
        up_dev, up_ns = pts.shaper
        self.shaper_ns = IPRoute(netns=up_ns)
        self.up = self.shaper_ns.link_lookup(ifname=up_dev)[0]
        self.root_kind = "tbf"  # the bottleneck's root qdisc: the testbed's TBF, or a queue policy's HTB

    def port_bytes(self) -> dict[str, int]:
        return {ln.get_attr("IFLA_IFNAME"): int(ln.get_attr("IFLA_STATS64")["tx_bytes"])
                for ln in self.delivery.get_links()}

    def bottleneck(self) -> tuple[float, int, int]:
        """(backlog bytes, cumulative drops, cumulative bytes sent) of the bottleneck's root qdisc."""
        for q in self.router.get_qdiscs(index=self.wan):
            if q.get_attr("TCA_KIND") in ("tbf", "htb") and q["parent"] == 0xFFFFFFFF:
                self.root_kind = q.get_attr("TCA_KIND")
                st2 = q.get_attr("TCA_STATS2")
                st = st2.get_attr("TCA_STATS_QUEUE")
                basic = st2.get_attr("TCA_STATS_BASIC")
                return float(st["backlog"]), int(st["drops"]), int(basic["bytes"]) if basic else 0
        return 0.0, 0, 0

    def shaper(self) -> tuple[float, int]:
        """(sojourn of the shaper's backlog in s, cumulative bytes sent) of the campus TBF."""
        for q in self.shaper_ns.get_qdiscs(index=self.up):
            if q.get_attr("TCA_KIND") == "tbf" and q["parent"] == 0xFFFFFFFF:
                st2 = q.get_attr("TCA_STATS2")
                backlog = float(st2.get_attr("TCA_STATS_QUEUE")["backlog"])
                basic = st2.get_attr("TCA_STATS_BASIC")
                parms = q.get_attr("TCA_OPTIONS").get_attr("TCA_TBF_PARMS")
                rate = float(parms["rate"]) if parms else 0.0  # bytes/s
                return (backlog / rate if rate > 0 else 0.0), int(basic["bytes"]) if basic else 0
        return 0.0, 0

    def close(self) -> None:
        for s in (self.delivery, self.router, self.shaper_ns):
            try:
                s.close()
            except Exception:  # noqa: BLE001 - namespace may already be gone
                pass


class _Sockets:
    """The senders' sockets by inet_diag, one ``DiagSocket`` per sender namespace.

    One thread owns them: a pyroute2 DiagSocket made in one thread answers nothing when queried
    from another (measured: empty socket lists), and the daemon steps the plant on a new worker
    thread every period.
    """

    def __init__(self, senders: Sequence[Sender]) -> None:
        self._exec = ThreadPoolExecutor(max_workers=1, thread_name_prefix="inet-diag")
        self._diag: dict[str, Any] = self._exec.submit(self._open, list(senders)).result()

    @staticmethod
    def _open(senders: list[Sender]) -> dict[str, Any]:
        from pyroute2 import DiagSocket, netns

        socks = {}
        for h in senders:
            netns.pushns(h.ns)
            try:
                d = DiagSocket()
                d.bind()
            finally:
                netns.popns()
            socks[h.name] = d
        return socks

    def tcp(self) -> dict[str, list[Any]]:
        """Every sender's established TCP sockets with tcp_info."""
        def dump() -> dict[str, list[Any]]:
            return {name: list(d.get_sock_stats(family=socket.AF_INET, states=_ESTABLISHED,
                                                extensions=_INET_DIAG_INFO)) for name, d in self._diag.items()}

        return self._exec.submit(dump).result()

    def udp_ports(self, names: Sequence[str]) -> dict[str, list[tuple[int, int]]]:
        """(sport, dport) of the UDP sockets of the named senders (by udp_diag)."""
        def dump() -> dict[str, list[tuple[int, int]]]:
            return {n: [(int(m["idiag_sport"]), int(m["idiag_dport"]))
                        for m in self._diag[n].get_sock_stats(family=socket.AF_INET, protocol=17)] for n in names}

        return self._exec.submit(dump).result()

    def close(self) -> None:
        def close_all() -> None:
            for d in self._diag.values():
                try:
                    d.close()
                except Exception:  # noqa: BLE001 - namespace may already be gone
                    pass

        self._exec.submit(close_all).result()
        self._exec.shutdown(wait=True)
        self._diag.clear()


class KernelCounterTelemetry:
    """Interim ``TelemetrySource`` on kernel counters (see module docstring).

    ``set_udp`` tells it which ``[[flows]]`` UDP senders run now (listed in ``flows()``) and how
    many UDP sources count as active flows; ``last_info`` holds the ground truth of the last period.
    """

    name = "kernel"

    def __init__(self, points: KernelPoints, sample_every: float = 0.1, alpha: float = RTT_CAMPUS_ALPHA,
                 active_bytes: float = ACTIVE_BYTES) -> None:
        self.points = points
        self.alpha = float(alpha)
        self.active_bytes = float(active_bytes)
        self.sample_every = float(sample_every)
        self.capacity = points.capacity
        self._senders = {h.name: h for h in points.senders}
        self._dtn_ports = {h.port for h in points.senders if h.role == "dtn"}
        self._ports = {h.port for h in points.senders}
        self._q = _Qdiscs(points)
        self._q_sampler = _Qdiscs(points)  # the sampler thread's own sockets
        self._socks = _Sockets(points.senders)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._shaper: list[tuple[float, float]] = []  # (sojourn s, bytes sent since)
        self._shaper_prev = (0.0, self._q_sampler.shaper()[1])
        self._backlog: list[tuple[float, float]] = []  # (backlog bytes, bytes sent since)
        self._prev_ports = self._q.port_bytes()
        _, self._prev_drops, self._prev_sent = self._q.bottleneck()
        self._prev_read = time.monotonic()
        self._sampler_sent, self._sampler_backlog = self._prev_sent, 0.0
        self._prev_chrono: dict[tuple, tuple[int, int, int]] = {}  # busy us, rwnd-limited us, periods seen
        self._prev_acked: dict[tuple, int] = {}
        self._prev_t = time.monotonic()
        self._flow_rows: list[tuple] = []
        self._rtt_campus: float | None = None
        self._rtt_dtn: float | None = None
        self.last_senders: dict[str, float] = {}
        self.udp_sources = 0
        self._udp_flows: list[str] = []
        self._udp_bytes: dict[str, float] = {}
        self.last_info: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._sampler, name="kernel-telemetry", daemon=True)
        self._thread.start()

    def set_udp(self, flows: Sequence[str], sources: int) -> None:
        """``flows``: names of the ``[[flows]]`` UDP senders sending now (listed in ``flows()`` from the
        delivery counters); ``sources``: UDP sources counted in ``active_flows`` (they have no socket
        state to judge)."""
        self._udp_flows = list(flows)
        self.udp_sources = int(sources)

    # -- the 0.1 s sampler -------------------------------------------------------------
    def _sampler(self) -> None:
        while not self._stop.wait(self.sample_every):
            try:
                backlog, _, sent = self._q_sampler.bottleneck()
                soj, s_sent = self._q_sampler.shaper()
            except Exception:  # noqa: BLE001 - sockets closed during shutdown
                return
            with self._lock:
                self._shaper.append((self._shaper_prev[0], float(s_sent - self._shaper_prev[1])))
                self._shaper_prev = (soj, s_sent)
                # The backlog seen at the previous sample is what the bytes sent since waited behind.
                self._backlog.append((self._sampler_backlog, float(sent - self._sampler_sent)))
                self._sampler_backlog, self._sampler_sent = backlog, sent

    def _take_samples(self, backlog_now: float) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
        with self._lock:
            samples, shaper = self._backlog or [(backlog_now, 0.0)], self._shaper
            self._backlog, self._shaper = [], []
        return samples, shaper

    # -- sockets -------------------------------------------------------------------------
    def _tcp_flows(self, period: float) -> tuple[list[float], list[float], int]:
        """(DTN RTTs, campus RTTs, active flow count) over the senders' data sockets; keeps the flow
        table and the DTN sockets' busy / rwnd-limited shares."""
        rtt_dtn: list[float] = []
        rtt_campus: list[float] = []
        active = 0
        seen: dict[tuple, int] = {}
        chrono: dict[tuple, tuple[int, int, int]] = {}
        busy: list[float] = []
        rwnd: list[float] = []
        rows: list[tuple] = []
        for name, msgs in self._socks.tcp().items():
            host = self._senders[name]
            for m in msgs:
                info = m.get_attr("INET_DIAG_INFO") if m["idiag_dport"] in _DATA_PORTS else None
                if info is None:
                    continue
                key = (name, m["idiag_sport"], m["idiag_dport"])
                acked = int(info["tcpi_bytes_acked"])
                seen[key] = acked
                prev = self._prev_chrono.get(key)
                chrono[key] = (int(info.get("tcpi_busy_time") or 0), int(info.get("tcpi_rwnd_limited") or 0),
                               prev[2] + 1 if prev else 0)
                grew = acked - self._prev_acked.get(key, 0)
                if acked >= self.active_bytes:
                    # The flow table lists every data flow (an iperf3 control connection never moves
                    # this much), also one starved in this period: a queue policy must still see it.
                    rows.append(self._row(host, m, info, grew, acked, period))
                if grew < self.active_bytes:
                    continue  # idle, or an iperf3 control connection
                active += 1
                # A socket's first full period includes its handshake and slow start: judged from the next.
                if host.role == "dtn" and prev is not None and prev[2] >= 1:
                    busy.append((chrono[key][0] - prev[0]) * 1e-6 / period)
                    rwnd.append((chrono[key][1] - prev[1]) * 1e-6 / period)
                (rtt_dtn if host.role == "dtn" else rtt_campus).append(info["tcpi_rtt"] * 1e-6)
        with self._lock:
            self._flow_rows = rows
        self._prev_acked, self._prev_chrono = seen, chrono
        self.last_senders = (
            {"dtn_busy": float(np.mean(busy)), "dtn_rwnd_limited": float(np.mean(rwnd))} if busy else {}
        )
        return rtt_dtn, rtt_campus, active

    @staticmethod
    def _row(host: Sender, m: Any, info: Any, grew: int, acked: int, period: float) -> tuple:
        min_rtt = int(info.get("tcpi_min_rtt") or 0) * 1e-6
        return (host.ip, _ipv4(m["idiag_dst"]), int(m["idiag_sport"]), int(m["idiag_dport"]), 6,
                info["tcpi_rtt"] * 1e-6, min_rtt if min_rtt > 0 else float("nan"),
                grew * 8.0 / period, acked, acked > _LONG_FLOW_BYTES, host.role)

    def _udp_rows(self, d_bytes: dict[str, int], period: float) -> None:
        """Flow-table rows for the running [[flows]] UDP senders: the sender's UDP socket (its ports,
        by udp_diag) with what their receiver's delivery port delivered; UDP has no RTT, so NaN."""
        if not self._udp_flows:
            return
        ports = self._socks.udp_ports(self._udp_flows)
        rows = []
        for name in self._udp_flows:
            h = self._senders[name]
            got = float(max(d_bytes.get(h.port, 0), 0))
            total = self._udp_bytes[name] = self._udp_bytes.get(name, 0.0) + got
            for sport, dport in ports.get(name, []):
                if dport in _DATA_PORTS:
                    rows.append((h.ip, h.dst, sport, dport, 17, float("nan"), float("nan"),
                                 got * 8.0 / period, total, total > _LONG_FLOW_BYTES, h.role))
        if rows:
            with self._lock:
                self._flow_rows = [*self._flow_rows, *rows]

    def _smooth_rtts(self, rtt_d: list[float], rtt_c: list[float], shaper_delay: float) -> None:
        if rtt_d:
            self._rtt_dtn = float(np.mean(rtt_d))
        if rtt_c:
            # The border router sees the campus RTT without the shaper's queue in front of it.
            # srtt lags the shaper's queue a little, so the difference is floored at the path's base RTT.
            floor = min((h.rtt for h in self._senders.values() if h.role != "dtn"), default=0.0)
            m = max(float(np.mean(rtt_c)) - shaper_delay, floor)
            self._rtt_campus = m if self._rtt_campus is None else self.alpha * m + (1 - self.alpha) * self._rtt_campus

    # -- the TelemetrySource side -----------------------------------------------------
    def sample(self, t: float) -> NetworkState:
        """y over the interval since the previous ``sample`` call, stamped ``t``."""
        now = time.monotonic()
        dt = max(now - self._prev_t, 1e-6)
        ports = self._q.port_bytes()
        backlog_now, drops, sent = self._q.bottleneck()
        # the bottleneck's byte counter is timed at its own read: the period's clock above was read
        # before the delivery ports, and a thread switch in between skews B_max x interval
        t_read = time.monotonic()
        samples, shaper = self._take_samples(backlog_now)
        d_bytes = {k: ports.get(k, 0) - self._prev_ports.get(k, 0) for k in ports}
        dtn_b = sum(max(v, 0) for k, v in d_bytes.items() if k in self._dtn_ports)
        campus_b = sum(max(v, 0) for k, v in d_bytes.items() if k in self._ports and k not in self._dtn_ports)
        mean_backlog, min_backlog = _weighted_mean(samples)
        qdelay = mean_backlog * 8.0 / self.capacity
        rtt_d, rtt_c, active = self._tcp_flows(dt)
        self._udp_rows(d_bytes, dt)
        shaper_delay = _weighted_mean(shaper)[0] if shaper else 0.0
        self._smooth_rtts(rtt_d, rtt_c, shaper_delay)
        self.last_info = {
            "dtn_bytes": float(dtn_b),
            "campus_bytes": float(campus_b),
            "bottleneck_drops": float(drops - self._prev_drops),
            "interval": dt,
            "bottleneck": {"sent_bytes": float(sent - self._prev_sent), "backlog_min": min_backlog,
                           "interval": max(t_read - self._prev_read, 1e-6), "kind": self._q.root_kind},
            "senders": dict(self.last_senders),
            "shaper_delay": shaper_delay,
            # bytes delivered to each receiver in the period, by delivery port
            "port_bytes": {k: float(max(v, 0)) for k, v in d_bytes.items() if k in self._ports},
        }
        self._prev_ports, self._prev_drops, self._prev_t, self._prev_sent = ports, drops, now, sent
        self._prev_read = t_read
        pts = self.points
        return NetworkState(
            t=float(t),
            rate_dtn=dtn_b * 8.0 / dt,
            rate_campus=campus_b * 8.0 / dt,
            # Before any flow is active the idle path's RTT is the base RTT plus the queue.
            rtt_dtn=self._rtt_dtn if self._rtt_dtn is not None else pts.rtt_dtn + qdelay,
            rtt_campus=self._rtt_campus if self._rtt_campus is not None else pts.rtt_campus + qdelay,
            qdelay_dtn=qdelay,
            qdelay_campus=qdelay,
            active_flows=float(active + self.udp_sources),
        )

    def flows(self) -> dict[str, list[Any]]:
        """The TCP data flows as of the last period (``FLOW_TABLE_COLUMNS``), from tcp_info.

        Kernel truth per sender socket: ``rtt`` is the smoothed RTT (incl. every
        queue on the path), ``min_rtt`` the kernel's windowed minimum, ``rate``
        the bytes acknowledged over the period, ``long_flow`` the data plane's
        10 MB rule on the bytes acknowledged so far, ``role`` the sender's kind
        (dtn | campus | short). UDP senders have no socket state: the ``[[flows]]`` UDP
        senders named by ``set_udp`` are listed (ports from udp_diag) with what was
        delivered to their receivers and no RTT; the campus hosts' UDP CBR is not (ours: the
        data-plane table lists every UDP flow).
        """
        with self._lock:
            rows = list(self._flow_rows)
        return {c: [r[i] for r in rows] for i, c in enumerate(FLOW_TABLE_COLUMNS)}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._q.close()
        self._q_sampler.close()
        self._socks.close()
