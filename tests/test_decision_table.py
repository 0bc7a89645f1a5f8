"""The README's decision table and the trade-off figures (``evaluation.decision``, ``plots.plot_tradeoff``).

Rows are where the admin acts, columns the regimes; a cell's mark checks the sign, an FCT won by
overshoot is never called better, a kind the plant does not model on equal footing is named
"not comparable", and a run without short-flow trials gets no invented short-flow FCT.
"""

from __future__ import annotations

import json
from pathlib import Path

from scidmz.evaluation.decision import (
    configuration_answers,
    decision_table,
    floors,
    mlc_standing,
    provisional_runs,
    tradeoff_points,
)
from scidmz.evaluation.docfigures import plot_figures, render_figure


def _row(plant: str, cca: str, policy: str, kind: str, exp: str, mean: float, pct: float, p: float | None,
         rank: int | None, comparable: bool = True, **kw: object) -> dict[str, object]:
    return {"plant": plant, "cca": cca, "policy": policy, "kind": kind, "experiment": exp, "trials": 20,
            "paired_n": 20, "mean": mean, "ci95": [mean * 0.9, mean * 1.1], "vs_trivial_pct": pct,
            "vs_trivial_ci95": [pct - 1.0, pct + 1.0], "p_vs_trivial": p, "comparable": comparable, "rank": rank,
            **kw}


def _doc() -> dict[str, object]:
    f = "fluid"
    rows = [
        _row(f, "cubic", "trivial", "rate", "mrae", 0.07, 0.0, None, 2),
        # a generic name of the host kind, as configurations will add (not comparable on the fluid plant)
        _row(f, "cubic", "pacing+pi", "host", "mrae", 0.02, 70.0, 1e-9, None, comparable=False),
        _row(f, "cubic", "mlc", "rate", "mrae", 0.06, 15.0, 0.001, 1, vs_pi_pct=8.0, vs_pi_p=0.9),
        _row(f, "cubic", "pi", "rate", "mrae", 0.065, 7.0, 0.2, 3),
        # significant, but worse: never a "*"
        _row(f, "cubic", "jenks", "queue", "mrae", 0.1, -45.0, 1e-6, 4),
        _row(f, "cubic", "mlc", "rate", "fct", 178.0, 3.2, 1e-5, 1),
        _row(f, "cubic", "jenks", "queue", "fct", 184.0, -0.1, 1.0, 3),
        _row(f, "cubic", "trivial", "rate", "fct", 184.0, 0.0, None, 2),
        _row(f, "cubic", "mlc", "rate", "short", 0.31, 4.0, 0.01, 2),
        _row(f, "cubic", "trivial", "rate", "short", 0.33, 0.0, None, 3),
        _row(f, "cubic", "jenks", "queue", "short", 0.04, 86.0, 1e-9, 1),
        _row("netns", "bbr", "trivial", "rate", "mrae", 0.78, 0.0, None, 2),
        _row("netns", "bbr", "pi", "rate", "mrae", 0.77, 0.3, 1.0, 1),
        # above its target: an FCT won by overshoot, with p < 0.05 still never "better"
        _row("netns", "bbr", "pi", "rate", "fct", 34.0, 4.5, 0.01, 1, rate_vs_target=1.45),
        _row("netns", "bbr", "trivial", "rate", "fct", 35.8, 0.0, None, 2, rate_vs_target=1.39),
    ]
    return {"rows": rows, "holm": {"tests": 9, "family": "all"}}


def test_cells_check_the_sign_name_overshoot_and_not_comparable_kinds() -> None:
    t = decision_table(_doc())
    assert t["columns"] == ["fluid, CUBIC", "kernel, BBR v1"]
    cells = {r["where"]: r["cells"] for r in t["rows"]}
    assert cells["the DTN host"] == ["not comparable on this plant (pacing+pi)", "not run"]
    assert cells["the campus uplink only"][0].startswith("**mlc**: MRAE +15.0 % [+14.0, +16.0]*; FCT +3.2 %")
    assert "MRAE -45.0 % [-46.0, -44.0]†" in cells["the border router's queues"][0]
    assert "]*" not in cells["the border router's queues"][0]
    bbr = cells["the campus uplink only"][1]
    assert "FCT +4.5 % [+3.5, +5.5] by overshoot (1.45 x its target rate)" in bbr and "]*" not in bbr
    assert cells["the bottleneck"] == ["not run", "not run"]


