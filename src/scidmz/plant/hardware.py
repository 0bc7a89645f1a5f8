"""``HardwarePlant``: the real network on the host, shaped by a real actuator, measured by a data plane.

This is the deployment of the MLC paper's Fig. 2 on real equipment: the
campus egress rate u is applied to a host interface (``TbfActuator`` on
``dev``, the paper's S1-eth1) or to an Open vSwitch port
(``OvsQosActuator``), and y comes from the telemetry program on a P4 switch
(``telemetry.p4.p4runtime.P4RuntimeView`` at ``telemetry="p4:HOST:PORT"``, set up by
``hardware_p4.P4Switch``: pipeline, tap ports, prefixes, owner record; or any
``DataPlaneView`` object, e.g. ``telemetry.p4.bfrt.BfrtView`` on a Tofino) or
from the same algorithms as eBPF programs on this Linux router's own
interfaces (``telemetry="ebpf:LAN_IF[,LAN_IF...],WAN_IF"``,
``telemetry.ebpf``: a campus without a P4 switch), read by the
collector (MLC Algorithms 3, 4, 6, 8) once per period T.

Real time: ``step(u)`` applies u, waits until the end of the period and
returns the sample, so it takes T. The actuator is exposed as ``actuator``
so the controller daemon can apply its fallback rate directly when the
telemetry stops answering. ``close`` removes the shaper (restoring the
interface or port) and disconnects from the switch.

Composition (ARCHITECTURE.md): ``HardwarePlant`` receives its actuator and its
telemetry view as objects; ``build_hardware_plant`` (what ``make_plant("hardware",
...)`` calls) makes them from command-line options. Nothing is simulated here:
without a switch address (or view) or without an actuator target it fails with
a one-line error. ``actuator=`` replaces the TBF/OVS actuator by another
factory of the same target: ``actuators.recording.RecordingActuator`` is
shadow mode's, which applies nothing.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from ..scenario import Scenario
from ..units import check_rates
from .base import StateBatch, register_plant
from .hardware_host import HostPlace, open_host

__all__ = ["HardwarePlant", "HostHardwarePlant", "build_hardware_plant", "DEFAULT_OVS_DB"]

DEFAULT_OVS_DB = "unix:/var/run/openvswitch/db.sock"


class HardwarePlant:
    """The ``Plant`` for a real interface/OVS port plus a P4 telemetry switch (batch = 1, real time)."""

    realtime = True

    def __init__(self, scenario: Scenario, actuator: Any, view: Any, *, owns_view: bool = False,
                 resources: tuple[Any, ...] = ()) -> None:
        """``actuator``: a ``RateActuator`` (``set_rate``, ``current_rate``, ``close``); ``view``: a
        ``DataPlaneView`` (``clock``, ``read_class_counters``, ``read_register``, ``drain_digests``;
        a view with ``new_collector()`` makes its own collector, as the eBPF maps' does).
        ``owns_view``: close the view with the plant; ``resources``: more objects closed with it
        (the eBPF telemetry whose programs the view reads). ``build_hardware_plant`` makes them
        from command-line options (the ``hardware`` entry of ``make_plant``)."""
        for attr in ("set_rate", "current_rate", "close"):
            if not callable(getattr(actuator, attr, None)):
                raise ValueError(f"actuator {type(actuator).__name__} is not a RateActuator (no {attr}())")
        for attr in ("clock", "read_class_counters", "read_register", "drain_digests"):
            if not callable(getattr(view, attr, None)):
                raise ValueError(f"telemetry object {type(view).__name__} is not a DataPlaneView (no {attr}())")
        self.scenario = scenario
        self.batch = 1
        self.actuator = actuator
        self._view = view
        self._own_view = owns_view
        self._resources = tuple(resources)
        self._closed = False
        self._info: dict[str, Any] = {}
        self.collector: Any = None
        self._t0 = 0.0
        self._next = 0.0

    # -- Plant ------------------------------------------------------------------------------------------
    @property
    def period(self) -> float:
        return self.scenario.period

    @property
    def info(self) -> dict[str, Any]:
        return self._info

    def reset(self, seed: int | None = None) -> StateBatch:
        """Set the initial shaper rate, start the collector, return the first sample after one period."""
        from ..telemetry.collector import Collector

        self._check_open()
        sc = self.scenario
        u0 = sc.shaper.rate if sc.shaper.rate is not None else sc.u_max
        self.actuator.set_rate(u0)
        own = getattr(self._view, "new_collector", None)
        self.collector = own() if callable(own) else Collector(self._view)
        self._t0 = time.monotonic()
        self._next = self._t0
        return self._sample_at_period_end(u0)

    def step(self, u: np.ndarray | float) -> StateBatch:
        """Apply u (bit/s) now, wait for the end of the period, return y measured over it."""
        self._check_open()
        if self.collector is None:
            raise RuntimeError("HardwarePlant.step before reset")
        rate = float(check_rates(u, 1, 0.0, self.scenario.u_max, "hardware plant", clip=False)[0])
        self.actuator.set_rate(rate)
        return self._sample_at_period_end(rate)

    def _sample_at_period_end(self, u: float) -> StateBatch:
        self._next += self.period
        now = time.monotonic()
        if self._next < now:  # overran (slow switch): re-anchor rather than sample twice at once
            self._next = now
        time.sleep(max(0.0, self._next - time.monotonic()))
        y = self.collector.sample()
        vec = y.as_vector()
        try:
            applied = float(self.actuator.current_rate())
        except Exception:
            applied = math.nan
        self._info = {"u_applied": np.array([applied]), "u_commanded": np.array([u])}
        return StateBatch(time.monotonic() - self._t0, vec[None, :])

    def flows(self) -> list[dict[str, list[Any]]]:
        """The switch's per-flow table as of the last period (the collector's: ``FLOW_COLUMNS`` plus
        ``cls``, ``slot``, ``bytes``), one instance; before ``reset``, an empty table."""
        from ..telemetry.collector import FLOW_COLUMNS

        if self.collector is None:
            return [{c: [] for c in FLOW_COLUMNS}]
        df = self.collector.flows()
        return [{c: df[c].tolist() for c in df.columns}]

    def unmeasured(self) -> dict[str, int]:
        """Packets the telemetry passed on unmeasured, by reason (``UnmeasuredPlant``): the ``drops``
        of the view and of the resources that count them (the eBPF telemetry's ``tunnel``,
        ``too_deep``, parse failures and lost flow digests); {} when none counts."""
        out: dict[str, int] = {}
        for obj in {id(o): o for o in (self._view, *self._resources)}.values():  # each source once
            drops = getattr(obj, "drops", None)
            for reason, n in ((drops() if callable(drops) else drops) or {}).items():
                out[reason] = out.get(reason, 0) + int(n)
        return out

    def close(self) -> None:
        """Remove the shaper (restoring the interface/port) and disconnect from the switch."""
        if self._closed:
            return
        self._closed = True
        try:
            self.actuator.close()
        finally:
            try:
                if self._own_view and self._view is not None and hasattr(self._view, "close"):
                    self._view.close()
            finally:
                for r in self._resources:
                    r.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("HardwarePlant is closed")

    def __enter__(self) -> HardwarePlant:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"HardwarePlant(actuator={self.actuator!r}, scenario={self.scenario.name!r})"


class HostHardwarePlant(HostPlace, HardwarePlant):
    """A ``HardwarePlant`` that also paces the DTNs through their agents (``--dtn-agent``; ``hardware_host``)."""

    def __init__(self, scenario: Scenario, actuator: Any, view: Any, *, host: Any, **kwargs: Any) -> None:
        super().__init__(scenario, actuator, view, **kwargs)
        self.host = host


def _with_host(plant: HardwarePlant, host: Any) -> HardwarePlant:
    """``plant`` with the host place when ``host`` (an ``AgentPacer``) is given."""
    if host is None:
        return plant
    return HostHardwarePlant(plant.scenario, plant.actuator, plant._view, host=host, owns_view=plant._own_view,
                             resources=plant._resources)


def build_hardware_plant(
    scenario: Scenario,
    dev: str | None = None,
    ovs_port: str | None = None,
    telemetry: Any = None,
    *,
    netns: str | None = None,
    ovs_db: str | None = None,
    ovs_mode: str = "htb",
    ovs_bridge: str | None = None,
    dtn_prefixes: list[str] | None = None,
    remote_prefixes: list[str] | None = None,
    install: bool = True,
    p4info: str | None = None,
    view_options: dict[str, Any] | None = None,
    egress_hook: str = "xmit",
    actuator: Any = None,
    p4_pipeline: str | None = None,
    p4_thrift: str | None = None,
    tap_ports: Any = "1,2",
    dtn_agent: list[str] | str | None = None,
    dtn_agent_token: list[str] | str | None = None,
    host_shadow: bool = False,
    queues_dev: str | None = None,
    discipline: str | None = None,
    discipline_pipeline: str | None = None,
    discipline_ports: Any = "0,1",
) -> HardwarePlant:
    """A ``HardwarePlant`` from command-line options: the actuator (``TbfActuator`` on ``dev`` or
    ``OvsQosActuator`` on ``ovs_port``, or ``actuator(target, netns=)``) and the telemetry view
    (``P4RuntimeView`` at ``telemetry="HOST:PORT"``, the eBPF programs at
    ``telemetry="ebpf:LAN_IF[,LAN_IF...],WAN_IF"`` in ``netns`` with ``egress_hook``, or a
    ``DataPlaneView`` object used as given). A P4 switch (``p4:HOST:PORT`` or ``HOST:PORT``) gets
    the pipeline in the folder ``p4_pipeline`` when given, BMv2's registers are read over Thrift
    at ``p4_thrift`` (checked to be BMv2's before the switch changes), and ``install`` writes the
    ``tap_ports`` ("INGRESS_PORT,EGRESS_PORT") and the prefix entries (``hardware_p4``). One-line
    errors for a missing or doubled actuator target, a malformed address, a pipeline folder
    without its files; nothing is left open on failure. ``dtn_agent`` (URLs) with
    ``dtn_agent_token`` (one token file, or one per URL): the host place (``hardware_host``), every
    agent checked first, before anything is shaped; ``host_shadow`` (shadow mode's): the agents are
    checked and asked, and no rate is set on them. ``queues_dev``: the queue place, K HTB
    queues on that interface (``hardware_queues``; without ``dev``/``ovs_port`` there is no rate place).
    ``discipline="p4:HOST:PORT"``: the discipline place, ABC or FFS in the P4 switch at the bottleneck
    (``hardware_discipline``: ``discipline_pipeline`` p4c's output folder, else the program compiled;
    ``discipline_ports`` "IN,OUT"), connected and its owner record taken before anything else is opened."""
    if telemetry is None or telemetry == "":
        raise ValueError(
            "the hardware plant needs its telemetry: give the P4Runtime address (--telemetry HOST:PORT) of "
            "the switch running telemetry_p4/, or --telemetry ebpf:LAN_IF,WAN_IF for this router's interfaces"
        )
    if dev is not None and ovs_port is not None or dev is None and ovs_port is None and queues_dev is None \
            and discipline is None:
        raise ValueError("the hardware plant needs exactly one actuator target: --dev IFACE or --ovs-port PORT"
                         " (or only --queues-dev IFACE for a queue policy, --discipline p4:HOST:PORT for a "
                         "discipline policy)")
    if actuator is not None and not callable(actuator):
        raise ValueError(f"actuator must be a factory (target, netns=) -> RateActuator, got {actuator!r}")
    _check_files_and_names(p4info, netns)
    if queues_dev is not None:
        from .hardware_queues import check_queue_dev

        check_queue_dev(queues_dev, netns, dev)  # before the shaper or the telemetry touch the router
    ebpf = _ebpf_source(telemetry, scenario, netns, dtn_prefixes, remote_prefixes, egress_hook)
    host = open_host(scenario, dtn_agent, dtn_agent_token, shadow=host_shadow)  # they answer, or exit 2
    disc = _discipline_place(discipline, discipline_pipeline, discipline_ports, dtn_prefixes, actuator)
    try:
        plant = _open_places(scenario, dev, ovs_port, telemetry, ebpf, netns, ovs_db, ovs_mode, ovs_bridge, actuator,
                             host, dict(p4_pipeline=p4_pipeline, p4_thrift=p4_thrift, tap_ports=tap_ports,
                                        p4info=p4info, dtn_prefixes=dtn_prefixes, remote_prefixes=remote_prefixes,
                                        install=install, options=view_options or {}))
    except BaseException:
        if disc is not None:
            disc.close()
        raise
    if disc is not None:
        from .hardware_discipline import with_discipline_place

        plant = with_discipline_place(plant, disc)
    try:
        return _queue_place(plant, queues_dev, netns, actuator)  # the queue place last, on any class
    except BaseException:
        plant.close()
        raise


def _discipline_place(address: str | None, pipeline: str | None, ports: Any, dtn: Any, factory: Any) -> Any:
    """The discipline place at ``address`` (``hardware_discipline``), opened: connected, its owner record
    taken, a dead owner's entries removed; shadow mode's prints its weights. None without an address."""
    if address is None:
        if pipeline is not None:
            raise ValueError("discipline_pipeline is for a discipline switch (--discipline p4:HOST:PORT)")
        return None
    from .hardware_discipline import DisciplinePrinter, DisciplineSwitch

    switch = DisciplineSwitch(address, pipeline=pipeline, ports=ports, dtn_prefixes=dtn)  # checks, no change
    if getattr(factory, "applies", True) is False:
        return DisciplinePrinter(switch.address)
    return switch.open()


def _open_places(scenario: Scenario, dev: str | None, ovs_port: str | None, telemetry: Any, ebpf: Any,
                 netns: str | None, ovs_db: str | None, ovs_mode: str, ovs_bridge: str | None, actuator: Any,
                 host: Any, p4opts: dict[str, Any]) -> HardwarePlant:
    """The rate place and the telemetry (and the host place), opened; nothing left open on failure."""
    p4 = None
    if isinstance(telemetry, str) and ebpf is None:
        from .hardware_p4 import P4Switch

        # every option is checked here, before the actuator or the switch is touched
        p4 = P4Switch(telemetry, pipeline=p4opts["p4_pipeline"], thrift=p4opts["p4_thrift"],
                      tap_ports=p4opts["tap_ports"], p4info=p4opts["p4info"], dtn_prefixes=p4opts["dtn_prefixes"],
                      remote_prefixes=p4opts["remote_prefixes"], install=p4opts["install"], options=p4opts["options"])
    elif p4opts["p4_pipeline"] is not None or p4opts["p4_thrift"] is not None:
        raise ValueError("--p4-pipeline and --p4-thrift are for a P4 telemetry switch (--telemetry p4:HOST:PORT)")
    # The actuator first: it validates the local side without touching the network.
    act = _actuator(scenario, dev, ovs_port, netns, ovs_db, ovs_mode, ovs_bridge, actuator)
    try:
        if ebpf is not None:
            ebpf.open()  # build, load, claim, attach: one line if any of it fails, nothing left
            plant = HardwarePlant(scenario, act, ebpf.view, resources=(ebpf,))
        elif p4 is not None:
            p4.open()  # connect, claim, load, install: one line if any of it fails, nothing left
            plant = HardwarePlant(scenario, act, p4.view, resources=(p4,))  # p4.close closes the view
        else:
            plant = HardwarePlant(scenario, act, telemetry)
    except BaseException:
        act.close()
        if p4 is not None:
            p4.close()
        if ebpf is not None:
            ebpf.close()
        raise
    return _with_host(plant, host)


def _queue_place(plant: HardwarePlant, queues_dev: str | None, netns: str | None, factory: Any) -> HardwarePlant:
    """The plant with its queue place on ``queues_dev`` (``hardware_queues``), or as it is without one;
    a factory whose actuators apply nothing (shadow mode's) gets the plan printer."""
    if queues_dev is None:
        return plant
    from .hardware_queues import with_queue_place

    return with_queue_place(plant, queues_dev, netns, shadow=getattr(factory, "applies", True) is False)


def _check_files_and_names(p4info: str | None, netns: str | None) -> None:
    """The input gate for what the plant's options name, before anything is opened: ``p4info`` is a
    regular file (``fileio.check_input_file``: ``/dev/zero`` was read to the OOM killer, a FIFO hung),
    ``netns`` a namespace *name* as ``ip netns`` makes them (``/var/run/netns/NAME``), never a path."""
    from ..fileio import check_input_file

    if p4info is not None:
        check_input_file(p4info, "plant option p4info")
    if netns is not None:
        name = str(netns)
        if not name or name in (".", "..") or "/" in name or "\0" in name or len(name.encode()) > 255:
            raise ValueError(f"--netns {name!r}: a network namespace name (as `ip netns list` shows), "
                             "not a path")


def _actuator(scenario: Scenario, dev: str | None, ovs_port: str | None, netns: str | None, ovs_db: str | None,
              ovs_mode: str, ovs_bridge: str | None, factory: Any) -> Any:
    if factory is not None:
        return factory(dev if dev is not None else str(ovs_port or ""), netns=netns)
    if dev is None and ovs_port is None:  # --queues-dev only: no shaper
        from .hardware_queues import NoRatePlace

        return NoRatePlace(scenario.u_max)
    if dev is not None:
        from ..actuators.tbf import TbfActuator

        return TbfActuator(dev, netns=netns, burst=scenario.shaper.burst, latency=scenario.shaper.latency)
    from ..actuators.ovs import OvsQosActuator

    return OvsQosActuator(ovs_db or DEFAULT_OVS_DB, str(ovs_port), mode=ovs_mode, bridge=ovs_bridge, netns=netns)


def _ebpf_source(telemetry: Any, scenario: Scenario, netns: str | None, dtn: list[str] | None,
                 remote: list[str] | None, egress_hook: str) -> Any:
    """``ebpf:LAN_IF[,LAN_IF...],WAN_IF`` as an (unopened) ``EbpfTelemetry``; None for anything else."""
    if not (isinstance(telemetry, str) and (telemetry == "ebpf" or telemetry.startswith("ebpf:"))):
        return None
    names = [n.strip() for n in telemetry[len("ebpf:"):].split(",") if n.strip()]
    if len(names) < 2:
        raise ValueError(f"telemetry {telemetry!r}: the eBPF programs need the router's interfaces, "
                         "ebpf:LAN_IF[,LAN_IF...],WAN_IF (the last one is the WAN side)")
    from ..telemetry import constants as C
    from ..telemetry.ebpf.source import EbpfTelemetry

    return EbpfTelemetry(names[:-1], names[-1], period=scenario.period, netns=netns, egress_hook=egress_hook,
                         dtn_prefix=dtn or C.DEFAULT_DTN_PREFIX, remote_prefix=remote or C.DEFAULT_REMOTE_PREFIX)


register_plant("hardware", build_hardware_plant, realtime=True, replays=False,
               cli=("telemetry", "dev", "netns", "ovs_port", "ovs_db", "ovs_mode", "dtn_agent", "dtn_agent_token",
                    "queues_dev", "discipline"))
