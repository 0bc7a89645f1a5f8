"""Identification (section 3.5): regressor alignment on a hand-made trace, dataset schema, excitation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scidmz.identification.excitation import identify, load_dataset, write_dataset
from scidmz.identification.regressors import FEATURE_NAMES, N_FEATURES, build_regressors
from scidmz.scenario import load_scenario
from scidmz.state import STATE_FIELDS, Trace


def _hand_trace(n: int, offset: float = 0.0) -> Trace:
    """Row k: every y column j holds 1000*j + k + offset, u holds 100 + k + offset."""
    k = np.arange(n, dtype=np.float64) + offset
    y = np.stack([1000.0 * j + k for j in range(7)], axis=1)
    return Trace.from_arrays(t=np.arange(1, n + 1.0), y=y, u=100.0 + k, target=np.zeros(n))


def test_regressor_alignment_on_hand_made_trace() -> None:
    X, target = build_regressors(_hand_trace(6))
    assert X.shape == (4, N_FEATURES) and len(FEATURE_NAMES) == 22
    for row, k in enumerate(range(2, 6)):  # samples k = 2..5
        for j in range(7):
            assert X[row, j] == 1000 * j + k  # y(t) = y_k
            assert X[row, 7 + j] == 1000 * j + k - 1  # y(t-T) = y_{k-1}
            assert X[row, 14 + j] == 1000 * j + k - 2  # y(t-2T) = y_{k-2}
        assert X[row, 21] == 100 + k - 1  # u(t-T) = u_{k-1}
        assert target[row] == 100 + k  # target u(t) = u_k
    assert FEATURE_NAMES[0] == "rate_dtn(t)" and FEATURE_NAMES[21] == "u(t-T)"


def test_regressors_never_cross_episode_boundaries() -> None:
    tr = Trace.concat([_hand_trace(5), _hand_trace(4, offset=50.0)])
    X, target = build_regressors(tr)
    assert X.shape[0] == (5 - 2) + (4 - 2)
    # The first sample of episode 2 uses only episode-2 rows (offset 50).
    np.testing.assert_array_equal(target, [102, 103, 104, 152, 153])
    assert X[3, 21] == 151 and X[3, 14] == 50
    # A list of traces is the same as their concatenation.
    X2, t2 = build_regressors([_hand_trace(5), _hand_trace(4, offset=50.0)])
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(target, t2)


def test_per_unit_scales_only_rates() -> None:
    X, target = build_regressors(_hand_trace(4))
    Xp, tp = build_regressors(_hand_trace(4), scenario_capacity=1000.0)
    rates = {f"{f}({lag})" for f in ("rate_dtn", "rate_campus") for lag in ("t", "t-T", "t-2T")} | {"u(t-T)"}
    for i, name in enumerate(FEATURE_NAMES):
        expect = X[:, i] / 1000.0 if name in rates else X[:, i]
        np.testing.assert_allclose(Xp[:, i], expect)
    np.testing.assert_allclose(tp, target / 1000.0)


def test_too_short_episodes_rejected() -> None:
    with pytest.raises(ValueError, match="shorter than 3"):
        build_regressors(_hand_trace(2))


# -- dataset schema -----------------------------------------------------------------------


def test_dataset_round_trip(tmp_path) -> None:
    tr = Trace.concat([_hand_trace(5), _hand_trace(5, 10.0)])
    tr.meta["scenario"] = {"name": "hand"}
    p = write_dataset(tr, tmp_path / "ds.parquet")
    back = load_dataset(p)
    pd.testing.assert_frame_equal(back.df, tr.df)
    assert back.meta["scenario"]["name"] == "hand"


def test_dataset_missing_column(tmp_path) -> None:
    tr = _hand_trace(5)
    df = tr.df.drop(columns=["rtt_dtn"])
    p = tmp_path / "bad.parquet"
    df.to_parquet(p)
    with pytest.raises(ValueError, match="rtt_dtn"):
        load_dataset(p)


def test_dataset_nan_named_and_nothing_written(tmp_path) -> None:
    tr = Trace.concat([_hand_trace(5)])
    tr.df.loc[2, "qdelay_campus"] = np.nan
    out = tmp_path / "ds.parquet"
    with pytest.raises(ValueError, match="qdelay_campus"):
        write_dataset(tr, out)
    assert not out.exists() and list(tmp_path.iterdir()) == []
    tr.to_parquet(out)  # written without the check, then refused on load
    with pytest.raises(ValueError, match="NaN/inf value\\(s\\) in column\\(s\\): qdelay_campus"):
        load_dataset(out)


# -- excitation on the real fluid plant -------------------------------------------------


def test_identify_small_cubic_batched_and_reproducible() -> None:
    sc = load_scenario("small-cubic")
    tr = identify(sc, 24.0, seed=3, batch=3)
    assert len(tr) == 24 and sorted(tr.df["episode"].unique()) == [0, 1, 2]
    df = tr.df
    assert all(c in df.columns for c in (*STATE_FIELDS, "u", "target", "t"))
    assert df["u"].between(sc.u_min, sc.u_max).all()
    assert df["u"].nunique() == 24  # a new uniform value every period
    assert (df["target"] == 0).all()
    assert np.isfinite(df[list(STATE_FIELDS)].to_numpy()).all()
    # The bottleneck never delivers more than B_max.
    assert ((df["rate_campus"] + df["rate_dtn"]) <= sc.capacity * 1.001).all()
    again = identify(sc, 24.0, seed=3, batch=3)
    pd.testing.assert_frame_equal(tr.df, again.df)
    X, y = build_regressors(tr)
    assert X.shape == (3 * (8 - 2), 22)


def test_identify_rejects_bad_duration() -> None:
    with pytest.raises(ValueError, match="duration"):
        identify(load_scenario("small-cubic"), 0.1)
