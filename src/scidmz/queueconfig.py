"""``QueueConfig``: what a queue policy decides and a ``QueueActuator`` applies.

A multi-queue bottleneck as the Jenks RTT-separation papers configure a
non-programmable router (Gomez et al., extended paper section 3, steps 5-7):
K queues, each with a guaranteed rate, a ceiling, a drop-tail buffer in bytes
and an HTB quantum, plus ACL-like rules that put flows into queues. Every
packet no rule matches goes to the default queue, which always exists.

This module sits at the bottom layer (it imports only ``units``, for the
MTU) so policies, actuators and plants can all share it. ``validate`` is the one place the
bad-input rules of a queue configuration live; it raises ``QueueConfigError`` (a
``ValueError``) with one line naming the problem, before anything is
applied, so a bad configuration is never half-applied.

Units: SI inside: rates in bit/s, buffers and quanta in bytes.
"""

from __future__ import annotations

import functools
import ipaddress
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from .units import MTU

__all__ = [
    "FlowMatch",
    "QueueSpec",
    "FlowRule",
    "QueueConfig",
    "QueueConfigError",
    "MTU",
    "MAX_QID",
    "RATE_TOLERANCE",
    "single_queue",
]

#: Largest queue id: HTB class minors are 16 bit; ids above this are the
#: actuator's own (inner class 0xfff, bfifo majors 0x8000 + id).
MAX_QID = 0x0FFE
#: Relative slack on "sum of rates <= C": rates are rounded to whole bytes/s by
#: the kernel, and float sums of C * N_i / N may land a few ulps above C.
RATE_TOLERANCE = 1e-9


class QueueConfigError(ValueError):
    """A queue configuration that must not be applied (one line says why)."""


@dataclass(frozen=True)
class FlowMatch:
    """Which packets a queue rule selects; ``None`` fields match anything.

    Addresses are strings (``"10.0.1.2"`` or a prefix ``"10.0.1.0/24"``),
    ports integers, ``proto`` an IP protocol number (6 TCP, 17 UDP). Port
    matches need ``proto`` 6 or 17 (the ports sit in the TCP/UDP header).
    """

    src: str | None = None
    dst: str | None = None
    sport: int | None = None
    dport: int | None = None
    proto: int | None = None

    def check(self) -> None:
        """Raise QueueConfigError if a field is malformed."""
        for name in ("src", "dst"):
            v = getattr(self, name)
            if v is None:
                continue
            try:
                _network(v)
            except (ValueError, TypeError):
                raise QueueConfigError(f"flow rule {name} {v!r} is not an IPv4 address or prefix") from None
        for name in ("sport", "dport"):
            v = getattr(self, name)
            if v is None:
                continue
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 0xFFFF:
                raise QueueConfigError(f"flow rule {name} {v!r} is not a port number 0..65535")
            if self.proto not in (6, 17):
                raise QueueConfigError(f"flow rule with a {name} needs proto 6 (TCP) or 17 (UDP), got {self.proto!r}")
        if self.proto is not None and (not isinstance(self.proto, int) or not 0 <= self.proto <= 255):
            raise QueueConfigError(f"flow rule proto {self.proto!r} is not an IP protocol number 0..255")
        if all(getattr(self, f) is None for f in ("src", "dst", "sport", "dport", "proto")):
            raise QueueConfigError("flow rule matches everything; use the default queue instead")

    def __hash__(self) -> int:
        # Cached (the match is frozen): rule sets of 10,000 flows are hashed several times an epoch.
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.src, self.dst, self.sport, self.dport, self.proto))
            object.__setattr__(self, "_hash", h)
        return h

    def networks(self) -> list[ipaddress.IPv4Network]:
        return [_network(v) for v in (self.src, self.dst) if v is not None]


@functools.lru_cache(maxsize=65536)
def _network(text: str) -> ipaddress.IPv4Network:
    # Cached: a queue policy re-validates the same few hundred flow addresses every epoch, and
    # parsing them was most of a Jenks epoch's time on the fluid plant (benchmarks/leaderboard_speed.py).
    return ipaddress.IPv4Network(text, strict=False)


@dataclass(frozen=True)
class QueueSpec:
    """One queue: ``rate`` guaranteed and ``ceil`` maximum (bit/s), ``buffer`` (bytes).

    ``ceil == rate`` is the papers' queue (no borrowing: a queue never uses
    another's unused share, which is why rebalancing exists); ``ceil > rate``
    lets HTB lend spare bandwidth. ``quantum`` (bytes, ``None``: the
    actuator derives one) is how much a queue sends per round when HTB lends.
    """

    qid: int
    rate: float
    ceil: float
    buffer: int
    quantum: int | None = None
    label: str = ""


@dataclass(frozen=True)
class FlowRule:
    match: FlowMatch
    queue: int


