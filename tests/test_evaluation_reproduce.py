"""`scidmz reproduce mlc --quick --json` end to end in a subprocess, as CI and a user run it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_reproduce_quick_json(tmp_path: Path) -> None:
    out = tmp_path / "report"
    store = tmp_path / "mlruns"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, "-m", "scidmz.cli", "reproduce", "mlc", "--quick", "--json",
         "--out", str(out), "--tracking-uri", str(store)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["mode"] == "quick"
    for cca in ("cubic", "bbr2"):
        h = doc["headline"][cca]
        for key in ("mrae_mlc", "mrae_trivial", "fct_mlc", "fct_trivial"):
            assert isinstance(h[key], float) and math.isfinite(h[key]) and h[key] > 0, (cca, key, h)
        assert h["fct_mlc"] < 120.0 and h["fct_trivial"] < 120.0  # quick bound: every transfer finished
        assert set(doc["stages"]) >= {f"{cca}/{s}" for s in ("identify", "train", "tune", "evaluate")}
        # One copy of each artefact, written by the same functions `scidmz train|tune` call.
        assert (out / cca / "model").is_dir() and (out / cca / "tune" / "gains.json").is_file()
        assert not (out / cca / "gains.json").exists() and not (out / cca / "convergence.png").exists()
        for f in ("mrae.csv", "fct.csv", "sweep.csv", "short.csv", "mrae_cdf.png", "fct_cdf.png"):
            assert (out / cca / f).stat().st_size > 0
    # Whether the MLC beats the trivial TBF is a result, measured in reports/mlc and
    # reports/leaderboard, not asserted here: with the BBRv2 fluid model (Linux's v2alpha) the quick
    # sizes put it behind on paper-bbr2 (seeds 0-2: -12.9 / -6.0 / +0.3 %, 2026-11-26).
    report = (out / "report.md").read_text()
    assert "scidmz reproduce mlc --quick" in report and "| 21.72 % |" in report
    assert "](cubic/mrae_cdf.png)" in report
    # Re-render with an analysis: numbers and images unchanged, the analysis appended.
    notes = tmp_path / "notes.md"
    notes.write_text("The MLC was trained on toy sizes.")
    proc = subprocess.run(
        [sys.executable, "-m", "scidmz.cli", "reproduce", "mlc", "--render-only", "--out", str(out),
         "--notes", str(notes), "--json"], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    again = (out / "report.md").read_text()
    assert "## Analysis" in again and "toy sizes" in again and "--render-only" in again
    assert "](cubic/mrae_cdf.png)" in again and "scidmz reproduce mlc --quick" in again
    # Every stage was tracked with mlflow: 4 runs per CCA in the file store.
    metas = list(store.rglob("meta.yaml"))
    assert len([m for m in metas if m.parent.parent.name != "mlruns"]) >= 8


@pytest.mark.slow
def test_an_executor_moves_the_wall_time_not_the_results(tmp_path: Path) -> None:
    """`reproduce mlc --executor processes:2`: the GA's fitness chunks and the fluid trials run in a
    pool, every trial and episode with the seed it has in-process. The gains and every policy's
    numbers are the local run's, the MLC's too (``test_an_mlc_prediction_does_not_depend_on_its_batch``)."""
    from scidmz.evaluation.mlc.reproduce import ReproducePlan, reproduce_mlc

    plan = ReproducePlan.quick().scaled(identify_duration=600, epochs=2, cv_folds=0, generations=2,
                                        population=4, trials=4, which="mrae,fct")
    docs = {}
    for spec in ("local", "processes:2"):
        docs[spec], _ = reproduce_mlc(out=tmp_path / spec.replace(":", "-"), plan=plan, verbose=False,
                                      tracking_uri=str(tmp_path / "mlruns"), executor=spec)
    local, pool = docs["local"], docs["processes:2"]
    for cca in ("cubic", "bbr2"):
        assert pool["sections"][cca]["tune"]["gains"] == local["sections"][cca]["tune"]["gains"]
        assert pool["sections"][cca]["tune"]["best_iae"] == pytest.approx(local["sections"][cca]["tune"]["best_iae"],
                                                                          rel=1e-12)
        for exp in ("mrae", "fct"):
            assert pool["sections"][cca]["summaries"][exp] == local["sections"][cca]["summaries"][exp], (cca, exp)
    meta = json.loads((tmp_path / "processes-2" / "results.json").read_text())["meta"]
    assert meta["executor"] == "processes:2"


def test_an_mlc_prediction_does_not_depend_on_its_batch() -> None:
    """Trial i's result must be a function of (plan seed, i) alone, whatever chunk or batch runs it
    (found 2026-12-07: a plain ``h @ w`` rounded differently by batch size, quick reproduce processes:2
    vs local cubic MLC FCT 18.2005 vs 18.1980 s; ``predictor.ROW_BLOCK`` is the fix)."""
    import numpy as np

    from scidmz.models.predictor import ROW_BLOCK, load_predictor

    p = load_predictor(Path(__file__).resolve().parents[1] / "src/scidmz/datasets/models/paper-cubic-cubic")
    x = np.random.default_rng(0).normal(size=(60, p.n_features)) * p.x_scale + p.x_mean
    whole = p(x)
    for size in (1, 7, ROW_BLOCK, 30):
        assert np.array_equal(np.concatenate([p(x[i:i + size]) for i in range(0, 60, size)]), whole), size
    assert p(x[:0]).shape == (0,)
    # the blocks change no value beyond rounding: the plain product, row by row
    plain = np.array([p._block((x[i:i + 1] - p.x_mean) / p.x_scale)[0] for i in range(60)]) * p.y_scale + p.y_mean
    assert np.allclose(whole, plain, rtol=1e-12, atol=1e-12)


def test_plan_scaling() -> None:
    from scidmz.evaluation.mlc.reproduce import ReproducePlan

    full = ReproducePlan()
    assert full.identify_duration == 28_800 and full.generations == 100 and full.population == 30
    assert full.parents == 15 and full.experiments.trials == 100 and full.experiments.transfer == 10e9
    p = full.scaled(identify_duration=7200, generations=10, population=12, trials=30, ns_values="1,10,100",
                    epochs=None, which="mrae,fct")
    assert p.identify_duration == 7200 and p.generations == 10 and p.population == 12 and p.parents == 6
    assert p.experiments.trials == 30 and p.experiments.ns_values == (1, 10, 100)
    assert p.which == ("mrae", "fct") and p.mode == "full (custom)"
    assert full.scaled() == full  # nothing given, nothing changed
    with pytest.raises(ValueError, match="N_s values"):
        full.scaled(ns_values="1,ten")
    with pytest.raises(ValueError, match="unknown experiment"):
        full.scaled(which="mrae,nope")
    with pytest.raises(ValueError, match="population"):
        full.scaled(population=1)


def test_netns_plan_tunes_on_fluid_and_evaluates_on_the_testbed() -> None:
    from scidmz.evaluation.mlc.reproduce import ReproducePlan

    full, quick = ReproducePlan.netns(), ReproducePlan.netns(quick=True)
    for p in (full, quick):
        assert p.eval_plant == "netns" and p.scenarios == {"cubic": "testbed"}
        assert p.which == ("mrae", "fct", "utilization")  # no N_s sweep or short flows in real time
    assert full.experiments.trials >= 10 and full.experiments.duration == 120.0  # full sizes
    assert quick.experiments.trials * 2 * quick.experiments.duration <= 120  # quick: minutes, not an hour
    assert full.scaled(trials=5).eval_plant == "netns"
    # Fluid, then refined on testbed data: fine-tuning data and gain refinement on the kernel.
    assert full.refine_identify_s == 1_800 and full.refine_episodes == 2 and full.delta_u == 0.05
    assert quick.refine_identify_s > 0 and quick.refine_episodes == 1
    assert ReproducePlan().refine_identify_s == 0 and ReproducePlan().refine_episodes == 0  # fluid: the paper's


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")
def test_reproduce_mlc_netns_quick_end_to_end(tmp_path: Path) -> None:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, "-m", "scidmz.cli", "reproduce", "mlc", "--plant", "netns", "--quick", "--json",
         "--out", str(tmp_path / "r"), "--tracking-uri", str(tmp_path / "mlruns")],
        capture_output=True, text=True, timeout=900, cwd=tmp_path, env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    h = doc["headline"]["cubic"]
    for key in ("mrae_mlc", "mrae_trivial", "fct_mlc", "fct_trivial"):
        assert isinstance(h[key], float) and math.isfinite(h[key]) and h[key] > 0, (key, h)
    report = (tmp_path / "r" / "report.md").read_text()
    assert "netns" in report and "refined on the netns plant" in report
    sec = json.loads((tmp_path / "r" / "results.json").read_text())["sections"]["cubic"]
    # every period of the planned testbed identification became a row of the fine-tuning data
    from scidmz.evaluation.mlc.reproduce import ReproducePlan
    from scidmz.scenario import load_scenario

    rows = ReproducePlan.netns(quick=True).refine_identify_s / load_scenario("testbed").period
    assert sec["fine_tune"]["plant"] == "netns" and sec["fine_tune"]["rows"] == rows >= 20
    assert math.isfinite(sec["fine_tune"]["init_relative_error"])
    ref = sec["tune"]["refine"]
    assert [c["factor"] for c in ref["candidates"]] == [1.0, 0.3, 0.1, 0.03] and ref["plant"] == "netns"
    assert sec["tune"]["gains"]["kp"] == pytest.approx(ref["ga_gains"]["kp"] * ref["factor"])


def test_resume_reuses_only_a_matching_identification_dataset(tmp_path: Path) -> None:
    from scidmz.evaluation.mlc.reproduce import _reusable_dataset
    from scidmz.identification.record import record_dataset
    from scidmz.scenario import load_scenario, resolve_scenario

    sc = load_scenario("small-cubic")
    ds = tmp_path / "dataset.parquet"
    rec, _ = record_dataset(sc, 20.0, str(ds), seed=3, batch=2, track=False)
    got = _reusable_dataset(ds, sc, 20.0, 3, "fluid", 2)
    assert got is not None and got["reused"] and got["sha256"] == rec["sha256"] and got["rows"] == rec["rows"]
    assert _reusable_dataset(ds, sc, 20.0, 3, "fluid", None) is not None  # batch not fixed by the plan
    # Any difference in what the step would record means recording afresh.
    assert _reusable_dataset(ds, sc, 20.0, 4, "fluid", 2) is None
    assert _reusable_dataset(ds, sc, 40.0, 3, "fluid", 2) is None
    assert _reusable_dataset(ds, sc, 20.0, 3, "netns", 2) is None
    assert _reusable_dataset(ds, sc, 20.0, 3, "fluid", 4) is None
    assert _reusable_dataset(ds, resolve_scenario("small-cubic", ["link.buffer_bdp=0.5"]), 20.0, 3, "fluid", 2) is None
    assert _reusable_dataset(tmp_path / "missing.parquet", sc, 20.0, 3, "fluid", 2) is None
    torn = tmp_path / "torn.parquet"
    torn.write_bytes(ds.read_bytes()[:100])  # cut short by the interruption
    assert _reusable_dataset(torn, sc, 20.0, 3, "fluid", 2) is None
    # made by another version of the fluid model: its numbers are not this plant's
    from scidmz.identification.excitation import load_dataset, write_dataset
    from scidmz.plant.fluid.plant import model_fingerprint

    old = load_dataset(ds)
    assert old.meta["plant_model"] == model_fingerprint()
    old.meta["plant_model"] = "0123456789abcdef"
    write_dataset(old, tmp_path / "old-model.parquet")
    assert _reusable_dataset(tmp_path / "old-model.parquet", sc, 20.0, 3, "fluid", 2) is None
