"""Fidelity of the fluid plant: behaviours the papers and the literature report (see docs/fluid_model.md)."""

from __future__ import annotations

import numpy as np
import pytest

from scidmz.plant.fluid import fidelity


def test_bbr_long_rtt_flow_takes_most_of_the_bottleneck():
    # Jenks et al. (extended), Test 3, Fig. 7(c): no separation, BBR, the long-RTT flow takes >= 75 %.
    r = fidelity.bbr_rtt_unfairness(rtt_long=(0.050, 0.100), seeds=3, duration=40, skip=10)
    assert min(r["long_share"]) >= 0.75, r
    assert min(r["utilization"]) > 0.9, r


def test_cubic_fills_the_link_with_a_one_bdp_buffer():
    r = fidelity.cubic_utilization(buffer_bdp=(1.0,), streams=(1, 8), duration=40, skip=10)
    for case in r["cases"]:
        assert case["utilization"] >= 0.95, case
        # ... and keeps the drop-tail buffer busy (loss-based)
        assert case["qdelay"] > 0.02, case


def test_bbr_standing_queue_is_small_next_to_cubic_in_a_deep_buffer():
    r = fidelity.standing_queue(buffer_bdp=4.0, ccas=("cubic", "bbr", "bbr2"), duration=40, skip=10)
    q = r["qdelay"]
    assert q["cubic"] > 0.5 * r["buffer_delay"], r  # CUBIC fills a good part of 400 ms
    assert q["bbr"] < 0.5 * q["cubic"], r
    assert q["bbr2"] < 0.5 * q["cubic"], r
    assert min(r["utilization"].values()) > 0.9, r


def test_bbr1_loses_heavily_in_a_shallow_buffer_bbr2_does_not():
    r = fidelity.shallow_buffer_loss(buffer_bdp=0.1, duration=30, skip=10)
    loss = r["loss_rate"]
    assert loss["bbr2"] < 0.02, r  # BBRv2's loss threshold bounds it
    assert loss["bbr"] > 0.05, r  # BBRv1 ignores loss
    assert loss["cubic"] < loss["bbr2"], r
    assert min(r["utilization"].values()) > 0.9, r


def _check_decreasing(r, capacity):
    rate = np.array(r["rate_dtn"])
    # non-increasing up to the seed-to-seed noise of the averages, and clearly falling overall
    assert np.all(np.diff(rate) <= 0.05 * capacity), r
    assert rate[0] - rate[-1] > 0.5 * capacity, r
    assert rate[0] > 0.9 * (capacity - r["u"][0]), r


def test_static_map_is_decreasing_cubic():
    r = fidelity.static_map("paper-cubic", points=8, seeds=2, duration=40, skip=10)
    _check_decreasing(r, 1e9)


def test_static_map_is_decreasing_bbr2():
    r = fidelity.static_map("paper-bbr2", points=8, seeds=3, duration=40, skip=10)
    _check_decreasing(r, 1e9)


def test_adaptive_substep_agrees_with_a_fine_fixed_step():
    from scidmz.plant.fluid import FluidPlant
    from scidmz.scenario import load_scenario

    # Shallow defaults and the deep variants (issue 9), three seeds each. Queue means are the touchy
    # part: CUBIC's agree within 5 %; BBRv2's probing makes its 30 s mean queue differ by up to
    # 17 % between the two step sizes (measured: 1.20 vs 1.33 ms shallow, 65 vs 61 ms deep). The
    # packet noise (constants.ARRIVAL_IDC) reads each sub-step's drift, so BBRv2's rates, which
    # react to its losses, now differ by up to 2 % deep (measured -1.3 % DTN, +1.9 % campus).
    for name in ("paper-cubic", "paper-bbr2", "paper-cubic-deep", "paper-bbr2-deep"):
        sc = load_scenario(name)
        means = []
        for dt in (0.001, None):
            plant = FluidPlant(sc, scenarios=[sc.replace(seed=s) for s in range(3)], dt=dt)
            ys = np.array([plant.step(np.full(3, 400e6)).y for _ in range(40)])
            means.append(ys[10:].mean(axis=(0, 1)))
        fine, adaptive = means
        rtol = 0.03 if "bbr2" in name else 0.02
        assert adaptive[0] == pytest.approx(fine[0], rel=rtol), name  # DTN rate
        assert adaptive[1] == pytest.approx(fine[1], rel=rtol), name  # campus rate
        qtol = 0.20 if "bbr2" in name else 0.05
        assert adaptive[4] == pytest.approx(fine[4], rel=qtol), name  # queueing delay
