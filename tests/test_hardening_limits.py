"""Every count and size has a documented upper bound, checked before allocation.

The bounds are one table (``scidmz.limits.BOUNDS``); the CLI declares which option is which bound
(``guard.counts.COUNTS``, and ``--seed`` everywhere). For every declared count, values just outside
its bound (and far outside: 10^9, the probe that reached 15 GB) are refused in one line naming
the option, in milliseconds, with nothing written; the library's own planners refuse the same
values; the scenario loader refuses oversized tables and deep nesting while reading;
docs/safety.md lists every bound.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from test_hardening_paths import base_argv
from test_hardening_props import (
    _examples,
    assert_refused_cleanly,
    run_inprocess,
    run_subprocess,
    snapshot,
)

from scidmz.guard.counts import COMMON_COUNTS, COUNTS
from scidmz.limits import BOUNDS, MAX_DEPTH, MAX_SCENARIO_BYTES, check, check_depth, depth

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SEEDED = ["simulate", "identify", "train", "tune", "evaluate", "reproduce", "control run"]
DECLARED = sorted({(cmd, attr, key) for cmd, opts in COUNTS.items() for attr, key in opts.items()}
                  | {(cmd, attr, key) for cmd in SEEDED for attr, key in COMMON_COUNTS.items()})


def _outside(key: str) -> st.SearchStrategy[int]:
    b = BOUNDS[key]
    hi, lo = int(b.hi), int(b.lo)
    below = st.integers(min_value=-(10**6), max_value=lo - 1)
    if b.zero_ok:
        below = below.filter(lambda v: v != 0)
    far = [st.just(10**9)] if 10**9 > hi else [st.just(2**64), st.just(10**30)]
    return st.one_of(st.just(hi + 1), st.just(lo - 1) if not (b.zero_ok and lo - 1 == 0) else st.just(-1),
                     st.integers(min_value=hi + 1, max_value=hi + 10**9), below, *far)


def test_docs_state_every_bound() -> None:
    """docs/safety.md names every bound with its upper value (the table is what users read)."""
    doc = (ROOT / "docs" / "safety.md").read_text()
    for key, b in BOUNDS.items():
        row = next((ln for ln in doc.splitlines() if ln.startswith("|") and f"`{key}`" in ln), None)
        assert row is not None, f"docs/safety.md has no row for the bound `{key}`"
        hi = f"{int(b.hi):,}" if float(b.hi).is_integer() else f"{b.hi:g}"
        assert hi in row or f"{b.hi:g}" in row or b.describe() in row, (key, row)


def test_every_bound_accepts_its_limits_and_refuses_one_past() -> None:
    for key, b in BOUNDS.items():
        assert check(key, int(b.hi)) == int(b.hi) and check(key, int(b.lo)) == int(b.lo)
        for bad in (int(b.hi) + 1, int(b.lo) - 1):
            if b.zero_ok and bad == 0:
                continue
            with pytest.raises(ValueError, match=re.escape(f"--x must be {b.describe()}")):
                check(key, bad, "--x")
        for bad in (float("nan"), float("inf"), True, "3", None):
            with pytest.raises(ValueError, match="--x"):
                check(key, bad, "--x")


@pytest.mark.parametrize(("cmd", "attr", "key"), DECLARED, ids=lambda x: str(x))
@_examples(4)
@given(data=st.data())
def test_every_declared_count_is_bounded_at_the_cli(tmp_path: Path, cmd: str, attr: str, key: str,
                                                    data: st.DataObject) -> None:
    value = data.draw(_outside(key), label=f"--{attr}")
    argv = base_argv(cmd, tmp_path) if cmd != "reproduce" else ["reproduce", "mlc", "--quick", "--out",
                                                                   str(tmp_path / "rep")]
    argv = [*argv, "--" + attr.replace("_", "-"), str(value)]
    before = snapshot(tmp_path)
    t0 = time.monotonic()
    rc, out, err = run_inprocess(argv, tmp_path)
    assert_refused_cleanly(argv, rc, err)
    assert rc == 2 and ("--" + attr.replace("_", "-")) in err, (argv, err)
    assert time.monotonic() - t0 < 20, argv
    assert snapshot(tmp_path) == before


def test_huge_trials_are_refused_in_milliseconds_not_gigabytes(tmp_path: Path) -> None:
    """The probe: ``--trials 1000000000`` reached 15.4 GB RSS in 30 s. Under RLIMIT_AS = 4 GiB."""
    argv = [*base_argv("evaluate", tmp_path), "--trials", "1000000000"]
    rc, out, err = run_subprocess(argv, tmp_path, timeout=60)
    assert_refused_cleanly(argv, rc, err)
    assert rc == 2 and "--trials" in err


def test_library_planners_refuse_the_same_counts() -> None:
    """Callers that are not the CLI (reproduce, notebooks) meet the same bounds."""
    from scidmz.evaluation.mlc.plan import ExperimentPlan
    from scidmz.identification.excitation import check_identification
    from scidmz.models.train import check_training
    from scidmz.plant.base import make_plant
    from scidmz.scenario import load_scenario
    from scidmz.tuning.run import TuneSettings, plan_tune

    sc = load_scenario("small-cubic")
    with pytest.raises(ValueError, match="trials"):
        ExperimentPlan(trials=10_001)
    with pytest.raises(ValueError, match="N_s"):
        ExperimentPlan(ns_values=(1, 100_001))
    with pytest.raises(ValueError, match="population"):
        plan_tune(sc, TuneSettings(population=10_001))
    with pytest.raises(ValueError, match="workers"):
        plan_tune(sc, TuneSettings(workers=-1))
    with pytest.raises(ValueError, match="3 periods"):
        plan_tune(sc, TuneSettings(episode=2))
    with pytest.raises(ValueError, match="epochs"):
        check_training(0, 0)
    with pytest.raises(ValueError, match="folds"):
        check_training(1, 1)
    with pytest.raises(ValueError, match="at least 20"):
        check_training(1, 0, rows=3)
    with pytest.raises(ValueError, match="periods"):
        check_identification(sc, 1e12, 1)
    with pytest.raises(ValueError, match="batch"):
        check_identification(sc, 100, 5000)
    big = load_scenario("paper-cubic")
    with pytest.raises(ValueError, match="flows in one batched plant"):
        make_plant("fluid", big, batch=100_000)


# -- the scenario loader: sizes and nesting while reading -------------------------------------------


def _scenario_file(d: Path, text: str) -> Path:
    p = d / "s.toml"
    p.write_text(text)
    return p


FLOW = '[[flows]]\nname = "f"\ncount = 1\n'


@pytest.mark.parametrize("case", ["too_many_tables", "inline_tables", "schedule", "deep_array", "deep_table",
                                  "too_big"])
def test_scenario_loader_refuses_oversized_and_deep_documents_while_reading(tmp_path: Path, case: str) -> None:
    n = int(BOUNDS["flow_tables"].hi) + 1
    text = {
        "too_many_tables": 'name = "big"\n' + FLOW * n,
        "inline_tables": 'name = "big"\nflows = [' + ", ".join(['{name = "f"}'] * n) + "]\n",
        "schedule": 'name = "s"\n[[flows]]\nrate = "1M"\nschedule = ['
                    + ", ".join(f'["{i}s", "1M"]' for i in range(int(BOUNDS["schedule"].hi) + 1)) + "]\n",
        "deep_array": "a = " + "[" * 5000 + "]" * 5000 + "\n",
        "deep_table": "a = " + "{b = " * (MAX_DEPTH + 2) + "1" + "}" * (MAX_DEPTH + 2) + "\n",
        "too_big": "# " + "x" * MAX_SCENARIO_BYTES + "\n",
    }[case]
    p = _scenario_file(tmp_path, text)
    t0 = time.monotonic()
    rc, out, err = run_subprocess(["scenarios", str(p)], tmp_path, timeout=60)
    assert_refused_cleanly(case, rc, err)
    assert rc == 2 and str(p) in err, err
    assert time.monotonic() - t0 < 30


def test_set_overrides_meet_the_same_table_bounds() -> None:
    from scidmz.scenario import Scenario, load_scenario

    d = load_scenario("testbed").to_dict()
    d["flows"] = [{"name": "f"}] * (int(BOUNDS["flow_tables"].hi) + 1)
    with pytest.raises(ValueError, match="flows"):
        Scenario.from_dict(d)


# -- nesting depth of every JSON input -------------------------------------------------------------------


@_examples(10)
@given(levels=st.integers(min_value=MAX_DEPTH + 1, max_value=200_000), kind=st.sampled_from(["[", "{"]))
def test_deep_json_is_one_line_naming_the_file(tmp_path: Path, levels: int, kind: str) -> None:
    """``maximum recursion depth exceeded`` with exit 1 and no file name, before (results.json, gains,
    meta.json): now exit 2 naming the file."""
    from scidmz.fileio import read_json_input

    body = ('{"a":' * levels + "1" + "}" * levels) if kind == "{" else ("[" * levels + "]" * levels)
    p = tmp_path / "deep.json"
    p.write_text(body)
    with pytest.raises(ValueError) as ei:
        read_json_input(p, "results file")
    assert str(p) in str(ei.value) and "\n" not in str(ei.value)


@pytest.mark.parametrize("where", ["gains", "results", "parquet_meta", "model_meta"])
def test_deep_documents_through_the_cli(tmp_path: Path, where: str) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    if where == "gains":
        g = tmp_path / "g.json"
        g.write_text(deep)
        argv = ["simulate", "small-cubic", "--policy", "mlc", "--model", str(ROOT / "src/scidmz/datasets/models/testbed-cubic"),
                "--gains", str(g), "--duration", "2"]
    elif where == "results":
        d = tmp_path / "rep"
        d.mkdir()
        (d / "results.json").write_text(deep)
        argv = ["reproduce", "mlc", "--render-only", "--out", str(d)]
    elif where == "model_meta":
        import shutil

        m = tmp_path / "m"
        shutil.copytree(ROOT / "src/scidmz/datasets/models/testbed-cubic", m)
        (m / "meta.json").write_text(deep)
        argv = ["simulate", "small-cubic", "--policy", "mlc", "--model", str(m), "--gains", str(m / "gains.json"),
                "--duration", "2"]
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        t = pq.read_table(ROOT / "src/scidmz/datasets/small-cubic-400s.parquet")
        for key in (b"scidmz", b"pandas"):
            bad = t.replace_schema_metadata({**t.schema.metadata, key: deep.encode()})
            pq.write_table(bad, tmp_path / f"{key.decode()}.parquet")
        del pa
        argv = ["train", str(tmp_path / "pandas.parquet"), "--out", str(tmp_path / "model")]
    before = snapshot(tmp_path)
    rc, out, err = run_subprocess(argv, tmp_path, timeout=90)
    assert_refused_cleanly(argv, rc, err)
    assert rc == 2 and ("nested" in err), err
    assert "recursion" not in err
    assert snapshot(tmp_path) == before
    if where == "parquet_meta":
        rc, out, err = run_subprocess(["train", str(tmp_path / "scidmz.parquet"), "--out", str(tmp_path / "m2")],
                                      tmp_path, timeout=90)
        assert rc == 2 and "nested" in err, err


def test_depth_helper_is_iterative() -> None:
    doc: list = []
    cur = doc
    for _ in range(100_000):  # deeper than Python's recursion limit
        nxt: list = []
        cur.append(nxt)
        cur = nxt
    assert depth(doc) == MAX_DEPTH + 1  # counting stops past the limit
    with pytest.raises(ValueError, match="nested deeper"):
        check_depth(doc, "x")
    assert check_depth(json.loads('{"a": [1, {"b": 2}]}'), "x")
