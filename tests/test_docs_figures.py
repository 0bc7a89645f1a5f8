"""Figures in README.md and docs/ come from the committed results files, so no figure can drift
from the evidence it cites.

``scripts/render_results.py --check`` must pass on the repository; an edited
number inside a rendered region must be caught; the leaderboard's verdict is
rendered from its rows (synthetic here) and skipped, not invented, without them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scidmz.evaluation.docfigures import FIGURES, Missing, check, regions, render_figure, write
from scidmz.evaluation.verdict import ALPHA, PLACES, leaderboard_context, p_floor, rank
from scidmz.kinds import POLICY_KINDS

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "render_results.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_every_figure_in_readme_and_docs_matches_its_results_file() -> None:
    r = _run("--check")
    assert r.returncode == 0, r.stderr


def test_readme_and_docs_use_rendered_figures() -> None:
    names = {rg.name for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")] for rg in regions(p.read_text())}
    assert {"readme-mlc-netns", "mlc-fluid", "mlc-netns", "ffs-table3", "jenks"} <= names


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copytree(ROOT / "reports", tmp_path / "reports")
    return tmp_path


def test_an_edited_number_is_caught_and_rewritten(copy: Path) -> None:
    docs = copy / "docs" / "results.md"
    text = docs.read_text()
    ffs = next(r for r in regions(text) if r.name == "ffs-table3")
    body = ffs.text(text)
    import re

    row = re.search(r"\| fluid \| FIFO \| ([0-9.]+) \|", body)  # reports/ffs/results.json's F
    assert row is not None
    wrong = f"{float(row.group(1)) + 4.5:.1f}"
    docs.write_text(text[:ffs.start] + body.replace(row.group(0), f"| fluid | FIFO | {wrong} |") + text[ffs.end:])
    r = _run("--check", "--root", str(copy))
    assert r.returncode == 1 and "docs/results.md: region 'ffs-table3'" in r.stderr
    assert write(copy, lambda _m: None) == ["docs/results.md: ffs-table3"]
    assert docs.read_text() == text and check(copy, lambda _m: None) is None


def test_a_changed_results_file_makes_its_figure_stale(copy: Path) -> None:
    path = copy / "reports" / "ffs" / "results.json"
    doc = json.loads(path.read_text())
    doc["fluid_table3"]["schemes"]["fifo"]["F"] = 46.0
    path.write_text(json.dumps(doc))
    assert check(copy, lambda _m: None) == "docs/results.md: region 'ffs-table3'"


def test_bad_regions_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no closing marker"):
        regions("<!-- render:jenks -->\ntext\n")
    with pytest.raises(ValueError, match="names no figure"):
        regions("<!-- render:nope -->\n<!-- /render:nope -->")
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("<!-- render:nope -->\n<!-- /render:nope -->\n")
    r = _run("--check", "--root", str(tmp_path))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "names no figure" in r.stderr


# ------------------------------------------------------------- the leaderboard's verdict


def _row(plant: str, cca: str, policy: str, exp: str, mean: float, p: float | None, pct: float,
         comparable: bool = True, p_best: float | None = None) -> dict:
    return {"plant": plant, "cca": cca, "policy": policy, "experiment": exp, "trials": 20, "mean": mean,
            "ci95": [mean * 0.95, mean * 1.05], "vs_trivial_pct": pct, "p_vs_trivial": p, "comparable": comparable,
            "p_vs_best": p_best}


ROWS = [
    _row("fluid", "cubic", "trivial", "mrae", 0.063, None, 0.0, p_best=0.001),
    _row("fluid", "cubic", "pi", "mrae", 0.0556, 0.001, 11.9, p_best=0.25),
    _row("fluid", "cubic", "mlc", "mrae", 0.0545, 0.0004, 13.6),
    _row("fluid", "cubic", "abc", "mrae", 0.0100, 0.0001, 84.0, comparable=False),
    _row("fluid", "cubic", "trivial", "fct", 184.4, None, 0.0),
    _row("fluid", "cubic", "mlc", "fct", 183.9, 0.30, 0.3),
    _row("fluid", "cubic", "trivial", "utilization", 0.952, None, 0.0),
    _row("fluid", "cubic", "mlc", "utilization", 0.960, 0.01, 0.8),
    _row("netns", "bbr", "trivial", "mrae", 0.050, None, 0.0),
    _row("netns", "bbr", "pacing", "mrae", 0.060, 0.02, -20.0),
]


def test_ranking_keeps_not_comparable_rows_out_and_orders_by_better() -> None:
    mrae = [r for r in ROWS if r["plant"] == "fluid" and r["experiment"] == "mrae"]
    assert [r["policy"] for r in rank(mrae)] == ["mlc", "pi", "trivial"]  # abc: not comparable
    util = [r for r in ROWS if r["experiment"] == "utilization"]
    assert rank(util)[0]["policy"] == "mlc"  # utilisation: higher is better


def test_verdict_in_plain_words() -> None:
    ctx = leaderboard_context({"rows": ROWS})
    fluid, netns = ctx["regimes"]
    assert (fluid["plant"], fluid["cca"], netns["plant"], netns["cca"]) == ("fluid", "cubic", "netns", "bbr")
    assert fluid["verdict"][0].startswith("mrae: best is mlc (+13.6 % vs trivial, p = 0.0004), significantly better")
    assert "not distinguishable from the best: pi" in fluid["verdict"][0]
    assert "abc" not in " ".join(fluid["verdict"])
    assert "**not** significantly better" in fluid["verdict"][1]  # fct, p = 0.30
    assert netns["verdict"] == ["mrae: no policy beats the trivial TBF (it ranks first of 2). A paced DTN ranks 2 "
                                "of 2, not distinguishable from the best."]


def test_leaderboard_region_renders_from_rows_and_is_skipped_without_them(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    region = "<!-- render:leaderboard -->\nkept as it is\n<!-- /render:leaderboard -->\n"
    (tmp_path / "README.md").write_text(region)
    msgs: list[str] = []
    assert check(tmp_path, msgs.append) is None and write(tmp_path, msgs.append) == []
    assert msgs and all("skipped region 'leaderboard'" in m and "results.json not found" in m for m in msgs)
    assert (tmp_path / "README.md").read_text() == region  # nothing invented
    (tmp_path / "reports" / "leaderboard").mkdir(parents=True)
    (tmp_path / "reports" / "leaderboard" / "results.json").write_text(json.dumps({"rows": ROWS}))
    text = render_figure("leaderboard", tmp_path)
    assert "| not comparable | abc |" in text and "| 1 | mlc |" in text and "**netns, DTN bbr.**" in text
    assert write(tmp_path, msgs.append) == ["README.md: leaderboard"]
    (tmp_path / "reports" / "leaderboard" / "results.json").write_text(json.dumps({"rows": [{"plant": "fluid"}]}))
    with pytest.raises(ValueError, match="row 0 lacks cca"):
        render_figure("leaderboard", tmp_path)


def test_verdict_names_the_runs_still_going(tmp_path: Path) -> None:
    """An incomplete run the merge left out is named beside the verdict, never ranked in it."""
    (tmp_path / "reports" / "leaderboard").mkdir(parents=True)
    doc = {"rows": ROWS, "incomplete_runs": [{"run": "netns-testbed-cubic", "scenario": "testbed", "plant": "netns",
                                              "cca": "cubic", "units_left": 93}]}
    (tmp_path / "reports" / "leaderboard" / "results.json").write_text(json.dumps(doc))
    assert leaderboard_context(doc)["pending"][0]["units_left"] == 93
    readme = render_figure("readme-decision", tmp_path)
    assert ("Not in this table yet, unfinished (each resumes from its ledger): netns, DTN cubic, on `testbed` "
            "(93 trial units left).") in readme
    assert "(../reports/leaderboard/netns-testbed-cubic/report.md)" in render_figure("leaderboard", tmp_path)
    (tmp_path / "reports" / "leaderboard" / "results.json").write_text(json.dumps({"rows": ROWS}))
    assert "Not in this table yet" not in render_figure("readme-decision", tmp_path)


def test_every_figure_has_a_template() -> None:
    for name in FIGURES:
        assert (ROOT / "src" / "scidmz" / "evaluation" / "templates" / "docs" / f"{name}.md.j2").is_file()


def test_verdict_says_whether_the_ann_pays_for_itself() -> None:
    rows = [_row("fluid", "cubic", "trivial", "mrae", 0.063, None, 0.0, p_best=0.001),
            {**_row("fluid", "cubic", "mlc", "mrae", 0.054, 0.0004, 13.6), "vs_pi_pct": 2.0, "vs_pi_p": 0.31},
            _row("fluid", "cubic", "pi", "mrae", 0.055, 0.001, 12.0, p_best=0.31)]
    (line,) = leaderboard_context({"rows": rows})["regimes"][0]["verdict"]
    assert "The inverse ANN (mlc vs pi, +2.0 %, p = 0.31, Holm) makes no significant difference." in line
    rows[1] = {**rows[1], "vs_pi_pct": 9.0, "vs_pi_p": 0.001}
    (line,) = leaderboard_context({"rows": rows})["regimes"][0]["verdict"]
    assert "(mlc vs pi, +9.0 %, p = 0.001, Holm) pays for itself." in line


def test_verdict_names_the_best_policy_of_each_place_an_admin_can_act() -> None:
    """Where an admin should act: per place (policy kind) its best on MRAE, with MRAE and FCT vs trivial;
    kinds kept out of the ranking are named as not comparable, never as a place's best."""
    def kind(row: dict, k: str) -> dict:
        return {**row, "kind": k}

    rows = [kind(_row("netns", "cubic", "trivial", "mrae", 0.065, None, 0.0), "rate"),
            kind(_row("netns", "cubic", "pi", "mrae", 0.052, 0.09, 19.5), "rate"),
            kind(_row("netns", "cubic", "mlc", "mrae", 0.051, 0.01, 14.4), "rate"),
            kind(_row("netns", "cubic", "pacing", "mrae", 0.034, 0.001, 47.9), "host"),
            kind(_row("netns", "cubic", "jenks", "mrae", 0.16, 0.002, -148.9), "queue"),
            kind(_row("netns", "cubic", "abc", "mrae", 0.35, 0.001, -430.2, comparable=False), "discipline"),
            kind(_row("netns", "cubic", "trivial", "fct", 58.6, None, 0.0), "rate"),
            kind(_row("netns", "cubic", "pacing", "fct", 53.9, 0.19, 7.9), "host"),
            kind(_row("netns", "cubic", "mlc", "fct", 55.8, 0.03, 4.8), "rate")]
    (g,) = leaderboard_context({"rows": rows})["regimes"]
    # mlc ranks above pi on MRAE (0.051 < 0.052), so it is the uplink's best; jenks has no FCT row.
    assert g["by_place"] == ("By where the admin acts, the best policy there (vs the trivial TBF, + = better, "
                             "* significantly better, † significantly worse (p < 0.05, Holm), ° too few pairs for any "
                             "outcome to reach it after Holm): the DTN host: pacing (MRAE +47.9 %*, FCT +7.9 %); the campus uplink "
                             "rate: mlc (MRAE +14.4 %*, FCT +4.8 %*); the border router's queues: jenks "
                             "(MRAE -148.9 %†); not comparable on this plant: abc.")
    rows[0] = {**rows[0], "mean": 0.04}  # the trivial TBF now beats every other rate policy
    (g,) = leaderboard_context({"rows": rows})["regimes"]
    assert "the campus uplink rate: the trivial TBF itself (no policy of this kind beats it);" in g["by_place"]
    assert leaderboard_context({"rows": ROWS})["regimes"][0]["by_place"] == ""  # rows without kinds: no sentence
    assert sorted(k for k, _ in PLACES) == sorted(POLICY_KINDS)  # a new kind must get its place in the sentence


