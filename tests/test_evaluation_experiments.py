"""Section 4 experiments on the real fluid plant, tiny sizes: structure and physically sane values.

The trivial TBF and "no shaping" stand in for MLC vs trivial here (the MLC
chain is covered end to end by test_evaluation_reproduce.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from scidmz.evaluation.leaderboard.trialunits import mrae_targets
from scidmz.evaluation.mlc.experiments import (
    EXPERIMENTS,
    ExperimentPlan,
    fct_experiment,
    mrae_experiment,
    parse_experiments,
    run_experiments,
    short_flow_experiment,
    sweep_experiment,
    sweep_layout,
)
from scidmz.policies import NoShapingPolicy, TrivialPolicy
from scidmz.scenario import load_scenario

pytest.importorskip("scidmz.plant.fluid")

PLAN = ExperimentPlan(
    trials=3, duration=20.0, target_hold=10.0, transfer=60e6, fct_max_time=60.0,
    ns_values=(1, 20), ns_trials=2, short_duration=20.0, short_trials=2, seed=3,
)


@pytest.fixture(scope="module")
def sc():
    return load_scenario("small-cubic")


@pytest.fixture(scope="module")
def policies():
    # "mlc" is a name here: any Policy can take the candidate's place.
    return {"none": NoShapingPolicy(), "trivial": TrivialPolicy()}


def test_plan_validation_and_parsing() -> None:
    with pytest.raises(ValueError, match="trials"):
        ExperimentPlan(trials=0)
    with pytest.raises(ValueError, match="target_low"):
        ExperimentPlan(target_low=0.8, target_high=0.2)
    assert parse_experiments(None) == EXPERIMENTS
    assert parse_experiments("fct, mrae") == ("fct", "mrae")
    with pytest.raises(ValueError, match="unknown experiment"):
        parse_experiments("mrae,bogus")
    assert sweep_layout(1) == (1, 1)
    assert sweep_layout(1000) == (100, 10)
    assert sweep_layout(10000) == (100, 100)
    with pytest.raises(ValueError):
        sweep_layout(0)


def test_mrae_targets_are_seeded_steps_within_bounds(sc) -> None:
    a = mrae_targets(sc, PLAN.core())
    assert a.shape == (20, 3)
    assert np.array_equal(a, mrae_targets(sc, PLAN.core()))
    assert a.min() >= 0.3 * sc.capacity and a.max() <= 0.7 * sc.capacity
    assert np.all(a[:10] == a[0]) and not np.all(a[10] == a[0])  # a new level every 10 s
    assert not np.array_equal(a[:, 0], a[:, 1])  # one pattern per trial


def test_mrae_experiment_structure_and_values(sc, policies) -> None:
    res = mrae_experiment(sc, policies, PLAN)
    t = res.table
    assert len(t) == 2 * PLAN.trials and set(t["policy"]) == {"none", "trivial"}
    assert np.all(t["mrae"] >= 0) and np.all(np.isfinite(t["mrae"]))
    assert np.all((t["utilization"] > 0.3) & (t["utilization"] <= 1.05))
    s = res.summary
    assert s["trivial"]["n"] == PLAN.trials and "reduction_pct" in s["none"]
    # Unshaped campus traffic crowds the DTN out: it tracks its target worse than with the TBF.
    assert s["none"]["mean"] > s["trivial"]["mean"]
    assert s["none"]["mean_rate_dtn"] < s["trivial"]["mean_rate_dtn"]
    # Paired over the same trials: "none" is worse than trivial in every one of them.
    assert s["none"]["paired_n"] == PLAN.trials and s["none"]["paired_wins"] == 0
    assert 0 < s["none"]["paired_p"] <= 1
    # Same seeds -> same numbers.
    again = mrae_experiment(sc, {"trivial": TrivialPolicy()}, PLAN)
    assert again.summary["trivial"]["mean"] == pytest.approx(s["trivial"]["mean"])


def test_fct_and_utilisation(sc, policies) -> None:
    fres, ures = fct_experiment(sc, policies, PLAN)
    t = fres.table
    assert len(t) == 2 * PLAN.trials
    fin = t[t["finished"]]
    assert len(fin) > 0
    # No transfer beats the bottleneck: FCT >= size / B_max.
    assert np.all(fin["fct"] >= 8 * PLAN.transfer / sc.capacity)
    s = fres.summary
    assert s["trivial"]["mean"] < s["none"]["mean"] or s["none"]["unfinished"] > 0
    assert "reduction_pct" in s["none"] and s["bound_s"] == 60.0
    u = ures.summary
    assert 0.5 < u["trivial"]["mean"] <= 1.05 and "decrease_pct" in u["none"]


def test_sweep_rows_per_ns(sc, policies) -> None:
    res = sweep_experiment(sc, {"trivial": TrivialPolicy()}, PLAN)
    rows = res.summary["rows"]
    assert [r["n_s"] for r in rows] == [1, 20]
    assert set(res.table["n_s"]) == {1, 20}
    one, many = rows[0]["trivial"]["mean"], rows[1]["trivial"]["mean"]
    assert math.isfinite(one) and one >= 8 * PLAN.transfer / sc.capacity
    # One campus stream cannot fill its share; twenty can, so the DTN transfer is slower.
    assert many > one


def test_short_flows_have_fcts(sc) -> None:
    res = short_flow_experiment(sc, {"trivial": TrivialPolicy()}, PLAN)
    t = res.table
    assert len(t) > 5 and np.all(t["fct"] > 0)
    s = res.summary["trivial"]
    assert 0 < s["median"] <= s["p90"]


def test_run_experiments_writes_files(tmp_path, sc, policies) -> None:
    res = run_experiments(sc, policies, PLAN, ["mrae", "utilization"], out_dir=tmp_path)
    assert set(res) == {"mrae", "utilization"}
    for f in ("mrae.csv", "utilization.csv", "mrae_cdf.png", "utilization_cdf.png", "results.json"):
        assert (tmp_path / f).stat().st_size > 0
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["results"]["mrae"]["summary"]["trivial"]["n"] == PLAN.trials
    assert doc["plan"]["trials"] == PLAN.trials


def test_single_instance_plants_run_trials_in_turn(sc, monkeypatch) -> None:
    """A real-time plant (netns, hardware) holds one instance, as its registry entry declares: trials run
    one after another with the same seeds. Here the fluid model registered as such a plant."""
    from scidmz.plant import registry
    from scidmz.plant.fluid.plant import FluidPlant

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register_plant("fluid-one", lambda scenario: FluidPlant(scenario, batch=1), realtime=True)
    plan = ExperimentPlan(trials=3, duration=10.0, target_hold=5.0, seed=5)
    batched = mrae_experiment(sc, {"trivial": TrivialPolicy()}, plan)
    serial = mrae_experiment(sc, {"trivial": TrivialPolicy()}, plan, "fluid-one")
    assert np.allclose(serial.table["mrae"], batched.table["mrae"])
    assert list(serial.table["seed"]) == [5, 6, 7]  # trial i: seed + i, one after another
    short = replace(PLAN, short_trials=2, short_duration=10.0)
    res = short_flow_experiment(sc, {"trivial": TrivialPolicy()}, short, "fluid-one")
    assert set(res.table["instance"]) <= {0, 1} and len(res.table) > 0


def test_ci95_is_students_t_not_the_normal_limit():
    from scidmz.evaluation.stats import summarize as _stats

    s = _stats([1.0, 2.0, 3.0, 4.0])  # n = 4: t_{0.975, 3} = 3.182, s = 1.291
    assert s["ci95"] == pytest.approx(3.182446 * 1.2909944 / 2.0, rel=1e-5)
    assert math.isnan(_stats([5.0])["ci95"]) and _stats([])["n"] == 0


def test_starved_periods_are_counted_where_the_plant_reports_them():
    import pandas as pd

    from scidmz.evaluation.leaderboard.trialunits import _starved

    assert _starved(pd.DataFrame({"rate_dtn": [1.0, 2.0]})) == 0  # the fluid plant: nothing to count
    assert _starved(pd.DataFrame({"starved": [0.0, 1.0, 1.0, np.nan]})) == 2


def test_the_study_runs_the_cores_trials(sc) -> None:
    """The MLC study has no trial engine of its own: its MRAE rows are the core's ledger lines, with
    the core's seeds and targets, and a run of more trials shares the first ones unchanged."""
    from scidmz.evaluation.leaderboard.trialunits import unit_metrics
    from scidmz.evaluation.mlc.experiments import run_core

    run = run_core(sc, {"trivial": TrivialPolicy()}, PLAN, ("mrae",))
    rows = run.rows("mrae", ["trivial"])
    assert [r["seed"] for r in rows] == [3, 4, 5]
    tr = run.first["mrae"]["trivial"][0]
    core = PLAN.core(("mrae",))
    assert rows[0]["mrae"] == unit_metrics("mrae", tr, core.variant(sc, "mrae"), core)["metrics"]["mrae"]
    more = run_core(sc, {"trivial": TrivialPolicy()}, replace(PLAN, trials=5), ("mrae",)).rows("mrae", ["trivial"])
    assert [r["mrae"] for r in more[:3]] == [r["mrae"] for r in rows]


