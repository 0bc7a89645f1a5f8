"""Backends receive their actuator and telemetry objects (ARCHITECTURE.md: composition, not strings)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from scidmz.plant.base import make_plant
from scidmz.plant.hardware import HardwarePlant
from scidmz.scenario import load_scenario
from scidmz.telemetry.twin.dataplane import SoftwareDataPlane


class RecordingActuator:
    """A RateActuator that remembers what it was told (the plant must go through it)."""

    def __init__(self) -> None:
        self.rates: list[float] = []
        self.closed = False

    def set_rate(self, rate: float) -> None:
        self.rates.append(float(rate))

    def current_rate(self) -> float:
        return self.rates[-1]

    def close(self) -> None:
        self.closed = True


def test_hardware_plant_composes_given_actuator_and_view():
    sc = load_scenario("testbed").replace(period=0.02)
    act = RecordingActuator()
    with HardwarePlant(sc, act, SoftwareDataPlane()) as plant:
        plant.reset(seed=0)
        st = plant.step(30e6)
        assert st.y.shape == (1, 7) and np.all(np.isfinite(st.y))
        assert act.rates[-1] == 30e6 and plant.info["u_applied"][0] == 30e6
    assert act.closed  # closing the plant releases the actuator it was given


def test_hardware_plant_refuses_objects_that_are_not_an_actuator_or_a_view():
    sc = load_scenario("testbed")
    with pytest.raises(ValueError, match="is not a RateActuator .no set_rate"):
        HardwarePlant(sc, object(), SoftwareDataPlane())
    with pytest.raises(ValueError, match="is not a DataPlaneView"):
        HardwarePlant(sc, RecordingActuator(), object())


def test_make_plant_hardware_builds_from_options_with_one_line_errors():
    sc = load_scenario("testbed")
    with pytest.raises(ValueError, match="exactly one actuator target"):
        make_plant("hardware", sc, telemetry="127.0.0.1:9559")
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        make_plant("hardware", sc, dev="eth0", telemetry="nowhere")
    with pytest.raises(ValueError, match="has no option 'bogus'"):
        make_plant("hardware", sc, bogus=1)


def test_p4_view_gets_plant_opt_prefixes_as_a_list(monkeypatch):
    """``--plant-opt dtn_prefixes=A,B`` arrives as one string; the P4 view must get the prefixes."""
    from scidmz.plant import hardware, hardware_p4

    got = {}

    def open_(self):  # the switch's set-up (connect, claim, install), here only what it would install
        got.update(dtn=self.dtn, remote=self.remote)
        self.view = SoftwareDataPlane()
        return self.view

    monkeypatch.setattr(hardware_p4.P4Switch, "open", open_)
    monkeypatch.setattr(hardware_p4.P4Switch, "close", lambda self: None)
    monkeypatch.setattr(hardware, "_actuator", lambda *a, **k: RecordingActuator())
    sc = load_scenario("testbed")
    plant = make_plant("hardware", sc, dev="eth0", telemetry="127.0.0.1:9559",
                       dtn_prefixes="198.51.100.7/32, 2001:db8::/64", remote_prefixes="203.0.113.0/24")
    plant.close()
    assert got == {"dtn": ["198.51.100.7/32", "2001:db8::/64"], "remote": ["203.0.113.0/24"]}


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")
def test_netns_plant_takes_telemetry_and_actuator_factories():
    from scidmz.actuators.tbf import TbfActuator
    from scidmz.plant.netns.plant import NetnsPlant
    from scidmz.plant.netns.sources import kernel_points
    from scidmz.telemetry.sources.counters import KernelCounterTelemetry

    made = []

    def actuator(dev, **kw):
        made.append(dev)
        return TbfActuator(dev, **kw)

    def telemetry(tb):
        # A telemetry factory of our own: the testbed's kernel-counter view, sampled every 0.2 s.
        made.append("telemetry")
        return KernelCounterTelemetry(kernel_points(tb), sample_every=0.2)

    sc = load_scenario("testbed").replace(campus={"hosts": 1}, dtn={"streams": 2},
                                          link={"capacity": 20e6, "buffer_bdp": 1.0})
    with NetnsPlant(sc, prefix="tcmp", telemetry=telemetry, actuator=actuator) as plant:
        plant.reset(seed=0)
        y = plant.step(5e6).y[0]
        assert type(plant.telemetry) is KernelCounterTelemetry and plant.telemetry.sample_every == 0.2
        assert made == [plant.testbed.spec.uplink[0], "telemetry"]
        assert plant.actuator.current_rate() == pytest.approx(5e6, rel=0.02)
        assert np.all(np.isfinite(y))
    with pytest.raises(ValueError, match="unknown telemetry 'bogus'"):
        NetnsPlant(sc, telemetry="bogus")
