"""Which TCP connections the agent paces: peer in a configured prefix, optionally narrowed.

A connection matches when its peer address lies in one of ``prefixes`` (IPv4 or
IPv6; an IPv4-mapped IPv6 peer is matched as IPv4), and, if given, one of its two
ports lies in one of ``ports`` and the process holding it has one of ``processes``
as its name (``/proc/PID/comm``). Either port, on purpose (ours): a DTN's
transfer tools differ in which end has the well-known port (iperf3 and xrootd
clients connect *to* a fixed port; GridFTP data channels use a local port range,
``GLOBUS_TCP_PORT_RANGE``), and an admin knows the range, not the direction.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["SocketFilter", "parse_prefixes", "parse_port_ranges"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _items(texts: Iterable[str]) -> Iterable[str]:
    """Every non-empty comma-separated item of ``texts`` (a flag given once per item or as a list)."""
    for text in texts:
        yield from (part.strip() for part in str(text).split(",") if part.strip())


def parse_prefixes(texts: Iterable[str]) -> tuple[Network, ...]:
    """``["203.0.113.0/24", "2001:db8::/32"]`` -> networks; one-line ValueError on anything else."""
    out = []
    for part in _items(texts):
        try:
            out.append(ipaddress.ip_network(part, strict=True))
        except ValueError as exc:
            raise ValueError(f"peer prefix {part!r} is not a prefix ({exc})") from None
    if not out:
        raise ValueError("the agent needs at least one peer prefix (--prefix 203.0.113.0/24)")
    return tuple(out)


def parse_port_ranges(texts: Iterable[str]) -> tuple[tuple[int, int], ...]:
    """``["5201", "50000-51000"]`` -> ((5201, 5201), (50000, 51000)); one-line ValueError otherwise."""
    out = []
    for part in _items(texts):
        lo_s, _, hi_s = part.partition("-")
        try:
            lo, hi = int(lo_s), int(hi_s or lo_s)
        except ValueError:
            raise ValueError(f"port range {part!r}: expected PORT or LOW-HIGH, e.g. 50000-51000") from None
        if not 1 <= lo <= hi <= 65535:
            raise ValueError(f"port range {part!r}: ports are 1..65535, low before high")
        out.append((lo, hi))
    return tuple(out)


@dataclass(frozen=True)
class SocketFilter:
    """The configured match; ``peer_ok`` and ``ports_ok`` are cheap, ``process_ok`` needs the owner."""

    prefixes: tuple[Network, ...]
    ports: tuple[tuple[int, int], ...] = ()
    processes: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def build(cls, prefixes: Sequence[str], ports: Sequence[str] = (), processes: Sequence[str] = ()) -> SocketFilter:
        names = frozenset(p.strip() for text in processes for p in str(text).split(",") if p.strip())
        for n in names:
            if len(n) > 15:  # the kernel's comm is TASK_COMM_LEN - 1 bytes: a longer name never matches
                raise ValueError(f"process name {n!r} is longer than the kernel's 15-character comm")
        return cls(parse_prefixes(prefixes), parse_port_ranges(ports), names)

    def peer_ok(self, addr: str) -> bool:
        ip = ipaddress.ip_address(addr)
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip.version == n.version and ip in n for n in self.prefixes)

    def ports_ok(self, local: int, remote: int) -> bool:
        if not self.ports:
            return True
        return any(lo <= p <= hi for lo, hi in self.ports for p in (local, remote))

    def process_ok(self, comm: str | None) -> bool:
        return not self.processes or comm in self.processes

    def describe(self) -> dict[str, object]:
        return {"prefixes": [str(n) for n in self.prefixes], "ports": [f"{a}-{b}" for a, b in self.ports],
                "processes": sorted(self.processes)}
