"""``RouterTelemetry``: the eBPF programs on a router as a real-time plant's telemetry, with a reference beside.

``EbpfTelemetry`` (``source.py``) reads y whenever asked. A real-time plant
(the netns testbed) wants more of its telemetry: ``sample(t)`` at
its own period boundaries, the period's ground truth in ``last_info``
(bytes delivered, drops, the starvation check's inputs) and the per-flow
table with each sender's role. ``RouterTelemetry`` gives that, with y from
the programs and everything else from a *reference source* running beside
them, made by the callable it is given and closed with it:

* the kernel counters (``telemetry.sources.counters``): ground truth, and the kernel's
  own y for the same period as ``last_info["kernel_y"]``;
* or the software twin on the passive taps (``telemetry.sources.taps``), which keeps
  kernel counters itself: its y goes to ``last_info["twin_y"]`` and its
  kernel truth to ``last_info["kernel_y"]``, so one run compares the three
  realisations period by period (``benchmarks/ebpf_netns.py``).

The programs' maps are read first, at the boundary (one syscall and the
mmap'd flow table: microseconds), then the reference, whose kernel reads
take milliseconds. Plain data only (interfaces, namespace, prefixes, the
senders' roles): the netns plant derives it (``plant/netns/sources.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...state import STATE_FIELDS, NetworkState
from .source import EbpfTelemetry

__all__ = ["RouterTelemetry"]


class RouterTelemetry:
    """y every period from ``tel`` (opened here), ground truth from ``reference()`` (see module docstring).

    ``roles``: sender address -> dtn | campus | short, the flow table's ``role`` column.
    """

    name = "ebpf"

    def __init__(self, tel: EbpfTelemetry, reference: Callable[[], Any], roles: Mapping[str, str]) -> None:
        self.roles = dict(roles)
        # The programs first: loading them takes a second or two, and a reference that counts its own
        # periods (the twin, from the moment its rings open) must start after that, with the programs'.
        self.tel = tel.open()
        try:
            self.reference = reference()
        except BaseException:
            self.tel.close()
            raise
        self.last_info: dict[str, Any] = {}

    @property
    def start_mono(self) -> float | None:
        """The reference's first period start when it has one (the twin's rings opened then), so
        the plant's boundaries are the twin's too; else None (the plant starts its own clock)."""
        return getattr(self.reference, "start_mono", None)

    def set_udp(self, flows: Sequence[str], sources: int) -> None:
        self.reference.set_udp(flows, sources)

    def sample(self, t: float) -> NetworkState:
        """The programs' y over the period ending now, stamped ``t``; the reference's beside it."""
        y = self.tel.sample()
        ref = self.reference.sample(t)
        if t <= 0:  # the plant starts the first period's counters
            return NetworkState(t=float(t), **{f: float(getattr(y, f)) for f in STATE_FIELDS})
        info = dict(self.reference.last_info)
        if "kernel_y" in info:  # the reference is the twin, with its own kernel truth
            info["twin_y"] = ref.as_vector()
        else:
            info["kernel_y"] = ref.as_vector()
        for f, flag in self.tel.stale.items():
            info[f"stale_{f}"] = float(flag)
        info["ebpf_drops"] = self.tel.drops
        self.last_info = info
        return NetworkState(t=float(t), **{f: float(getattr(y, f)) for f in STATE_FIELDS})

    def flows(self) -> dict[str, list[Any]]:
        """The programs' per-flow table as of the last period (the collector's), with each
        sender's ``role`` from its address (as the twin's source gives it)."""
        df = self.tel.flows
        if df is None:
            return self.reference.flows()
        src = df["src"].tolist()
        return {
            "src": src, "dst": df["dst"].tolist(), "sport": df["sport"].tolist(), "dport": df["dport"].tolist(),
            "proto": df["proto"].tolist(), "rtt": df["rtt"].tolist(), "rate": df["rate"].tolist(),
            "bytes": df["bytes"].tolist(), "long_flow": df["long_flow"].tolist(),
            "role": [self.roles.get(a, "campus") for a in src],
        }

    def close(self) -> None:
        try:
            self.tel.close()
        finally:
            self.reference.close()
