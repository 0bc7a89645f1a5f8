"""Every committed leaderboard results.json follows from its ledger: recomputed here, any difference fails.

A reviewer recomputed our statistics from the ledgers with scipy and statsmodels; this is the
same check, run in CI, so a change of the statistics that is not re-rendered into reports/ (or a
results file edited by hand) cannot go unnoticed. Re-render with
``python3 scripts/recompute_leaderboard.py`` and ``scidmz leaderboard --merge --out reports/leaderboard``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scidmz.evaluation.leaderboard.ledger import first_difference
from scidmz.evaluation.leaderboard.results import merge_runs, recompute

ROOT = Path(__file__).resolve().parents[1]
RUNS = sorted(p.parent for p in ROOT.glob("reports/leaderboard*/*/ledger.jsonl"))


def test_there_are_committed_runs_to_check() -> None:
    assert len(RUNS) >= 5


@pytest.mark.parametrize("run", RUNS, ids=[f"{p.parent.name}/{p.name}" for p in RUNS])
def test_results_json_is_recomputed_from_its_ledger(run: Path) -> None:
    old, new = recompute(run)
    assert first_difference(old, new) is None, f"{run.relative_to(ROOT)}: {first_difference(old, new)}"


def test_the_merged_page_is_the_merge_of_its_runs() -> None:
    top = ROOT / "reports/leaderboard"
    committed = json.loads((top / "results.json").read_text())
    merged = json.loads(json.dumps(merge_runs(top), allow_nan=True).replace("NaN", "null"))
    for key in ("rows", "holm", "incomplete_runs", "floors"):
        assert first_difference(committed[key], merged[key]) is None, f"{key}: {first_difference(committed[key], merged[key])}"


def test_a_hand_edited_number_is_caught(tmp_path: Path) -> None:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(RUNS[0], run)
    doc = json.loads((run / "results.json").read_text())
    doc["rows"][0]["mean"] *= 1.001
    (run / "results.json").write_text(json.dumps(doc))
    old, new = recompute(run)
    assert "rows[0].mean" in (first_difference(old, new) or "")


@pytest.mark.parametrize("run", RUNS, ids=[f"{p.parent.name}/{p.name}" for p in RUNS])
def test_committed_comparability_is_todays_plant_rule(run: Path) -> None:
    """A committed run marks exactly the rows today's plant rule marks (``recompute(..., rejudge=True)``
    changes nothing): the fluid runs keep pacing, ABC and FFS out of their ranking; a real
    network has no model to be unequal in, so every kernel row is comparable."""
    from scidmz.evaluation.leaderboard.results import comparable_now

    doc = json.loads((run / "results.json").read_text())
    now = comparable_now(doc)
    assert {r["policy"]: r["comparable"] for r in doc["rows"]} == {p: now[p] for p in {r["policy"] for r in doc["rows"]}}
    if doc["plant"] == "fluid":
        ran = {r["policy"] for r in doc["rows"]}
        assert not now["pacing"] and all(not now[p] for p in ("abc", "pacing+pi") if p in ran)
        assert all(now[p] for p in ("pi", "jenks", "trivial") if p in ran)
    else:
        assert all(now.values())
