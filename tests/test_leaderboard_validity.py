"""Validity fixed before a run, judged per trial from machine signals, never from the outcome; an invalid
trial re-run for every policy, the re-run appended, the results on the last valid run.

A real-time plant is played here by the fluid model registered as one (batch 1, ``realtime=True``), its
machine signals given by a fake source through the same constructor option the netns plant takes
(``validity``: a factory ``(plant) -> ValiditySource``). Non-root; the netns source itself is exercised
by ``test_leaderboard_validity_netns.py`` (root).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from scidmz.evaluation.leaderboard.ledger import Ledger, parse_ledger_lines
from scidmz.evaluation.leaderboard.plan import LeaderboardPlan, make_plan
from scidmz.evaluation.leaderboard.results import build_rows, recompute, results_doc
from scidmz.evaluation.leaderboard.validity import ValidityRule, select_runs, unit_breaks
from scidmz.plant.fluid.plant import FluidPlant

QUIET = {"cpu_pressure": 0.02, "cpu_pressure_source": "psi", "stage_late_mean_s": 1e-4}
BUSY = {**QUIET, "cpu_pressure": 0.9}


class FakeSignals:
    """A ``ValiditySource`` whose ``end()`` reads BUSY for the unit numbers in ``busy`` (0: the first unit
    the plant runs), QUIET otherwise; its probe always finds the link served."""

    def __init__(self, busy: set[int]) -> None:
        self.busy, self.units, self.probes = busy, 0, 0

    def probe(self) -> dict:
        self.probes += 1
        return {"probe_service": 0.99}

    def begin(self) -> None:
        pass

    def end(self) -> dict:
        n, self.units = self.units, self.units + 1
        return dict(BUSY if n in self.busy else QUIET)


class OneAtATimeFluid(FluidPlant):
    """The fluid model as a real-time plant with a validity source (the netns plant's ``validity`` option)."""

    def __init__(self, scenario, validity=None) -> None:
        super().__init__(scenario, batch=1)
        self.validity_signals = validity(self) if validity is not None else None


@pytest.fixture
def rt_plant(monkeypatch):
    """Registers ``vd-fluid`` for one test (``register_plant``; the registry is restored after it) and
    returns a function that sets which units its fake source reads as disturbed."""
    from scidmz.plant import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    fakes: list[FakeSignals] = []

    def use(busy: set[int]) -> list[FakeSignals]:
        fake = FakeSignals(busy)
        fakes.append(fake)
        class WithFake(OneAtATimeFluid):  # a class, so its capabilities are declared as the fluid plant's
            def __init__(self, scenario) -> None:
                super().__init__(scenario, validity=lambda pl: fake)

        registry.register_plant("vd-fluid", WithFake, realtime=True)
        return fakes

    return use


def _run(tmp_path: Path, plan: LeaderboardPlan, resume: bool = False) -> dict:
    from scidmz.commands.build import build_policies
    from scidmz.evaluation.leaderboard.run import prepare, run_leaderboard
    from scidmz.scenario import load_scenario

    sc = load_scenario("small-cubic")
    pols, _ = build_policies(["trivial", "none", "abc"], sc)
    prep = prepare(sc, pols, {}, "vd-fluid", plan, tmp_path / "run", resume=resume)
    return run_leaderboard(prep, "test")


def _plan(trials: int = 3, **rule) -> LeaderboardPlan:
    return make_plan("fluid", trials, trials, ("mrae",), quick=True,
                     overrides={"duration": 6.0, "target_hold": 3.0, **rule})


def _lines(tmp_path: Path) -> list[dict]:
    return parse_ledger_lines((tmp_path / "run" / "ledger.jsonl").read_bytes(), "ledger")[1]


def test_the_rule_is_fixed_in_the_header_and_a_change_on_resume_is_refused(tmp_path, capsys) -> None:
    plan = _plan(max_cpu_pressure=0.25, max_reruns=1)
    assert plan.to_dict()["validity"] == {"max_cpu_pressure": 0.25, "max_stage_late": 0.5e-3,
                                          "min_probe_service": 0.9, "max_reruns": 1}
    assert "max_starved" not in plan.to_dict()  # the starved share is evidence now, not the rule
    with Ledger.open(tmp_path, {"plan": plan.to_dict()}, resume=False) as led:
        led.append("mrae", "trivial", 0, {"seed": 0, "metrics": {"mrae": 0.1}})
    assert json.loads((tmp_path / "ledger.jsonl").read_text().splitlines()[0])["plan"]["validity"] == plan.validity.to_dict()
    with pytest.raises(ValueError, match=r"plan\.validity\.max_cpu_pressure: 0\.25 in the ledger, 0\.5 now") as e:
        Ledger.open(tmp_path, {"plan": _plan(max_cpu_pressure=0.5, max_reruns=1).to_dict()}, resume=True,
                    allow_drift=True)
    assert "\n" not in str(e.value)
    # and from the command line: one line, exit 2, the ledger untouched
    from scidmz.cli import main

    out = tmp_path / "cli"
    argv = ["leaderboard", "small-cubic", "--quick", "--trials", "2", "--policies", "trivial,none", "--experiments",
            "mrae", "--set", "plan.duration=4", "--set", "plan.target_hold=2", "--out", str(out)]
    assert main([*argv, "--set", "plan.max_stage_late=1ms"]) == 0
    before = (out / "ledger.jsonl").read_bytes()
    capsys.readouterr()
    assert main([*argv, "--set", "plan.max_stage_late=2ms", "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "plan.validity.max_stage_late: 0.001 in the ledger, 0.002 now" in err
    assert (out / "ledger.jsonl").read_bytes() == before


def test_a_disturbed_trial_is_invalid_for_every_policy_rerun_and_appended(tmp_path, rt_plant) -> None:
    """Unit 4 (trial 1's second policy) ran on a busy machine: trial 1 is run again for all three
    policies with the same seed and target, appended with rerun 1, and the results use that run."""
    fakes = rt_plant({4})
    res = _run(tmp_path, _plan())
    lines = _lines(tmp_path)
    assert len(lines) == 3 * 3 + 3 and fakes[0].probes == 12  # a probe before every unit
    first = {ln["policy"]: ln for ln in lines if ln["trial"] == 1 and "rerun" not in ln}
    again = {ln["policy"]: ln for ln in lines if ln["trial"] == 1 and ln.get("rerun") == 1}
    assert set(first) == set(again) == {"trivial", "none", "abc"}
    assert [ln["trial"] for ln in lines[6:9]] == [1, 1, 1] and lines[9]["trial"] == 2  # re-run before trial 2
    for name in again:  # same trial: same seed, same target signal
        assert again[name]["seed"] == first[name]["seed"] == 1
        assert again[name]["metrics"]["mean_target"] == first[name]["metrics"]["mean_target"]
        assert again[name]["validity"]["cpu_pressure"] == QUIET["cpu_pressure"]
    chosen, bad, reruns = select_runs(lines, ValidityRule())
    assert bad == {} and reruns == {"mrae": {1: 1}}
    assert all(chosen[("mrae", n, 1)].get("rerun") == 1 for n in again)
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    assert doc["reruns"] == {"mrae": {"1": 1}} and doc["invalid_trials"] == {} and doc["stayed_invalid"] == {}
    assert doc["complete"] and res["units"] == 12
    assert {r["trials"] for r in doc["rows"]} == {3} and {r["excluded_trials"] for r in doc["rows"]} == {0}
    report = (tmp_path / "run" / "report.md").read_text()
    assert "each trial counts with its last valid run (re-run: MRAE trials 1)." in report
    # the committed-results check holds for a ledger with re-runs
    old, new = recompute(tmp_path / "run")
    from scidmz.evaluation.leaderboard.ledger import first_difference

    assert first_difference(old, new) is None


def test_results_use_the_last_valid_run_not_the_first(tmp_path) -> None:
    """The first run of trial 1 collapsed for trivial (MRAE 0.9) on a busy machine; its re-run is the
    trial every policy is judged on."""
    head = {"plan": {"experiments": ["mrae"], "seed": 0, "validity": ValidityRule().to_dict()}, "plant": "netns",
            "scenario": {"fingerprint": {"dtn_cca": "cubic"}},
            "policies": {"trivial": {"kind": "rate"}, "pi": {"kind": "rate"}}}

    def line(p, i, v, sig, rerun=0):
        return {"unit": "mrae", "policy": p, "trial": i, "metrics": {"mrae": v}, "periods": 100,
                "starved_periods": 0, "validity": sig, **({"rerun": rerun} if rerun else {})}

    units = [line(p, i, v + 0.001 * i, QUIET) for i in range(6) for p, v in (("trivial", 0.10), ("pi", 0.08))]
    units[2] = line("trivial", 1, 0.9, BUSY)  # trial 1, trivial: the disturbed window
    units += [line("trivial", 1, 0.101, QUIET, 1), line("pi", 1, 0.081, QUIET, 1)]
    rows = {r["policy"]: r for r in build_rows(head, units, {})}
    assert rows["trivial"]["trials"] == 6 and rows["trivial"]["excluded_trials"] == 0
    assert rows["trivial"]["mean"] == pytest.approx(np.mean([0.10 + 0.001 * i for i in range(6)]), abs=1e-9)
    # without the re-run trial 1 is out for both policies
    rows = {r["policy"]: r for r in build_rows(head, units[:-2], {})}
    assert {r["trials"] for r in rows.values()} == {5} and {r["excluded_trials"] for r in rows.values()} == {1}


def test_a_trial_still_disturbed_after_its_reruns_is_reported_and_left_out(tmp_path, rt_plant) -> None:
    """Trial 1's first policy is disturbed in every run: after max_reruns = 2 re-runs it stays invalid,
    for every policy, and the results say so."""
    rt_plant({3, 6, 9})  # trial 1's first unit in each of its three runs
    res = _run(tmp_path, _plan(max_reruns=2))
    from scidmz.commands.leaderboard import _validity_line

    assert res["stayed_invalid"] == {"mrae": [1]} and res["reruns"] == {"mrae": {"1": 2}}
    assert _validity_line(res) == ("\nre-run (a disturbed machine): mrae trials 1; "
                                   "still invalid, left out for every policy: mrae trials 1")
    lines = _lines(tmp_path)
    assert sorted({ln.get("rerun", 0) for ln in lines if ln["trial"] == 1}) == [0, 1, 2] and len(lines) == 15
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    assert doc["stayed_invalid"] == {"mrae": [1]} and doc["invalid_trials"] == {"mrae": [1]}
    assert {r["trials"] for r in doc["rows"]} == {2} and {r["excluded_trials"] for r in doc["rows"]} == {1}
    report = (tmp_path / "run" / "report.md").read_text()
    assert "still invalid after its re-runs is left out for every policy (counted; MRAE trials 1)" in report


def test_a_resume_finishes_a_rerun_the_interruption_cut_short(tmp_path, rt_plant) -> None:
    rt_plant({4})
    _run(tmp_path, _plan())
    path = tmp_path / "run" / "ledger.jsonl"
    text = path.read_text().splitlines()
    # cut after the re-run's first unit: two policies' re-runs of trial 1 and all of trial 2 are missing
    path.write_text("\n".join(text[:1 + 7]) + "\n")
    from scidmz.evaluation.leaderboard.trialunits import todo_count

    with Ledger.open(tmp_path / "run", json.loads(text[0]) | {}, resume=True, allow_drift=True) as led:
        assert todo_count(_plan(), ["trivial", "none", "abc"], led) == 2 + 3
    fakes = rt_plant(set())
    res = _run(tmp_path, _plan(), resume=True)
    assert res["units_run"] == 5 and fakes[-1].units == 5
    lines = _lines(tmp_path)
    assert sorted(ln["policy"] for ln in lines if ln.get("rerun") == 1) == ["abc", "none", "trivial"]


def _head(**plan) -> dict:
    return {"plan": {"experiments": ["mrae"], "seed": 0, **plan}, "plant": "netns", "plant_model": {}, "code": {},
            "scenario": {"fingerprint": {"dtn_cca": "cubic"}}, "policies": {"trivial": {"kind": "rate"}, "pi": {"kind": "rate"}}}


def test_the_outcome_is_never_consulted() -> None:
    """A great and a terrible MRAE, a unit with every period starved: all valid on quiet signals.
    Busy signals make a trial invalid whatever its MRAE. A line without metrics is judged as well."""
    rule = ValidityRule()
    assert unit_breaks({"validity": QUIET}, rule) == []
    assert unit_breaks({"validity": BUSY}, rule) == ["cpu_pressure 0.90 > 0.3"]
    assert unit_breaks({"validity": {**QUIET, "stage_late_mean_s": 2e-3, "probe_service": 0.6}}, rule) == [
        "stage_late_mean_s 2.00 ms > 0.5 ms", "probe_service 0.600 < 0.9"]
    assert unit_breaks({"validity": {"cpu_pressure": None, "stage_late_mean_s": None}}, rule) == []  # unread
    # ... but a stage that released nothing over a unit that ran was not serving (a torn-down testbed)
    dead = {**QUIET, "stage_late_mean_s": None, "stage_frames": 0.0, "measured_s": 121.5}
    assert unit_breaks({"validity": dead}, rule) == [
        "stage_frames 0: the delay stage released nothing (the testbed was not serving)"]
    assert unit_breaks({"validity": {**dead, "stage_frames": 3.0}}, rule) == []
    head = _head(validity=rule.to_dict())
    units = [{"unit": "mrae", "policy": p, "trial": i, "metrics": {"mrae": v}, "periods": 100, "starved_periods": 0,
              "validity": QUIET} for i in range(4) for p, v in (("trivial", 0.1), ("pi", 0.05))]
    units[1]["metrics"]["mrae"] = 0.0  # a perfect trial
    units[3]["metrics"]["mrae"] = 50.0  # a terrible one
    units[5]["starved_periods"] = 100  # every period starved: evidence, not validity
    doc = results_doc(head, units, {}, command="t", max_starved=0.05, load_start=None)
    assert doc["invalid_trials"] == {} and {r["trials"] for r in doc["rows"]} == {4}
    assert doc["max_starved"] is None and doc["validity"] == rule.to_dict()
    units[7]["validity"] = BUSY  # trial 3, pi: the machine, whatever the numbers
    doc = results_doc(head, units, {}, command="t", max_starved=0.05, load_start=None)
    assert doc["invalid_trials"] == {"mrae": [3]} and {r["trials"] for r in doc["rows"]} == {3}


def test_the_fluid_plant_records_no_signals_and_every_trial_is_valid(tmp_path, capsys) -> None:
    from scidmz.cli import main

    out = tmp_path / "fluid"
    assert main(["leaderboard", "small-cubic", "--quick", "--trials", "2", "--policies", "trivial,none",
                 "--experiments", "mrae", "--out", str(out)]) == 0
    lines = parse_ledger_lines((out / "ledger.jsonl").read_bytes(), "ledger")[1]
    assert lines and not any("validity" in ln or "rerun" in ln for ln in lines)
    doc = json.loads((out / "results.json").read_text())
    assert doc["invalid_trials"] == {} and doc["reruns"] == {} and doc["validity"] == ValidityRule().to_dict()


def test_legacy_ledgers_keep_the_starvation_rule_they_ran_under() -> None:
    """A ledger whose plan carries max_starved and no validity rule is judged as it was run: per trial,
    by any unit's starved share (the committed reports recompute unchanged)."""
    head = _head(max_starved=0.05)
    units = [{"unit": "mrae", "policy": p, "trial": i, "metrics": {"mrae": 0.1 + 0.01 * i}, "periods": 100,
              "starved_periods": 6 if (p, i) == ("pi", 2) else 0} for i in range(4) for p in ("trivial", "pi")]
    doc = results_doc(head, units, {}, command="t", max_starved=0.05, load_start=None)
    assert doc["invalid_trials"] == {"mrae": [2]} and doc["max_starved"] == 0.05
    assert "validity" not in doc and "reruns" not in doc


def test_the_netns_source_falls_back_to_proc_stat_without_psi_and_says_so(monkeypatch) -> None:
    from scidmz.plant.netns.manage import validity as V

    stage = iter([{"tx": 1000, "late_sum_s": 0.1}, {"tx": 3000, "late_sum_s": 0.5}])
    src = V.MachineSignals(lambda: next(stage), lambda: {"probe_service": 0.98})
    monkeypatch.setattr(V, "_psi_some_us", lambda: None)  # a kernel without /proc/pressure
    src.begin()
    time.sleep(0.2)  # some jiffies go by
    sig = src.end()
    assert sig["cpu_pressure_source"] == "stat" and 0.0 <= sig["cpu_pressure"] <= 1.0
    assert sig["stage_late_mean_s"] == pytest.approx(0.4 / 2000) and sig["stage_frames"] == 2000
    assert src.probe() == {"probe_service": 0.98}
    stage = iter([{"tx": 3000, "late_sum_s": 0.5}, {"tx": 10, "late_sum_s": 0.0}])  # the stage restarted
    src = V.MachineSignals(lambda: next(stage), dict)
    src.begin()
    assert src.end()["stage_late_mean_s"] is None


def test_a_recheck_judges_each_run_by_its_own_rule_and_uses_the_reruns() -> None:
    """A re-check under the validity rule against a first run under the legacy starvation rule: the
    first run's starved trial 2 is out, the re-check's trial 1 counts with its re-run."""
    from scidmz.evaluation.leaderboard.recheck import recheck_rows
    from scidmz.evaluation.leaderboard.validity import LegacyStarvation

    first = [{"unit": "mrae", "policy": "pi", "trial": i, "metrics": {"mrae": 0.1}, "periods": 100,
              "starved_periods": 9 if i == 2 else 0} for i in range(5)]
    again = [{"unit": "mrae", "policy": "pi", "trial": i, "metrics": {"mrae": 0.9 if i == 1 else 0.1},
              "periods": 100, "starved_periods": 50, "validity": BUSY if i == 1 else QUIET} for i in range(5)]
    again.append({**again[1], "metrics": {"mrae": 0.1}, "validity": QUIET, "rerun": 1})
    row = recheck_rows(first, again, ["pi"], ["mrae"], LegacyStarvation(0.05), 0, ValidityRule())[0]
    assert row["n"] == 4 and row["again_mean"] == pytest.approx(0.1)  # trial 2 out (first run), trial 1 re-run
