"""disciplines/abc/p4/abc.p4 compiled with p4c and run on BMv2 against the numba core."""

import tempfile
from pathlib import Path

import numpy as np
import pytest

from scidmz.disciplines import abc
from scidmz.disciplines.abc.p4 import gen_tables
from scidmz.disciplines.abc.p4check import compile_abc, run_bmv2
from scidmz.disciplines.p4check import available

pytestmark = pytest.mark.skipif(not available(), reason="P4 toolchain not unpacked (scripts/install_p4tc.sh)")


def test_generated_tables_current() -> None:
    assert gen_tables.current(), "abc/p4/include/abc_tables.p4 is stale: python -m scidmz.disciplines.abc.p4.gen_tables"


def test_bmv2_matches_numba_core() -> None:
    """Same packets, same queue trace: activities within the tables' resolution, verdicts equal
    wherever the queue is more than one packet away from the float threshold."""
    rng = np.random.default_rng(2)
    duration = 1.0
    parts = [np.sort(rng.uniform(0, duration, rng.poisson(r * duration / 12000))) for r in (30e6, 50e6)]
    ts = np.concatenate(parts)
    agg = np.concatenate([np.full(p.size, k) for k, p in enumerate(parts)])
    o = np.argsort(ts, kind="stable")
    ts_us = np.floor(ts[o] * 1e6)
    agg = agg[o]
    ts = ts_us / 1e6
    q = rng.integers(0, 25, ts.size).astype(float)  # uncorrelated with the threshold: a fair test
    p = abc.ABCConfig(capacity_bps=50e6).params()
    meter, avg = abc.new_state(2)
    want = np.zeros(ts.size, np.bool_)
    act = np.zeros(ts.size)
    th = np.zeros(ts.size)
    for k in range(ts.size):
        probe = meter.copy()
        act[k] = abc.meter_activity(probe, p, int(agg[k]), ts[k], 1500.0)
        a_avg = avg[0] / avg[1] if avg[1] > 0 else act[k]
        th[k] = max(6.0, 20.0 - 16.0 * (act[k] - a_avg))
        want[k] = abc.abc_packet(meter, avg, p, int(agg[k]), ts[k], 1500.0, q[k])
    with tempfile.TemporaryDirectory() as d:
        w = Path(d)
        got_act, got = run_bmv2(compile_abc(w), ts_us, agg, np.full(ts.size, 1500), q, w)
    assert np.abs(got_act - act).max() < 0.08  # Q8 log tables, geometric range tables
    far = (np.abs(q - th) > 1.0) | (q >= 24)
    assert far.mean() > 0.8
    assert np.array_equal(got[far], want[far])
    assert (got == want).mean() > 0.97
