"""The statistics a reviewer recomputed, each finding with a test that would have caught it.

- ranks and "best" are paired comparisons on the trials every ranked policy kept, not means
  over unequal trial sets (a policy climbed by losing its worst trial to the starvation filter);
- the Wilcoxon tests come with their effect, the Hodges-Lehmann estimate and its interval;
- Holm spans every test a page renders, the planned mlc-vs-pi test included;
- the verdict's words check the sign ("-8.0 % vs trivial ... significantly better" could be rendered);
- a DTN above its target is overshoot, never the FCT's best;
- one all-ties convention (p = 1.0) for every study.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from scidmz.evaluation import stats
from scidmz.evaluation.verdict import leaderboard_context


def test_signed_rank_cdf_is_scipys_exact_null() -> None:
    from scipy.stats import wilcoxon

    rng = np.random.default_rng(5)
    for n in (3, 7, 12, 20):
        d = rng.normal(0.2, 1.0, n)
        res = wilcoxon(d, method="exact")
        t = int(min(res.statistic, n * (n + 1) / 2 - res.statistic))
        assert min(1.0, 2 * stats.signed_rank_cdf(n)[t]) == pytest.approx(res.pvalue, rel=1e-12)


def test_hodges_lehmann_is_the_median_of_walsh_averages_and_inverts_the_test() -> None:
    """The interval is the set of shifts the exact two-sided test at 5 % does not reject."""
    from scipy.stats import wilcoxon

    rng = np.random.default_rng(8)
    d = rng.normal(0.5, 1.0, 15)
    est, lo, hi = stats.hodges_lehmann(d)
    walsh = [(d[i] + d[j]) / 2 for i in range(15) for j in range(i, 15)]
    assert est == pytest.approx(np.median(walsh))
    eps = 1e-9
    for inside in (lo + eps, hi - eps, est):
        assert wilcoxon(d - inside, method="exact").pvalue >= 0.05
    for outside in (lo - eps, hi + eps):
        assert wilcoxon(d - outside, method="exact").pvalue < 0.05
    assert stats.hodges_lehmann(np.zeros(6)) == (0.0, 0.0, 0.0)
    assert all(math.isnan(v) for v in stats.hodges_lehmann([]))


def test_all_tied_pairs_give_p_one_and_a_zero_effect_in_both_studies() -> None:
    a = np.array([0.1, 0.2, 0.3, 0.4])
    assert stats.wilcoxon_p(a, a) == 1.0 and stats.wilcoxon_p is stats.wilcoxon_p
    fam = stats.family({"trivial": dict(enumerate(a)), "same": dict(enumerate(a))}, "lower")
    assert fam["same"]["p_vs_trivial_raw"] == 1.0 and fam["same"]["vs_trivial_pct"] == 0.0
    assert fam["same"]["vs_trivial_hl_pct"] == 0.0 and fam["same"]["vs_trivial_hl_ci95"] == [0.0, 0.0]
    # the MLC study's paired() gives the same p, not NaN
    table = pd.DataFrame({"policy": ["trivial"] * 4 + ["same"] * 4, "trial": [0, 1, 2, 3] * 2, "mrae": [*a, *a]})
    summary = {"trivial": {}, "same": {}}
    stats.paired(summary, table, "mrae")
    assert summary["same"]["paired_p"] == 1.0 and stats.BASELINE is stats.BASELINE


def test_ranks_are_paired_on_the_trials_every_ranked_policy_kept() -> None:
    """"lucky" is worse than "steady" in every trial, but lost its worst trial (excluded): by the
    means over unequal trial sets it would rank first; paired, it ranks behind."""
    rng = np.random.default_rng(4)
    base = rng.uniform(0.08, 0.12, 20)
    steady = base - 0.02
    lucky = base - 0.015
    lucky_kept = {i: v for i, v in enumerate(lucky) if i not in (0, 1)}
    base[:2] = 0.5  # trials 0 and 1 disturbed: every policy was slow there
    steady[:2] = 0.5
    fam = stats.family({"trivial": dict(enumerate(base)), "steady": dict(enumerate(steady)), "lucky": lucky_kept},
                       "lower")
    assert fam["lucky"]["mean"] < fam["steady"]["mean"]  # the unpaired means would rank lucky first
    assert fam["steady"]["rank"] == 1 and fam["lucky"]["rank"] == 2 and fam["trivial"]["rank"] == 3
    assert fam["steady"]["shared_n"] == fam["lucky"]["shared_n"] == 18
    assert fam["lucky"]["paired_n"] == 18 and fam["steady"]["paired_n"] == 20  # differing trial counts


def test_negative_paired_change_is_never_called_better() -> None:
    """The latent bug: a best row 8 % worse than trivial with a small p read "significantly better"."""
    rows = [{"plant": "netns", "cca": "cubic", "policy": "trivial", "experiment": "mrae", "trials": 10, "mean": 0.05,
             "ci95": [0.04, 0.06], "vs_trivial_pct": 0.0, "p_vs_trivial": None, "comparable": True, "rank": 2},
            {"plant": "netns", "cca": "cubic", "policy": "pi", "experiment": "mrae", "trials": 10, "mean": 0.049,
             "ci95": [0.04, 0.06], "vs_trivial_pct": -8.0, "p_vs_trivial": 0.01, "comparable": True, "rank": 1,
             "vs_trivial_hl_pct": -7.5, "vs_trivial_hl_ci95": [-9.0, -6.0]}]
    (line,) = leaderboard_context({"rows": rows})["regimes"][0]["verdict"]
    assert "-8.0 % vs trivial, HL -7.5 % [-9.0, -6.0]" in line
    assert "significantly better" not in line and "significantly **worse** than the trivial TBF" in line
    by_place = leaderboard_context({"rows": [{**r, "kind": "rate"} for r in rows]})["regimes"][0]["by_place"]
    assert "MRAE -8.0 %†" in by_place and "-8.0 %*" not in by_place


def test_an_overshooting_dtn_is_never_the_fcts_best() -> None:
    """A BBR DTN at 1.3 x its target finishes sooner by taking campus bandwidth: named as overshoot."""
    def row(policy: str, mean: float, pct: float, p: float | None, ratio: float, rank: int) -> dict:
        return {"plant": "netns", "cca": "bbr", "policy": policy, "experiment": "fct", "trials": 10, "mean": mean,
                "ci95": [mean - 1, mean + 1], "vs_trivial_pct": pct, "p_vs_trivial": p, "comparable": True,
                "rate_vs_target": ratio, "rank": rank, "p_vs_best": 0.01 if rank > 1 else None, "kind": "rate"}

    rows = [row("pi", 40.0, 4.1, 0.003, 1.30, 1), row("trivial", 41.7, 0.0, None, 0.97, 2),
            row("pacing", 50.0, -19.9, 0.002, 0.96, 3)]
    (line,) = leaderboard_context({"rows": rows})["regimes"][0]["verdict"]
    assert not line.startswith("fct: best is pi")
    assert line.startswith("fct: no policy beats the trivial TBF")
    assert "Overshoot, not better service" in line and "pi (40.0 s at 1.30 x its target rate)" in line
    assert "not distinguishable from the best" not in line  # its tests were against the overshooter


def test_holm_spans_the_planned_mlc_vs_pi_test_too() -> None:
    from statsmodels.stats.multitest import multipletests

    rows = [{"p_vs_trivial_raw": 0.001, "p_vs_best_raw": math.nan, "vs_pi_p_raw": 0.02},
            {"p_vs_trivial_raw": 0.03, "p_vs_best_raw": 0.2}]
    assert stats.holm_rows(rows) == 4
    ref = multipletests([0.001, 0.02, 0.03, 0.2], method="holm")[1]
    assert [rows[0]["p_vs_trivial"], rows[0]["vs_pi_p"], rows[1]["p_vs_trivial"], rows[1]["p_vs_best"]] == \
        pytest.approx(list(ref))
    assert rows[0]["vs_pi_p"] > 0.05  # 0.02 alone would have read "pays for itself"
    assert math.isnan(rows[0]["p_vs_best"])


def _unit(unit: str, policy: str, trial: int, value: float, starved: int = 0) -> dict:
    return {"kind": "unit", "unit": unit, "policy": policy, "trial": trial, "seed": trial,
            "metrics": {"mrae": value}, "starved_periods": starved, "periods": 100}


def _head(max_starved: float | None = None) -> dict:
    plan = {"trials": 8, "experiments": ["mrae"], "seed": 0, "fct_target": 0.5}
    if max_starved is not None:
        plan["max_starved"] = max_starved
    return {"plan": plan, "plant": "netns", "scenario": {"fingerprint": {"dtn_cca": "cubic", "capacity": 1e8}},
            "policies": {"trivial": {"kind": "rate"}, "pi": {"kind": "rate"}, "pacing": {"kind": "host"}}}


def test_a_trial_invalid_for_one_policy_is_invalid_for_all() -> None:
    """The re-check's disturbed trial 1: only pacing's unit crossed the starvation threshold, so only
    it was dropped, and pi's and trivial's slow trial 1 stayed in. Per trial, it goes for everyone."""
    from scidmz.evaluation.leaderboard.results import build_rows, invalid_trials

    units = [_unit("mrae", n, i, v + 0.001 * i) for i in range(8)
             for n, v in (("trivial", 0.10), ("pi", 0.09), ("pacing", 0.05))]
    units[1 * 3 + 2]["starved_periods"] = 6  # trial 1, pacing: 6 % starved
    units[1 * 3 + 0]["metrics"]["mrae"] = 0.9  # the disturbed window: trivial collapsed there
    assert invalid_trials(units, 0.05) == {"mrae": {1}}
    rows = {r["policy"]: r for r in build_rows(_head(), units, {})}
    assert {r["trials"] for r in rows.values()} == {7} and {r["excluded_trials"] for r in rows.values()} == {1}
    assert rows["pi"]["vs_trivial_pct"] == pytest.approx(100 * 0.01 / np.mean([0.10 + 0.001 * i for i in range(8) if i != 1]))
    # the plan's rule wins over the caller's: a ledger whose plan says 0.1 keeps trial 1
    rows = {r["policy"]: r for r in build_rows(_head(max_starved=0.1), units, {}, max_starved=0.05)}
    assert rows["pi"]["trials"] == 8


def test_the_validity_rule_is_in_the_ledger_header_and_a_change_mid_run_is_refused(tmp_path) -> None:
    from scidmz.evaluation.leaderboard.ledger import Ledger
    from scidmz.evaluation.leaderboard.plan import LeaderboardPlan, make_plan

    plan = make_plan("netns", 4, 4, ("mrae",), max_starved=0.05)
    assert plan.to_dict()["max_starved"] == 0.05
    with Ledger.open(tmp_path, {"plan": plan.to_dict()}, resume=False) as led:
        led.append("mrae", "trivial", 0, {"seed": 0, "metrics": {"mrae": 0.1}})
    other = make_plan("netns", 4, 4, ("mrae",), max_starved=0.1)
    with pytest.raises(ValueError, match=r"plan\.max_starved: 0\.05 in the ledger, 0\.1 now") as e:
        Ledger.open(tmp_path, {"plan": other.to_dict()}, resume=True, allow_drift=True)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="--max-starved must be a share"):
        LeaderboardPlan(trials=2, fct_trials=2, short_trials=2, max_starved=1.5)


def test_merge_refuses_runs_of_one_plan_with_other_targets(tmp_path) -> None:
    import json

    from scidmz.evaluation.leaderboard.results import merge_runs

    for name, hashes in (("a", ["x0", "x1"]), ("b", ["x0", "y1"])):
        (tmp_path / name).mkdir()
        doc = {"rows": [], "plan": {"seed": 0, "duration": 120.0}, "fingerprint": {"capacity": 1e8},
               "targets": {"mrae": hashes}, "scenario": {"name": name}}
        (tmp_path / name / "results.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"runs a and b share a plan but trial 1's MRAE target differs"):
        merge_runs(tmp_path)


def test_leave_one_out_says_when_one_trial_decides_the_sign() -> None:
    """The re-check's MLC MRAE +42.8 % was one disturbed trial; without it the change was -0.2 %."""
    base = np.array([0.05] * 9 + [0.50])  # trial 9: trivial collapsed in a disturbed window
    mlc = np.array([0.0502] * 9 + [0.05])
    lo, hi = stats.loo_pct(base, mlc, "lower")
    assert lo == pytest.approx(-0.4) and hi > 40
    fam = stats.family({"trivial": dict(enumerate(base)), "mlc": dict(enumerate(mlc))}, "lower")
    assert fam["mlc"]["vs_trivial_loo_pct"] == pytest.approx([lo, hi])
    row = {"plant": "netns", "cca": "cubic", "policy": "mlc", "experiment": "mrae", "trials": 10, "mean": 0.0952,
           "ci95": [0.05, 0.14], "comparable": True, "p_vs_trivial": 0.6, "rank": 1, **{k: fam["mlc"][k] for k in (
               "vs_trivial_pct", "vs_trivial_loo_pct")}}
    triv = {**row, "policy": "trivial", "rank": 2, "vs_trivial_pct": 0.0, "vs_trivial_loo_pct": [math.nan] * 2}
    (line,) = leaderboard_context({"rows": [row, triv]})["regimes"][0]["verdict"]
    assert "one trial decides its sign (leaving one out: -0.4 to" in line
    assert all(math.isnan(v) for v in stats.loo_pct(base[:2], mlc[:2], "lower"))