def test_the_too_few_pairs_mark_counts_the_pages_holm_family() -> None:
    """Ten FCT pairs all one way give a raw p of 0.002, but beside 40 larger p's Holm multiplies it past
    0.05: no outcome of that test could be significant, so its figure is marked ° (not a silent blank);
    in a page of two tests the same ten pairs could be, so no mark. Five pairs: ° in any page."""
    def kernel(policy: str, kind: str, exp: str, pct: float, raw: float | None, n: int = 20) -> dict[str, object]:
        return _row("netns", "cubic", policy, kind, exp, 1.0, pct, None if raw is None else min(1.0, raw * 41), None,
                    trials=n, paired_n=n, **({} if raw is None else {"p_vs_trivial_raw": raw}))

    page = [kernel("trivial", "rate", "mrae", 0.0, None), kernel("pacing", "host", "mrae", 40.0, 1e-6),
            kernel("trivial", "rate", "fct", 0.0, None), kernel("pacing", "host", "fct", 3.0, 0.4, n=10)]
    others = [_row("fluid", "cubic", f"p{i}", "rate", "short", 1.0, 1.0, 0.9, None, p_vs_trivial_raw=0.4)
              for i in range(40)]
    doc = {"rows": page + others}
    host = {r["where"]: r["cells"] for r in decision_table(doc)["rows"]}["the DTN host"]
    assert host[1] == "**pacing**: MRAE +40.0 % [+39.0, +41.0]*; FCT +3.0 % [+2.0, +4.0]°"
    assert "p_vs_trivial_floor" not in page[3]  # the caller's rows are not written to
    host = {r["where"]: r["cells"] for r in decision_table({"rows": page})["rows"]}["the DTN host"]
    assert host[0].endswith("FCT +3.0 % [+2.0, +4.0]")
    page[3] = {**page[3], "paired_n": 5}
    host = {r["where"]: r["cells"] for r in decision_table({"rows": page})["rows"]}["the DTN host"]
    assert host[0].endswith("FCT +3.0 % [+2.0, +4.0]°")


def test_mlc_standing_is_the_planned_test_in_words() -> None:
    (m,) = mlc_standing(_doc())
    assert (m["label"], m["ann"], m["vs_pi_pct"]) == ("fluid, CUBIC", "no difference", 8.0)
    assert m["vs_trivial"] == "MRAE +15.0 % [+14.0, +16.0]*"


def test_tradeoff_points_never_invent_short_flows(tmp_path: Path) -> None:
    fluid, netns = tradeoff_points(_doc())
    assert fluid["has_short"] and not netns["has_short"]
    jenks = next(p for p in fluid["points"] if p["policy"] == "jenks")
    assert jenks["short"]["mean"] == 0.04 and jenks["mrae"]["mean"] == 0.1
    assert all(p["short"] is None for p in netns["points"])
    (tmp_path / "reports" / "leaderboard").mkdir(parents=True)
    (tmp_path / "reports" / "leaderboard" / "results.json").write_text(json.dumps(_doc()))
    assert plot_figures(tmp_path, check_only=True) == ["docs/figures/tradeoff-fluid-cubic.png",
                                                       "docs/figures/tradeoff-netns-bbr.png"]
    written = plot_figures(tmp_path)
    assert all((tmp_path / w).stat().st_size > 1000 for w in written) and plot_figures(tmp_path, True) == []
    text = render_figure("tradeoff", tmp_path)
    assert "![tracking error against campus short-flow FCT, fluid, CUBIC](figures/tradeoff-fluid-cubic.png)" in text
    assert "*kernel, BBR v1:* this run has no campus short-flow trials" in text
    assert "fluid, CUBIC:* this run" not in text


def test_readme_decision_renders_the_table(tmp_path: Path) -> None:
    (tmp_path / "reports" / "leaderboard").mkdir(parents=True)
    (tmp_path / "reports" / "leaderboard" / "results.json").write_text(json.dumps(_doc()))
    text = render_figure("readme-decision", tmp_path)
    assert text.startswith("| the admin controls | fluid, CUBIC | kernel, BBR v1 |\n|---|---|---|\n")
    assert "Holm-corrected over 9 tests" in text
    assert "fluid, CUBIC +8.0 % (p = 0.9, no significant difference)." in text
    assert "Not in this table yet" not in text
    doc = {**_doc(), "incomplete_runs": [{"run": "r", "scenario": "testbed", "plant": "netns", "cca": "cubic",
                                          "units_left": 93}]}
    (tmp_path / "reports" / "leaderboard" / "results.json").write_text(json.dumps(doc))
    assert ("Not in this table yet, unfinished (each resumes from its ledger): netns, DTN cubic, on `testbed` "
            "(93 trial units left).") in render_figure("readme-decision", tmp_path)


