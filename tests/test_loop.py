"""The episode runner's alignment and validation, on a tiny deterministic plant defined here.

The plant below is a test double for the runner only (the product's plants
are tested in their own files): y_k's DTN rate is B_max - u_k, so alignment
errors show up as off-by-one rows.
"""

from __future__ import annotations

import numpy as np
import pytest

from scidmz.controller.loop import run_episode
from scidmz.plant.base import StateBatch
from scidmz.policies import NoShapingPolicy, TrivialPolicy, make_policy
from scidmz.scenario import load_scenario
from scidmz.units import check_rates


class EchoPlant:
    def __init__(self, scenario, batch=1):
        self.scenario, self.batch, self._k, self.seen = scenario, batch, 0, []

    @property
    def period(self):
        return self.scenario.period

    def reset(self, seed=None):
        self._k = 0
        return StateBatch(0.0, np.zeros((self.batch, 7)))

    def step(self, u):
        u = check_rates(u, self.batch, 0.0, self.scenario.u_max, "test plant", clip=False)
        self.seen.append(u.copy())
        self._k += 1
        y = np.zeros((self.batch, 7))
        y[:, 0] = self.scenario.capacity - u
        y[:, 1] = u
        self._info = {"dtn_bytes": y[:, 0] * self.period / 8, "ignored_matrix": np.zeros((2, 2))}
        return StateBatch(self._k * self.period, y)

    @property
    def info(self):
        return self._info

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def test_trivial_alignment_and_metrics():
    sc = load_scenario("small-cubic")
    plant = EchoPlant(sc, batch=2)
    targets = np.array([[60e6, 30e6], [50e6, 30e6], [40e6, 20e6]])
    traces = run_episode(plant, TrivialPolicy(), targets, seed=1)
    assert len(traces) == 2
    tr = traces[1]
    np.testing.assert_allclose(tr.df["u"], [70e6, 70e6, 80e6])  # B_max - R*
    np.testing.assert_allclose(tr.df["rate_dtn"], [30e6, 30e6, 20e6])  # y_k reflects u_k
    np.testing.assert_allclose(tr.df["t"], [1.0, 2.0, 3.0])
    assert "dtn_bytes" in tr.df.columns and "ignored_matrix" not in tr.df.columns
    assert tr.meta["policy"] == "trivial" and tr.meta["instance"] == 1
    assert tr.meta["scenario"]["name"] == "small-cubic"


def test_none_policy_opens_shaper():
    sc = load_scenario("small-cubic")
    traces = run_episode(EchoPlant(sc), NoShapingPolicy(), np.full(4, 50e6))
    np.testing.assert_allclose(traces[0].df["u"], sc.u_max)


def test_target_above_capacity_rejected_before_running():
    sc = load_scenario("small-cubic")
    plant = EchoPlant(sc)
    with pytest.raises(ValueError, match="above the bottleneck capacity"):
        run_episode(plant, TrivialPolicy(), np.full(3, 2 * sc.capacity))
    assert plant.seen == []


def test_nan_policy_output_never_reaches_plant():
    sc = load_scenario("small-cubic")

    class Broken(TrivialPolicy):
        name = "broken"

        def decide(self, history, target):
            return np.full(history.batch, np.nan)

    plant = EchoPlant(sc)
    with pytest.raises(ValueError, match="non-finite"):
        run_episode(plant, Broken(), np.full(3, 50e6))
    assert plant.seen == []


def test_bad_rate_commands_rejected_by_plant_guard():
    with pytest.raises(ValueError, match="plant: .* above the maximum"):
        check_rates(2e9, 1, 0.0, 1e9, "plant", clip=False)
    with pytest.raises(ValueError, match="below 0"):
        check_rates(-1.0, 1, 0.0, 1e9, "plant", clip=False)
    with pytest.raises(ValueError, match="plant: non-finite"):
        check_rates([np.inf], 1, 0.0, 1e9, "plant", clip=False)
    with pytest.raises(ValueError, match="policy: rate command must be"):
        check_rates([1.0, 2.0, 3.0], 2, 0.0, 1e9, "policy")
    np.testing.assert_array_equal(check_rates([-5.0, 2e9], 2, 1e3, 1e9, "policy"), [1e3, 1e9])
    np.testing.assert_array_equal(check_rates(5.0, 2, 0.0, np.array([1.0, 10.0]), "policy"), [1.0, 5.0])


def test_make_policy_unknown():
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("pid")
