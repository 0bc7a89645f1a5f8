"""How the netns plant composes its telemetry: factories from a built ``Testbed`` to a source.

The sources themselves live in ``scidmz.telemetry`` and know no plant: they
take plain data (namespace and device names, addresses, B_max, T) and
callables. The factories here are the adapters: each reads the testbed's
description (``spec.py``) and hands the source what it needs, as Mininet
passes link classes to its builder. This module is the one place where the
netns plant imports ``scidmz.telemetry`` (lazily, when a source is made);
nothing in ``scidmz.telemetry`` imports the plant.

``NetnsPlant(telemetry=...)`` takes a name from ``TELEMETRY_KINDS`` (the
command line's) or any ``TelemetryFactory``: a callable ``(testbed) ->
source`` returning an object with the ``NetnsTelemetry`` methods. A new
source adds one factory function and one ``_KINDS`` line, as the eBPF programs on BR1 did
(``ebpf_telemetry``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ...state import NetworkState
from .spec import REMOTE_NET
from .testbed import Testbed

__all__ = ["NetnsTelemetry", "TelemetryFactory", "TELEMETRY_KINDS", "telemetry_factory", "kernel_points",
           "tap_points", "kernel_telemetry", "dataplane_telemetry", "auto_telemetry", "ebpf_telemetry",
           "ebpf_points"]

log = logging.getLogger("scidmz.testbed")


class NetnsTelemetry(Protocol):
    """What ``NetnsPlant`` needs of a telemetry source.

    ``sample(t)`` is called at t = 0 (after the episode's traffic started: start the first
    period's counters) and at every period boundary t = kT; it returns y over the period that
    just ended, with ARCHITECTURE.md's meaning. ``last_info`` is that period's ground truth
    (keys the plant copies into ``info`` when present: ``dtn_bytes``, ``campus_bytes``,
    ``bottleneck_drops``, ``interval``, ``bottleneck`` and ``senders`` (the starvation check's
    inputs), ``port_bytes``, ``shaper_delay``, ``tap_drops``, ``kernel_y``, ``stale_<field>``).
    ``flows()`` is the per-flow table a queue policy reads; ``set_udp`` names the running
    ``[[flows]]`` UDP senders and the number of UDP sources (they have no socket state).
    A source may also have ``start_mono`` (the ``time.monotonic()`` instant its first period
    began: the plant aligns its period boundaries to it).
    """

    name: str
    last_info: dict[str, Any]

    def sample(self, t: float) -> NetworkState: ...

    def flows(self) -> dict[str, list[Any]]: ...

    def set_udp(self, flows: Sequence[str], sources: int) -> None: ...

    def close(self) -> None: ...


TelemetryFactory = Callable[[Testbed], NetnsTelemetry]


def kernel_points(tb: Testbed) -> Any:
    """The kernel source's view of the testbed (``telemetry.sources.counters.KernelPoints``)."""
    from ...telemetry.sources.counters import KernelPoints, Sender

    spec = tb.spec
    senders = tuple(Sender(h.name, h.ns, h.ip, h.role, h.rtt, spec.delivery_port(h), tb.hosts[h.peer].ip)
                    for h in spec.senders)
    return KernelPoints(senders, spec.scenario.capacity, spec.bottleneck, spec.uplink, spec.ns("sw2"),
                        spec.dtn.rtt, spec.scenario.campus.rtt)


def tap_points(tb: Testbed) -> Any:
    """Build the testbed's passive taps (once) and return the data plane's view of them
    (``telemetry.sources.taps.TapPoints``)."""
    from ...telemetry.sources.taps import TapPoints

    ns, egress, ingress = tb.add_taps()
    spec = tb.spec
    return TapPoints(ns, egress, ingress, spec.scenario.period, f"{spec.hosts['dtnr'].ip}/32", REMOTE_NET,
                     {h.ip: h.role for h in spec.senders})


def kernel_telemetry(tb: Testbed) -> NetnsTelemetry:
    """Kernel counters and tcp_info (``telemetry.sources.counters``)."""
    from ...telemetry.sources.counters import KernelCounterTelemetry

    return KernelCounterTelemetry(kernel_points(tb))


def dataplane_telemetry(tb: Testbed) -> NetnsTelemetry:
    """The software data plane on the passive taps (``telemetry.sources.taps``), with kernel counters beside it."""
    from ...telemetry.sources.taps import DataplaneTelemetry

    try:
        return DataplaneTelemetry(tap_points(tb), kernel=lambda: kernel_telemetry(tb))
    except Exception as exc:
        raise RuntimeError(f"data-plane telemetry unavailable: {exc}") from exc


def auto_telemetry(tb: Testbed) -> NetnsTelemetry:
    """The data plane when it can run here, else the kernel counters (logged)."""
    try:
        return dataplane_telemetry(tb)
    except Exception as exc:  # noqa: BLE001 - auto falls back; an explicit "dataplane" re-raises
        log.warning("%s; using kernel counters", exc)
    return kernel_telemetry(tb)


def ebpf_points(tb: Testbed) -> dict[str, Any]:
    """Where the eBPF programs go on the testbed, as ``EbpfTelemetry``'s arguments: BR1's LAN
    interfaces (towards S1 and S3, the twin's ingress tap) and its WAN interface (the bottleneck:
    the transmit hook sees what left its TBF), in BR1's namespace."""
    spec = tb.spec
    wan, ns = spec.bottleneck
    router = spec.bottleneck_tbf.role
    lan = [a.ifname for a in spec.addresses if a.role == router and a.ifname != wan]
    return {"lan": lan, "wan": wan, "netns": ns, "period": spec.scenario.period,
            "dtn_prefix": f"{spec.hosts['dtnr'].ip}/32", "remote_prefix": REMOTE_NET}


def ebpf_telemetry(tb: Testbed, twin: bool = False) -> NetnsTelemetry:
    """The eBPF programs on BR1 (``telemetry.ebpf``), kernel counters beside them for ground truth.

    ``twin=True`` (comparisons: ``functools.partial(ebpf_telemetry, twin=True)``) runs the software
    twin on the passive taps beside them instead, which keeps kernel counters itself. The taps' mirrors
    are made first, so the programs' filters go in front of them on BR1's hooks (a mirror ends the
    filter chain; the programs pass every packet on), and the twin's periods start after the programs
    are loaded, with theirs.
    """
    from ...state import RTT_CAMPUS_ALPHA
    from ...telemetry.ebpf.router import RouterTelemetry
    from ...telemetry.ebpf.source import EbpfTelemetry

    if twin:
        tap_points(tb)
    ref = dataplane_telemetry if twin else kernel_telemetry
    try:
        tel = EbpfTelemetry(**ebpf_points(tb), alpha=RTT_CAMPUS_ALPHA)
        return RouterTelemetry(tel, lambda: ref(tb), {h.ip: h.role for h in tb.spec.senders})
    except (RuntimeError, OSError) as exc:
        raise RuntimeError(f"eBPF telemetry unavailable: {exc}") from exc


_KINDS: dict[str, TelemetryFactory] = {
    "auto": auto_telemetry,
    "dataplane": dataplane_telemetry,
    "kernel": kernel_telemetry,
    "ebpf": ebpf_telemetry,
}
TELEMETRY_KINDS = tuple(_KINDS)


def telemetry_factory(telemetry: str | TelemetryFactory) -> TelemetryFactory:
    """A name from ``TELEMETRY_KINDS`` (mapped here, at the edge) or a factory, checked; one-line error."""
    if isinstance(telemetry, str):
        if telemetry not in _KINDS:
            raise ValueError(f"unknown telemetry '{telemetry}' (choose {', '.join(TELEMETRY_KINDS)})")
        return _KINDS[telemetry]
    if callable(telemetry):
        return telemetry
    raise ValueError(f"telemetry must be one of {', '.join(TELEMETRY_KINDS)} or a factory, got {telemetry!r}")
