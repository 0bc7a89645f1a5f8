"""The MLC report's kernel evaluation laid out from the kernel leaderboard's units (``mlc.fromledger``).

Here on the fluid plant (the same core, the same ledger): a leaderboard run of ``mlc`` (the model
shipped for ``paper-cubic``) and the trivial TBF gives a study section whose numbers are the
leaderboard's; a run of another plan or another model is refused in one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scidmz.cli import main

QUICK = ["--quick", "--trials", "3", "--fct-trials", "2", "--policies", "trivial,mlc", "--experiments", "mrae,fct"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("lb") / "run"
    assert main(["leaderboard", "paper-cubic", *QUICK, "--out", str(out), "--json"]) == 0
    return out, json.loads((out / "results.json").read_text())


def _study(tmp: Path, **plan: object) -> Path:
    """An MLC report folder as the chain leaves it (its sections' tuning; the evaluation to be laid out)."""
    from scidmz.datasets import shipped_model
    from scidmz.scenario import load_scenario

    gains = json.loads(shipped_model(load_scenario("paper-cubic"))[1].read_text())
    experiments = {"seed": 0, "duration": 30.0, "target_low": 0.3, "target_high": 0.7, "target_hold": 30.0,
                   "fct_target": 0.5, "transfer": 150e6, **plan}
    out = tmp / "mlc"
    out.mkdir()
    doc = {"mode": "netns", "plan": {"experiments": experiments}, "meta": {"plant": "netns", "sizes": {}},
           "sections": {"cubic": {"scenario": "paper-cubic", "tune": {"gains": gains}}}, "files": {"cubic": {}}}
    (out / "results.json").write_text(json.dumps(doc))
    return out


def test_the_section_is_the_leaderboards_units(run, tmp_path: Path, capsys) -> None:
    lb, doc = run
    out = _study(tmp_path)
    assert main(["reproduce", "mlc", "--evaluation-from", str(lb), "--out", str(out), "--json"]) == 0
    res = json.loads((out / "results.json").read_text())
    summ = res["sections"]["cubic"]["summaries"]
    rows = {(r["experiment"], r["policy"]): r for r in doc["rows"]}
    for exp, key in (("mrae", "mrae"), ("fct", "fct")):
        for pol in ("mlc", "trivial"):
            assert summ[key][pol]["mean"] == pytest.approx(rows[(exp, pol)]["mean"], rel=1e-12)
            assert summ[key][pol]["n"] == rows[(exp, pol)]["trials"]
    assert summ["mrae"]["invalid_trials"] == [] and res["meta"]["evaluation_from"] == {"cubic": str(lb)}
    text = (out / "report.md").read_text()
    assert "kernel leaderboard's units of the MLC and the trivial TBF" in text and "example_trace" not in text
    assert "mrae_trials = 3 x 30 s" in text


@pytest.mark.parametrize("plan, words", [({"transfer": 300e6}, "plan.transfer is 150000000.0, the study's 300000000.0"),
                                         ({"seed": 4}, "plan.seed is 0, the study's 4")])
def test_another_plan_is_refused_in_one_line(run, tmp_path: Path, capsys, plan: dict, words: str) -> None:
    out = _study(tmp_path, **plan)
    assert main(["reproduce", "mlc", "--evaluation-from", str(run[0]), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1
    assert "summaries" not in json.loads((out / "results.json").read_text())["sections"]["cubic"]  # untouched


def test_other_gains_or_a_run_without_the_mlc_are_refused(run, tmp_path: Path, capsys) -> None:
    out = _study(tmp_path)
    doc = json.loads((out / "results.json").read_text())
    doc["sections"]["cubic"]["tune"]["gains"]["kp"] = 123.0
    (out / "results.json").write_text(json.dumps(doc))
    assert main(["reproduce", "mlc", "--evaluation-from", str(run[0]), "--out", str(out)]) == 2
    assert "the chain tuned 123.0" in capsys.readouterr().err
    assert main(["reproduce", "mlc", "--evaluation-from", str(tmp_path), "--out", str(out)]) == 2
    assert "no results.json, so the run has not finished" in capsys.readouterr().err
    part = tmp_path / "part"
    part.mkdir()
    (part / "results.json").write_text(json.dumps({**run[1], "complete": False, "units_left": 7}))
    assert main(["reproduce", "mlc", "--evaluation-from", str(part), "--out", str(out)]) == 2
    assert "the run is unfinished (7 trial units left" in capsys.readouterr().err
    assert main(["reproduce", "mlc", "--evaluation-from", str(run[0]), "--trials", "5", "--out", str(out)]) == 2
    assert "does nothing with --evaluation-from" in capsys.readouterr().err
