"""The Jenks papers' Test 1 / Test 3 on the fluid plant (short runs)."""

from __future__ import annotations

import json

import pytest

from scidmz.evaluation.jenks_repro import jain, main, paper_test1, paper_test3


def test_jain():
    assert jain([1, 1, 1, 1]) == pytest.approx(1.0)
    assert jain([1, 0, 0, 0]) == pytest.approx(0.25)


@pytest.mark.parametrize("cca", ["cubic", "bbr"])
def test_separation_restores_fairness_test1(cca):
    without = paper_test1(cca, False, 20.0)
    with_ = paper_test1(cca, True, 20.0)
    assert with_.jain > 0.95
    assert without.jain < 0.8
    # The bias has the paper's direction: CUBIC favours the 2 ms flow, BBR the 60 ms one.
    top = max(range(4), key=lambda i: without.shares[i])
    assert top == (0 if cca == "cubic" else 3)


def test_bbr_longer_rtt_dominates_without_separation_test3():
    r = paper_test3("bbr", False, 0.050, 20.0)
    assert r.shares[1] >= 0.75


def test_main_writes_report_and_json(tmp_path, capsys):
    assert main(["--quick", "--json", "--out", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(out["test1"]) == 4 and out["test3"] and len(out["exp4"]) == 4 and len(out["exp5"]) == 2
    assert len(out["test6"]) == 2 and len(out["exp3"]) == 8 and len(out["test5"]) == 2
    assert (tmp_path / "exp5.png").stat().st_size > 0
    text = (tmp_path / "report.md").read_text()
    assert "Test 1 / Exp 1" in text and "≈ 0.98" in text


def test_exp4_rebalancing_recovers_the_unused_share():
    from scidmz.evaluation.jenks_repro import paper_exp4

    without = paper_exp4("cubic", False, 30.0)
    with_ = paper_exp4("cubic", True, 30.0)
    assert 0.6 < without.utilisation < 0.8  # 50 % + 20 % of C
    assert with_.utilisation > 0.9


def test_rate_limit_bad_input():
    from scidmz.plant.fluid.plant import FluidPlant
    from scidmz.scenario import load_scenario

    sc = load_scenario("small-cubic").with_overrides(["dtn.streams=2", "campus.hosts=0"])
    with FluidPlant(sc) as p, pytest.raises(ValueError, match="rate limits must be > 0"):
        p.set_rate_limits([0.0, 1e6])


def test_test6_udp_isolation():
    from scidmz.evaluation.jenks_repro import paper_test6

    without = paper_test6(False, 40.0)
    with_ = paper_test6(True, 40.0)
    assert without["jain_per_phase"][-1] < 0.4  # UDP keeps most of the link
    assert min(with_["jain_per_phase"]) > 0.9


def test_test5_bufferbloat_rule_keeps_flow1_low():
    from scidmz.evaluation.jenks_repro import paper_test5

    without = paper_test5(False, 45.0)
    with_ = paper_test5(True, 45.0)
    assert without["flow1_rtt_after_s"] > 0.013  # flow 2's backlog in the shared queue
    assert with_["flow1_rtt_after_s"] < 0.0115  # flow 2 moved to the high-latency queue
