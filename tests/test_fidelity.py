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


def _pair_share(spec: tuple[str, float, str, float], seeds: int = 2, duration: int = 50, skip: int = 20) -> float:
    """The DTN flow's share of two unshaped flows in the testbed's 0.05 BDP buffer (62.5 kB at 100 Mbit/s),
    as benchmarks/sim_vs_testbed.py runs them on both plants."""
    from scidmz.plant.fluid import FluidPlant
    from scidmz.scenario import load_scenario

    dcca, drtt, ccca, crtt = spec
    base = load_scenario("testbed")
    sc = base.replace(link={"buffer": base.buffer_bytes},
                      dtn={"streams": 1, "rtt": drtt, "cca": dcca, "transfer": None},
                      campus={"hosts": 1, "rtt": crtt, "cca": ccca, "traffic": "long", "flows_per_host": 1})
    plant = FluidPlant(sc, scenarios=[sc.replace(seed=s) for s in range(seeds)])
    ys = np.array([plant.step(sc.u_max).y for _ in range(duration)])[skip:]
    return float((ys[:, :, 0].sum(axis=0) / (ys[:, :, 0] + ys[:, :, 1]).sum(axis=0)).mean())


def test_bbr1_pair_in_a_shallow_buffer_is_near_the_kernel():
    # reports/fidelity: in the 0.05 BDP buffer the kernel's BBR v1 shares 50/50 whatever the RTT (0.496,
    # 0.499, 0.497, 0.518 at 10/50/100/200 vs 10 ms): both flows pace at their estimate, neither is
    # cwnd-limited. The fluid's long flow took 0.75 at 50 ms before its phase samples (bbr1.py); the
    # remaining gap (~0.1) is reports/fidelity's open item.
    assert _pair_share(("bbr", 0.010, "bbr", 0.010)) == pytest.approx(0.50, abs=0.05)
    assert _pair_share(("bbr", 0.050, "bbr", 0.010)) < 0.65


def test_bbr1_against_cubic_at_equal_rtt_matches_the_kernel():
    # reports/fidelity: BBR v1 takes 0.893 against one CUBIC flow at 10 ms (kernel), 0.985 at 100 ms
    assert _pair_share(("bbr", 0.010, "cubic", 0.010)) == pytest.approx(0.893, abs=0.05)


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

    # Shallow defaults and the deep variants, three seeds each. Queue means are the touchy
    # part: CUBIC's agree within 5 %. BBRv2 (bbr2.py) keeps a small queue even in the deep
    # buffer, and its probes' ends fall on sub-step boundaries, so its 30 s mean queue differs by a
    # few ms between the two step sizes (measured, 4 seeds: 1.43 vs 1.62 ms shallow, 14.1 vs 17.4 ms
    # in the 100 ms deep buffer): 20 % or 5 ms. The packet noise (constants.ARRIVAL_IDC) reads each
    # sub-step's drift, so BBRv2's rates, which react to its losses, may differ by up to 2 % deep.
    # Since the window CCAs' congestion events end at the reaction the campus
    # CUBIC flows react more often, and the deep BBRv2 queue's step dependence grew: 9 seeds, 15.8 ms
    # (1 ms step) vs 21.6 ms (adaptive), one seed's mean ranging over 10.8-33.5 ms (seeds 0-2 alone:
    # 14.5 vs 24.4 ms), so that one is compared over 9 seeds, within 8 ms.
    for name in ("paper-cubic", "paper-bbr2", "paper-cubic-deep", "paper-bbr2-deep"):
        sc = load_scenario(name)
        means = []
        for dt in (0.001, None):
            n = 9 if name == "paper-bbr2-deep" else 3
            plant = FluidPlant(sc, scenarios=[sc.replace(seed=s) for s in range(n)], dt=dt)
            ys = np.array([plant.step(np.full(n, 400e6)).y for _ in range(40)])
            means.append(ys[10:].mean(axis=(0, 1)))
        fine, adaptive = means
        rtol = 0.03 if "bbr2" in name else 0.02
        assert adaptive[0] == pytest.approx(fine[0], rel=rtol), name  # DTN rate
        assert adaptive[1] == pytest.approx(fine[1], rel=rtol), name  # campus rate
        if "bbr2" in name:
            assert adaptive[4] == pytest.approx(fine[4], rel=0.20, abs=0.008 if "deep" in name else 0.005), name
        else:
            # paper-cubic's shallow queue averages 0.25 ms, and one seed's 30 s mean ranges over
            # 0.19-0.31 ms with either step (measured, 9 seeds): 3-seed means
            # differ by up to ~0.1 ms by chance, so 5 % or 0.1 ms
            assert adaptive[4] == pytest.approx(fine[4], rel=0.05, abs=1e-4), name
