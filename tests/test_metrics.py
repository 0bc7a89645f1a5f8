"""Metrics checked against numbers computed by hand."""

import numpy as np
import pytest

from scidmz.metrics import fct, iae, jain_index, mrae, reduction_pct, utilization


def test_mrae_by_hand():
    # |600-540|/600 = 0.1, |600-600|/600 = 0, |400-500|/400 = 0.25 -> mean 0.35/3
    assert mrae([600e6, 600e6, 400e6], [540e6, 600e6, 500e6]) == pytest.approx(0.35 / 3)


def test_mrae_skips_zero_targets_and_rejects_all_zero():
    assert mrae([0.0, 100.0], [50.0, 90.0]) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="zero"):
        mrae([0.0, 0.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="shapes differ"):
        mrae([1.0], [1.0, 2.0])


def test_iae_by_hand():
    # errors 60M, 0, 100M with T = 1 s -> 160 Mbit; with T = 0.5 s -> 80 Mbit
    tg, ms = [600e6, 600e6, 400e6], [540e6, 600e6, 500e6]
    assert iae(tg, ms) == pytest.approx(160e6)
    assert iae(tg, ms, period=0.5) == pytest.approx(80e6)


def test_utilization_by_hand():
    rho = utilization([600e6, 500e6], [300e6, 500e6], 1e9)
    np.testing.assert_allclose(rho, [0.9, 1.0])
    with pytest.raises(ValueError):
        utilization([1.0], [1.0], 0.0)


def test_fct_and_unfinished():
    out = fct([0.0, 1.0, 2.0], [100.0, 3.5, np.nan])
    np.testing.assert_allclose(out[:2], [100.0, 2.5])
    assert np.isnan(out[2])
    with pytest.raises(ValueError, match="before it starts"):
        fct([5.0], [4.0])


def test_jain_by_hand():
    assert jain_index([1, 1, 1, 1]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    # (1+2+3)^2 / (3 * (1+4+9)) = 36/42
    assert jain_index([1, 2, 3]) == pytest.approx(36 / 42)
    with pytest.raises(ValueError):
        jain_index([])


def test_reduction_pct():
    assert reduction_pct(173.94, 159.49) == pytest.approx(8.307, abs=1e-3)  # MLC Table 5, Cubic N_s=100