def test_p_floor_is_scipys_smallest_wilcoxon_p() -> None:
    """Every difference of one sign is the most extreme a signed-rank test sees: scipy's p there."""
    from scipy.stats import wilcoxon

    for n in range(2, 13):
        assert p_floor(n) == pytest.approx(wilcoxon(np.arange(1.0, n + 1)).pvalue, rel=1e-12)
    assert p_floor(5) >= ALPHA > p_floor(6) and p_floor(0) == 1.0


def test_verdict_says_when_a_test_had_too_few_pairs_to_decide() -> None:
    """Five FCT pairs cannot give p < 0.05 however far apart: such a policy is named untestable,
    never "not distinguishable" from the best nor "not significantly better" than trivial."""
    def n(row: dict, trials: int) -> dict:
        return {**row, "trials": trials, "paired_n": trials, "kind": "rate"}

    rows = [n(_row("netns", "cubic", "trivial", "fct", 58.3, None, 0.0, p_best=0.02), 10),
            n(_row("netns", "cubic", "pacing", "fct", 53.9, 0.023, 7.3), 9),
            n(_row("netns", "cubic", "pi", "fct", 55.5, 0.2, 4.9, p_best=0.3), 9),
            n(_row("netns", "cubic", "ffs", "fct", 150.5, 0.25, -156.0, p_best=0.25), 5)]
    (g,) = leaderboard_context({"rows": rows})["regimes"]
    (line,) = g["verdict"]
    assert "not distinguishable from the best: pi;" in line
    assert ("too few paired trials to test against the best (no outcome on so few can reach p < 0.05, "
            "Holm-corrected): ffs (150, n = 5, p >= 0.062)" in line)
    assert "ffs" not in line.split("too few")[0]
    rows = [n(_row("netns", "cubic", "trivial", "fct", 58.3, None, 0.0), 4),
            n(_row("netns", "cubic", "pacing", "fct", 50.0, 0.5, 14.2, p_best=None), 4)]
    (line,) = leaderboard_context({"rows": rows})["regimes"][0]["verdict"]
    assert "untestable against the trivial TBF: too few paired trials (n = 4; the smallest p" in line
    assert "**not** significantly" not in line
    rows[1]["paired_n"] = 8  # the same p on 8 pairs is a real "not significant"
    (line,) = leaderboard_context({"rows": rows})["regimes"][0]["verdict"]
    assert "**not** significantly better than the trivial TBF" in line
    # ten pairs clear the raw floor, but not the Holm correction of a page of 41 tests: still untestable
    rows = [n(_row("netns", "cubic", "trivial", "fct", 58.3, None, 0.0), 10),
            {**n(_row("netns", "cubic", "pacing", "fct", 50.0, 0.5, 14.2), 10), "p_vs_trivial_raw": 0.3}]
    rows += [{**_row("fluid", "cubic", f"p{i}", "mrae", 1.0, 0.9, 1.0), "p_vs_trivial_raw": 0.4} for i in range(40)]
    (line,) = next(g["verdict"] for g in leaderboard_context({"rows": rows})["regimes"] if g["plant"] == "netns")
    assert ("untestable against the trivial TBF: too few paired trials for this page's Holm correction (n = 10; "
            "the smallest corrected p any outcome could get is 0.08)") in line
    assert "**not** significantly" not in line