def test_the_floor_is_read_per_regime_and_never_invented(tmp_path: Path) -> None:
    """The floor (the DTN alone on the link, the same targets) is shown for the regimes a floor run measured,
    and the others are named as not measured yet."""
    doc = {**_doc(), "floors": [{"run": "netns-testbed-bbr-floor", "plant": "netns", "cca": "bbr", "policy": "pacing",
                                 "mean": 0.0123, "ci95": [0.011, 0.0135], "trials": 20}]}
    fl, nb = floors(doc)
    assert fl == {"label": "fluid, CUBIC", "floor": None} and nb["floor"]["mean"] == 0.0123
    (tmp_path / "reports" / "leaderboard").mkdir(parents=True)
    (tmp_path / "reports" / "leaderboard" / "results.json").write_text(json.dumps(doc))
    text = render_figure("readme-decision", tmp_path)
    assert "kernel, BBR v1 pacing MRAE 0.0123 [0.0110, 0.0135] over 20 trials. Not measured yet: fluid, CUBIC." in text
    (tmp_path / "reports" / "leaderboard" / "results.json").write_text(json.dumps(_doc()))
    assert "Not measured yet: fluid, CUBIC; kernel, BBR v1." in render_figure("readme-decision", tmp_path)


def test_a_run_made_before_the_rules_marks_its_column_provisional(tmp_path: Path) -> None:
    """A column from a run whose plan carries no validity rule (it predates per-trial targets and
    validity) is named provisional under the table, with the run and its date; one under the rule is not."""
    rows = [{**r, "run": "fluid-a" if r["plant"] == "fluid" else "netns-b"} for r in _doc()["rows"]]
    runs = [{"run": "fluid-a", "plan": {"validity": {"max_cpu_pressure": 0.3}}, "generated": "2026-12-06 12:06:09 UTC"},
            {"run": "netns-b", "plan": {"trials": 24}, "generated": "2026-12-02 02:11:30 UTC"}]
    doc = {**_doc(), "rows": rows, "runs": runs}
    assert provisional_runs(doc) == [{"label": "kernel, BBR v1", "runs": "`netns-b` of 2026-12-02"}]
    (tmp_path / "reports" / "leaderboard").mkdir(parents=True)
    (tmp_path / "reports" / "leaderboard" / "results.json").write_text(json.dumps(doc))
    text = render_figure("readme-decision", tmp_path)
    assert "being redone under them (`scripts/kernel_campaign.sh`): kernel, BBR v1 (`netns-b` of 2026-12-02)." in text
    runs[1]["plan"] = {"validity": {"max_cpu_pressure": 0.3}}
    (tmp_path / "reports" / "leaderboard" / "results.json").write_text(json.dumps({**doc, "runs": runs}))
    assert provisional_runs({**doc, "runs": runs}) == [] and "Provisional" not in render_figure("readme-decision", tmp_path)


def _config_doc(p_alone: float, gain: float, short_pct: float | None, short_p: float | None,
                short_ci: tuple[float, float] | None = None) -> dict[str, object]:
    k = "netns"
    rows = [_row(k, "cubic", "trivial", "rate", "mrae", 0.07, 0.0, None, 3),
            _row(k, "cubic", "pacing", "host", "mrae", 0.03, 50.0, 1e-4, 2),
            _row(k, "cubic", "pacing+pi", "host", "mrae", 0.02, 70.0, 1e-5, 1, vs_pacing_pct=gain, vs_pacing_p=p_alone)]
    if short_pct is not None:
        ci = {"vs_trivial_ci95": list(short_ci)} if short_ci else {}
        rows += [_row(k, "cubic", "trivial", "rate", "short", 0.3, 0.0, None, 1),
                 _row(k, "cubic", "pacing+pi", "host", "short", 0.35, short_pct, short_p, 2, **ci)]
    return {"rows": rows}


