"""disciplines/ffs/p4/ffs.p4 compiled with p4c and run on BMv2 against the numba core."""

import math
import tempfile
from pathlib import Path

import numpy as np
import pytest

from scidmz.disciplines import ffs
from scidmz.disciplines.ffs.p4 import gen_tables
from scidmz.disciplines.ffs.p4check import compile_ffs, run_bmv2_ffs
from scidmz.disciplines.p4check import available

pytestmark = pytest.mark.skipif(not available(), reason="P4 toolchain not unpacked (scripts/install_p4tc.sh)")

MBPS = 1e6


def test_generated_tables_current() -> None:
    assert gen_tables.current(), "ffs/p4/include/ffs_tables.p4 is stale: python -m scidmz.disciplines.ffs.p4.gen_tables"


def _table_ii_sequence(seconds: float, seed: int) -> dict[str, np.ndarray]:
    """Table II at 1/1000 of its rates: (rate, FFS label) (3, 6), (4, 1) on i1 and (16, 8) on i2, Mbit/s."""
    rng = np.random.default_rng(seed)
    rates = np.array([3.0, 4.0, 16.0]) * MBPS
    fair = np.array([6.0, 1.0, 8.0]) * MBPS
    parts = [np.sort(rng.uniform(0, seconds, rng.poisson(r * seconds / 12000))) for r in rates]
    t = np.concatenate(parts)
    sid = np.concatenate([np.full(p.size, k) for k, p in enumerate(parts)])
    o = np.argsort(t, kind="stable")
    t_us = np.floor(t[o] * 1e6)
    t_us -= t_us[0]
    sid = sid[o]
    # labels travel as log2(bit/s) in Q8 (Appendix D's log form); the core gets exactly those values
    r_q8 = np.round(np.log2(rates[sid]) * 256).astype(np.int64)
    f_q8 = np.round(np.log2(fair[sid]) * 256).astype(np.int64)
    return {"t_us": t_us, "sid": sid, "ing": np.array([0, 0, 1])[sid], "r_q8": r_q8, "f_q8": f_q8,
            "u16": rng.integers(0, 65536, t_us.size)}


def _core(seq: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    cfg = ffs.FFSConfig(capacity_bps=15 * MBPS, matrix_col_bps=(7 * MBPS, 8 * MBPS))
    st, ing = cfg.new_state(0.0)
    p, m = cfg.params(), cfg.matrix
    n = seq["t_us"].size
    out = {"verdict": np.zeros(n, bool), "g_log": np.zeros(n), "tau_log": np.zeros(n), "f_log": np.zeros(n)}
    for k in range(n):
        ok, _r, f2, _ri, g = ffs.ffs_packet(st, ing, p, m, int(seq["ing"][k]), seq["t_us"][k] / 1e6, 1500.0,
                                            2.0 ** (seq["r_q8"][k] / 256), 2.0 ** (seq["f_q8"][k] / 256), math.nan,
                                            seq["u16"][k] / 65536)
        out["verdict"][k] = ok
        out["g_log"][k] = math.log2(g)
        out["tau_log"][k] = math.log2(st[ffs.S_TAU])
        out["f_log"][k] = math.log2(f2)
    return out


def test_bmv2_ffs_matches_numba_core() -> None:
    """Same packets, labels and random numbers: tau, gamma and the normalised label within the tables'
    resolution; verdicts equal wherever u is not within the fixed-point error of gamma."""
    seq = _table_ii_sequence(1.0, 3)
    want = _core(seq)
    with tempfile.TemporaryDirectory() as d:
        w = Path(d)
        got = run_bmv2_ffs(compile_ffs(w), seq["t_us"], seq["ing"], np.full(seq["t_us"].size, 1500),
                           seq["r_q8"], seq["f_q8"], seq["u16"], w)
    late = seq["t_us"] > 0.2e6  # after the estimators' start-up
    # Q8 logs (1/256), an 8-bit mantissa and geometric decay ranges: measured max errors 0.028 (tau),
    # 0.050 (f), 0.043 (gamma) in log2, i.e. within 3.5 %
    assert np.abs(got["tau_log"] - want["tau_log"])[late].max() < 0.05
    assert np.abs(got["f_log"] - want["f_log"])[late].max() < 0.07
    assert np.abs(got["g_log"] - want["g_log"])[late].max() < 0.07
    gamma = 2.0 ** want["g_log"]
    far = np.abs(seq["u16"] / 65536 - gamma) > 0.06 * gamma
    assert far.mean() > 0.85
    assert np.array_equal(got["verdict"][far], want["verdict"][far])
    assert (got["verdict"] == want["verdict"]).mean() > 0.97
    # and the switch reproduces Table II: s2 is cut to 1/3 of its rate, s1 passes, s3 gets 2/3
    for s, share in ((0, 1.0), (1, 1 / 3), (2, 2 / 3)):
        sel = late & (seq["sid"] == s)
        assert got["verdict"][sel].mean() == pytest.approx(share, abs=0.08)