def test_saturator_figure_gives_each_policys_best_and_the_verdict_on_the_ann(tmp_path: Path) -> None:
    """docs/results.md's saturator region: rendered from the study's results.json (skipped without it)."""
    def best(limiter: str, du: float, mrae: float) -> dict:
        return {"limiter": limiter, "delta_u": du, "mrae": mrae, "fct_s": 190.0, "utilization": 0.95}

    vs = {"mrae": {"n": 50, "mean_diff": -0.004, "mlc_lower": 36, "pi_lower": 14, "wilcoxon_p": 0.003}}
    doc = {"benchmark": "pi_vs_mlc_saturator", "plan": {"quick": False},
           "results": {"cubic": {"trivial": {"mrae": 0.063, "fct_s": 195.0, "utilization": 0.94},
                                 "best": {"mlc": best("rate", 0.05, 0.048), "pi": best("band", 0.02, 0.052),
                                          "mlc_vs_pi": vs},
                                 "configs": [{"limiter": "band", "delta_u": 0.02, "mlc": {"mrae": 0.05},
                                              "pi": {"mrae": 0.052}},
                                             {"limiter": "band", "delta_u": 0.2, "mlc": {"mrae": 0.07},
                                              "pi": {"mrae": 0.071}},
                                             {"limiter": "rate", "delta_u": 0.05, "mlc": {"mrae": 0.048},
                                              "pi": {"mrae": 0.09}}]}}}
    with pytest.raises(Exception, match="reports/saturator/results.json not found"):
        render_figure("saturator", tmp_path)
    (tmp_path / "reports" / "saturator").mkdir(parents=True)
    (tmp_path / "reports" / "saturator" / "results.json").write_text(json.dumps(doc))
    text = render_figure("saturator", tmp_path)
    assert "| cubic | mlc | rate 0.05 | 0.0480 |" in text and "| cubic | pi | band 0.02 | 0.0520 |" in text
    # the spread across GA seeds unmeasured: a significant difference is still not a finding
    assert "DTN cubic: At each policy's best saturator mlc's and pi's MRAE differ by 0.0040" in text
    assert "was not measured: not a finding" in text and "pays for itself" not in text
    assert "Smoke-test" not in text
    assert "(mlc lower in 36/50 paired trials, p = 0.003)" in text
    doc["results"]["cubic"]["best"]["ga_spread"] = 0.001  # measured, and smaller than the difference
    (tmp_path / "reports" / "saturator" / "results.json").write_text(json.dumps(doc))
    assert "DTN cubic: At each policy's best saturator the inverse ANN pays for itself" in render_figure("saturator",
                                                                                                      tmp_path)
    assert ("each reading: band mlc 0.0500, pi 0.0520; rate mlc 0.0480, pi 0.0900 (trivial TBF 0.0630)."
            in text)


