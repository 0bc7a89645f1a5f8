"""Actuator protocols: what a policy's decision is applied through.

``RateActuator`` is the MLC paper's single knob (section 3.1, Fig. 2): the
campus egress rate u(t) of the TBF on S1-eth1. ``QueueActuator`` is the
richer interface queue-separation policies (Jenks RTT separation, ABC, FFS)
need: several queues, each with its own rate and buffer, and rules that put
flows into queues. Implementations live next to this file (``tbf.py``,
``ovs.py``); every method works in SI units (bit/s, bytes, s).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ..queueconfig import FlowMatch, QueueConfig

__all__ = ["RateActuator", "QueueActuator", "FlowMatch", "MIN_RATE", "ActuatorError", "ForeignConfigError",
           "check_rate"]

#: The rate a rate actuator applies for a command of 0 bit/s. A token bucket
#: cannot hold a rate of exactly 0 (the kernel divides by it), and "closed"
#: must still let an occasional packet through so that TCP connections do not
#: time out: 8 kbit/s is one full-size frame every ~1.5 s.
MIN_RATE = 8_000.0


def check_rate(bps: float, what: str, max_rate: float, max_what: str) -> float:
    """Validate a rate command (finite, >= 0, <= ``max_rate``) and lift it to ``MIN_RATE``.

    A shaper cannot hold 0 bit/s, so 0 means "as little as the shaper allows".
    """
    from ..units import check_rates

    if isinstance(bps, bool | str):
        raise ValueError(f"{what} rate must be a number of bit/s, got {bps!r}")
    v = float(check_rates(bps, 1, 0.0, np.inf, what, clip=False)[0])
    if v < 0:
        raise ValueError(f"{what} rate must be >= 0 bit/s, got {v:.0f}")
    if v > max_rate:
        raise ValueError(f"{what} rate {v:.0f} bit/s is above {max_what}")
    return max(v, MIN_RATE)


class ActuatorError(RuntimeError):
    """The enforcing element refused or failed a command (netlink error, OVSDB/ovs-ofctl failure).

    Bad *input* is a ``ValueError``; this is a failure of the real element, which
    the controller daemon answers by falling back to the trivial rate.
    """


class ForeignConfigError(ActuatorError):
    """Where the actuator enforced its rate now holds something it did not make.

    An admin put their own root qdisc on the device, their own QoS on the OVS
    port, or changed our meter or policing values, while scidmz ran. scidmz
    never replaces or deletes what it did not make: from then on the actuator
    changes nothing (every ``set_rate`` raises this again, ``close`` leaves the
    admin's configuration as it is), and the controller falls back with the
    cause ``foreign``. Told apart by the mark scidmz put on what it made (a qdisc
    handle and kind, OVSDB ``external_ids`` naming this process, the values it
    last set), never by guessing.
    """


@runtime_checkable
class RateActuator(Protocol):
    """A single shaped rate, applied to real traffic.

    ``set_rate(0)`` means "as closed as possible" and applies ``MIN_RATE``;
    negative, NaN, infinite or unsupportably large rates raise ``ValueError``
    and leave the current rate unchanged. ``current_rate`` reads the rate back
    from where it is enforced (kernel, switch), never from a cache, so a
    monitor sees what is really applied. ``close`` removes only what the
    actuator created and restores what was there before.
    """

    def set_rate(self, bps: float) -> None:
        """Apply ``bps`` (bit/s) from now on."""
        ...

    def current_rate(self) -> float:
        """The rate in force now, in bit/s, read back from the enforcing element."""
        ...

    def close(self) -> None:
        """Undo everything this actuator created; safe to call twice."""
        ...


@runtime_checkable
class QueueActuator(Protocol):
    """Several shaped queues plus rules mapping flows to them (queue separation).

    The shape of the queue-separation policies in the papers (the Jenks RTT
    separation, ABC/FFS): traffic classes get separate queues, each with a
    rate, a ceiling and a drop-tail buffer, and the policy moves flows between
    queues as their measured RTTs or rates change. ``apply`` takes a whole
    ``QueueConfig`` (``scidmz.queueconfig``) and applies it as one batch, all
    or nothing: on any failure the previous configuration stays in force.
    Implementation: ``actuators.htb.HtbQueueActuator``.
    """

    def apply(self, config: QueueConfig) -> None:
        """Validate ``config`` and make it the configuration in force."""
        ...

    def current(self) -> QueueConfig | None:
        """The configuration in force, read back from the enforcing element (None before ``apply``)."""
        ...

    def close(self) -> None:
        """Remove every queue and rule this actuator created; safe to call twice."""
        ...
