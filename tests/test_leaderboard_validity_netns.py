"""The netns plant's validity signals, on the real testbed: every unit's ledger line records the CPU
pressure, the delay stage's lateness and the calibration probe before it; a trial is judged on them.
Root, under the lock (``flock /tmp/scidmz-root.lock``); namespaces prefixed ``vd``."""

from __future__ import annotations

import math

import pytest

from scidmz.scenario import load_scenario

pytestmark = pytest.mark.root


def _scenario():
    return load_scenario("testbed").replace(campus={"hosts": 2}, link={"capacity": 20e6, "buffer_bdp": 1.0},
                                            dtn={"streams": 2, "rtt": 0.05}, duration=10.0)


def test_each_netns_unit_records_the_machine_signals_and_the_trial_is_judged_on_them(tmp_path) -> None:
    from scidmz.commands.build import build_policies
    from scidmz.evaluation.leaderboard.ledger import Ledger
    from scidmz.evaluation.leaderboard.plan import make_plan
    from scidmz.evaluation.leaderboard.trialunits import run_realtime
    from scidmz.evaluation.leaderboard.validity import select_runs

    sc = _scenario()
    # no re-runs: the test checks what is recorded and judged, on a machine that may be busy
    plan = make_plan("netns", 2, 2, ("mrae",), overrides={"duration": 4.0, "target_hold": 2.0, "max_reruns": 0})
    policies, _ = build_policies(["trivial", "none"], sc)
    with Ledger.open(tmp_path, {"plan": plan.to_dict()}, resume=False) as led:
        run_realtime(sc, policies, plan, led, "netns", plant_options={"prefix": "vd", "telemetry": "kernel"})
        lines = list(led.lines)
    assert len(lines) == 4
    for ln in lines:
        v = ln["validity"]
        # the probe: a saturated 20 Mbit/s bottleneck serves about B_max (0.5: a busy machine's floor)
        assert 0.5 < v["probe_service"] < 1.1 and v["probe_s"] == pytest.approx(1.0, abs=0.3)
        assert v["cpu_pressure_source"] in ("psi", "stat") and 0.0 <= v["cpu_pressure"] <= 1.0
        assert v["stage_frames"] > 0 and 0.0 <= v["stage_late_mean_s"] < 0.05
        assert math.isclose(v["measured_s"], ln["wall_s"], rel_tol=0.2)
    _, bad, _ = select_runs(lines, plan.validity)
    busy = {ln["trial"] for ln in lines if plan.validity.breaks(ln["validity"])}
    assert bad.get("mrae", set()) == busy  # whatever the machine was doing, judged per trial


def test_a_floor_unit_probes_from_the_idle_probe_host_not_the_dtn(tmp_path) -> None:
    """No campus host (a floor run): the probe's sender is the probe host on the campus path, so it
    measures the machine (about B_max) and not the DTN's 100 ms ramp (0.29 x B_max before it existed)."""
    from scidmz.commands.build import build_policies
    from scidmz.evaluation.leaderboard.ledger import Ledger
    from scidmz.evaluation.leaderboard.plan import make_plan
    from scidmz.evaluation.leaderboard.trialunits import run_realtime

    sc = load_scenario("testbed").replace(campus={"hosts": 0}, link={"capacity": 20e6, "buffer_bdp": 1.0},
                                          dtn={"streams": 2}, duration=10.0)
    plan = make_plan("netns", 2, 2, ("mrae",), overrides={"duration": 4.0, "target_hold": 2.0, "max_reruns": 0})
    policies, _ = build_policies(["pacing"], sc)
    with Ledger.open(tmp_path, {"plan": plan.to_dict()}, resume=False) as led:
        run_realtime(sc, policies, plan, led, "netns", plant_options={"prefix": "vf", "telemetry": "kernel"})
        lines = list(led.lines)
    assert len(lines) == 2
    for ln in lines:
        v = ln["validity"]
        assert v["probe_host"] == "sp" and 0.5 < v["probe_service"] < 1.1, v
