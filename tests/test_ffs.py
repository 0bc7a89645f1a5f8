"""FFS: Table II exactly, the packet core against it, Algorithms 2-4, bad input."""

import math
import pathlib

import numpy as np
import pytest

from scidmz.disciplines.base import DisciplineConfigError
from scidmz.disciplines.ffs import (
    FFSConfig,
    ffs_compact_packet,
    ffs_packet,
    log_decode,
    log_encode,
    run_sequence,
)
from scidmz.disciplines.ffs.waterfill import ffs_allocation, hwfq_allocation, weighted_maxmin

G = 1e9
# Table II: 15 Gbit/s egress; (rate, fair share): s1 (3, 6), s2 (4, 1) on i1, s3 (16, 8) on i2.
RATES = np.array([3 * G, 4 * G, 16 * G])
FAIR = np.array([6 * G, 1 * G, 8 * G])
INGRESS = np.array([0, 0, 1])
M = np.array([7 * G, 8 * G])


def test_table2_ffs_exact() -> None:
    alloc, tau = ffs_allocation(RATES, FAIR, INGRESS, M, 15 * G)
    assert tau == pytest.approx(4 / 3, rel=1e-12)
    np.testing.assert_allclose(alloc / G, [3, 4 / 3, 32 / 3], rtol=1e-12)
    assert alloc.sum() == pytest.approx(15 * G, rel=1e-12)


def test_table2_hwfq_exact() -> None:
    alloc = hwfq_allocation(RATES, FAIR, INGRESS, M, 15 * G)
    np.testing.assert_allclose(alloc / G, [3, 4, 8], rtol=1e-12)


def test_waterfill_uncongested_is_identity() -> None:
    alloc, tau = weighted_maxmin(np.array([1.0, 2.0]), np.array([1.0, 1.0]), 10.0)
    assert math.isinf(tau)
    np.testing.assert_array_equal(alloc, [1.0, 2.0])


