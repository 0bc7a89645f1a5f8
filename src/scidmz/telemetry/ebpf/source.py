"""``EbpfTelemetry``: y(t) every T from the eBPF programs on a Linux border router.

The telemetry source for a router without a P4 switch. ``open()``
checks the interfaces, builds the programs (``build.py``), loads the object
with the class prefixes (``objects.EbpfObject``: no permission or a verifier
rejection fails here, before anything is written), claims the interfaces
(``attach.claim``: one instance per interface, a record of what is made) and
attaches:

* ``scidmz_lan_in`` to every LAN interface's ingress (frames from the campus
  and the DTN, before the router's queue: the twin's ingress tap);
* ``scidmz_wan_in`` to the WAN interface's ingress (frames back from the WAN,
  the ACKs: both taps);
* the egress tap on the WAN interface: ``egress_hook="xmit"`` (default) the
  ``net_dev_start_xmit`` tracepoint, after WAN_IF's qdisc, so rates count what
  left the queue and Algorithm 5's queuing delay includes it (needs kernel
  BTF); ``"tc"`` the clsact egress hook, before WAN_IF's qdisc (for a router
  whose bottleneck queue is elsewhere, or a kernel without BTF).

Every period the collector (``view.EbpfCollector``, MLC Algorithms 3, 4, 6,
8) reads the counter block, drains the flow digests and reads the per-flow
registers of the tracked flows. Iterating yields one ``NetworkState`` per
period at wall-clock pace; ``sample()`` reads one now (for a plant that
paces itself). ``flows`` is the per-flow table queue policies read.

Teardown: ``close()`` (also ``with``, at interpreter exit, and on SIGTERM /
SIGHUP when opened from the main thread) removes the filters and qdiscs it
made; after a SIGKILL, ``attach.down_stale()`` does it from the record.
"""

from __future__ import annotations

import atexit
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ...state import NetworkState
from .. import constants as C
from ..collector import DEFAULT_ALPHA
from .attach import Attachments, Iface, claim, resolve_iface
from .build import build
from .layout import COUNTER_NAMES, EBPF_REASONS, PARSE_REASONS
from .objects import EbpfObject, cfg_bytes, class_entries
from .view import EbpfCollector, EbpfView

__all__ = ["EbpfTelemetry", "EGRESS_HOOKS"]

EGRESS_HOOKS = ("xmit", "tc")
MIN_PERIOD, MAX_PERIOD = 1e-3, 86400.0  # as telemetry/twin/source.py


def _names(v: str | Sequence[str]) -> list[str]:
    return [x.strip() for x in v.split(",") if x.strip()] if isinstance(v, str) else [str(x) for x in v]


