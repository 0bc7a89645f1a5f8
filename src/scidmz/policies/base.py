"""The policy kinds, one ``Protocol`` each, for policy authors (defined in ``scidmz.kinds``).

- ``RatePolicy`` (``kind = "rate"``): ``decide(history, target) -> u`` (B,) bit/s,
  the campus uplink rate, applied by the plant's rate actuator (``rate/``).
- ``HostPolicy`` (``kind = "host"``): ``decide(history, target) -> pacing`` (B,)
  bit/s, the DTN streams' aggregate pacing rate (``HostPlant.set_pacing``), and
  ``campus_rate(scenario, target) -> u`` (B,), the campus rate it keeps (``host/``).
- ``QueuePolicy`` (``kind = "queue"``): ``decide(history, target, flows) ->``
  one ``QueueConfig`` per instance, from the plant's flow table
  (``QueuePlant.flows/apply_queues``) (``queue/``).
- ``DisciplinePolicy`` (``kind = "discipline"``): ``configure(scenario)`` and
  ``weights(scenario, target)`` of a per-packet discipline inside the bottleneck
  (``DisciplinePlant``) (``discipline/``). Not to be confused with
  ``scidmz.disciplines.base.BottleneckDiscipline``, the base class of a
  discipline's *configuration* (what ``configure`` returns).

Each has ``name``, ``kind`` and ``reset(scenario, batch)``. A new policy goes in
its kind's folder and registers itself with one line
(``scidmz.policies.registry.register_policy(name, kind, factory)``); the
conformance suite (``scidmz.conformance.check_policy``) checks it.
"""

from __future__ import annotations

from ..kinds import (
    POLICY_KINDS,
    DisciplinePolicy,
    HostPolicy,
    Policy,
    PolicyKind,
    QueuePolicy,
    RatePolicy,
)

__all__ = ["POLICY_KINDS", "PolicyKind", "Policy", "RatePolicy", "HostPolicy", "QueuePolicy", "DisciplinePolicy"]
