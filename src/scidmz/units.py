"""SI units and the wire facts every part of scidmz counts with.

Everything inside scidmz is SI: rates in bit/s, times in seconds, sizes in
bytes. Strings ("600M", "1G", "10ms", "12.5MB") are accepted only at the
edges (CLI, TOML) and go through the ``parse_*`` functions, which raise
``ValueError`` with a one-line message naming the bad value.

The wire facts (Ethernet and TCP/IPv4 sizes) are defined here once, below
every plant, telemetry source and actuator: ARCHITECTURE.md counts rates in
Ethernet frame bytes (14-byte header + IP packet; no preamble, FCS or gap),
as Linux's ``skb->len``, tc's TBF and the P4 counters do.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy only when a rate array is checked: keeps `scidmz --help` instant
    import numpy as np

__all__ = ["check_rates", "parse_rate", "parse_time", "parse_size", "format_rate", "format_time",
           "ETH_HLEN", "MTU", "TCPIP_HEADERS", "MSS_PAYLOAD", "FRAME_BYTES", "MSS", "WIRE_PER_PAYLOAD"]

# -- wire facts ----------------------------------------------------------------
#: Ethernet header: destination, source, EtherType (no preamble, FCS or inter-frame gap).
ETH_HLEN = 14
#: Largest IP packet on the links scidmz builds (Ethernet's MTU), bytes.
MTU = 1500
#: IPv4 (20) + TCP (20) + the timestamp option every Linux TCP sends (12), bytes.
TCPIP_HEADERS = 52
#: Payload of one full-size TCP segment (TCP's MSS with timestamps), bytes.
MSS_PAYLOAD = float(MTU - TCPIP_HEADERS)
#: One full-size segment on the wire: MSS_PAYLOAD + TCP/IP headers + Ethernet header, bytes.
FRAME_BYTES = float(MTU + ETH_HLEN)
#: One segment in the byte unit of scidmz's rates and windows (frame bytes). The fluid model's
#: windows grow and shrink in these; TCP's own MSS is ``MSS_PAYLOAD``.
MSS = FRAME_BYTES
#: Wire bytes per application byte of a bulk transfer in full segments: a transfer of S payload
#: bytes occupies S x WIRE_PER_PAYLOAD of a frame-rate link (10 GB at 500 Mbit/s: 167.3 s, not 160 s).
WIRE_PER_PAYLOAD = FRAME_BYTES / MSS_PAYLOAD

_NUM = r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9, "t": 1e12, "T": 1e12}
_TIME = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0, "h": 3600.0}
_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def _split(text: str | float | int, what: str) -> tuple[float, str]:
    if isinstance(text, bool):
        raise ValueError(f"{what}: expected a number or a string like '600M', got {text!r}")
    if isinstance(text, int | float):
        return float(text), ""
    m = re.fullmatch(_NUM + r"\s*([A-Za-zµ/]*)", str(text).strip())
    if not m:
        raise ValueError(f"{what}: cannot parse {text!r}")
    return float(m.group(1)), m.group(2)


def parse_rate(text: str | float | int, what: str = "rate") -> float:
    """Return a rate in bit/s. Accepts 600M, 600Mbit, 600Mbps, 1G, 1e9, 75MB/s (bytes)."""
    value, unit = _split(text, what)
    per_byte = unit.endswith("B/s") or unit.endswith("Bps")
    u = re.sub(r"(bit/s|bps|bit|b/s|B/s|Bps)$", "", unit)
    if u not in _PREFIX:
        raise ValueError(f"{what}: unknown rate unit in {text!r} (use e.g. 600M, 1G, 100Mbit)")
    out = value * _PREFIX[u] * (8.0 if per_byte else 1.0)
    if out < 0:
        raise ValueError(f"{what}: must not be negative, got {text!r}")
    return out


def parse_time(text: str | float | int, what: str = "time") -> float:
    """Return a duration in seconds. Accepts 10ms, 1.5s, 100us, 2min, 0.1."""
    value, unit = _split(text, what)
    if unit not in _TIME:
        raise ValueError(f"{what}: unknown time unit in {text!r} (use s, ms, us, ns, min, h)")
    out = value * _TIME[unit]
    if out < 0:
        raise ValueError(f"{what}: must not be negative, got {text!r}")
    return out


def parse_size(text: str | float | int, what: str = "size") -> float:
    """Return a size in bytes. Accepts 10GB, 100kB, 1.5MiB, 12500000. SI prefixes are powers of 10."""
    value, unit = _split(text, what)
    u = re.sub(r"(B|bytes|byte)$", "", unit)
    if u in _BIN:
        mult = float(_BIN[u])
    elif u in _PREFIX:
        mult = _PREFIX[u]
    else:
        raise ValueError(f"{what}: unknown size unit in {text!r} (use B, kB, MB, GB, MiB)")
    out = value * mult
    if out < 0:
        raise ValueError(f"{what}: must not be negative, got {text!r}")
    return out


def format_rate(bps: float) -> str:
    """Human-readable rate, e.g. 6.00e8 -> '600.0 Mbit/s'."""
    for mult, name in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if abs(bps) >= mult:
            return f"{bps / mult:.1f} {name}"
    return f"{bps:.0f} bit/s"


def format_time(seconds: float) -> str:
    """Human-readable duration, e.g. 0.0123 -> '12.3 ms'."""
    if abs(seconds) >= 1:
        return f"{seconds:.2f} s"
    if abs(seconds) >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def check_rates(
    u: np.ndarray | float,
    batch: int,
    u_min: float | np.ndarray,
    u_max: float | np.ndarray,
    who: str,
    clip: bool = True,
) -> np.ndarray:
    """The one validator of rate commands (bit/s): broadcast ``u`` to shape (batch,), check, bound.

    NaN/inf (or a shape that does not broadcast) is always a one-line
    ``ValueError`` naming ``who``. ``clip=True`` (a policy's output, the
    runner) clips into [u_min, u_max]; ``clip=False`` (a plant or shaper
    receiving a command) refuses values outside it instead, since a plant
    silently changing its input would hide a caller's bug. ``u_min``/``u_max``
    may be per instance, shape (batch,).
    """
    import numpy as np

    try:
        arr = np.broadcast_to(np.asarray(u, dtype=np.float64), (batch,)).copy()
    except (TypeError, ValueError):
        raise ValueError(f"{who}: rate command must be a number or {batch} numbers of bit/s, got {u!r}") from None
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"{who}: non-finite rate command {arr[bad][0]!r} (instance {int(np.argmax(bad))})")
    lo = np.broadcast_to(np.asarray(u_min, dtype=np.float64), (batch,))
    hi = np.broadcast_to(np.asarray(u_max, dtype=np.float64), (batch,))
    if clip:
        return np.clip(arr, lo, hi)
    below = arr < lo * (1 - 1e-9) - 1e-9
    if below.any():
        i = int(np.argmax(below))
        raise ValueError(f"{who}: rate command {arr[i]:.0f} bit/s for instance {i} is below {lo[i]:.0f} bit/s")
    above = arr > hi * (1 + 1e-9)
    if above.any():
        i = int(np.argmax(above))
        raise ValueError(f"{who}: rate command {arr[i]:.0f} bit/s for instance {i} is above the maximum {hi[i]:.0f} bit/s")
    return arr
