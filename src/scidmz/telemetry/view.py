"""What the control plane reads from a data plane: the ``DataPlaneView`` interface.

The collector (``collector.py``, MLC Algorithms 3, 4, 6, 8) never touches a
switch or the software twin directly; it calls these four methods once per
control period T. Three implementations feed it:

* ``dataplane.SoftwareDataPlane`` (the twin on pcaps / live taps),
* ``p4runtime.P4RuntimeView`` (BMv2 v1model program over P4Runtime),
* ``bfrt.BfrtView`` (Tofino TNA program over BF Runtime).

Contract (names and widths from ``constants.py``):

``tick_ns`` (int attribute)
    Nanoseconds per timestamp tick in the registers and digests
    (``TS_TICK_NS_V1MODEL`` = 1000 on BMv2 and the twin, ``TS_TICK_NS_TNA`` =
    1024 on Tofino).

``clock() -> float``
    The data plane's current time in seconds (for the twin: the newest
    packet timestamp processed; for a switch: the host's monotonic clock at
    the read). Algorithm 3 divides counter deltas by differences of it.

``read_class_counters() -> np.ndarray``
    uint64 array of shape (``N_CLASSES``, 2): cumulative [bytes, packets] of
    the ``class_bytes`` direct counter of ``class_lpm`` at the bottleneck
    (egress) tap, row = class id. Monotone; the collector takes deltas.

``read_register(name, index=None) -> np.ndarray``
    uint64 values of register ``name`` (``REG_*`` in constants.py) at the
    given integer indices, or the whole array when ``index`` is None. The
    collector reads ``qd_last``/``qd_sum``/``qd_cnt`` (index = class) and
    ``af_ts``/``af_bytes``/``flow_rtt`` (index = flow slot from digests).

``drain_digests() -> tuple[np.ndarray, np.ndarray]``
    Every digest produced since the previous call, oldest first, as NumPy
    structured arrays: RTT samples (``DIGEST_RTT_DTYPE``) and flow events
    (``DIGEST_FLOW_DTYPE``; kind new-flow / timeout / long-flow). A switch
    adapter acknowledges the digest lists it drained. Addresses are 128 bits
    (IPv4 as ``::ffff:a``), each as ``<name>_hi`` / ``<name>_lo`` words.

Prefixes (``parse_prefix``, ``lpm_entry``): IPv4 or IPv6, several per class;
both families share the 128-bit key of ``class_lpm`` (constants.py "addresses").
"""

from __future__ import annotations

import ipaddress
from typing import Protocol, runtime_checkable

import numpy as np

from . import constants as C

__all__ = ["DataPlaneView", "parse_prefix", "parse_prefixes", "lpm_entry", "digest_array", "mapped"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_prefix(text: str) -> Network:
    """An IPv4 or IPv6 prefix for the class LPM tables; one-line ValueError otherwise."""
    try:
        return ipaddress.ip_network(str(text).strip(), strict=False)
    except ValueError:
        raise ValueError(f"not an IPv4 or IPv6 prefix: {text!r} (expected e.g. 10.0.3.2/32 or "
                         "2001:db8:3::2/128)") from None


def parse_prefixes(prefixes: list[str] | tuple[str, ...] | str | None) -> list[Network]:
    """Prefixes given as a list and/or comma-separated text."""
    if prefixes is None:
        return []
    if isinstance(prefixes, str):
        prefixes = [prefixes]
    return [parse_prefix(x) for item in prefixes for x in str(item).split(",") if x.strip()]


def mapped(net: Network) -> tuple[int, int]:
    """The prefix as a 128-bit (network, prefix length): IPv4 a/n is ::ffff:a/(96 + n)."""
    if net.version == 4:
        return C.IPV4_MAPPED_LO | int(net.network_address), C.IPV4_MAPPED_PREFIXLEN + net.prefixlen
    return int(net.network_address), net.prefixlen


def lpm_entry(net: Network) -> tuple[int, int, int, int]:
    """(network hi, network lo, mask hi, mask lo) of the 128-bit key, as unsigned 64-bit words."""
    addr, plen = mapped(net)
    mask = ((1 << 128) - 1) ^ ((1 << (128 - plen)) - 1)
    m64 = (1 << 64) - 1
    return addr >> 64, addr & m64, mask >> 64, mask & m64


def digest_array(rows: list[tuple[int, ...]], fields: tuple[tuple[str, int], ...]) -> np.ndarray:
    """Digest tuples read from a switch (one int per P4 field of ``fields``, ``DIGEST_*_FIELDS``)
    as the structured array ``drain_digests`` returns (128-bit fields split in two words)."""
    cols: list[list[int]] = []
    for j, (_, bits) in enumerate(fields):
        vals = [int(r[j]) for r in rows]
        cols += [[v >> 64 for v in vals], [v & ((1 << 64) - 1) for v in vals]] if bits == 128 else [vals]
    dtype = C.DIGEST_RTT_DTYPE if fields == C.DIGEST_RTT_FIELDS else C.DIGEST_FLOW_DTYPE
    out = np.zeros(len(rows), dtype=dtype)
    for (name, _), col in zip(dtype, cols, strict=True):
        out[name] = np.array(col, dtype=np.uint64)
    return out


@runtime_checkable
class DataPlaneView(Protocol):
    """The control plane's read side of a telemetry data plane (see module doc)."""

    tick_ns: int

    def clock(self) -> float: ...

    def read_class_counters(self) -> np.ndarray: ...

    def read_register(self, name: str, index: np.ndarray | None = None) -> np.ndarray: ...

    def drain_digests(self) -> tuple[np.ndarray, np.ndarray]: ...