def test_verdict_names_dtns_that_finished_faster_than_their_target_allows() -> None:
    """A kernel BBR v1 DTN overshoots its target: its lower FCT is campus traffic's loss, and the
    FCT sentence says so for every policy under the ideal at the target (from the run's plan, for
    rows without their DTN's rate / target), never calling it the best."""
    rows = [{**_row("netns", "bbr", "trivial", "fct", 36.3, None, 0.0), "run": "r"},
            {**_row("netns", "bbr", "pacing", "fct", 51.8, 0.001, -42.7), "run": "r"}]
    doc = {"rows": rows, "runs": [{"run": "r", "fct_ideal_s": 48.0}]}
    (line,) = leaderboard_context(doc)["regimes"][0]["verdict"]
    assert line.startswith("fct: best is pacing (-42.7 % vs trivial, p = 0.001), significantly **worse** than")
    assert line.endswith("At exactly its target the DTN would take 48.0 s. Overshoot, not better service (the DTN ran "
                         "above its target at campus traffic's expense; read the MRAE): trivial (36.3 s).")
    doc["runs"][0]["fct_ideal_s"] = 30.0
    assert "At exactly its target" not in leaderboard_context(doc)["regimes"][0]["verdict"][0]
    assert "At exactly its target" not in leaderboard_context({"rows": rows})["regimes"][0]["verdict"][0]


