"""``DtnAgent``: one period of the DTN host agent (discover, measure, share, pace, lease).

Every period T (and at once when the controller sets a new rate):

1. one sock_diag dump lists every established TCP socket with its ``tcp_info``
   (``diag``); sockets gone since are forgotten (the kernel freed them);
2. a socket not seen before is matched (``match``: peer prefix and ports, then
   the owner's process name once ``owners`` has found who holds it); its
   ``SO_MAX_PACING_RATE`` at that moment is kept as its *original*;
3. each matching connection's delivered rate over the period comes from its
   ``tcpi_bytes_acked`` difference; ``share`` water-fills the aggregate R;
4. each cap is applied through the mechanism when it differs from the socket's
   current option by more than ``DEADBAND`` (2 %, ours: below the period-to-period
   noise of a paced sender, and it spares a syscall round per connection per period);
   a socket whose own application set a lower cap keeps it (the lower wins, as
   with fq's maxrate);
5. the lease is checked: expired, every cap the agent set is lifted (back to the
   socket's original, ~0 unless its application had set one), one log line.

Rates: R and the shares are Ethernet frame bit/s (``scidmz.units``); the socket
option is payload bytes/s (``actuators.pacing.payload_bytes_per_s``).
Shadow mode computes and reports everything and never calls the mechanism.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..actuators.pacing import payload_bytes_per_s
from ..actuators.share import demand, water_fill
from ..units import WIRE_PER_PAYLOAD
from .diag import UNLIMITED, DiagSocket, TcpSocket
from .lease import Lease
from .match import SocketFilter
from .mechanism import PidfdMechanism
from .owners import Owner, OwnerIndex, comm_of
from .record import OwnerRecord

__all__ = ["DtnAgent", "Conn", "DEADBAND"]

log = logging.getLogger("scidmz.agent")

DEADBAND = 0.02
#: Periods a matching socket whose owner cannot be found is looked for before it is left alone
#: (a socket of a process in another pid namespace, or one being closed).
OWNER_TRIES = 3


@dataclass
class Conn:
    """A matching connection the agent tracks."""

    inode: int
    owner: Owner
    comm: str | None
    peer: str
    rport: int
    lport: int
    original: int  # SO_MAX_PACING_RATE before the agent touched it (payload bytes/s)
    option: int  # the socket's option as last read (payload bytes/s)
    acked: int
    t: float
    delivered: float | None = None  # frame bit/s over the last period
    delivery_rate: float = 0.0  # tcp_info's delivery-rate sample, frame bit/s
    cap: float | None = None  # the share granted (frame bit/s)
    ours: bool = False  # the agent set the option on this socket


def _frame_bps(payload_bytes_per_s: float) -> float:
    return float(payload_bytes_per_s) * 8.0 * WIRE_PER_PAYLOAD


class DtnAgent:
    """The host agent's state and its per-period ``step`` (module docstring)."""

    def __init__(self, match: SocketFilter, *, period: float = 1.0, lease_periods: int = 3, shadow: bool = False,
                 record_path: str | None = None, mechanism: Any = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not (period > 0 and math.isfinite(period)):
            raise ValueError(f"agent period must be a positive time, got {period!r}")
        self.match = match
        self.period = float(period)
        self.shadow = bool(shadow)
        self.lease = Lease(lease_periods, period, clock)
        self.mechanism = mechanism if mechanism is not None else PidfdMechanism()
        self.record = OwnerRecord(record_path) if record_path else None
        self._clock = clock
        # A mechanism that walks the sockets itself (bpf) is also the source of the list; else sock_diag.
        self._source = self.mechanism if callable(getattr(self.mechanism, "dump", None)) else DiagSocket()
        self._needs_owner = bool(getattr(self.mechanism, "needs_owner", True)) or bool(match.processes)
        self._owners = OwnerIndex()
        self._lock = threading.RLock()
        self.wake = threading.Event()
        self.rate: float | None = None
        self.conns: dict[int, Conn] = {}
        self._skip: dict[int, int] = {}  # inode -> tries left (0: never ours)
        self._recorded: set[int] = set()  # inodes the owner record lists
        self._claimed = False  # the owner record is ours (``reclaim`` found no live owner)
        self.k = 0
        self.state = "idle"  # idle | pacing | lease_expired | stopped
        self.counts = {"lease_expiries": 0, "sets": 0, "set_failures": 0, "reclaimed": 0}
        self.last_cpu = 0.0
        self.host_caps: dict[str, Any] = {"devices": {}, "caps": []}

    # -- the controller's side ---------------------------------------------------------
    def set_rate(self, bps: float) -> float:
        v = float(bps)
        if not (v > 0 and math.isfinite(v)):
            raise ValueError(f"aggregate rate must be a finite number > 0 bit/s, got {bps!r}")
        with self._lock:
            self.rate = v
            self.lease.grant()
            self.state = "pacing"
        self.wake.set()
        return v

    def renew(self) -> bool:
        with self._lock:
            return self.lease.renew()

    def delivered(self) -> float | None:
        """What the matching connections delivered over the last period (frame bit/s); None before any
        period was measured. The controller splits its rate among DTNs on it (``actuators.host_agent``)."""
        with self._lock:
            got = [c.delivered for c in self.conns.values() if c.delivered is not None]
            return float(sum(got)) if got or not self.conns else None

    # -- one period ----------------------------------------------------------------------
    def step(self) -> None:
        c0 = time.process_time()
        with self._lock:
            if self.lease.expired():
                self._expire()
            now = self._clock()
            self._track(self._source.dump(), now)
            if self.rate is not None:
                self._apply(self._shares())
                self._flush()
            self.k += 1
        self.last_cpu = time.process_time() - c0

    def _track(self, socks: list[TcpSocket], now: float) -> None:
        live = {s.inode: s for s in socks}
        for ino in [i for i in self.conns if i not in live]:
            del self.conns[ino]
        self._skip = {i: n for i, n in self._skip.items() if i in live}
        new = []
        for ino, s in live.items():
            if ino in self.conns or self._skip.get(ino) == 0:
                continue
            if ino not in self._skip and not (self.match.peer_ok(s.peer) and self.match.ports_ok(s.lport, s.rport)):
                self._skip[ino] = 0  # never ours: not looked at again while it lives
                continue
            new.append(s)
        self._adopt(new, now)
        for ino, c in self.conns.items():
            s = live[ino]
            dt = now - c.t
            if dt > 0 and c.t < now:
                c.delivered = _frame_bps((s.bytes_acked - c.acked) / dt)
            c.acked, c.t, c.option = s.bytes_acked, now, s.max_pacing_rate
            c.delivery_rate = _frame_bps(s.delivery_rate)
        self._owners.forget_dead({c.owner.pid for c in self.conns.values()})
        self.mechanism.forget({(c.owner.pid, c.owner.start) for c in self.conns.values()})

    def _adopt(self, new: list[TcpSocket], now: float) -> None:
        if not new:
            return
        look = bool(self.match.processes) or (self._needs_owner and not self.shadow)
        owners = self._owners.find(s.inode for s in new) if look else {}
        for s in new:
            o = owners.get(s.inode)
            if o is None and (self.shadow or not self._needs_owner) and not self.match.processes:
                # shadow mode sets nothing, and the bpf mechanism reaches sockets by inode: no owner needed
                o = Owner(0, 0, -1)
            if o is None:
                self._skip[s.inode] = self._skip.get(s.inode, OWNER_TRIES) - 1
                continue
            comm = comm_of(o.pid) if o.pid else None
            if not self.match.process_ok(comm):
                self._skip[s.inode] = 0
                continue
            self._skip.pop(s.inode, None)
            self.conns[s.inode] = Conn(s.inode, o, comm, s.peer, s.rport, s.lport, s.max_pacing_rate,
                                       s.max_pacing_rate, s.bytes_acked, now)

    def _shares(self) -> dict[int, float]:
        conns = list(self.conns.values())
        caps = water_fill(self.rate or 0.0, [demand(c.delivered, c.cap) for c in conns])
        return {c.inode: cap for c, cap in zip(conns, caps, strict=True)}

    def _apply(self, caps: dict[int, float]) -> None:
        if self.record is not None and self._claimed and not self.shadow \
                and not self._recorded.issuperset(self.conns):
            self._write_record()  # before the first set on a new socket: a crash leaves it listed
        for ino, cap in caps.items():
            c = self.conns[ino]
            c.cap = cap
            want = payload_bytes_per_s(cap)
            if c.original != UNLIMITED:
                want = min(want, c.original)
            if abs(want - c.option) <= DEADBAND * max(c.option, 1) and c.option != UNLIMITED:
                c.ours = c.ours or want != c.original
                continue
            self._set(c, want)

    def _flush(self) -> None:
        """Apply now what a deferring mechanism (bpf: one more walk) was given this period."""
        flush = getattr(self.mechanism, "flush", None)
        if callable(flush) and not self.shadow:
            flush()

    def _set(self, c: Conn, value: int) -> None:
        if self.shadow:
            return
        try:
            ok = self.mechanism.set(c.owner, c.inode, value)
        except OSError as exc:
            self.counts["set_failures"] += 1
            log.warning("cannot pace %s:%d (pid %d): %s", c.peer, c.rport, c.owner.pid, exc.strerror or exc)
            return
        if ok:
            self.counts["sets"] += 1
            c.option, c.ours = value, True

    # -- lifting -------------------------------------------------------------------------
    def _expire(self) -> None:
        n = self.lift("lease expired")
        self.counts["lease_expiries"] += 1
        self.state = "lease_expired"
        log.warning("lease expired: no renewal for %d periods (%.1f s); pacing lifted from %d connections "
                    "(fail-open)", self.lease.periods, self.lease.periods * self.period, n)

    def lift(self, why: str) -> int:
        """Give every socket the agent set its original option back; returns how many."""
        with self._lock:
            n = 0
            for c in self.conns.values():
                if c.ours and not self.shadow:
                    try:
                        if self.mechanism.set(c.owner, c.inode, c.original):
                            n += 1
                    except OSError as exc:
                        log.warning("cannot lift pacing from %s:%d (%s): %s", c.peer, c.rport, why, exc)
                c.ours, c.cap, c.option = False, None, c.original
            self._flush()
            self.rate = None
            self.lease.drop()
            if self.record is not None and self._claimed and not self.shadow:
                self.record.write({})
                self._recorded = set()
            return n

    def reclaim(self) -> int:
        """Lift what a dead agent left paced (its record); refuse a live one's. Returns sockets lifted."""
        if self.record is None:
            return 0
        old = self.record.previous()
        n = 0
        if old is not None and not self.shadow:
            live = {s.inode: s for s in self._source.dump()}
            left = {int(i): r for i, r in old["sockets"].items()
                    if int(i) in live and live[int(i)].max_pacing_rate != int(r["original"])}
            # a record of the bpf mechanism names no owners; the pidfd one needs them
            unknown = [i for i, r in left.items() if not r["pid"]] if self._needs_owner else []
            found = self._owners.find(unknown)
            for ino, r in left.items():
                owner = found.get(ino) or Owner(int(r["pid"]), int(r["start"]), int(r["fd"]))
                if self.mechanism.set(owner, ino, int(r["original"])):
                    n += 1
            self._flush()
            if old["sockets"]:
                log.warning("reclaimed: lifted pacing from %d connections a dead agent (pid %d) left paced",
                            n, old["owner_pid"])
        self.counts["reclaimed"] = n
        self._claimed = True
        if not self.shadow:
            self.record.write({})
        return n

    def _write_record(self) -> None:
        assert self.record is not None
        self.record.write({c.inode: {"pid": c.owner.pid, "start": c.owner.start, "fd": c.owner.fd,
                                     "original": c.original} for c in self.conns.values()})
        self._recorded = set(self.conns)

    def close(self, why: str = "stopped") -> int:
        """Lift everything the agent set, release its descriptors and its record."""
        n = self.lift(why)
        with self._lock:
            self.state = "stopped"
            self.mechanism.close()
            if self._source is not self.mechanism:
                self._source.close()
            if self.record is not None and self._claimed:
                self.record.remove()
        return n

    def refresh_host_caps(self) -> None:
        """Re-read the host's qdisc caps (``hostcaps``); one log line when one starts to bind."""
        from .hostcaps import binding_caps, read_host_caps

        caps = read_host_caps(self.match.prefixes)
        with self._lock:
            before = binding_caps(self.host_caps["caps"], self.rate, [c.cap or 0.0 for c in self.conns.values()])
            self.host_caps = caps
            now = binding_caps(caps["caps"], self.rate, [c.cap or 0.0 for c in self.conns.values()])
        if now and not before:
            log.warning("the host's own cap binds, not the agent: %s", "; ".join(now))

    # -- reporting -----------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        from .hostcaps import binding_caps

        with self._lock:
            conns = [self._conn_status(c) for c in self.conns.values()]
            shares = [c.cap for c in self.conns.values() if c.cap is not None]
            return {
                "state": self.state, "mode": "shadow" if self.shadow else "live", "k": self.k,
                "period": self.period, "rate": self.rate, "lease_periods": self.lease.periods,
                "lease_remaining": self.lease.remaining(), "mechanism": getattr(self.mechanism, "name", "?"),
                "match": self.match.describe(), "connections": conns,
                "paced": sum(1 for c in self.conns.values() if c.ours),
                "delivered": sum(c.delivered or 0.0 for c in self.conns.values()),
                "host_caps": self.host_caps, "binding": binding_caps(self.host_caps["caps"], self.rate, shares),
                "counts": dict(self.counts), "period_cpu": self.last_cpu,
            }

    @staticmethod
    def _conn_status(c: Conn) -> dict[str, Any]:
        opt = None if c.option == UNLIMITED else _frame_bps(c.option)
        return {"peer": c.peer, "rport": c.rport, "lport": c.lport, "pid": c.owner.pid or None, "process": c.comm,
                "inode": c.inode, "share": c.cap, "pacing_rate": opt, "paced": c.ours,
                "delivered": c.delivered, "delivery_rate": c.delivery_rate,
                "app_cap": None if c.original == UNLIMITED else _frame_bps(c.original)}