@dataclass(frozen=True)
class QueueConfig:
    """K queues on a link of capacity ``capacity`` (bit/s), rules, and the default queue."""

    capacity: float
    queues: tuple[QueueSpec, ...]
    default: int
    rules: tuple[FlowRule, ...] = field(default=())
    mtu: int = MTU

    def queue(self, qid: int) -> QueueSpec:
        for q in self.queues:
            if q.qid == qid:
                return q
        raise KeyError(qid)

    def queue_of(self) -> dict[FlowMatch, int]:
        """Rule match -> queue id."""
        return {r.match: r.queue for r in self.rules}

    def validate(self, scope: Iterable[str] | None = None) -> QueueConfig:
        """Check everything the actuator and the plants rely on; return self.

        ``scope``: IPv4 prefixes of the scenario; a rule naming an address
        outside all of them is refused (it would steer traffic the scenario
        does not own).
        """
        c = self.capacity
        if not (isinstance(c, int | float) and math.isfinite(c) and c > 0):
            raise QueueConfigError(f"link capacity must be a positive number of bit/s, got {c!r}")
        if not self.queues:
            raise QueueConfigError("a queue configuration needs at least one queue (the default)")
        seen: set[int] = set()
        total = 0.0
        for q in self.queues:
            if not isinstance(q.qid, int) or isinstance(q.qid, bool) or not 1 <= q.qid <= MAX_QID:
                raise QueueConfigError(f"queue id {q.qid!r} is not an integer 1..{MAX_QID}")
            if q.qid in seen:
                raise QueueConfigError(f"queue id {q.qid} appears twice")
            seen.add(q.qid)
            for name in ("rate", "ceil"):
                v = getattr(q, name)
                if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                    raise QueueConfigError(f"queue {q.qid} {name} must be a positive number of bit/s, got {v!r}")
            if q.ceil < q.rate:
                raise QueueConfigError(f"queue {q.qid} ceil {q.ceil:.0f} bit/s is below its rate {q.rate:.0f} bit/s")
            if q.ceil > c * (1 + RATE_TOLERANCE):
                raise QueueConfigError(f"queue {q.qid} ceil {q.ceil:.0f} bit/s is above the link capacity {c:.0f} bit/s")
            if not isinstance(q.buffer, int | float) or not math.isfinite(q.buffer) or q.buffer < self.mtu:
                raise QueueConfigError(f"queue {q.qid} buffer {q.buffer!r} bytes is below one MTU ({self.mtu} bytes)")
            if q.quantum is not None and (not isinstance(q.quantum, int) or not self.mtu <= q.quantum < 2**32):
                raise QueueConfigError(f"queue {q.qid} quantum {q.quantum!r} bytes is not in [one MTU ({self.mtu}), 2^32)")
            total += q.rate
        if total > c * (1 + RATE_TOLERANCE):
            raise QueueConfigError(f"queue rates sum to {total:.0f} bit/s, above the link capacity {c:.0f} bit/s")
        if self.default not in seen:
            raise QueueConfigError(f"default queue {self.default!r} is not one of the queues {sorted(seen)}")
        self._check_rules(seen, None if scope is None else tuple(scope))
        return self

    def _check_rules(self, qids: set[int], scope: tuple[str, ...] | None) -> None:
        # Each rule's own checks are remembered on its (frozen) match: a queue policy hands the same
        # matches back every epoch, and re-checking 10,000 of them took most of a Jenks epoch's budget
        # on a real router (benchmarks/jenks_epoch_htb.py).
        nets = None if scope is None else [_network(s) for s in scope]
        matches: set[FlowMatch] = set()
        for r in self.rules:
            m = r.match
            memo = m.__dict__
            if "_checked" not in memo:
                m.check()
                object.__setattr__(m, "_checked", True)
            if r.queue not in qids:
                raise QueueConfigError(f"flow rule {_show(m)} names queue {r.queue}, which does not exist")
            matches.add(m)
            if nets is not None and memo.get("_scope") != scope:
                for n in m.networks():
                    if not any(_subnet_of(n, s) for s in nets):
                        raise QueueConfigError(
                            f"flow rule address {n} is outside the scenario's networks "
                            f"({', '.join(str(s) for s in nets)})"
                        )
                object.__setattr__(m, "_scope", scope)
        if len(matches) != len(self.rules):
            seen_m: set[FlowMatch] = set()
            for r in self.rules:
                if r.match in seen_m:
                    raise QueueConfigError(f"flow rule {_show(r.match)} appears twice")
                seen_m.add(r.match)

    def summary(self) -> dict[str, object]:
        """JSON-ready description (rates in bit/s, buffers in bytes)."""
        return {
            "capacity": self.capacity,
            "default": self.default,
            "queues": [
                {"qid": q.qid, "rate": q.rate, "ceil": q.ceil, "buffer": q.buffer, "quantum": q.quantum, "label": q.label}
                for q in self.queues
            ],
            "rules": len(self.rules),
        }


@functools.lru_cache(maxsize=65536)
def _subnet_of(n: ipaddress.IPv4Network, s: ipaddress.IPv4Network) -> bool:
    return n.subnet_of(s)


def _show(m: FlowMatch) -> str:
    parts = [f"{k}={getattr(m, k)}" for k in ("src", "dst", "sport", "dport", "proto") if getattr(m, k) is not None]
    return "(" + " ".join(parts) + ")"


def single_queue(capacity: float, buffer: int, mtu: int = MTU) -> QueueConfig:
    """The no-separation baseline: one FIFO of ``buffer`` bytes at the full capacity."""
    return QueueConfig(capacity, (QueueSpec(1, capacity, capacity, int(buffer), label="single"),), 1, (), mtu)
