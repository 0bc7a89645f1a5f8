"""The queue place of the hardware plant: the Jenks papers' "legacy router", a Linux box with HTB.

``control run --plant hardware --queues-dev IFACE --policy jenks`` gives the
hardware plant K queues on the router's WAN interface: an HTB leaf with a
bfifo under it per queue and the flow -> queue rules as u32 filters, all
through ``actuators.htb.HtbQueueActuator`` (its batch path, ``u32batch``).
The per-flow RTTs a queue policy reads are the telemetry's flow table
(``HardwarePlant.flows``: the eBPF maps' flows, or the P4 switch's digests).

``with_queue_place(plant, ...)`` composes it: it returns the same plant as a
``HardwareQueuePlant`` (``QueuePlace`` mixed in: ``apply_queues``), so the runner's capability check
accepts queue policies there and only there. Kept out of ``hardware.py`` so the
host place (the DTN agent) and the queue place compose side by side.

Reconfiguration keeps traffic flowing (the actuator's order: classes first,
the new rule set under a fresh u32 priority before the old one goes, unused
classes last; ``tests/test_hardware_queues.py`` counts the drops across 100 of
them under load). The HTB tree has an owner record (``RootQdisc``): a fresh
start reclaims what a SIGKILLed controller left, and refuses what a live one
holds. In shadow mode (the rate actuator applies nothing) the queue place is a
``QueuePlanPrinter``: each plan is printed on stderr and nothing is touched.

``check_queue_dev`` is the input gate, before anything on the router changes:
the interface must exist (in ``netns``). The queue count against the link is the
policy's (``JenksPolicy.check_link``), checked when the run is assembled.
"""

from __future__ import annotations

import functools
import math
import sys
from typing import Any, TextIO

from ..actuators.base import ActuatorError

__all__ = ["QueuePlace", "QueuePlanPrinter", "NoRatePlace", "with_queue_place", "check_queue_dev",
           "format_plan"]


def check_queue_dev(dev: str, netns: str | None, shaper_dev: str | None = None) -> None:
    """One line (ValueError) unless ``dev`` is an interface (in namespace ``netns``) other than the rate
    place's ``shaper_dev`` (the TBF and the HTB would both be its root qdisc); changes nothing."""
    from pyroute2 import IPRoute

    if not isinstance(dev, str) or not dev or "/" in dev or len(dev) > 15:
        raise ValueError(f"--queues-dev {dev!r}: an interface name, e.g. wan0")
    if dev == shaper_dev:
        raise ValueError(f"--queues-dev {dev} is also --dev: the TBF and the HTB would both be its root qdisc; "
                         "give the queue place alone (no --dev) or shape another interface")
    try:
        ipr = IPRoute(netns=netns) if netns is not None else IPRoute()
    except OSError as exc:
        raise ValueError(f"--queues-dev {dev}: cannot open namespace {netns!r}: {exc}") from None
    try:
        if not ipr.link_lookup(ifname=dev):
            raise ValueError(f"--queues-dev {dev}: no such interface" + (f" in namespace '{netns}'" if netns else ""))
    finally:
        ipr.close()


def format_plan(cfg: Any) -> str:
    """One queue configuration as the lines an admin reads (queue: rate, ceil, buffer; rule count)."""
    lines = [f"queue plan: {len(cfg.queues)} queues, {len(cfg.rules)} flow rules, default queue {cfg.default}"]
    per: dict[int, int] = {}
    for r in cfg.rules:
        per[r.queue] = per.get(r.queue, 0) + 1
    for q in cfg.queues:
        lines.append(f"  queue {q.qid} {q.label or ''}: rate {q.rate / 1e6:.3f} Mbit/s, ceil {q.ceil / 1e6:.3f} "
                     f"Mbit/s, buffer {int(q.buffer)} B, {per.get(q.qid, 0)} flows")
    return "\n".join(lines)