def _table2_packets(duration: float, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    size = 1500.0
    parts = []
    for s in range(3):
        n = rng.poisson(RATES[s] * duration / (8 * size))
        parts.append((np.sort(rng.uniform(0, duration, n)), np.full(n, s)))
    ts = np.concatenate([p[0] for p in parts])
    sid = np.concatenate([p[1] for p in parts])
    o = np.argsort(ts, kind="stable")
    ts, sid = ts[o], sid[o]
    return {"ts": ts, "sid": sid, "ing": INGRESS[sid], "r": RATES[sid], "f": FAIR[sid], "size": np.full(ts.shape, size)}


def test_table2_packet_core_converges() -> None:
    """Algorithm 1 + Appendix A on Poisson packets at the paper's rates reach Table II."""
    duration = 0.3
    pk = _table2_packets(duration, seed=11)
    cfg = FFSConfig(capacity_bps=15 * G, matrix_col_bps=(7 * G, 8 * G))
    out = run_sequence(cfg, pk["ing"], pk["ts"], pk["size"], pk["r"], pk["f"], seed=5)
    late = pk["ts"] > 0.15
    got = [out["accept"][late & (pk["sid"] == s)].sum() * 1500 * 8 / (duration - 0.15) / G for s in range(3)]
    np.testing.assert_allclose(got, [3, 4 / 3, 32 / 3], rtol=0.03)
    assert np.mean(out["tau"][late]) == pytest.approx(4 / 3, rel=0.02)
    # Algorithm 1 line 1 left the normalised labels at Table II's fair shares.
    np.testing.assert_allclose(out["f"][late], pk["f"][late], rtol=0.05)


def test_algorithm2_congested_and_not() -> None:
    cfg = FFSConfig(capacity_bps=10e6, matrix_col_bps=(5e6, 5e6))
    st, ing = cfg.new_state()
    p, m = cfg.params(), cfg.matrix
    # One 1500 B packet after 1 s: R_* tiny -> uncongested, gamma = 1, RI = min(RI, C, max(r C/R_*, f)).
    ok, r2, f2, ri2, g = ffs_packet(st, ing, p, m, 0, 1.0, 1500.0, 1e6, 1e6, math.inf, 0.999)
    assert ok and g == 1.0 and r2 == 1e6
    # Line 1 with the one-packet estimate F = (1 - e^{-1 s/10 ms}) * 12000 bit / 1 s (weight f/r = 1).
    f_est = -math.expm1(-1.0 / 0.01) * 12000.0
    assert ing[0, 1] == pytest.approx(f_est, rel=1e-12)
    assert f2 == pytest.approx(1e6 / f_est * 5e6, rel=1e-12)
    assert ri2 == pytest.approx(10e6)  # capped at C
    # Force congestion: R_* above C, tau = 1 -> gamma = f/r, RI = f * tau.
    st[0] = 20e6
    st[3] = 1.0
    st[4] = 1.0  # no tau update this packet
    ing[0, 1] = 1e6 * 8 / 0.01  # F estimate
    ok, r2, f2, ri2, g = ffs_packet(st, ing, p, m, 0, 1.0, 1500.0, 8e6, 1e6, 9e6, 0.0)
    assert g == pytest.approx(f2 / 8e6)
    assert r2 == pytest.approx(8e6 * g)
    assert ri2 == pytest.approx(min(9e6, f2 * 1.0))


def test_compact_variant_matches_full_gamma() -> None:
    cfg = FFSConfig(capacity_bps=10e6, matrix_col_bps=(5e6, 5e6))
    p, m = cfg.params(), cfg.matrix
    a_st, a_ing = cfg.new_state()
    b_st, b_ing = cfg.new_state()
    rng = np.random.default_rng(0)
    t = 0.0
    for _ in range(2000):
        t += rng.exponential(1e-4)
        i = int(rng.integers(2))
        r, f = rng.uniform(1e6, 9e6), rng.uniform(1e6, 9e6)
        u = rng.random()
        ok1, r2, f2, _ri, g1 = ffs_packet(a_st, a_ing, p, m, i, t, 1500.0, r, f, math.nan, u)
        ok2, rf2, _rri, g2 = ffs_compact_packet(b_st, b_ing, p, m, i, t, 1500.0, r / f, 1.0, u)
        assert ok1 == ok2 and g1 == pytest.approx(g2, rel=1e-9)
        assert rf2 == pytest.approx(r2 / f2, rel=1e-9)


def test_log_encoding_roundtrip() -> None:
    lo, hi, n = 1e-3, 1e3, 8
    step = (hi / lo) ** (1 / ((1 << n) - 1))
    for x in np.geomspace(lo, hi, 57):
        b = log_encode(x, lo, hi, n)
        assert 0 <= b <= 255
        y = log_decode(b, lo, hi, n)
        assert y <= x * (1 + 1e-12) and x / y < step * (1 + 1e-9)  # floor: never above, within one step
    assert log_encode(1e9, lo, hi, n) == 255 and log_encode(0.0 + 1e-9, lo, hi, n) == 0


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"capacity_bps": 15e9, "matrix_col_bps": (7e9, 7e9)}, "sums to"),
        ({"capacity_bps": 0.0, "matrix_col_bps": (1.0,)}, "capacity_bps"),
        ({"capacity_bps": 1e9, "matrix_col_bps": (1e9,), "estimator_s": 0.0}, "estimator_s"),
        ({"capacity_bps": 1e9, "matrix_col_bps": (1e9,), "tau_period_s": -1.0}, "tau_period_s"),
        ({"capacity_bps": 1e9, "matrix_col_bps": (math.nan,)}, "matrix_col_bps"),
    ],
)
def test_bad_config_one_line(kwargs: dict, needle: str) -> None:
    with pytest.raises(DisciplineConfigError) as e:
        FFSConfig(**kwargs)
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("bad", [0.0, math.nan, -1.0])
def test_bad_labels_one_line(bad: float) -> None:
    cfg = FFSConfig(capacity_bps=1e9, matrix_col_bps=(1e9,))
    ts = np.array([0.0, 0.1])
    with pytest.raises(DisciplineConfigError, match="label f") as e:
        run_sequence(cfg, np.zeros(2, int), ts, np.full(2, 1500.0), np.ones(2), np.array([1.0, bad]), seed=0)
    assert "\n" not in str(e.value)


def test_reproduce_ffs_cli_quick(tmp_path: pathlib.Path) -> None:
    import json
    import os
    import subprocess
    import sys

    out = tmp_path / "ffs"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.run([sys.executable, "-m", "scidmz.cli", "reproduce", "ffs", "--quick", "--out", str(out), "--json"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc["exact_tau"] == pytest.approx(4 / 3)
    assert doc["packet_core_tau"] == pytest.approx(4 / 3, rel=0.03)
    res = json.loads((out / "results.json").read_text())
    np.testing.assert_allclose(np.array(res["exact_ffs_bps"]) / G, [3, 4 / 3, 32 / 3], rtol=1e-12)
    assert "Table II" in (out / "report.md").read_text()
    # Table III on the fluid plant: FFS makes CCA pairs fairer than FIFO; FFS-C85 keeps the queue short
    t3 = doc["table3"]
    assert t3["ffs100"]["F"] > t3["fifo"]["F"] + 20
    assert t3["ffs85"]["L2"] == 100.0 and t3["fifo"]["L2"] < 50.0
    assert t3["ffs85"]["U"] < t3["ffs100"]["U"]
