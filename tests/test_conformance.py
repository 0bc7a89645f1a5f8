"""The conformance suite (scidmz.conformance) on every built-in plant and policy, and on broken doubles.

The built-ins: the fluid plant (batch 1 and 3, same seed -> same trace, queue and
discipline capabilities), the hardware plant composed with a software data plane as its
switch (no root: what BMv2's simple_switch_grpc would be, see test_plant_composition.py;
BMv2 itself needs a namespace, a compiled program and ~1 min per build, and exercises the
same ``HardwarePlant`` code), the netns plant (root, real kernel TCP, under the lock), and
every registered policy (the MLC with the model shipped for the ``testbed`` scenario, ``pi``
with the gains shipped for it).
The broken doubles show each kind of failure is reported, naming its check.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from scidmz.conformance import ConformanceError, check_plant, check_policy
from scidmz.plant.base import make_plant
from scidmz.policies.registry import make_policy, policy_names
from scidmz.scenario import load_scenario


def test_fluid_plant_conforms():
    passed = check_plant(lambda sc, b: make_plant("fluid", sc, batch=b), "small-cubic")
    for name in ("reset_step_batch3", "same_seed_same_trace_batch3", "flows_batch3", "info_batch1",
                 "rejects_nonfinite_u_batch1", "close_twice_batch3", "context_manager", "capability_queue",
                 "capability_discipline", "capability_host"):
        assert name in passed


class _RecordingActuator:
    def __init__(self) -> None:
        self.rate = float("nan")

    def set_rate(self, bps: float) -> None:
        self.rate = float(bps)

    def current_rate(self) -> float:
        return self.rate

    def close(self) -> None:
        pass


def test_hardware_plant_conforms():
    from scidmz.plant.hardware import HardwarePlant
    from scidmz.telemetry.twin.dataplane import SoftwareDataPlane

    sc = load_scenario("testbed").replace(period=0.02)
    passed = check_plant(lambda s, b: HardwarePlant(s, _RecordingActuator(), SoftwareDataPlane()), sc,
                         batches=(1,), simulated=False)
    assert "flows_batch1" in passed and not any(p.startswith("capability_") for p in passed)


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")
def test_netns_plant_conforms():
    sc = load_scenario("testbed").with_overrides(
        ["campus.hosts=2", "link.capacity=20M", "period=0.5", "dtn.streams=2"])
    prefix = f"cf{os.getpid() % 10000}"
    passed = check_plant(lambda s, b: make_plant("netns", s, prefix=prefix, telemetry="kernel"), sc,
                         batches=(1,), simulated=False)
    assert {"flows_batch1", "capability_queue", "capability_discipline", "capability_host"} <= set(passed)


def _built_in(name: str):
    """The policy with the trained files its registry entry resolves (those shipped for testbed), if any."""
    from scidmz.policies.registry import policy_files, resolve_policy_files

    if not policy_files(name):
        return make_policy(name), "small-cubic"
    sc = load_scenario("testbed")
    return make_policy(name, **resolve_policy_files(name, sc)), "testbed"


@pytest.mark.parametrize("name", policy_names())
def test_every_registered_policy_conforms(name):
    policy, scenario = _built_in(name)
    passed = check_policy(policy, scenario)
    assert {"registered", "decide_batch3", "deterministic_batch3", "episode_batch3"} <= set(passed)


# -- the suite reports what is broken -------------------------------------------------------------


class _Halfway:
    """A rate policy double: u = B_max - target, registered under its name, with switchable faults."""

    name = "conformance-halfway"
    kind = "rate"

    def __init__(self, fault: str = "") -> None:
        self.fault = fault
        self.calls = 0

    def reset(self, scenario, batch=1):
        self.sc = scenario

    def decide(self, history, target):
        self.calls += 1
        u = self.sc.capacity - np.asarray(target, dtype=np.float64)
        if self.fault == "outside":
            return u + 10 * self.sc.u_max
        if self.fault == "drift":
            return u * (1 - 1e-3 * self.calls)  # remembers across resets
        return u


def test_check_policy_names_the_failed_check(monkeypatch):
    from scidmz.policies import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # registered for this test only
    with pytest.raises(ConformanceError, match="check 'registered' failed: .*unknown policy"):
        check_policy(_Halfway())
    registry.register_policy("conformance-halfway", "rate", _Halfway)
    assert "episode_batch3" in check_policy(_Halfway())
    with pytest.raises(ConformanceError, match="check 'decide_batch1' failed: .*outside \\[u_min, u_max\\]"):
        check_policy(_Halfway("outside"))
    with pytest.raises(ConformanceError, match="check 'deterministic_batch1' failed"):
        check_policy(_Halfway("drift"))
    kindless = _Halfway()
    kindless.kind = "speed"
    with pytest.raises(ConformanceError, match="check 'kind' failed"):
        check_policy(kindless)


def test_check_plant_names_the_failed_check():
    class NoSeed:
        """The fluid plant, but every reset draws a fresh seed: not reproducible."""

        def __init__(self, sc, b):
            self.inner = make_plant("fluid", sc, batch=b)
            self.resets = 0

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def reset(self, seed=None):
            self.resets += 1
            return self.inner.reset(seed + self.resets)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.inner.close()

    with pytest.raises(ConformanceError, match="check 'protocol_batch1' failed: .*missing Plant member"):
        check_plant(lambda sc, b: NoSeed(sc, b))

    class Wide(NoSeed):
        scenario = property(lambda self: self.inner.scenario)
        batch = property(lambda self: self.inner.batch)
        period = property(lambda self: self.inner.period)
        info = property(lambda self: self.inner.info)

        def step(self, u):
            return self.inner.step(u)

        def flows(self):
            return self.inner.flows()

        def close(self):
            self.inner.close()

    with pytest.raises(ConformanceError, match="check 'same_seed_same_trace_batch1' failed"):
        check_plant(lambda sc, b: Wide(sc, b), batches=(1,))