class QueuePlanPrinter:
    """Shadow mode's queue place: validates each plan as the HTB would and prints it; touches nothing."""

    applies = False

    def __init__(self, dev: str, scope: list[str] | None = None, out: TextIO | None = None) -> None:
        self.dev, self.scope, self.out = dev, scope, out
        self.last: Any = None

    def apply(self, config: Any) -> None:
        config.validate(self.scope)
        self.last = config
        print(f"scidmz control: SHADOW {self.dev}: " + format_plan(config), file=self.out or sys.stderr, flush=True)

    def current(self) -> Any:
        return None  # nothing is in force

    def close(self) -> None:
        """Nothing was made."""


class NoRatePlace:
    """The rate place of a hardware plant given only ``--queues-dev``: there is no shaper, so only
    u = u_max (what the runner gives a queue-only policy) is accepted; a lower rate is an
    ``ActuatorError`` naming the missing ``--dev`` (ours: refuse rather than pretend to shape)."""

    applies = False

    def __init__(self, u_max: float) -> None:
        self.u_max = float(u_max)

    def set_rate(self, bps: float) -> None:
        if not (math.isfinite(bps) and bps >= self.u_max * (1 - 1e-9)):
            raise ActuatorError(f"no rate place: {bps:.6g} bit/s asked, but the hardware plant has only "
                                "--queues-dev; give --dev or --ovs-port for a rate policy")

    def current_rate(self) -> float:
        return math.nan

    def close(self) -> None:
        """Nothing was made."""


class QueuePlace:
    """The queue place as a mixin over a ``HardwarePlant`` (``QueuePlant``): K HTB queues on ``queues``'
    device. A mixin, not a subclass, so this module does not import ``hardware`` (which composes it)."""

    queues: Any

    def flows(self) -> list[dict[str, list[Any]]]:
        """The telemetry's flow table without the IPv6 flows: u32 rules match IPv4 headers only, so an
        IPv6 flow cannot be given a queue and stays in the default one (ours: dropped from the table
        rather than handed to a policy whose every plan the actuator would then refuse)."""
        out = []
        for table in super().flows():  # type: ignore[misc]
            keep = [i for i, (a, b) in enumerate(zip(table.get("src", []), table.get("dst", []), strict=True))
                    if ":" not in str(a) and ":" not in str(b)]
            out.append({c: [v[i] for i in keep] for c, v in table.items()})
        return out

    def apply_queues(self, configs: Any) -> None:
        """Load one ``QueueConfig`` (or a list of one) on the queue device, before the next period."""
        self._check_open()  # type: ignore[attr-defined]
        cfgs = list(configs) if isinstance(configs, list | tuple) else [configs]
        if len(cfgs) != 1:
            raise ValueError(f"got {len(cfgs)} queue configurations for a batch of 1")
        self.queues.apply(cfgs[0])

    def close(self) -> None:
        """Close the plant (shaper, telemetry), then delete the HTB tree (its classes, bfifos, filters)."""
        try:
            super().close()  # type: ignore[misc]
        finally:
            self.queues.close()


@functools.cache
def _with_place(base: type) -> type:
    return type(f"{base.__name__.removesuffix('Plant')}QueuePlant", (QueuePlace, base), {})


def with_queue_place(plant: Any, dev: str, netns: str | None, *, shadow: bool,
                     scope: list[str] | None = None) -> Any:
    """``plant`` (a ``HardwarePlant``) with ``QueuePlace`` mixed in whose queues are an HTB on ``dev`` (or the
    plan printer in shadow mode). The HTB claims the device's root now (owner record, a dead owner's
    tree reclaimed; one line for a live or foreign one); on failure ``plant`` is closed."""
    try:
        if shadow:
            queues: Any = QueuePlanPrinter(dev, scope)
        else:
            from ..actuators.htb import HtbQueueActuator

            queues = HtbQueueActuator(dev, netns=netns, scope=scope)
    except BaseException:
        plant.close()
        raise
    # The built plant gains the place in place (its shaper and telemetry are already open and must
    # not be opened twice): the subclass adds apply_queues and closes the queues with the rest.
    plant.__class__ = _with_place(type(plant))
    plant.queues = queues
    return plant