def test_the_study_judges_trials_as_the_leaderboard_does() -> None:
    """On a testbed the MLC study uses, per trial, the run the validity rule chose: a re-run replaces
    a disturbed first run for both policies, and a trial disturbed in every run is left out of both
    policies' rows and flows (``--quick`` keeps it). A unit's outcome never decides."""
    import pandas as pd

    from scidmz.evaluation.mlc.experiments import _judged

    quiet, busy = {"cpu_pressure": 0.1}, {"cpu_pressure": 0.9}

    def line(policy: str, trial: int, mrae: float, signals: dict, rerun: int = 0) -> dict:
        return {"unit": "short", "policy": policy, "trial": trial, "seed": trial, "rerun": rerun,
                "metrics": {"short_fct_median": mrae}, "validity": signals}

    lines = [line("trivial", 0, 1.0, busy), line("mlc", 0, 0.1, quiet),        # trial 0: disturbed once,
             line("trivial", 0, 2.0, quiet, 1), line("mlc", 0, 3.0, quiet, 1),  # re-run clean
             line("trivial", 1, 5.0, quiet), line("mlc", 1, 6.0, busy)]         # trial 1: disturbed, left
    flows = {("short", n, i): pd.DataFrame({"fct": [float(i)], "policy": [n], "instance": [i]})
             for n in ("trivial", "mlc") for i in (0, 1)}
    core = PLAN.core(("short",))
    run = _judged(lines, core, ["trivial", "mlc"], {}, flows, exclude=True)
    assert {k: r["metrics"]["short_fct_median"] for k, r in run.units.items()} == \
        {("short", "trivial", 0): 2.0, ("short", "mlc", 0): 3.0}
    assert run.invalid == {"short": [1]} and [int(f["instance"].iloc[0]) for f in run.flows] == [0, 0]
    kept = _judged(lines, core, ["trivial", "mlc"], {}, flows, exclude=False)
    assert len(kept.units) == 4 and kept.invalid == {} and len(kept.flows) == 4


def test_short_flows_are_tested_pair_by_pair_on_the_cores_per_trial_medians(sc, policies) -> None:
    """Table 6's medians are over every single flow; the paired test is on the core's per-trial
    medians (trial i of each policy on the same seed), so the short-flow cell can be judged."""
    res = short_flow_experiment(sc, policies, PLAN)
    s = res.summary["none"]
    assert s["paired_n"] == PLAN.short_trials and 0 < s["paired_p"] <= 1
    # unshaped campus traffic: its own short flows finish sooner in every trial
    assert s["paired_wins"] == PLAN.short_trials and s["median"] < res.summary["trivial"]["median"]
