"""ABC: the meter and threshold against hand-computed values, behaviour, bad input."""

import math
import pathlib

import numpy as np
import pytest

from scidmz.disciplines.abc import ABCConfig, abc_packet, abc_run_fifo, new_state
from scidmz.disciplines.base import DisciplineConfigError

CFG = ABCConfig(capacity_bps=50e6)  # paper defaults: 3 s, 10 kbit/s, 0.3 s, 6/20/16, 24


def _activity(bytes_sum: float, t: float, mem: float = 3.0, rr: float = 10e3) -> float:
    return math.log2(8 * bytes_sum / (mem * (1 - math.exp(-t / mem))) / rr)


def test_meter_and_threshold_hand_computed() -> None:
    meter, avg = new_state(2)
    p = CFG.params()
    # Packet 1 (agg 0, 1500 B, t = 1 s, empty queue): A1 = log2(12000 / (3 (1 - e^-1/3)) / 1e4) = 0.4968;
    # no accepted history -> A_avg := A1 -> T_drop = 20; Q = 0 -> accept.
    a1 = _activity(1500, 1.0)
    assert a1 == pytest.approx(0.49681, abs=1e-4)
    assert abc_packet(meter, avg, p, 0, 1.0, 1500.0, 0.0)
    assert avg[0] / avg[1] == pytest.approx(a1, rel=1e-12)
    # Packet 2 (agg 0, t = 1.5 s): S = 1500 e^{-1/6} + 1500, Q = 20 -> accept iff 20 <= 20 - 16 (A2 - A1).
    s2 = 1500 * math.exp(-0.5 / 3) + 1500
    a2 = _activity(s2, 1.5)
    th2 = max(6, 20 - 16 * (a2 - a1))
    assert a2 > a1  # faster than before: threshold below Q_base
    assert th2 < 20
    assert not abc_packet(meter, avg, p, 0, 1.5, 1500.0, 20.0)
    assert avg[1] == 1.0  # a dropped packet does not enter A_avg
    # Packet 3 (agg 1, a fresh aggregate, t = 1.5 s, 40 B): far lighter -> threshold far above Q -> accept at Q = 20.
    a3 = _activity(40, 1.5)
    d = math.exp(-0.5 / 0.3)
    assert max(6, 20 - 16 * (a3 - a1)) > 23
    assert abc_packet(meter, avg, p, 1, 1.5, 40.0, 20.0)
    assert avg[0] / avg[1] == pytest.approx((d * a1 + a3) / (d * 1 + 1), rel=1e-12)
    # Full buffer always drops, whatever the activity.
    assert not abc_packet(meter, avg, p, 1, 1.6, 40.0, 24.0)


def test_threshold_floor_q_min() -> None:
    meter, avg = new_state(2)
    p = CFG.params()
    assert abc_packet(meter, avg, p, 1, 1.0, 40.0, 0.0)  # light history A_avg << 0
    # A heavy packet: 20 - 16 (A - A_avg) < 6 -> threshold Q_min = 6: accepted at Q = 6, dropped at 7.
    m2, a2 = meter.copy(), avg.copy()
    assert abc_packet(meter, avg, p, 0, 1.0, 1e6, 6.0)
    assert not abc_packet(m2, a2, p, 0, 1.0, 1e6, 7.0)


def test_meter_unbiased_for_constant_rate() -> None:
    meter, avg = new_state(1)
    p = CFG.params()
    for k in range(1, 200):  # 1 Mbit/s of 1500 B packets from the meter start on
        abc_packet(meter, avg, p, 0, k * 0.012, 1500.0, 0.0)
    s, t = meter[0, 0], 199 * 0.012
    assert 8 * s / (3 * -math.expm1(-t / 3)) == pytest.approx(1e6, rel=0.005)


def _cbr_pair(r0: float, r1: float, duration: float) -> tuple[float, float]:
    size = 1500.0
    a = np.arange(1e-4, duration, size * 8 / r0)
    b = np.arange(3.7e-4, duration, size * 8 / r1)
    ts = np.concatenate([a, b])
    agg = np.r_[np.zeros(a.size, np.int64), np.ones(b.size, np.int64)]
    o = np.argsort(ts, kind="stable")
    ts, agg = ts[o], agg[o]
    meter, avg = new_state(2)
    acc = np.zeros(ts.size, np.bool_)
    abc_run_fifo(meter, avg, CFG.params(), agg, ts, np.full(ts.size, size), 50e6, acc)
    late = ts > duration / 2
    return tuple(acc[late & (agg == k)].sum() * size * 8 / (duration / 2) for k in (0, 1))


def test_cbr_heavier_sender_falls_below_lighter() -> None:
    """Paper section 6.2.1: once client 0 sends more than client 1 (40 Mbit/s), it gets less."""
    g0, g1 = _cbr_pair(80e6, 40e6, 20.0)
    assert g0 < g1
    assert g0 + g1 == pytest.approx(50e6, rel=0.02)  # work-conserving at the 50 Mbit/s link
    g0, g1 = _cbr_pair(20e6, 40e6, 20.0)
    assert g0 == pytest.approx(20e6, rel=0.01)  # the lighter sender is untouched


@pytest.mark.parametrize(
    "field, value, needle",
    [
        ("memory_meter_s", 0.0, "memory_meter_s"),
        ("memory_avg_s", -0.3, "memory_avg_s"),
        ("ref_rate_bps", 0.0, "R_r"),
        ("q_min_pkts", 0.5, "q_min_pkts"),
        ("gamma_pkts", math.nan, "gamma_pkts"),
    ],
)
def test_bad_config_one_line(field: str, value: float, needle: str) -> None:
    with pytest.raises(DisciplineConfigError) as e:
        ABCConfig(capacity_bps=50e6, **{field: value})
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_reproduce_abc_cli_quick(tmp_path: pathlib.Path) -> None:
    """`scidmz reproduce abc --quick` (packet level): the paper's Fig. 4 pattern in the JSON results."""
    import json
    import os
    import subprocess
    import sys

    out = tmp_path / "abc"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.run([sys.executable, "-m", "scidmz.cli", "reproduce", "abc", "--quick", "--out", str(out), "--json"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    rows = {r["r0_bps"]: r for r in json.loads((out / "results.json").read_text())["rows"]}
    heavy = rows[80e6]
    assert heavy["abc_goodput0_bps"] < heavy["abc_goodput1_bps"]  # heavier sender falls below the lighter
    assert heavy["fifo_goodput0_bps"] > heavy["fifo_goodput1_bps"]  # drop-tail rewards it
    assert (out / "cbr_vs_cbr.png").stat().st_size > 0
    # Fig. 5 on the fluid plant: 4 TCP connections vs 1 -- proportional without ABC, ~25/25 with it
    res = json.loads((out / "results.json").read_text())
    four = {r["n_flows"]: r for r in res["fluid_tcp_rows"]}[4]
    assert four["fifo_goodput0_bps"] > 2.5 * four["fifo_goodput1_bps"]
    assert four["abc_goodput0_bps"] == pytest.approx(four["abc_goodput1_bps"], rel=0.15)
    # Fig. 6: a CBR above the link starves TCP without ABC, not with it
    cbr = {r["r0_bps"]: r for r in res["fluid_cbr_tcp_rows"]}[60e6]
    assert cbr["fifo_goodput1_bps"] < 5e6 < 20e6 < cbr["abc_goodput1_bps"]
    assert (out / "tcp_flows.png").stat().st_size > 0 and (out / "cbr_vs_tcp.png").stat().st_size > 0
