"""Starvation verdicts of the netns testbed, from synthetic counters (no root needed)."""

from __future__ import annotations

import json

import pytest

from scidmz.plant.netns.manage import starvation as S


def _monitor(stage: dict) -> S.StarvationMonitor:
    return S.StarvationMonitor(100e6, 1.0, 0.010, stage_stats=lambda: dict(stage))


def test_a_clean_period_is_not_starved_and_carries_its_evidence():
    stage = {"tx": 1000, "late_sum_s": 0.0, "kernel_drops": 0, "tx_errors": 0}
    m = _monitor(stage)
    stage.update(tx=5000, late_sum_s=0.05)  # 12.5 us late per frame
    starved, ev = m.check(step_late=0.001, bottleneck={"sent_bytes": 12.5e6, "backlog_min": 50e3, "interval": 1.0},
                          senders={"dtn_busy": 1.0, "dtn_rwnd_limited": 0.0})
    assert not starved, ev["reasons"]
    assert ev["stage_frames"] == 4000
    assert ev["stage_late_mean_s"] == pytest.approx(12.5e-6)
    for key in ("cpu_pressure", "load1", "softnet_dropped", "bottleneck_service"):
        assert key in ev
    assert m.starved_periods == 0 and m.periods == 1


@pytest.mark.parametrize("what, kw, stage_after, needle", [
    ("stage late", {}, {"tx": 2000, "late_sum_s": 2.0}, "delay stage"),  # 2 ms per frame > 1 ms
    ("stage lost", {}, {"tx": 2000, "late_sum_s": 0.0, "kernel_drops": 3}, "lost 3"),
    ("app-limited", {"senders": {"dtn_busy": 0.5, "dtn_rwnd_limited": 0.0}}, None, "DTN senders"),
    ("rings", {"tap_drops": 12}, None, "capture rings"),
    ("late step", {"step_late": 0.3}, None, "control step"),
])
def test_each_symptom_alone_marks_the_period_starved(what, kw, stage_after, needle):
    stage = {"tx": 1000, "late_sum_s": 0.0, "kernel_drops": 0, "tx_errors": 0}
    m = _monitor(stage)
    if stage_after:
        stage.update(stage_after)
    starved, ev = m.check(**kw)
    assert starved, what
    assert any(needle in r for r in ev["reasons"]), ev["reasons"]
    assert len(ev["symptoms"]) == len(ev["reasons"]) and set(ev["symptoms"]) <= set(S.SYMPTOMS)
    assert m.starved_periods == 1


def test_a_busy_bottleneck_that_went_idle_is_not_a_service_failure():
    m = _monitor({})
    starved, ev = m.check(bottleneck={"sent_bytes": 5e6, "backlog_min": 0.0, "interval": 1.0})
    assert not starved, ev["reasons"]  # half-used link with an empty queue: TCP's choice, not the CPU's


def test_stage_stats_file_reader(tmp_path):
    p = tmp_path / "delaystage.json"
    assert S.read_stage_stats(p) == {}
    p.write_text(json.dumps({"tx": 3}))
    assert S.read_stage_stats(p) == {"tx": 3}


def _psi_monitor(monkeypatch, pressure: float) -> S.StarvationMonitor:
    """A monitor whose next check sees ``pressure`` (share of the period a task waited for a CPU)."""
    clock = iter([100.0, 101.0])
    psi_us = iter([0.0, pressure * 1e6])
    monkeypatch.setattr(S.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(S, "_psi_some_us", lambda: next(psi_us))
    return _monitor({})


def test_a_backlogged_bottleneck_underserved_on_a_busy_machine_is_starved(monkeypatch):
    m = _psi_monitor(monkeypatch, 0.8)
    starved, ev = m.check(bottleneck={"sent_bytes": 10e6, "backlog_min": 60e3, "interval": 1.0})
    assert ev["cpu_pressure"] == pytest.approx(0.8)
    assert starved and any("bottleneck" in r and "CPU pressure 80%" in r for r in ev["reasons"]), ev["reasons"]


def test_the_same_shortfall_on_a_quiet_machine_is_tcps_not_the_machines(monkeypatch):
    # BBR v1 at 15 % loss on a quiet machine (reports/fidelity): served 89 % with a backlog in every
    # 0.1 s sample, CPU pressure 9 %, delay stage 0.04 ms late per frame
    m = _psi_monitor(monkeypatch, 0.09)
    starved, ev = m.check(bottleneck={"sent_bytes": 0.89 * 12.5e6, "backlog_min": 7570.0, "interval": 1.0})
    assert not starved, ev["reasons"]
    assert ev["bottleneck_service"] == pytest.approx(0.89)
    assert ev["bottleneck_shortfall_quiet"] is True  # kept as evidence


def test_without_pressure_readings_a_shortfall_is_no_verdict(monkeypatch):
    monkeypatch.setattr(S, "_psi_some_us", lambda: None)
    m = _monitor({})
    starved, ev = m.check(bottleneck={"sent_bytes": 10e6, "backlog_min": 60e3, "interval": 1.0})
    assert not starved and "cpu_pressure" not in ev


def test_receive_window_limits_are_the_machines_only_when_it_was_busy(monkeypatch):
    # a kernel BBR v1 DTN outran receive autotuning on a quiet machine (19 % of a period)
    quiet = _psi_monitor(monkeypatch, 0.2)
    starved, ev = quiet.check(senders={"dtn_busy": 1.0, "dtn_rwnd_limited": 0.19})
    assert not starved and ev["dtn_rwnd_limited_quiet"], ev["reasons"]
    busy = _psi_monitor(monkeypatch, 0.7)
    starved, ev = busy.check(senders={"dtn_busy": 1.0, "dtn_rwnd_limited": 0.19})
    assert starved and ev["symptoms"] == ["rwnd"], ev["reasons"]
    assert "receivers" in ev["reasons"][0] and "CPU pressure 70%" in ev["reasons"][0]


def test_symptoms_pack_into_a_trace_column_and_count_per_trial():
    import pandas as pd

    from scidmz.evaluation.leaderboard.trialunits import _starved_by

    masks = [S.symptom_mask(c) for c in ([], ["stage_late"], ["stage_late", "rwnd"], ["senders"], ["rwnd"])]
    assert masks[0] == 0 and len(set(masks)) == 5
    df = pd.DataFrame({"starved": [m > 0 for m in masks], "starved_by": masks})
    assert _starved_by(df) == {"stage_late": 2, "rwnd": 2, "senders": 1}
    assert _starved_by(pd.DataFrame({"starved": [False]})) == {}