class EbpfTelemetry:
    """y(t) from eBPF programs on ``lan`` (one or more interfaces) and ``wan`` (see module docstring).

    Nothing touches the system until ``open()`` (or ``with``/iteration); the arguments are checked
    here. ``netns``: the network namespace (name under /run/netns, or a path) the interfaces live in.
    """

    def __init__(self, lan: str | Sequence[str], wan: str, *, period: float = 1.0,
                 dtn_prefix: str | list[str] = C.DEFAULT_DTN_PREFIX,
                 remote_prefix: str | list[str] = C.DEFAULT_REMOTE_PREFIX, netns: str | None = None,
                 egress_hook: str = "xmit", rtt_tap: int = C.TAP_INGRESS, alpha: float = DEFAULT_ALPHA,
                 duration: float | None = None) -> None:
        if not (isinstance(period, int | float) and MIN_PERIOD <= period <= MAX_PERIOD):
            raise ValueError(f"period must be between {MIN_PERIOD * 1e3:g} ms and {MAX_PERIOD:g} s, got {period!r}")
        if egress_hook not in EGRESS_HOOKS:
            raise ValueError(f"egress_hook must be one of {', '.join(EGRESS_HOOKS)}, got {egress_hook!r}")
        if rtt_tap not in (C.TAP_INGRESS, C.TAP_EGRESS):
            raise ValueError(f"rtt_tap must be {C.TAP_INGRESS} or {C.TAP_EGRESS}, got {rtt_tap}")
        self.lan = _names(lan)
        self.wan = str(wan).strip()
        if not self.lan or not self.wan:
            raise ValueError("the eBPF telemetry needs LAN and WAN interfaces (ebpf:LAN_IF,WAN_IF)")
        if self.wan in self.lan or len(set(self.lan)) != len(self.lan):
            raise ValueError(f"each interface may appear once (LAN {','.join(self.lan)}, WAN {self.wan})")
        self.entries = class_entries(dtn_prefix, remote_prefix)
        self.period = float(period)
        self.netns = netns
        self.egress_hook = egress_hook
        self.rtt_tap = int(rtt_tap)
        self.alpha = alpha
        self.duration = duration
        self.obj: EbpfObject | None = None
        self.view: EbpfView | None = None
        self.collector: EbpfCollector | None = None
        self._att: Attachments | None = None
        self._old_handlers: dict[int, Any] = {}
        self._t0 = 0.0
        self._k = 0

    # -- lifecycle ---------------------------------------------------------------------------------
    def open(self) -> EbpfTelemetry:
        """Build, load, claim and attach (idempotent); on any failure nothing stays attached.

        The object is loaded before anything is written or attached, so a user without the
        right to load BPF (or a verifier rejection) fails before touching the system.
        """
        if self.obj is not None:
            return self
        ifaces = [resolve_iface(n, self.netns) for n in (*self.lan, self.wan)]
        wan = ifaces[-1]
        egress = "scidmz_wan_xmit" if self.egress_hook == "xmit" else "scidmz_wan_out"
        cfg = cfg_bytes(self.entries, self.rtt_tap, False, wan.index, wan.netns_ino)
        obj = EbpfObject(build(), cfg, ("scidmz_lan_in", "scidmz_wan_in", egress))
        try:
            self._att = Attachments(claim(ifaces))
        except BaseException:
            obj.close()
            raise
        self.obj = obj
        atexit.register(self.close)
        self._install_signal_handlers()
        try:
            self._attach(ifaces, egress)
        except BaseException:
            self.close()
            raise
        return self

    def _attach(self, ifaces: list[Iface], egress: str) -> None:
        obj, att, wan = self.obj, self._att, ifaces[-1]
        assert obj is not None and att is not None
        for name, i, direction in [*(("scidmz_lan_in", i, "ingress") for i in ifaces[:-1]),
                                   ("scidmz_wan_in", wan, "ingress")]:
            att.tc(i, direction, name, obj.prog_fd(name), obj.prog_id(name))
        if egress == "scidmz_wan_out":
            att.tc(wan, "egress", egress, obj.prog_fd(egress), obj.prog_id(egress))
        else:
            att.tracepoint(obj.prog_ptr(egress), egress)
        self.view = EbpfView(obj)
        self._t0 = time.monotonic()
        self._k = 0
        self.collector = EbpfCollector(self.view, self.alpha, t0=self._t0)

    def close(self) -> None:
        """Detach everything this instance attached, remove its record, unload (safe to call twice)."""
        try:
            if self._att is not None:
                att, self._att = self._att, None
                att.detach()
        finally:
            if self.obj is not None:
                obj, self.obj = self.obj, None
                obj.close()
            self._restore_signal_handlers()
            atexit.unregister(self.close)

    def __enter__(self) -> EbpfTelemetry:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def stop(signum: int, _frame: Any) -> None:
            raise SystemExit(128 + signum)  # unwinds through close()

        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                self._old_handlers[sig] = signal.signal(sig, stop)

    def _restore_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)
        self._old_handlers.clear()

    # -- samples -------------------------------------------------------------------------------------
    def sample(self) -> NetworkState:
        """y for the period since the previous sample (or since ``open``), read now."""
        if self.collector is None:
            self.open()
        assert self.collector is not None
        return self.collector.sample()

    def __iter__(self) -> Iterator[NetworkState]:
        self.open()
        while self.duration is None or (self._k + 1) * self.period <= self.duration + 1e-9:
            boundary = self._t0 + (self._k + 1) * self.period
            time.sleep(max(0.0, boundary - time.monotonic()))
            self._k += 1
            yield self.sample()

    @property
    def stale(self) -> dict[str, bool]:
        return {} if self.collector is None else dict(self.collector.stale)

    @property
    def flows(self) -> Any:
        """Per-flow records (pandas DataFrame, ``collector.FLOW_COLUMNS``) as of the last period."""
        return None if self.collector is None else self.collector.flows()

    def counters(self) -> dict[str, int]:
        """Every counter of the programs (cumulative, read now): the twin's event counters (``stat_*``),
        parser reasons (``parse_*``), packets per hook, class counters, lost flow digests."""
        if self.obj is None:
            return {}
        return {n: int(v) for n, v in zip(COUNTER_NAMES, self.obj.counters(), strict=True)}

    @property
    def drops(self) -> dict[str, int]:
        """Packets passed on without measurement, by reason (as ``TelemetrySource.drops``), and lost digests.

        ``tunnel`` and ``too_deep`` are frames the twin would measure and the programs do not
        (``layout.EBPF_REASONS``; docs/telemetry_ebpf.md "Known gaps")."""
        c = self.counters()
        out = {r: c[f"parse_{r}"] for r in (*PARSE_REASONS, *EBPF_REASONS) if c.get(f"parse_{r}")}
        if c.get("events_lost"):
            out["flow_events_lost"] = c["events_lost"]
        return out
