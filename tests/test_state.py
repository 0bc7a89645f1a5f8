import numpy as np
import pytest

from scidmz.state import STATE_FIELDS, History, NetworkState, Trace


def test_network_state_vector_order():
    s = NetworkState(1.0, 6e8, 4e8, 0.1, 0.01, 0.002, 0.003, 108)
    v = s.as_vector()
    assert list(v) == [6e8, 4e8, 0.1, 0.01, 0.002, 0.003, 108]
    assert NetworkState.from_vector(1.0, v) == s
    assert STATE_FIELDS[0] == "rate_dtn" and STATE_FIELDS[-1] == "active_flows"
    with pytest.raises(ValueError):
        NetworkState.from_vector(0.0, [1, 2, 3])


def test_history_lags_and_growth():
    h = History(np.zeros((2, 7)), capacity_hint=1)
    assert len(h) == 0
    np.testing.assert_array_equal(h.last_y(1), np.zeros((2, 7)))
    np.testing.assert_array_equal(h.last_u(5.0), [5.0, 5.0])
    for k in range(5):
        h.append(np.array([k, 10 + k]), np.full((2, 7), k), np.array([1.0, 2.0]))
    assert len(h) == 5 and h.y.shape == (5, 2, 7)
    assert h.last_y(1)[0, 0] == 4 and h.last_y(2)[0, 0] == 3
    np.testing.assert_array_equal(h.last_u(0.0), [4, 14])
    np.testing.assert_array_equal(h.u[:, 1], [10, 11, 12, 13, 14])


def _trace(n=5):
    y = np.arange(n * 7, dtype=float).reshape(n, 7)
    return Trace.from_arrays(np.arange(1, n + 1), y, np.full(n, 3e8), np.full(n, 6e8),
                             extra={"dtn_bytes": np.ones(n)}, meta={"policy": "trivial", "seed": 3})


def test_trace_parquet_roundtrip(tmp_path):
    tr = _trace()
    (tmp_path / "sub").mkdir()  # missing parents are an error (fileio)
    path = tr.to_parquet(tmp_path / "sub" / "t.parquet")
    back = Trace.read_parquet(path)
    assert back.meta == {"policy": "trivial", "seed": 3, "format_version": 1, "scidmz_version": back.meta["scidmz_version"]}
    np.testing.assert_array_equal(back.y, tr.y)
    assert "dtn_bytes" in back.df.columns
    assert not list(tmp_path.joinpath("sub").glob("*.tmp"))


def test_trace_validation_errors(tmp_path):
    import pandas as pd

    with pytest.raises(ValueError, match="missing column"):
        Trace(pd.DataFrame({"t": [0.0]}))
    tr = _trace()
    tr.df.loc[2, "rtt_dtn"] = np.nan
    with pytest.raises(ValueError, match="'rtt_dtn' at row 2"):
        tr.validate()
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(ValueError, match="not a readable Parquet"):
        Trace.read_parquet(bad)
    with pytest.raises(FileNotFoundError):
        Trace.read_parquet(tmp_path / "missing.parquet")


def test_trace_concat_episode_column():
    both = Trace.concat([_trace(3), _trace(4)])
    assert len(both) == 7 and list(both.df["episode"]) == [0, 0, 0, 1, 1, 1, 1]
    assert both.meta["episodes"] == 2
