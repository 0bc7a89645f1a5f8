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
    adapter acknowledges the digest lists it drained.
"""

from __future__ import annotations

import ipaddress
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["DataPlaneView", "parse_prefix", "digest_array"]


def parse_prefix(text: str) -> ipaddress.IPv4Network:
    """An IPv4 prefix for the class LPM tables; one-line ValueError otherwise."""
    try:
        return ipaddress.IPv4Network(str(text).strip(), strict=False)
    except ValueError:
        raise ValueError(f"not an IPv4 prefix: {text!r} (expected e.g. 10.0.3.2/32)") from None


def digest_array(rows: list[tuple[int, ...]], dtype: list[tuple[str, str]]) -> np.ndarray:
    """Digest tuples read from a switch as the structured array ``drain_digests`` returns."""
    out = np.zeros(len(rows), dtype=dtype)
    if rows:
        arr = np.array(rows, dtype=np.uint64)
        for j, (n, _) in enumerate(dtype):
            out[n] = arr[:, j]
    return out


@runtime_checkable
class DataPlaneView(Protocol):
    """The control plane's read side of a telemetry data plane (see module doc)."""

    tick_ns: int

    def clock(self) -> float: ...

    def read_class_counters(self) -> np.ndarray: ...

    def read_register(self, name: str, index: np.ndarray | None = None) -> np.ndarray: ...

    def drain_digests(self) -> tuple[np.ndarray, np.ndarray]: ...