def test_the_configuration_question_is_answered_either_way(tmp_path: Path) -> None:
    """Does a configuration beat pacing alone on MRAE (p < 0.01, Holm) with the campus's short flows no worse
    than under the trivial TBF? Yes, no, or not answerable yet without short-flow trials; never a yes on
    p < 0.05 alone, nor on a gain of the wrong sign."""
    def answer(*a: float | None) -> str:
        (c,) = configuration_answers(_config_doc(*a))
        return c["answer"]

    assert answer(0.001, 30.0, -2.0, 0.4).split("? ")[1].startswith("Yes: pacing+pi: MRAE +30.0 % vs pacing alone")
    assert "campus short-flow FCT -2.0 % [-3.0, -1.0] vs trivial, no worse" in answer(0.001, 30.0, -2.0, 0.4)
    assert answer(0.03, 30.0, -2.0, 0.4).split("? ")[1].startswith("No:")  # p < 0.05 is not the bar
    assert answer(0.001, -30.0, 1.0, 0.4).split("? ")[1].startswith("No:")  # significantly worse than alone
    assert "significantly worse" in answer(0.001, 30.0, -20.0, 0.001)
    assert answer(0.001, 30.0, -20.0, 0.001).split("? ")[1].startswith("No:")
    assert answer(0.001, 30.0, None, None).split("? ")[1].startswith("Not answerable yet:")
    (fluid,) = configuration_answers(_doc())
    assert fluid["label"] == "fluid, CUBIC" and fluid["answer"].endswith("? No: pacing+pi is not comparable on this plant.")
    (tmp_path / "reports" / "leaderboard").mkdir(parents=True)
    (tmp_path / "reports" / "leaderboard" / "results.json").write_text(json.dumps(_config_doc(0.001, 30.0, -2.0, 0.4)))
    assert "Configurations, kernel, CUBIC: Does a configuration beat" in render_figure("readme-decision", tmp_path)


def test_short_flows_no_worse_must_be_shown_not_merely_untested() -> None:
    """"No worse than under the trivial TBF" is a non-inferiority test (``SHORT_MARGIN_PCT``): short flows
    that no test could call significantly worse (10 pairs in a large Holm family, p = 1) but whose interval
    reaches a slowdown past the margin are "not shown", never a yes; an interval above the margin passes
    whatever its p."""
    from scidmz.evaluation.verdict import SHORT_MARGIN_PCT

    def answer(pct: float, p: float, ci: tuple[float, float]) -> str:
        (c,) = configuration_answers(_config_doc(0.001, 30.0, pct, p, ci))
        return c["answer"].split("? ")[1]

    wide = answer(-2.0, 1.0, (-12.0, +8.0))  # the old rule ("not significantly worse") said yes here
    assert wide.startswith("No:") and f"not shown to be no worse (its interval reaches -{SHORT_MARGIN_PCT:g} %" in wide
    edge = answer(-2.0, 1.0, (-SHORT_MARGIN_PCT, +1.0))
    assert edge.startswith("No:") and "not shown" in edge  # the margin itself is not cleared
    assert answer(-2.0, 1.0, (-SHORT_MARGIN_PCT + 0.1, +1.0)).startswith("Yes:")
    assert answer(+10.0, 1.0, (+2.0, +18.0)).startswith("Yes:")  # faster short flows pass, untested or not
    worse = answer(-20.0, 0.001, (-30.0, -10.0))
    assert worse.startswith("No:") and "significantly worse" in worse and "not shown" not in worse


def test_configurations_are_tested_against_the_paced_dtn_alone_in_the_pages_family() -> None:
    from scidmz.evaluation import stats
    from scidmz.evaluation.leaderboard.results import holm_note, planned_pairs

    pols = {"trivial": {"kind": "rate"}, "pi": {"kind": "rate"}, "pacing": {"kind": "host"},
            "pacing+pi": {"kind": "host"}, "mlc": {"kind": "rate"}, "jenks+pi": {"kind": "queue"}}
    assert planned_pairs(pols) == {"mlc": "pi", "pacing+pi": "pacing", "jenks+pi": "pacing"}
    assert planned_pairs({"pi": {"kind": "rate"}, "jenks+pi": {"kind": "queue+rate"}}) == {"mlc": "pi"}
    rows = [{"policy": "pacing+pi", "p_vs_trivial_raw": 0.01, "vs_pacing_p_raw": 0.004},
            {"policy": "mlc", "p_vs_trivial_raw": 0.02, "vs_pi_p_raw": 0.5}]
    assert stats.holm_rows(rows) == 4
    assert abs(rows[0]["vs_pacing_p"] - 0.016) < 1e-12 and rows[1]["vs_pi_p"] == 0.5
    note = holm_note(rows)
    assert note["tests"] == 4 and note["family"].endswith("each configuration against the paced DTN alone")
