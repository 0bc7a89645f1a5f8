"""`scidmz leaderboard`: statistics against scipy/statsmodels, the ledger's resume and
refusals, the results.json schema, --render-only, bad input, and a --quick --json run."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from scidmz.cli import main
from scidmz.evaluation import stats

# -- statistics on known data ----------------------------------------------------------------


def test_wilcoxon_matches_scipy_and_a_known_value() -> None:
    from scipy.stats import wilcoxon

    # scipy's documented example (Cheung & Klotz's data): d = x - y, two-sided exact p = 0.04126
    d = np.array([6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75], dtype=float)
    assert stats.wilcoxon_p(d, np.zeros_like(d)) == pytest.approx(0.041259765625, rel=1e-9)
    rng = np.random.default_rng(3)
    a, b = rng.normal(1.0, 0.1, 40), rng.normal(1.02, 0.1, 40)
    assert stats.wilcoxon_p(a, b) == pytest.approx(wilcoxon(a, b).pvalue, rel=1e-12)
    assert stats.wilcoxon_p(a, a) == 1.0  # every pair equal: no evidence of a difference
    assert math.isnan(stats.wilcoxon_p(a[:1], b[:1]))


def test_holm_matches_statsmodels_and_by_hand() -> None:
    from statsmodels.stats.multitest import multipletests

    # by hand: sorted 0.01, 0.03, 0.04 -> 3 x 0.01 = 0.03, 2 x 0.03 = 0.06, max(0.06, 1 x 0.04) = 0.06
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    p = [0.002, 0.5, 0.03, 0.04, 0.9]
    assert stats.holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]))
    out = stats.holm([0.01, math.nan, 0.02])  # NaN is no test: m = 2
    assert out[0] == pytest.approx(0.02) and math.isnan(out[1]) and out[2] == pytest.approx(0.02)


def test_holm_floor_is_the_least_corrected_p_any_outcome_of_the_test_gets() -> None:
    # by hand: [0.001, 0.002 (the floor), 0.3]: 3 x 0.001, then max(0.003, 2 x 0.002) = 0.004
    assert stats.holm_floor([0.001, 0.5, 0.3], 1, 0.002) == pytest.approx(0.004)
    rng = np.random.default_rng(5)
    for _ in range(20):
        fam = list(rng.uniform(0, 0.2, 30) ** 3)
        i, best = int(rng.integers(30)), float(rng.uniform(1e-4, 1e-2))
        floor = stats.holm_floor(fam, i, best)
        for raw in (best, best * 1.5, 0.01, 0.5, 1.0):  # every outcome the test can have, at or above its floor
            assert stats.holm([*fam[:i], raw, *fam[i + 1:]])[i] >= floor - 1e-15
        assert floor == pytest.approx(stats.holm([*fam[:i], best, *fam[i + 1:]])[i])
    # ten pairs all one way (raw 2/2**10) beside 34 larger p's: Holm multiplies it by 35, 0.068 > 0.05;
    # beside 34 smaller ones it comes last and keeps its own 0.00195
    assert stats.holm_floor([0.4] * 35, 34, 2.0 ** -9) == pytest.approx(35 * 2.0 ** -9)
    assert stats.holm_floor([1e-9] * 35, 34, 2.0 ** -9) == pytest.approx(2.0 ** -9)
    assert math.isnan(stats.holm_floor([0.1, 0.2], 0, math.nan))
    # ties and NaN (no test) as statsmodels' Holm has them
    for fam, i, best in (([0.002, 0.5, 0.3], 1, 0.002), ([0.01, math.nan, 0.01, 0.04], 3, 0.01), ([0.2], 0, 0.3)):
        assert stats.holm_floor(fam, i, best) == pytest.approx(stats.holm([*fam[:i], best, *fam[i + 1:]])[i])


def test_bootstrap_ci_is_scipys_seeded_bca() -> None:
    from scipy.stats import bootstrap, t

    rng = np.random.default_rng(0)
    x = rng.normal(10.0, 2.0, 200)
    lo, hi = stats.bootstrap_ci(x, seed=7)
    ref = bootstrap((x,), np.mean, n_resamples=stats.BOOTSTRAP_RESAMPLES, method="BCa",
                    random_state=np.random.default_rng(7)).confidence_interval
    assert (lo, hi) == pytest.approx((ref.low, ref.high), rel=1e-12)
    assert (lo, hi) == stats.bootstrap_ci(x, seed=7)  # seeded: the same interval every time
    half = t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    assert lo == pytest.approx(x.mean() - half, rel=0.01) and hi == pytest.approx(x.mean() + half, rel=0.01)
    assert stats.bootstrap_ci([3.0, 3.0, 3.0]) == (3.0, 3.0)
    assert all(math.isnan(v) for v in stats.bootstrap_ci([1.0]))
    lo2, hi2 = stats.bootstrap_ci([1.0, 2.0])  # BCa is undefined here; the percentile interval is not
    assert 1.0 <= lo2 <= hi2 <= 2.0


def test_paired_ci_resamples_pairs() -> None:
    rng = np.random.default_rng(1)
    base = rng.normal(100.0, 20.0, 60)
    other = base * 0.9 + rng.normal(0.0, 1.0, 60)  # 10 % lower, pair by pair
    lo, hi = stats.paired_ci(base, other, "lower", seed=0)
    assert lo < 10.0 < hi and hi - lo < 2.0  # pairing removes the trials' spread from the interval
    lo_h, hi_h = stats.paired_ci(base, other, "higher", seed=0)
    assert (lo_h, hi_h) == pytest.approx((-hi, -lo), rel=0.05)


def test_family_ranks_tests_and_corrects() -> None:
    from scipy.stats import wilcoxon
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(2)
    n = 30
    base = rng.normal(1.0, 0.05, n)
    vals = {"trivial": base, "good": base - 0.1 + rng.normal(0, 0.01, n), "bad": base + 0.05 + rng.normal(0, 0.01, n),
            "odd": base - 0.5}
    fam = stats.family({k: dict(enumerate(v)) for k, v in vals.items()}, "lower",
                       ranked=["trivial", "good", "bad"], seed=0)
    assert [fam[k]["rank"] for k in ("good", "trivial", "bad")] == [1, 2, 3]
    assert fam["odd"]["rank"] is None and not fam["odd"]["best"]  # not comparable: never ranked, never best
    assert fam["good"]["best"] and fam["good"]["vs_trivial_pct"] > 5 and fam["bad"]["vs_trivial_pct"] < 0
    raw = [wilcoxon(base, vals[k]).pvalue for k in ("good", "bad", "odd")]
    assert [fam[k]["p_vs_trivial_raw"] for k in ("good", "bad", "odd")] == pytest.approx(raw)
    assert fam["trivial"]["p_vs_best_raw"] == pytest.approx(wilcoxon(vals["good"], base).pvalue)
    assert math.isnan(fam["good"]["p_vs_best_raw"]) and math.isnan(fam["trivial"]["p_vs_trivial_raw"])
    # Holm over the page, not the family: every raw p of every row at once (stats.holm_rows)
    rows = [{"policy": k, **v} for k, v in fam.items()]
    n = stats.holm_rows(rows)
    flat = [(r["policy"], key) for r in rows for key in ("p_vs_trivial_raw", "p_vs_best_raw")
            if math.isfinite(r[key])]
    assert n == len(flat) == 6
    ref = multipletests([fam[k][key] for k, key in flat], method="holm")[1]
    got = [next(r for r in rows if r["policy"] == k)[key.replace("_raw", "")] for k, key in flat]
    assert got == pytest.approx(list(ref))
    assert fam["trivial"]["vs_trivial_pct"] == 0.0
    m = base.mean()
    assert fam["bad"]["mean"] == pytest.approx(vals["bad"].mean())
    assert fam["bad"]["vs_trivial_pct"] == pytest.approx(-100 * (vals["bad"].mean() - m) / m)
    # higher is better: the sign turns, so + is still better
    up = stats.family({"trivial": {0: 0.9, 1: 0.8}, "x": {0: 0.99, 1: 0.98}}, "higher")
    assert up["x"]["rank"] == 1 and up["x"]["vs_trivial_pct"] == pytest.approx(100 * (0.985 - 0.85) / 0.85)


# -- the ledger -------------------------------------------------------------------------------


def _header(seed: int = 0) -> dict:
    return {"scenario": {"name": "s", "sha256": "x"}, "plant": "fluid", "plant_model": {"fluid": "m"},
            "code": {"sha256": "c"}, "plan": {"trials": 2, "seed": seed}, "policies": {"trivial": {"kind": "rate"}}}


def test_ledger_appends_fsynced_lines_resumes_and_cuts_a_partial_line(tmp_path) -> None:
    from scidmz.evaluation.leaderboard.ledger import Ledger

    with Ledger.open(tmp_path, _header(), resume=False) as led:
        assert not (tmp_path / "ledger.jsonl").exists()  # nothing before the first finished trial
        led.append("mrae", "trivial", 0, {"metrics": {"mrae": 0.05}, "periods": 120, "starved_periods": 0})
        led.append("mrae", "trivial", 1, {"metrics": {"mrae": math.nan}, "periods": 120, "starved_periods": 0})
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["kind"] == "header"
    assert json.loads(lines[2])["metrics"]["mrae"] is None  # strict JSON
    with open(tmp_path / "ledger.jsonl", "a") as f:
        f.write('{"kind": "unit", "unit": "mrae", "pol')  # a crash mid-write
    led = Ledger.open(tmp_path, _header(), resume=True)
    assert set(led.done) == {("mrae", "trivial", 0), ("mrae", "trivial", 1)} and led.cut > 0
    assert (tmp_path / "ledger.jsonl").read_text().endswith("}\n")  # the partial line is gone
    with led:
        led.append("fct", "trivial", 0, {"metrics": {"fct": 10.0}})  # a resumed ledger keeps its header
    assert len((tmp_path / "ledger.jsonl").read_text().splitlines()) == 4


def test_ledger_refusals(tmp_path) -> None:
    from scidmz.evaluation.leaderboard.ledger import Ledger

    with pytest.raises(ValueError, match="no ledger"):
        Ledger.open(tmp_path, _header(), resume=True)
    with Ledger.open(tmp_path, _header(), resume=False) as led:
        led.append("mrae", "trivial", 0, {})
    with pytest.raises(ValueError, match="exists: pass --resume"):
        Ledger.open(tmp_path, _header(), resume=False)
    with pytest.raises(ValueError, match=r"another run \(plan.seed: 0 in the ledger, 1 now\)"):
        Ledger.open(tmp_path, _header(seed=1), resume=True)
    h = _header()
    h["code"] = {"sha256": "d"}
    with pytest.raises(ValueError, match="code.sha256"):
        Ledger.open(tmp_path, h, resume=True)
    (tmp_path / "ledger.jsonl").write_text('{"kind": "unit"}\n')
    with pytest.raises(ValueError, match="header"):
        Ledger.open(tmp_path, _header(), resume=True)


def _netns_header(kernel: str = "k1", code: str = "c", testbed: str = "t") -> dict:
    h = _header()
    h.update(plant="netns", plant_model={"kernel": kernel, "testbed": testbed}, code={"tree": code, "sha256": code})
    return h


def test_allow_drift_crosses_a_code_or_kernel_change_only_and_records_it(tmp_path) -> None:
    from scidmz.evaluation.leaderboard.ledger import Ledger

    with Ledger.open(tmp_path, _netns_header(), resume=False) as led:
        led.append("mrae", "trivial", 0, {})
    moved = _netns_header(kernel="k2", code="d")
    with pytest.raises(ValueError, match=r"code.tree: \"c\" in the ledger, \"d\" now\); use another --out, or --allow-drift"):
        Ledger.open(tmp_path, moved, resume=True)
    # never the testbed's description, the plan or the scenario, even with allow_drift
    with pytest.raises(ValueError, match=r"plant_model.testbed.*use another --out$"):
        Ledger.open(tmp_path, _netns_header(kernel="k2", testbed="u"), resume=True, allow_drift=True)
    h = _netns_header(kernel="k2")
    h["plan"]["seed"] = 3
    with pytest.raises(ValueError, match="plan.seed"):
        Ledger.open(tmp_path, h, resume=True, allow_drift=True)
    # a resume that fails before its first unit leaves no drift line
    Ledger.open(tmp_path, moved, resume=True, allow_drift=True).close()
    assert len((tmp_path / "ledger.jsonl").read_text().splitlines()) == 2
    with Ledger.open(tmp_path, moved, resume=True, allow_drift=True) as led:
        led.append("mrae", "trivial", 1, {})
        led.append("fct", "trivial", 0, {})
    lines = [json.loads(x) for x in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert [x["kind"] for x in lines] == ["header", "unit", "drift", "unit", "unit"]
    d = lines[2]
    assert (d["units_before"], d["kernel"], d["code"]["sha256"]) == (1, "k2", "d")
    assert (d["was"]["kernel"], d["was"]["code"]["sha256"]) == ("k1", "c") and d["at"] == lines[3]["finished_at"]
    # the ledger now runs on the new identity: resuming on it needs no flag, the old one does
    led = Ledger.open(tmp_path, moved, resume=True)
    assert len(led.done) == 3 and [x["kernel"] for x in led.drifts] == ["k2"]
    with pytest.raises(ValueError, match=r"kernel: \"k2\" in the ledger, \"k1\" now"):
        Ledger.open(tmp_path, _netns_header(code="d"), resume=True)


# -- the command ------------------------------------------------------------------------------

_QUICK = ["--quick", "--trials", "3", "--policies", "trivial,none,abc"]


def _lb(capsys, *argv: str) -> tuple[int, dict | None, str]:
    code = main(["leaderboard", *argv])
    cap = capsys.readouterr()
    out = cap.out.strip().splitlines()
    doc = json.loads(out[-1]) if code == 0 and "--json" in argv else None
    return code, doc, cap.err


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> tuple:
    out = tmp_path_factory.mktemp("lb") / "run"
    code = main(["leaderboard", "small-cubic", *_QUICK, "--out", str(out), "--json"])
    assert code == 0
    return out, json.loads((out / "results.json").read_text())


def test_quick_json_run_writes_every_output_and_the_schema(quick_run) -> None:
    out, doc = quick_run
    for f in ("ledger.jsonl", "results.json", "report.md", "ranking.png", "command.txt"):
        assert (out / f).is_file(), f
    for key in ("format_version", "scidmz_version", "git_commit", "scenario", "fingerprint", "plant", "plant_model",
                "machine", "load", "plan", "command", "rows"):
        assert key in doc, key
    assert {"cpus", "arch", "kernel"} <= set(doc["machine"]) and {"start", "end"} <= set(doc["load"])
    assert doc["plant_model"]["fluid"] and doc["fingerprint"]["dtn_cca"] == "cubic"
    rows = doc["rows"]
    keys = {(r["plant"], r["cca"], r["policy"], r["experiment"]) for r in rows}
    assert len(keys) == len(rows) == 3 * 4  # one row per (plant, cca, policy, experiment)
    for r in rows:
        for f in ("plant", "cca", "policy", "experiment", "trials", "mean", "ci95", "vs_trivial_pct", "p_vs_trivial",
                  "comparable", "p_vs_trivial_raw", "p_vs_best", "better", "starved_trials", "excluded_trials"):
            assert f in r, f
        assert r["trials"] == 3 and len(r["ci95"]) == 2 and r["ci95"][0] <= r["mean"] <= r["ci95"][1]
        assert r["better"] == ("higher" if r["experiment"] == "utilization" else "lower")
        # abc's queue is not under the fluid plant's packet-noise model: shown, not ranked
        assert r["comparable"] == (r["policy"] != "abc") and (r["rank"] is None) == (r["policy"] == "abc")
    mrae = {r["policy"]: r for r in rows if r["experiment"] == "mrae"}
    assert mrae["trivial"]["best"] and mrae["none"]["vs_trivial_pct"] < -100  # no shaping: far off target
    lines = (out / "ledger.jsonl").read_text().splitlines()
    assert len(lines) == 1 + 3 * 3 * 3  # header + units x policies x trials
    assert "| 1 | trivial **best** |" in (out / "report.md").read_text()


def test_render_only_rewrites_the_report_from_results_json(quick_run, capsys) -> None:
    out, doc = quick_run
    before = (out / "report.md").read_text()
    (out / "report.md").unlink()
    (out / "ranking.png").unlink()
    code, res, _ = _lb(capsys, "--render-only", "--out", str(out), "--json")
    assert code == 0 and res["rows"] == doc["rows"]
    after = (out / "report.md").read_text()
    assert (out / "ranking.png").stat().st_size > 10_000
    assert "re-rendered from `results.json`" in after
    strip = [ln for ln in after.splitlines() if not ln.startswith("Command:")]
    assert strip == [ln for ln in before.splitlines() if not ln.startswith("Command:")]


def test_the_report_says_why_periods_were_starved(quick_run, tmp_path, capsys) -> None:
    import shutil

    src, doc = quick_run
    out = tmp_path / "why"
    shutil.copytree(src, out)
    rows = [dict(r) for r in doc["rows"]]
    assert all(r["starved_by"] == {} for r in rows)  # the fluid plant never starves
    first = next(r for r in rows if r["experiment"] == "mrae")
    first["starved_by"] = {"stage_late": 3, "senders": 1}
    (out / "results.json").write_text(json.dumps({**doc, "rows": rows}))
    code, _, _ = _lb(capsys, "--render-only", "--out", str(out), "--json")
    report = (out / "report.md").read_text()
    assert code == 0 and report.count("Starved periods by symptom") == 1
    assert f"{first['policy']}: stage_late 3, senders 1." in report


def test_the_report_names_each_drift_a_resume_crossed(quick_run, tmp_path, capsys) -> None:
    import shutil

    src, doc = quick_run
    assert doc["drift"] == []  # a run that never crossed one
    out = tmp_path / "drift"
    shutil.copytree(src, out)
    was = {"code": {"tree": "aaaaaaaaaa11", "sha256": "bbbbbbbbbbbb22"}, "kernel": "6.18.44-v669"}
    drift = [{"units_before": 128, "at": "2026-11-29T06:10:00Z", "kernel": "6.18.44-v657",
              "code": {"tree": "cccccccccc33", "sha256": "dddddddddddd44"}, "was": was}]
    (out / "results.json").write_text(json.dumps({**doc, "drift": drift}))
    code, _, _ = _lb(capsys, "--render-only", "--out", str(out), "--json")
    report = (out / "report.md").read_text()
    assert code == 0 and ("Resumed across a change (`--allow-drift`) after 128 trial units, 2026-11-29T06:10:00Z: "
                          "code bbbbbbbbbbbb → dddddddddddd (src tree aaaaaaaaaa → cccccccccc), "
                          "kernel 6.18.44-v669 → 6.18.44-v657;") in report


def test_resume_runs_only_what_is_missing_and_equals_an_uninterrupted_run(quick_run, tmp_path, capsys) -> None:
    out, doc = quick_run
    lines = (out / "ledger.jsonl").read_text().splitlines()
    # an interrupted run: trial 0 of every unit done, then a crash mid-write
    kept = [lines[0]] + [ln for ln in lines[1:] if json.loads(ln)["trial"] == 0]
    run = tmp_path / "run"
    run.mkdir()
    (run / "ledger.jsonl").write_text("\n".join(kept) + "\n" + lines[-1][:40])
    code, res, _ = _lb(capsys, "small-cubic", *_QUICK, "--out", str(run), "--resume", "--json")
    assert code == 0 and res["units_run"] == 3 * 3 * 2 and res["cut_bytes"] == 40
    new = json.loads((run / "results.json").read_text())
    strip = ("wall_s", "finished_at")
    old_units = {(u["unit"], u["policy"], u["trial"]): {k: v for k, v in u.items() if k not in strip}
                 for u in map(json.loads, lines[1:])}
    new_units = {(u["unit"], u["policy"], u["trial"]): {k: v for k, v in u.items() if k not in strip}
                 for u in map(json.loads, (run / "ledger.jsonl").read_text().splitlines()[1:])}
    assert new_units == old_units  # trials 1-2 in a batch of their own: the same numbers
    assert [(r["policy"], r["experiment"], r["mean"]) for r in new["rows"]] == \
           [(r["policy"], r["experiment"], r["mean"]) for r in doc["rows"]]
    # all done: a second resume runs nothing
    code, res, _ = _lb(capsys, "small-cubic", *_QUICK, "--out", str(run), "--resume", "--json")
    assert code == 0 and res["units_run"] == 0


@pytest.mark.parametrize("argv, msg", [
    (["--policies", "trivial,nope"], "unknown policy 'nope'"),
    (["--trials", "1"], "--trials must be a whole number in [2, 10000]"),
    (["--trials", "10001"], "--trials must be a whole number in [2, 10000]"),
    (["--fct-trials", "1"], "--fct-trials must be"),
    (["--seed", "-1"], "--seed must be"),
    (["--max-starved", "0.05"], "--max-starved: a trial's starved share is evidence now"),
    (["--set", "plan.max_cpu_pressure=2"], "plan.max_cpu_pressure must be a share"),
    (["--set", "plan.max_reruns=1.5"], "plan.max_reruns: expected a whole number"),
    (["--experiments", "mrae,nope"], "unknown experiment 'nope'"),
    (["--set", "plan.nope=1"], "unknown plan key"),
    (["--set", "plan.duration=1e6"], "plan.duration must be in"),
    (["--set", "plan.duration=-5"], "plan.duration: must not be negative"),
    (["--policies", "trivial,mlc"], "--mlc-model DIR and --mlc-gains FILE"),
    (["--plant", "hardware", "--policies", "trivial,jenks"], "the hardware plant plays no scenario"),
    (["--allow-drift"], "--allow-drift goes with --resume"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, argv, msg) -> None:
    out = tmp_path / "out"
    code, _, err = _lb(capsys, "small-cubic", "--quick", "--policies", "trivial,none", *argv, "--out", str(out))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and msg in err, err
    assert not (out / "ledger.jsonl").exists()


def test_a_host_policy_is_refused_where_the_plant_cannot_pace(tmp_path, capsys) -> None:
    from scidmz.policies.registry import _REGISTRY, register_policy

    class Paced:  # a minimal host policy: the capability check needs its kind only
        name, kind = "test-paced", "host"

    from scidmz.evaluation.leaderboard.run import check_capabilities

    # The command refuses the hardware plant before this check (it plays no scenario to pair trials on);
    # the library's check still names the capability a plant lacks.
    register_policy("test-paced", "host", Paced)
    try:
        with pytest.raises(ValueError, match=r"policy test-paced \(host policy\) cannot run on the hardware plant"):
            check_capabilities("hardware", {"test-paced": Paced()})
    finally:
        _REGISTRY.pop("test-paced", None)


def test_ledger_refusals_on_the_command_line(quick_run, tmp_path, capsys) -> None:
    out, _ = quick_run
    code, _, err = _lb(capsys, "small-cubic", *_QUICK, "--out", str(out))
    assert code == 2 and "exists: pass --resume" in err
    code, _, err = _lb(capsys, "small-cubic", *_QUICK, "--seed", "5", "--out", str(out), "--resume")
    assert code == 2 and "plan.seed: 0 in the ledger, 5 now" in err
    code, _, err = _lb(capsys, "small-cubic", *_QUICK, "--set", "dtn.cca=bbr2", "--out", str(out), "--resume")
    assert code == 2 and "another run (scenario." in err
    code, _, err = _lb(capsys, "small-cubic", *_QUICK, "--out", str(tmp_path / "new"), "--resume")
    assert code == 2 and "no ledger" in err
    (tmp_path / "file").write_text("x")
    code, _, err = _lb(capsys, "small-cubic", *_QUICK, "--out", str(tmp_path / "file"))
    assert code == 2 and "not a directory" in err
    code, _, err = _lb(capsys, "--render-only", "--out", str(tmp_path / "new"))
    assert code == 2 and "no results file" in err


# -- starved trials, the fluid plant's declaration ---------------------------------------------


def test_starved_trials_are_counted_and_excluded() -> None:
    from scidmz.evaluation.leaderboard.results import build_rows

    header = {"plan": {"experiments": ["mrae"], "seed": 0}, "plant": "netns",
              "scenario": {"fingerprint": {"dtn_cca": "bbr"}},
              "policies": {"trivial": {"kind": "rate"}, "pi": {"kind": "rate"}}}

    def unit(p: str, i: int, v: float, starved: int, by: dict | None = None) -> dict:
        return {"unit": "mrae", "policy": p, "trial": i, "metrics": {"mrae": v}, "periods": 100,
                "starved_periods": starved, **({"starved_by": by} if by is not None else {})}

    units = [unit("trivial", i, 0.06 + 0.001 * i, 0) for i in range(5)]
    units += [unit("pi", 0, 0.05, 3, {"senders": 1, "stage_late": 2}),
              unit("pi", 1, 0.9, 20, {"stage_late": 19, "rwnd": 1})] + [unit("pi", i, 0.05, 0) for i in range(2, 5)]
    rows = {r["policy"]: r for r in build_rows(header, units, {"trivial": True, "pi": True}, max_starved=0.05)}
    assert rows["pi"]["starved_trials"] == 2 and rows["pi"]["excluded_trials"] == 1
    # why, over all trials (the excluded one too), most frequent first; a ledger that does not say: {}
    assert list(rows["pi"]["starved_by"].items()) == [("stage_late", 21), ("rwnd", 1), ("senders", 1)]
    assert rows["trivial"]["starved_by"] == {}
    assert rows["pi"]["trials"] == 4 and rows["pi"]["mean"] == pytest.approx(0.05)
    assert rows["pi"]["paired_n"] == 4 and rows["pi"]["cca"] == "bbr" and rows["pi"]["best"]


def test_fluid_plant_declares_which_policies_its_noise_covers() -> None:
    from scidmz.plant.fluid.plant import FluidPlant
    from scidmz.scenario import load_scenario

    sc = load_scenario("small-cubic")
    with FluidPlant(sc) as p:
        # rate: the FIFO; queue: the HTB leaves; ABC and FFS disagreed with the kernel
        # (reports/leaderboard/noise.json), so a discipline is not covered; a paced DTN's
        # burstiness was never measured against the kernel, so host (pacing) is not covered.
        assert p.noise_covers("rate") and p.noise_covers("queue")
        assert not p.noise_covers("host")
        assert not p.noise_covers("discipline")
        with pytest.raises(ValueError, match="unknown policy kind"):
            p.noise_covers("nope")
    with FluidPlant(sc, packet_noise=False) as p:
        assert p.noise_covers("discipline")  # no noise anywhere: every queue alike


def test_merge_combines_the_runs_of_a_folder(quick_run, tmp_path, capsys) -> None:
    import shutil

    out, doc = quick_run
    top = tmp_path / "leaderboard"
    for name in ("fluid-small-cubic", "fluid-small-cubic-again"):
        (top / name).mkdir(parents=True)
        shutil.copy(out / "results.json", top / name / "results.json")
    code, res, _ = _lb(capsys, "--merge", "--out", str(top), "--json")
    assert code == 0
    merged = json.loads((top / "results.json").read_text())
    assert [r["run"] for r in merged["runs"]] == ["fluid-small-cubic", "fluid-small-cubic-again"]
    assert len(merged["rows"]) == 2 * len(doc["rows"]) and merged["rows"][0]["scenario"] == "small-cubic"
    text = (top / "report.md").read_text()
    assert "[fluid-small-cubic](fluid-small-cubic/report.md)" in text and "**best**" in text
    code, _, err = _lb(capsys, "--merge", "--out", str(tmp_path / "empty"))
    assert code == 2 and "no leaderboard runs to merge" in err
    # An interrupted run is listed, never merged into the rows (nor the verdict rendered from them).
    part = json.loads((out / "results.json").read_text())
    part.update(complete=False, units_left=7)
    (top / "netns-part").mkdir()
    (top / "netns-part" / "results.json").write_text(json.dumps(part))
    code, _, _ = _lb(capsys, "--merge", "--out", str(top), "--json")
    merged = json.loads((top / "results.json").read_text())
    assert code == 0 and len(merged["rows"]) == 2 * len(doc["rows"])
    assert [r["run"] for r in merged["incomplete_runs"]] == ["netns-part"] and "netns-part" not in {
        r["run"] for r in merged["rows"]}
    assert "[netns-part](netns-part/report.md): fluid, small-cubic, 7 trial units left" in (top / "report.md").read_text()
    # A floor run (no campus traffic: the DTN alone, the same targets) is neither ranked nor tested: its
    # MRAE rows other than the baseline's become the regime's floor.
    floor = json.loads((out / "results.json").read_text())
    floor["scenario"]["campus"]["hosts"] = 0
    (top / "fluid-floor").mkdir()
    (top / "fluid-floor" / "results.json").write_text(json.dumps(floor))
    code, _, _ = _lb(capsys, "--merge", "--out", str(top), "--json")
    merged = json.loads((top / "results.json").read_text())
    assert code == 0 and len(merged["rows"]) == 2 * len(doc["rows"]) and "fluid-floor" not in {
        r["run"] for r in merged["rows"]}
    mrae = [r for r in floor["rows"] if r["experiment"] == "mrae" and r["policy"] != "trivial"]
    assert [(f["run"], f["policy"], f["mean"]) for f in merged["floors"]] == [
        ("fluid-floor", r["policy"], r["mean"]) for r in mrae] and mrae
    assert [r["floor"] for r in merged["runs"]] == [True, False, False]
    shutil.rmtree(top / "fluid-floor")
    for name in ("fluid-small-cubic", "fluid-small-cubic-again"):
        shutil.rmtree(top / name)
    code, _, err = _lb(capsys, "--merge", "--out", str(top))
    assert code == 2 and "every run is incomplete" in err


# -- fewer trials for some policies ------------------------------------------------------------


def test_policy_trials_run_fewer_paired_trials_and_say_so(tmp_path, capsys) -> None:
    out = tmp_path / "run"
    code, doc, err = _lb(capsys, "small-cubic", "--quick", "--trials", "3", "--policies", "trivial,none,abc",
                         "--experiments", "mrae,fct", "--policy-trials", "abc=2", "--out", str(out), "--json")
    assert code == 0, err
    trials = {(r["policy"], r["experiment"]): r["trials"] for r in doc["rows"]}
    assert trials[("abc", "mrae")] == trials[("abc", "fct")] == 2
    assert trials[("none", "mrae")] == trials[("trivial", "fct")] == 3
    units = [json.loads(ln) for ln in (out / "ledger.jsonl").read_text().splitlines()[1:]]
    assert len(units) == 2 * (3 + 3 + 2)  # two trial kinds x (trivial, none, abc)
    assert {u["trial"] for u in units if u["policy"] == "abc"} == {0, 1}  # the first trials: paired
    assert json.loads((out / "results.json").read_text())["plan"]["policy_trials"] == {"abc": [2, 2]}
    assert "Fewer trials (the first ones" in (out / "report.md").read_text()


def test_realtime_order_is_trial_major_balanced_and_stops_each_policy_at_its_count() -> None:
    from collections import Counter

    from scidmz.evaluation.leaderboard.plan import make_plan
    from scidmz.evaluation.leaderboard.trialunits import policy_order, realtime_order

    plan = make_plan("netns", 3, 2, ("mrae", "fct"), policy_trials=(("b", 2, 2),))
    order = realtime_order(plan, ["a", "b", "c"], {(("mrae", "a", 0))})
    assert order == [(0, "mrae", "b"), (0, "mrae", "c"), (0, "fct", "a"), (0, "fct", "b"), (0, "fct", "c"),
                     (1, "mrae", "b"), (1, "mrae", "c"), (1, "mrae", "a"), (1, "fct", "b"), (1, "fct", "c"),
                     (1, "fct", "a"), (2, "mrae", "c"), (2, "mrae", "a")]
    # Williams design: over a cycle every policy holds every place and follows every other equally often
    for n in (3, 4, 7):
        names = list("abcdefg"[:n])
        rows = [policy_order(names, i) for i in range(n if n % 2 == 0 else 2 * n)]
        assert len(set(Counter((r.index(x), x) for r in rows for x in names).values())) == 1
        follows = Counter((r[j], r[j + 1]) for r in rows for j in range(n - 1))
        assert len(follows) == n * (n - 1) and len(set(follows.values())) == 1


@pytest.mark.parametrize("spec, msg", [
    ("trivial=2", "trivial is the paired baseline"),
    ("abc=2", "abc is not among --policies"),
    ("none=5", "none's counts must be whole numbers in [2, --trials = 4]"),
    ("none=3/1", "none's counts must be whole numbers in [2, --fct-trials = 4]"),
    ("none", "expected NAME=N or NAME=N/M"),
    ("none=x", "expected NAME=N or NAME=N/M"),
    ("none=2,none=3", "none given twice"),
])
def test_bad_policy_trials_are_one_line_exit_2(tmp_path, capsys, spec, msg) -> None:
    out = tmp_path / "out"
    code, _, err = _lb(capsys, "small-cubic", "--quick", "--policies", "trivial,none", "--policy-trials", spec,
                       "--out", str(out))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and msg in err, err
    assert not (out / "ledger.jsonl").exists()


def test_an_interrupted_run_writes_its_results_so_far_marked_incomplete(tmp_path, monkeypatch) -> None:
    """Ctrl-C after some trials: exit 130, the ledger keeps them, results.json and report.md say
    what they show and that the run is incomplete; --resume finishes it and clears the mark."""
    from scidmz.evaluation.leaderboard.ledger import Ledger

    real_append, calls = Ledger.append, []

    def append_then_interrupt(self, *a, **k):
        out = real_append(self, *a, **k)
        calls.append(a[:3])
        if len(calls) == 5:
            raise KeyboardInterrupt
        return out

    monkeypatch.setattr(Ledger, "append", append_then_interrupt)
    out = tmp_path / "run"
    assert main(["leaderboard", "small-cubic", *_QUICK, "--out", str(out), "--json"]) == 130
    doc = json.loads((out / "results.json").read_text())
    assert doc["complete"] is False and doc["units_left"] > 0
    assert any(r["trials"] > 0 for r in doc["rows"])
    assert "**Incomplete" in (out / "report.md").read_text()
    monkeypatch.setattr(Ledger, "append", real_append)
    assert main(["leaderboard", "small-cubic", *_QUICK, "--out", str(out), "--resume", "--json"]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["complete"] is True and doc["units_left"] == 0
    assert "**Incomplete" not in (out / "report.md").read_text()


def test_speed_benchmark_reads_a_real_runs_overhead_off_its_ledger(tmp_path) -> None:
    """benchmarks/leaderboard_speed.py --ledger: wall time beyond periods x T per unit; a unit that
    began well after the previous one ended opened a (resumed) run and is reported apart."""
    import subprocess
    import sys
    from pathlib import Path

    units = [("mrae", "trivial", 127.5, 120, "2026-11-26T10:02:07Z"),  # opened the run: built the testbed
             ("mrae", "pi", 123.0, 120, "2026-11-26T10:04:10Z"),
             ("fct", "pi", 63.0, 55, "2026-11-26T10:05:13Z"),  # 8 s over 55 s: 14.5 %
             ("mrae", "mlc", 150.0, 120, "2026-11-26T12:00:00Z")]  # a resume hours later
    lines = [json.dumps({"kind": "header"})] + [json.dumps(
        {"kind": "unit", "unit": e, "policy": p, "trial": 0, "seed": 0, "wall_s": w, "periods": n,
         "finished_at": t, "metrics": {}, "starved_periods": 0}) for e, p, w, n, t in units]
    (tmp_path / "ledger.jsonl").write_text("\n".join(lines) + "\n")
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "leaderboard_speed.py"
    r = subprocess.run([sys.executable, str(script), "--ledger", str(tmp_path / "ledger.jsonl")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)["ledger"]
    assert res["units"] == 2 and res["run_openings"] == {"units": 2, "overhead_s": [7.5, 30.0]}
    assert res["max_trial_overhead_share"] == pytest.approx(8 / 55, abs=1e-4) and res["meets_goal"] is False
    assert res["median_later_trial_overhead_s"] == 8.0  # the upper median of 3 s and 8 s
    assert res["per_group"]["mrae/pi"] == {"units": 1, "max_share": 0.025, "median_s": 3.0}


def test_every_table_row_of_the_report_is_its_own_line(quick_run) -> None:
    # trim_blocks once ate the newline after the separator, gluing the first row to it: no table
    report = (quick_run[0] / "report.md").read_text()
    seps = [ln for ln in report.splitlines() if ln.startswith("|---")]
    assert seps and all("|| " not in ln for ln in seps)
