"""Actuators: apply a policy's decision to real traffic.

``tbf.TbfActuator`` (tc TBF through pyroute2, the MLC paper's S1-eth1
shaper) and ``ovs.OvsQosActuator`` (Open vSwitch QoS) implement
``base.RateActuator``; ``base.QueueActuator`` is the protocol for
queue-separation policies. Submodules import pyroute2/ovsdbapp lazily.
"""

from .base import MIN_RATE, ActuatorError, FlowMatch, QueueActuator, RateActuator

__all__ = ["RateActuator", "QueueActuator", "FlowMatch", "MIN_RATE", "ActuatorError"]
