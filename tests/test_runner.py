"""The episode runner (scidmz.runner): alignment, step-wise episodes, until-done, queue policies, rate validation; on tiny deterministic plants defined here.

The plant below is a test double for the runner only (the product's plants
are tested in their own files): y_k's DTN rate is B_max - u_k, so alignment
errors show up as off-by-one rows.
"""

from __future__ import annotations

import numpy as np
import pytest

from scidmz.plant.base import StateBatch
from scidmz.policies import NoShapingPolicy, TrivialPolicy, make_policy
from scidmz.policies.base import QueuePolicy
from scidmz.runner import Episode, run_episode
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


def test_episode_stepwise_matches_batched_run():
    sc = load_scenario("small-cubic")
    targets = np.array([60e6, 50e6, 40e6])
    batched = run_episode(EchoPlant(sc), TrivialPolicy(), targets, seed=3)[0]
    ep = Episode(EchoPlant(sc), TrivialPolicy())
    ep.reset(3)
    us = [float(ep.step(t)[1][0]) for t in targets]
    stepped = ep.traces()[0]
    np.testing.assert_allclose(us, [40e6, 50e6, 60e6])
    np.testing.assert_allclose(stepped.df["u"], batched.df["u"])
    np.testing.assert_allclose(stepped.df["rate_dtn"], batched.df["rate_dtn"])


class _LagPolicy:
    """Records what it saw: y(t - T), y(t - 3T) and u(t - T) at every decision."""

    name = "lag"
    kind = "rate"

    def __init__(self):
        self.seen = []

    def reset(self, scenario, batch):
        self.sc = scenario

    def decide(self, history, target):
        self.seen.append((history.last_y(1).copy(), history.last_y(3).copy(), history.last_u(0.0).copy()))
        return np.full(len(target), 20e6 + 1e5 * (len(self.seen) % 7))


def test_bounded_episode_keeps_memory_flat_and_the_policy_sees_the_same_past():
    sc = load_scenario("small-cubic")
    full, bounded = _LagPolicy(), _LagPolicy()
    a, b = Episode(EchoPlant(sc), full), Episode(EchoPlant(sc), bounded, keep=8)
    a.reset(1)
    b.reset(1)
    for k in range(100):
        a.step(50e6 + 1e5 * k)
        b.step(50e6 + 1e5 * k)
        assert len(b.history) < 4 * 8  # a daemon's history cannot grow for months
    assert len(a.history) == 100
    for (y1a, y3a, ua), (y1b, y3b, ub) in zip(full.seen, bounded.seen, strict=True):
        np.testing.assert_array_equal(y1a, y1b)
        np.testing.assert_array_equal(y3a, y3b)
        np.testing.assert_array_equal(ua, ub)
    with pytest.raises(RuntimeError, match="records no traces"):
        b.traces()
    with pytest.raises(ValueError, match="at least 4"):
        Episode(EchoPlant(sc), TrivialPolicy(), keep=2)


def test_episode_step_before_reset_is_an_error():
    with pytest.raises(RuntimeError, match="before reset"):
        Episode(EchoPlant(load_scenario("small-cubic")), TrivialPolicy()).step(50e6)


def test_until_done_stops_when_every_instance_finished():
    sc = load_scenario("small-cubic")

    class Finishing(EchoPlant):
        def step(self, u):
            st = super().step(u)
            # instance 0 finishes after period 2, instance 1 after period 4
            self._info["dtn_fct"] = np.where(np.array([2, 4]) <= self._k, float(self._k), np.inf)
            return st

    traces = run_episode(Finishing(sc, batch=2), TrivialPolicy(), np.full(10, 50e6), until_done=True)
    assert len(traces[0].df) == 4
    full = run_episode(Finishing(sc, batch=2), TrivialPolicy(), np.full(10, 50e6))
    assert len(full[0].df) == 10


class HalfQueues:
    """A queue policy double: one queue at half the uplink, recorded by the plant."""

    name = "halfq"
    kind = "queue"

    def reset(self, scenario, batch=1):
        self.scenario = scenario

    def decide(self, history, target, flows):
        return {"queues": [{"rate": self.scenario.u_max / 2}], "flows_seen": flows}


def test_queue_policy_applied_through_plant_queues():
    sc = load_scenario("small-cubic")

    class QueuedPlant(EchoPlant):
        applied: list = []

        def flows(self):
            return ["flow-table"]

        def apply_queues(self, cfg):
            self.applied.append(cfg)

    plant = QueuedPlant(sc)
    assert isinstance(HalfQueues(), QueuePolicy)
    traces = run_episode(plant, HalfQueues(), np.full(2, 50e6))
    assert len(plant.applied) == 2 and plant.applied[0]["flows_seen"] == ["flow-table"]
    np.testing.assert_allclose(traces[0].df["u"], sc.u_max)  # the shaper stays open


def test_queue_policy_on_plant_without_queues_is_one_line():
    with pytest.raises(ValueError, match="has no queues") as err:
        Episode(EchoPlant(load_scenario("small-cubic")), HalfQueues())
    assert "\n" not in str(err.value) and "it runs: rate policies" in str(err.value)


class HalfPacer:
    """A host policy double: paces the DTN at half its target, keeps the campus at u_min."""

    name = "halfpace"
    kind = "host"

    def reset(self, scenario, batch=1):
        self.scenario = scenario

    def decide(self, history, target):
        return np.asarray(target) / 2

    def campus_rate(self, scenario, target):
        return np.full(len(target), scenario.u_min)


class PacedPlant(EchoPlant):
    def __init__(self, scenario, batch=1):
        super().__init__(scenario, batch)
        self.paced = []

    def set_pacing(self, rates):
        self.paced.append(np.asarray(rates).copy())


def test_host_policy_paces_through_the_plant_and_keeps_its_campus_rate():
    sc = load_scenario("small-cubic")
    plant = PacedPlant(sc, batch=2)
    traces = run_episode(plant, HalfPacer(), np.array([[60e6, 40e6], [50e6, 40e6]]))
    np.testing.assert_allclose(plant.paced, [[30e6, 20e6], [25e6, 20e6]])  # before each period
    np.testing.assert_allclose(traces[0].df["u"], sc.u_min)
    np.testing.assert_allclose(traces[1].df["pacing"], [20e6, 20e6])  # recorded with the trace
    with pytest.raises(ValueError, match="cannot pace the DTN's streams; host policy 'halfpace' needs one"):
        Episode(EchoPlant(sc), HalfPacer())


def test_host_policy_nan_pacing_never_reaches_the_plant():
    class Broken(HalfPacer):
        def decide(self, history, target):
            return np.full(len(target), np.nan)

    plant = PacedPlant(load_scenario("small-cubic"))
    with pytest.raises(ValueError, match="host policy 'halfpace' pacing: non-finite"):
        run_episode(plant, Broken(), np.full(2, 50e6))
    assert plant.paced == [] and plant.seen == []


def test_a_policy_without_a_kind_is_one_line():
    class Kindless:
        name = "kindless"

        def reset(self, scenario, batch=1):
            pass

        def decide(self, history, target):
            return target

    with pytest.raises(ValueError, match="policy 'kindless' declares no kind"):
        Episode(EchoPlant(load_scenario("small-cubic")), Kindless())


def test_check_rates_shapes_clips_and_names_who():
    np.testing.assert_allclose(check_rates(5.0, 3, 1.0, 4.0, "x"), [4.0, 4.0, 4.0])
    with pytest.raises(ValueError, match="policy 'p'.*non-finite rate"):
        check_rates([np.nan], 1, 0.0, 1.0, "policy 'p'")