def test_merged_runs_carry_their_ideal_fct() -> None:
    from scidmz.evaluation import fct
    from scidmz.evaluation.leaderboard.plan import ideal_fct
    from scidmz.evaluation.leaderboard.results import fct_ideal_of
    from scidmz.evaluation.mlc.plan import ExperimentPlan
    from scidmz.units import WIRE_PER_PAYLOAD

    # one formula for both studies: payload bytes on a frame-byte rate (48.0 s without the frames)
    doc = {"plan": {"transfer": 300e6, "fct_target": 0.5}, "fingerprint": {"capacity": 100e6}}
    assert fct_ideal_of(doc) == pytest.approx(48.0 * WIRE_PER_PAYLOAD) == ideal_fct(300e6, 0.5, 100e6)
    assert fct.ideal_fct(300e6, 50e6) == ideal_fct(300e6, 0.5, 100e6) == pytest.approx(50.19, abs=0.01)

    class Sc:
        capacity = 100e6

    plan = ExperimentPlan(transfer=300e6, fct_target=0.5, fct_max_time=None)
    assert plan.fct_bound(Sc()) == pytest.approx(4 * fct.ideal_fct(300e6, 50e6) + 60)
    assert fct_ideal_of({"plan": {"transfer": 300e6}}) is None


def test_saturator_figure_marks_the_old_rule_and_a_difference_within_the_ga_spread(tmp_path: Path) -> None:
    """Results selected on their own test trials (no plan.selection) say so; where the leaderboard holds
    a second GA run of one of the study's configurations on the same trials, its spread is shown and a
    smaller mlc-pi difference is not a finding."""
    gains = {"kp": 0.3, "ki": 0.2, "kw": 1.4}
    cfg = {"limiter": "band", "delta_u": 0.02, "mlc": {"mrae": 0.0441, "gains": gains},
           "pi": {"mrae": 0.0449, "fct_s": 174.4, "gains": {"kp": 0.7, "ki": 0.5, "kw": 1.5}}}
    best = {"limiter": "band", "delta_u": 0.02, "mrae": 0.0441, "fct_s": 172.0, "utilization": 0.97}
    vs = {"mrae": {"n": 50, "mean_diff": 0.001, "mlc_lower": 20, "pi_lower": 30, "wilcoxon_p": 0.014}}
    plan = {"trials": 50, "seed": 0, "ga": [100, 30, 15], "ga_episode_s": 120.0}
    doc = {"benchmark": "pi_vs_mlc_saturator", "plan": plan,
           "results": {"bbr2": {"scenario": "paper-bbr2", "trivial": {"mrae": 0.0446, "fct_s": 176.0, "utilization": 0.97},
                                "best": {"mlc": best, "pi": best, "mlc_vs_pi": vs}, "configs": [cfg]}}}
    sat = tmp_path / "reports" / "saturator"
    sat.mkdir(parents=True)
    (sat / "results.json").write_text(json.dumps(doc))
    text = render_figure("saturator", tmp_path)
    assert "**Produced under the old rule:**" in text and "was not measured: not a finding" in text  # no spread
    lb = tmp_path / "reports" / "leaderboard"
    (lb / "pi-gains" / "paper-bbr2").mkdir(parents=True)
    (lb / "pi-gains" / "paper-bbr2" / "gains.json").write_text(json.dumps(
        {**gains, "delta_u": 0.02, "limiter": "band", "info": {"generations": 100, "population": 30, "episode": 120.0}}))
    (lb / "fluid-paper-bbr2").mkdir()
    rows = [{"policy": "pi", "experiment": "mrae", "mean": 0.0430, "trials": 50},
            {"policy": "pi", "experiment": "fct", "mean": 173.2, "trials": 50}]
    targets = {"mrae": ["a", "b"], "fct": ["c", "c"]}
    (lb / "fluid-paper-bbr2" / "results.json").write_text(json.dumps({"plan": {"seed": 0}, "rows": rows,
                                                                        "targets": {**targets, "short": ["d"]}}))
    # the study records no target hashes: it cannot show it ran the leaderboard's trials, so no pair
    assert "a spread of" not in render_figure("saturator", tmp_path)
    doc["results"]["bbr2"]["targets"] = {**targets, "mrae": ["a", "x"]}
    (sat / "results.json").write_text(json.dumps(doc))
    assert "a spread of" not in render_figure("saturator", tmp_path)  # other targets
    doc["results"]["bbr2"]["targets"] = targets
    (sat / "results.json").write_text(json.dumps(doc))
    text = render_figure("saturator", tmp_path)
    assert "less than one configuration's MRAE moves across GA runs (0.0019): not a finding" in text
    assert "gives MRAE 0.0430 and 0.0449: a spread of 0.0019 from two runs" in text and "(DTN FCT 173.2 and 174.4 s" in text
    (sat / "results.json").write_text(json.dumps({**doc, "plan": {**plan, "selection": {"seed": 50, "trials": 50}}}))
    assert "old rule" not in render_figure("saturator", tmp_path)


