"""The fluid plant's interface and invariants (shapes, seeds, batching, conservation, shaper, flows)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scidmz.plant.base import Plant, StateBatch, make_plant
from scidmz.scenario import load_scenario
from scidmz.state import STATE_FIELDS

INFO_KEYS = (
    "dtn_bytes",
    "campus_bytes",
    "dtn_lost_bytes",
    "campus_lost_bytes",
    "shaper_lost_bytes",
    "dtn_fct",
    "utilization",
)


@pytest.fixture(scope="module")
def small():
    return load_scenario("small-cubic")


def _episode(plant, u, steps):
    ys, infos = [], []
    for k in range(steps):
        uk = u[k] if np.ndim(u) and len(np.shape(u)) == 2 else u
        ys.append(plant.step(uk).y.copy())
        infos.append(plant.info)
    return np.array(ys), {k: np.array([i[k] for i in infos]) for k in infos[0]}


def test_interface_shapes_and_info(small):
    with make_plant("fluid", small, batch=3) as plant:
        assert isinstance(plant, Plant)
        assert plant.batch == 3 and plant.period == small.period
        s0 = plant.reset(seed=1)
        assert isinstance(s0, StateBatch) and s0.y.shape == (3, len(STATE_FIELDS)) and s0.t == 0.0
        s1 = plant.step(np.array([20e6, 50e6, 80e6]))
        assert s1.y.shape == (3, 7) and s1.t == pytest.approx(small.period)
        assert np.all(np.isfinite(s1.y))
        info = plant.info
        for key in INFO_KEYS:
            assert np.shape(info[key]) == (3,), key
        assert np.all(np.isnan(info["dtn_fct"]))  # unlimited transfer never completes
        snap = plant.snapshot()
        n = plant.shape.n_flows
        for key in ("rate", "rtt", "cwnd", "queue_id", "cls", "active"):
            assert snap[key].shape == (3, n), key
        assert np.all(snap["rtt"] >= snap["base_rtt"] - 1e-12)
    with pytest.raises(ValueError, match="closed"):
        plant.step(1e6)


def test_state_is_plausible(small):
    with make_plant("fluid", small) as plant:
        plant.reset()
        ys, _ = _episode(plant, 60e6, 10)
    y = ys[3:, 0]
    rate_dtn, rate_c, rtt_d, rtt_c, qd_d, qd_c, active = y.T
    assert np.all(rate_dtn + rate_c <= small.capacity * (1 + 1e-9))
    assert np.all(rtt_d >= small.dtn.rtt) and np.all(rtt_c >= small.campus.rtt)
    assert np.all(qd_d >= 0) and np.all(qd_d <= small.buffer_bytes * 8 / small.capacity + 1e-9)
    # 8 DTN streams + 10 campus hosts, all long-lived and sending
    assert np.all(active == small.dtn.streams + small.campus.hosts)
    # the link is shared and busy
    assert np.mean(rate_dtn + rate_c) > 0.9 * small.capacity


def test_same_seed_same_trace_other_seed_differs(small):
    def run(seed):
        with make_plant("fluid", small) as plant:
            plant.reset(seed=seed)
            return _episode(plant, 50e6, 6)[0]

    a, b, c = run(7), run(7), run(8)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_batch_equals_independent_runs(small):
    u = np.array([30e6, 60e6, 90e6])
    with make_plant("fluid", small, batch=3) as plant:
        plant.reset(seed=11)
        batched, binfo = _episode(plant, u, 5)
    for i in range(3):
        with make_plant("fluid", small) as single:
            single.reset(seed=11 + i)
            alone, ainfo = _episode(single, u[i], 5)
        np.testing.assert_allclose(batched[:, i], alone[:, 0], rtol=1e-12, atol=0)
        np.testing.assert_allclose(binfo["dtn_bytes"][:, i], ainfo["dtn_bytes"][:, 0], rtol=1e-12)


def test_scenarios_batch_and_shape_check(small):
    other = small.replace(dtn={"cca": "bbr2"}, link={"buffer_bdp": 2.0})
    with make_plant("fluid", small, scenarios=[small, other]) as plant:
        assert plant.batch == 2
        plant.reset(seed=3)
        ys, _ = _episode(plant, 50e6, 3)
        assert not np.array_equal(ys[:, 0], ys[:, 1])
    with pytest.raises(ValueError, match="flow layout"):
        make_plant("fluid", small, scenarios=[small, small.replace(campus={"hosts": 3})])


def test_conservation(small):
    with make_plant("fluid", small, batch=2) as plant:
        plant.reset(seed=2)
        _, info = _episode(plant, np.array([30e6, 100e6]), 12)
    T = small.period
    for cls in ("dtn", "campus"):
        sent = info[f"{cls}_sent_bytes"].sum(axis=0)
        out = info[f"{cls}_bytes"].sum(axis=0) + info[f"{cls}_lost_bytes"].sum(axis=0)
        if cls == "campus":
            out = out + info["shaper_lost_bytes"].sum(axis=0)
        assert np.all(out <= sent * (1 + 1e-9))
        # what is missing is at most what fits in the buffers
        backlog = small.buffer_bytes + 100e6 * small.shaper.latency / 8 + 1e6
        assert np.all(sent - out <= backlog)
    total = (info["dtn_bytes"] + info["campus_bytes"]) * 8 / T
    assert np.all(total <= small.capacity * (1 + 1e-9))
    assert np.all(info["utilization"] <= 1 + 1e-9)


@pytest.mark.parametrize("u", [5e6, 25e6, 70e6])
def test_shaper_caps_campus_rate(small, u):
    sc = small.replace(campus={"hosts": 20})
    with make_plant("fluid", sc) as plant:
        plant.reset()
        ys, info = _episode(plant, u, 8)
    burst = max(u / 8 * 0.004, 10 * 1448)  # constants.TBF_BURST_TIME / TBF_MIN_BURST_PKTS
    # what leaves the shaper in a period: at most u T plus one bucket
    assert np.all(info["shaper_out_bytes"][:, 0] <= u * sc.period / 8 + burst + 1.0)
    # at the bottleneck tap, campus bytes queued in the previous period may add to it
    assert np.all(ys[:, 0, 1] <= u + 8 * (burst + sc.buffer_bytes) / sc.period)
    assert ys[2:, 0, 1].mean() <= u * 1.001
    # the campus demand exceeds u, so the shaper is busy and drops
    assert ys[2:, 0, 1].mean() > 0.9 * u
    assert info["shaper_lost_bytes"].sum() > 0


def test_udp_campus_is_shaped(small):
    sc = small.replace(campus={"traffic": "udp", "udp_rate": 10e6})  # 10 hosts x 10M = 100M offered
    with make_plant("fluid", sc) as plant:
        plant.reset()
        ys, info = _episode(plant, 40e6, 5)
    # the shaper passes exactly u; the bottleneck tap sees it through the queue's jitter
    assert np.allclose(info["shaper_out_bytes"][1:, 0] * 8 / sc.period, 40e6, rtol=1e-6)
    assert ys[1:, 0, 1].mean() == pytest.approx(40e6, rel=0.02)
    assert info["shaper_lost_bytes"][1:].sum() > 0


def test_dtn_fct_appears_for_a_finite_transfer(small):
    size = 40e6  # bytes, all streams together
    sc = small.replace(dtn={"transfer": size}, campus={"hosts": 4})
    with make_plant("fluid", sc) as plant:
        plant.reset()
        _, info = _episode(plant, 20e6, 12)
        fct = info["dtn_fct"][:, 0]
        recs = plant.flow_records()
    assert np.isnan(fct[0])
    done = np.flatnonzero(np.isfinite(fct))
    assert done.size, "the 40 MB transfer should finish within 12 s at <= 100 Mbit/s"
    first = fct[done[0]]
    assert np.all(fct[done] == first)  # reported from completion on, unchanged
    assert first >= size * 8 / sc.capacity
    # The plant counts frame bytes: the payload plus its headers.
    from scidmz.plant.fluid.constants import WIRE_PER_PAYLOAD

    assert info["dtn_bytes"][:, 0].sum() == pytest.approx(size * WIRE_PER_PAYLOAD, rel=1e-6)
    dtn = recs[recs["class"] == "dtn"]
    assert len(dtn) == sc.dtn.streams
    assert dtn["bytes"].sum() == pytest.approx(size * WIRE_PER_PAYLOAD)
    assert dtn["finish"].max() - dtn["start"].min() == pytest.approx(first)


def test_weibull_short_flow_records(small):
    sc = small.replace(campus={"short_flow_senders": 2})
    with make_plant("fluid", sc) as plant:
        plant.reset(seed=4)
        _episode(plant, 60e6, 6)
        recs = plant.flow_records()
        assert plant.records_lost()[0] == 0
    short = recs[recs["class"] == "short"]
    assert len(short) > 50  # ~2 senders x ~40 flows/s
    w = sc.campus.weibull
    assert short["bytes"].between(w.size_min, w.size_max).all()
    assert (short["fct"] > 0).all() and short["flow_id"].is_unique
    # the smallest flows finish within a few RTTs, the biggest take longer
    small_f = short[short["bytes"] < 20e3]["fct"].median()
    big_f = short[short["bytes"] > 500e3]["fct"].median()
    assert small_f < big_f


def test_weibull_campus_traffic(small):
    sc = small.replace(campus={"traffic": "weibull", "hosts": 5})
    with make_plant("fluid", sc) as plant:
        plant.reset()
        ys, _ = _episode(plant, 80e6, 4)
        assert len(plant.flow_records()) > 100
    assert ys[1:, 0, 1].mean() > 1e6


@pytest.mark.parametrize("bad", [math.nan, -1.0, 2e8, [1e6, math.inf]])
def test_bad_rate_command_is_rejected(small, bad):
    with make_plant("fluid", small, batch=2) as plant:
        plant.reset()
        with pytest.raises(ValueError, match="rate command"):
            plant.step(bad)


def test_bad_construction_arguments(small):
    with pytest.raises(ValueError, match="batch"):
        make_plant("fluid", small, batch=0)
    with pytest.raises(ValueError, match="dt"):
        make_plant("fluid", small, dt=-1.0)


@pytest.mark.parametrize("cca", ["cubic", "bbr", "bbr2", "reno"])
def test_random_excitation_keeps_invariants(small, cca):
    # the identification excitation of MLC section 3.5: a new u uniform in [0, B_max] every T
    sc = small.replace(dtn={"cca": cca}, campus={"cca": cca, "short_flow_senders": 1})
    rng = np.random.default_rng(5)
    with make_plant("fluid", sc, batch=3) as plant:
        plant.reset(seed=9)
        for _ in range(25):
            u = rng.uniform(0, sc.u_max, 3)
            y = plant.step(u).y
            info = plant.info
            assert np.all(np.isfinite(y))
            assert np.all(y[:, 0] + y[:, 1] <= sc.capacity * (1 + 1e-9))
            bucket = np.maximum(u / 8 * 0.004, 10 * 1448)
            assert np.all(info["shaper_out_bytes"] <= u * sc.period / 8 + bucket + 1.0)
            assert np.all(y[:, 2] >= sc.dtn.rtt - 1e-12) and np.all(y[:, 3] >= sc.campus.rtt - 1e-12)
        assert np.all(plant.records_lost() == 0)


def test_weighted_queues_isolate_the_classes():
    # DTN streams in queue 0, campus hosts in queue 1, no shaping: the weights set the shares
    sc = load_scenario("small-cubic")
    n_dtn = sc.dtn.streams
    shares = {}
    for weights in ((1.0, 1.0), (3.0, 1.0)):
        with make_plant("fluid", sc) as plant:
            F = plant.shape.n_flows
            fq = np.array([0] * n_dtn + [1] * (F - n_dtn))
            plant.set_queues([sc.buffer_bytes / 2] * 2, weights, fq)
            plant.reset(seed=1)
            ys, _ = _episode(plant, sc.u_max, 20)
            assert plant.queue_state()["bytes"].shape == (1, 2)
            assert np.all(plant.snapshot()["queue_id"][0] == fq)
        m = ys[5:, 0].mean(axis=0)
        shares[weights] = m[0] / (m[0] + m[1])
        assert (m[0] + m[1]) > 0.95 * sc.capacity
    assert shares[(1.0, 1.0)] == pytest.approx(0.5, abs=0.05)
    assert shares[(3.0, 1.0)] == pytest.approx(0.75, abs=0.05)


def test_one_queue_via_set_queues_is_the_default_fifo(small):
    with make_plant("fluid", small) as a, make_plant("fluid", small) as b:
        b.set_queues([small.buffer_bytes])
        a.reset(seed=2)
        b.reset(seed=2)
        ya, _ = _episode(a, 50e6, 4)
        yb, _ = _episode(b, 50e6, 4)
    np.testing.assert_array_equal(ya, yb)


def test_set_queues_rejects_bad_input(small):
    with make_plant("fluid", small) as plant:
        with pytest.raises(ValueError, match="buffers"):
            plant.set_queues([0.0, 1e5])
        with pytest.raises(ValueError, match="flow_queue"):
            plant.set_queues([1e5, 1e5], flow_queue=np.full(plant.shape.n_flows, 2))


def test_make_plant_bad_name_or_option_is_one_line():
    sc = load_scenario("small-cubic")
    with pytest.raises(ValueError, match="unknown plant 'nope'"):
        make_plant("nope", sc)
    with pytest.raises(ValueError, match="plant 'fluid' has no option 'bogus'"):
        make_plant("fluid", sc, bogus=1)
    with pytest.raises(ValueError, match="plant 'netns' has no option 'bogus'"):
        make_plant("netns", sc, bogus=1)
    with pytest.raises(ValueError, match="batch<=1"):
        make_plant("netns", sc, batch=2)