def test_p4_discipline_share_lists_every_run_and_marks_a_failed_one(tmp_path: Path) -> None:
    """benchmarks/p4_discipline_share.py's file: every run's share is in the table, a failed run
    stays there marked, and the goodput range spans all runs."""
    meta = {"generated": "2026-12-06 20:00:00 UTC", "kernel": "k", "machine": {"cpus": 2}, "load_avg": [0.5],
            "bmv2": None}
    line = {"link_bps": 1e7, "buffer_bytes": 36000, "seconds": 10, "target_share": 0.7, "gap": 0.01}
    rows = [{**line, "policy": "abc", "run": k, "passed": True, "dtn_share_bmv2": 0.70 + k / 100,
             "dtn_share_netns_stage": 0.69, "goodput_bmv2_bps": 9.4e6 + k * 1e5, "goodput_stage_bps": 8.6e6}
            for k in range(2)]
    rows.append({**line, "policy": "ffs", "run": 0, "passed": False, "dtn_share_bmv2": 0.52, "gap": -0.2,
                 "dtn_share_netns_stage": 0.72, "goodput_bmv2_bps": 5.0e6, "goodput_stage_bps": 6.0e6})
    rows.append({"policy": "ffs", "run": 1, "passed": False, "measured": False})
    (tmp_path / "reports" / "p4disc").mkdir(parents=True)
    (tmp_path / "reports" / "p4disc" / "share.json").write_text(json.dumps({"meta": meta, "runs": 2, "rows": rows}))
    text = render_figure("p4disc-share", tmp_path)
    assert "| ABC | 0.700, 0.710 | 0.690, 0.690 | +0.010, +0.010 | passed, passed |" in text
    assert "| FFS | 0.520 | 0.720 | -0.200 | **failed** |" in text
    assert "ABC 9.4-9.5 through BMv2 and 8.6-8.6 through the stage; FFS 5.0-5.0" in text
    assert "A 10 Mbit/s link, a 36,000-byte buffer" in text and "target share 0.70" in text
    assert "Failed before measuring (no share, counted here so that no run is left out): FFS in run 2." in text


def test_validity_signals_are_read_from_every_ledger_that_carries_them(tmp_path: Path) -> None:
    """Each real-time ledger whose plan has the rule is summarised over every unit line (re-runs
    included); a legacy ledger (no rule) and one without signals (the fluid plant) are left out."""
    rule = {"max_cpu_pressure": 0.3, "max_stage_late": 0.0005, "min_probe_service": 0.9, "max_reruns": 3}

    def unit(policy: str, trial: int, cpu: float, rerun: int = 0) -> dict:
        return {"kind": "unit", "unit": "mrae", "policy": policy, "trial": trial, "wall_s": 100.0, "rerun": rerun,
                "finished_at": f"2026-12-0{5 + trial}T10:00:00", "metrics": {"mrae": 9.0},
                "validity": {"cpu_pressure": cpu, "stage_late_mean_s": 2e-5, "probe_service": 0.99,
                             "probe_wall_s": 3.0}}

    def ledger(rel: str, head: dict, units: list[dict]) -> None:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("".join(json.dumps(x) + "\n" for x in [{"kind": "header", **head}, *units]))

    ledger("reports/leaderboard/netns-a/ledger.jsonl", {"plan": {"validity": rule}},
           [unit("trivial", 0, 0.10), unit("ffs", 0, 0.40), unit("trivial", 0, 0.12, 1), unit("ffs", 0, 0.20, 1),
            unit("trivial", 1, 0.14), unit("ffs", 1, 0.22)])
    ledger("reports/leaderboard/netns-legacy/ledger.jsonl", {"plan": {"max_starved": 0.05}}, [unit("pi", 0, 0.9)])
    fluid = unit("pi", 0, 0.0)
    del fluid["validity"]
    ledger("reports/leaderboard/fluid-b/ledger.jsonl", {"plan": {"validity": rule}}, [fluid])
    ctx = FIGURES["validity-signals"](tmp_path)
    assert ctx["src"] == ["reports/leaderboard/netns-a/ledger.jsonl"]
    text = render_figure("validity-signals", tmp_path)
    row = "| `netns-a` | 6 (2) | 2026-12-05 to 2026-12-06 | 0.10 / 0.17 / 0.40 | ffs 0.22 | 0.02 ms | 0.9900 / 0.9900 |"
    assert row in text, text
    assert "| 3.00 s (3.0 %) | 1 (rule: 0.3, 0.5 ms, 0.9) |" in text
    (tmp_path / "reports" / "leaderboard" / "netns-a" / "ledger.jsonl").unlink()
    with pytest.raises(Missing, match="no committed ledger holds validity signals"):
        FIGURES["validity-signals"](tmp_path)
