"""A re-check run paired trial by trial with the run it re-checks (evaluation.leaderboard.recheck),
and its page (``scidmz leaderboard --out AGAIN --recheck FIRST``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scidmz.evaluation.leaderboard.recheck import (
    check_same_plan,
    read_ledger,
    recheck_context,
    recheck_rows,
    standing,
)

PLAN = {"trials": 8, "fct_trials": 8, "experiments": ["mrae", "fct"], "duration": 120.0, "target_low": 0.3,
        "target_high": 0.7, "target_hold": 30.0, "fct_target": 0.5, "transfer": 3e8, "seed": 0}
SC = {"name": "testbed", "sha256": "abc", "fingerprint": {"dtn_cca": "cubic", "capacity": 1e8}}


def _header(policies: dict[str, str], **plan: Any) -> dict[str, Any]:
    return {"kind": "header", "format_version": 1, "scenario": SC, "plant": "netns", "plan": {**PLAN, **plan},
            "policies": {n: {"kind": k, "files": {}} for n, k in policies.items()}}


def _unit(unit: str, policy: str, trial: int, value: float, starved: int = 0) -> dict[str, Any]:
    metrics = {"mrae": value} if unit == "mrae" else {"fct": value, "finished": True}
    return {"kind": "unit", "unit": unit, "policy": policy, "trial": trial, "seed": trial, "metrics": metrics,
            "starved_periods": starved, "periods": 100}


def _write(d: Path, header: dict[str, Any], units: list[dict[str, Any]], partial: bool = False) -> None:
    d.mkdir(parents=True)
    text = "".join(json.dumps(r) + "\n" for r in [header, *units])
    (d / "ledger.jsonl").write_text(text + ('{"kind": "unit", "pol' if partial else ""))


def _runs(tmp: Path, again_complete: bool = True) -> tuple[Path, Path]:
    rng = np.random.default_rng(1)
    base = {"trivial": 0.10, "pi": 0.09, "pacing": 0.05}
    first, again = [], []
    for i in range(8):
        noise = rng.normal(0, 0.004, 3)
        for j, (name, m) in enumerate(base.items()):
            first += [_unit("mrae", name, i, m + noise[j]), _unit("fct", name, i, 50 + 10 * m + noise[j])]
        # The re-check: trivial as before (its own noise), pacing halved in every trial, no pi.
        again += [_unit("mrae", "trivial", i, 0.10 + rng.normal(0, 0.004)), _unit("mrae", "pacing", i, 0.025),
                  _unit("fct", "trivial", i, 51.0 + rng.normal(0, 0.04)), _unit("fct", "pacing", i, 50.5)]
    first.append(_unit("mrae", "pacing", 9, 0.05))  # beyond the re-check's trials: never paired
    again[0]["starved_periods"] = 50  # trivial MRAE trial 0 of the re-check: excluded on both sides
    a, b = tmp / "first", tmp / "again"
    _write(a, _header({"trivial": "rate", "pi": "rate", "pacing": "host"}), first)
    _write(b, _header({"trivial": "rate", "pacing": "host"}), again, partial=True)
    (b / "results.json").write_text(json.dumps({"complete": again_complete, "units_left": 0 if again_complete else 7,
                                                "max_starved": 0.05, "plan": PLAN, "fingerprint": SC["fingerprint"]}))
    return a, b


def test_rows_pair_trial_by_trial_and_leave_out_excluded_trials(tmp_path: Path) -> None:
    a, b = _runs(tmp_path)
    h, u1 = read_ledger(a / "ledger.jsonl")
    _, u2 = read_ledger(b / "ledger.jsonl")  # the partial last line is skipped, the file left as it is
    assert h["plant"] == "netns" and (b / "ledger.jsonl").read_text().endswith('"pol')
    rows = {(r["experiment"], r["policy"]): r for r in recheck_rows(u1, u2, ["trivial", "pacing"])}
    pac = rows[("mrae", "pacing")]
    # trial 9 of the first run is unpaired; trial 0, starved for trivial in the re-check, is invalid
    # for every policy (validity per trial, not per unit), on both sides
    assert pac["n"] == 7 and pac["again_mean"] == pytest.approx(0.025)
    assert pac["pct"] == pytest.approx(100 * (pac["first_mean"] - 0.025) / pac["first_mean"])
    assert pac["p"] == pytest.approx(2 / 2**7)  # better in all 7 pairs: the exact two-sided p
    assert rows[("mrae", "trivial")]["n"] == 7
    assert rows[("mrae", "trivial")]["p"] > 0.05
    assert abs(rows[("fct", "pacing")]["pct"]) < 0.1 and rows[("fct", "pacing")]["first_mean"] == pytest.approx(50.5, abs=0.02)


def test_context_gives_both_verdicts_on_the_rechecked_trials(tmp_path: Path) -> None:
    a, b = _runs(tmp_path)
    ctx = recheck_context(a, b)
    assert ctx["complete"] and ctx["policies"] == ["trivial", "pacing"] and ctx["trials"] == {"mrae": 8, "fct": 8}
    assert ctx["first"][0].startswith("mrae: best is pacing") and ctx["again"][0].startswith("mrae: best is pacing")
    assert "pi" not in " ".join(ctx["first"])  # the first run's verdict among the re-check's policies only
    assert len(ctx["rows"]) == 4
    assert ctx["standing"] == {"held": ["pacing's MRAE (significantly better than the trivial TBF)",
                                        "pacing's FCT (significantly better than the trivial TBF)"], "moved": []}


def _row(exp: str, policy: str, p: float | None, pct: float | None) -> dict[str, Any]:
    return {"experiment": exp, "policy": policy, "p_vs_trivial": p, "vs_trivial_pct": pct}


def test_standing_names_a_lead_over_trivial_that_vanished_or_appeared() -> None:
    first = [_row("mrae", "trivial", None, 0.0), _row("mrae", "pi", 0.012, 20.0), _row("mrae", "mlc", 0.3, 5.0),
             _row("fct", "pi", 0.01, -8.0), _row("utilization", "pi", 0.01, 3.0)]
    again = [_row("mrae", "trivial", None, 0.0), _row("mrae", "pi", 0.32, 12.0), _row("mrae", "mlc", 0.02, 9.0),
             _row("fct", "pi", 0.2, -1.0), _row("utilization", "pi", 0.5, 0.0), _row("mrae", "pacing", 0.01, 50.0)]
    out = standing(first, again)
    # Significantly worse (p small, pct < 0) is no lead, so pi's FCT held; utilisation is not read;
    # pacing is not in the first run, so it has no standing to keep.
    assert out["held"] == ["pi's FCT (not distinguishable from or worse than the trivial TBF)"]
    assert out["moved"] == [
        "pi's MRAE: p vs trivial 0.012 in the first run, 0.32 in the re-check (now not distinguishable from or worse than it)",
        "mlc's MRAE: p vs trivial 0.3 in the first run, 0.02 in the re-check (now significantly better than it)"]


def test_unfinished_recheck_and_unpaired_plans(tmp_path: Path) -> None:
    a, b = _runs(tmp_path, again_complete=False)
    ctx = recheck_context(a, b)
    assert ctx == {"complete": False, "units_left": 7, "policies": ["trivial", "pacing"]}
    with pytest.raises(ValueError, match="seed, transfer differ"):
        check_same_plan(_header({}), _header({}, seed=3, transfer=1e8))
    other = _header({"mlc": "rate"})
    other["policies"]["mlc"]["files"] = {"model": "0" * 64}
    with pytest.raises(ValueError, match="mlc's files differ"):
        check_same_plan(_header({"mlc": "rate"}), other)
    with pytest.raises(ValueError, match="no such ledger"):
        read_ledger(tmp_path / "none.jsonl")
    h = _header({"pacing": "host"})
    (b / "ledger.jsonl").write_text(json.dumps(h) + "\n")
    with pytest.raises(ValueError, match="needs the trivial policy"):
        recheck_context(a, b)


def test_the_cli_writes_the_recheck_page_and_refuses_a_run_option(tmp_path: Path, capsys) -> None:
    from scidmz.cli import main

    a, b = _runs(tmp_path)
    before = {p.name: p.read_bytes() for d in (a, b) for p in d.iterdir()}
    assert main(["leaderboard", "--out", str(b), "--recheck", str(a)]) == 0
    page = (b / "recheck.md").read_text()
    assert page.startswith(f"# Re-check of `{a}` by `{b}`")
    assert "Re-checked on the same seeds (trivial, pacing; 8 MRAE, 8 FCT trials)" in page and "| mrae | pacing |" in page
    assert "against the trivial TBF, held: pacing's MRAE" in page and "against the trivial TBF, moved: none." in page
    # the two runs are only read
    assert {p.name: p.read_bytes() for d in (a, b) for p in d.iterdir() if p.name != "recheck.md"} == before
    (b / "results.json").write_text(json.dumps({"complete": False, "units_left": 3}))
    assert main(["leaderboard", "--out", str(b), "--recheck", str(a)]) == 0
    assert "unfinished: 3 trial units left" in (b / "recheck.md").read_text()
    capsys.readouterr()
    for argv, why in ((["--trials", "4"], "--trials does nothing with --recheck"),
                      (["--merge"], "--recheck does nothing with --merge"),
                      ([], f"{tmp_path / 'none' / 'ledger.jsonl'}: no such ledger")):
        first = str(tmp_path / "none") if not argv else str(a)
        assert main(["leaderboard", "--out", str(b), "--recheck", first, *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and why in err, err


def test_readme_mlc_sentence_says_whose_trials_it_read(tmp_path: Path) -> None:
    """The README's MLC sentence says whether its evaluation is a kernel leaderboard run's (tuning kept
    apart from those trials) or the chain's own (tuning and testing on the same trials)."""
    from scidmz.evaluation.docfigures import render_figure

    root = tmp_path / "repo"
    (root / "reports/mlc-netns").mkdir(parents=True)
    doc = json.loads((Path(__file__).resolve().parents[1] / "reports/mlc-netns/results.json").read_text())
    doc["sections"]["cubic"].pop("evaluation_from", None)
    (root / "reports/mlc-netns/results.json").write_text(json.dumps(doc))
    own = render_figure("readme-mlc-netns", root)
    assert "That evaluation is the chain's own" in own and "leaderboard's own" not in own
    doc["sections"]["cubic"]["evaluation_from"] = {"run": "reports/leaderboard/netns-testbed-cubic"}
    (root / "reports/mlc-netns/results.json").write_text(json.dumps(doc))
    lead = render_figure("readme-mlc-netns", root)
    assert "the kernel leaderboard's own (`reports/leaderboard/netns-testbed-cubic`)" in lead
    assert "chain's own" not in lead


def _with_targets(d: Path, targets: dict[str, list[str]] | None, mean_target: float | None = None) -> None:
    """Rewrite a ledger's header with per-trial target hashes, or its MRAE lines with a mean target."""
    lines = [json.loads(x) for x in (d / "ledger.jsonl").read_text().splitlines() if x.endswith("}")]
    if targets is not None:
        lines[0]["targets"] = targets
    for r in lines[1:]:
        if mean_target is not None and r["unit"] == "mrae":
            r["metrics"]["mean_target"] = mean_target + r["trial"]
    (d / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


def test_a_recheck_on_other_targets_is_not_compared_trial_by_trial(tmp_path: Path) -> None:
    """What the kernel CUBIC re-check hid: 10 trials drawn from a 10-column matrix are not the first
    20-trial run's trials 0-9. Hashes where the headers have them, else the recorded mean targets."""
    a, b = _runs(tmp_path / "hash")
    _with_targets(a, {"mrae": ["h0", "h1", "h2"], "fct": ["f0", "f1"]})
    _with_targets(b, {"mrae": ["h0", "x1"], "fct": ["f0", "f1", "f2"]})
    ctx = recheck_context(a, b)
    assert ctx["unpaired"] == {"mrae": "trial 1's MRAE target differs (hash h1 vs x1)"}
    assert {r["experiment"] for r in ctx["rows"]} == {"fct"} and ctx["first"][0].startswith("fct:")
    assert ctx["again_own"]["mrae"].startswith("mrae: best is pacing")
    a, b = _runs(tmp_path / "legacy")
    _with_targets(a, None, mean_target=46.4e6)
    _with_targets(b, None, mean_target=51.7e6)
    assert recheck_context(a, b)["unpaired"]["mrae"].startswith("trial 0's MRAE target differs (mean 46.4 vs 51.7")
    _with_targets(b, None, mean_target=46.4e6)
    assert recheck_context(a, b)["unpaired"] == {}
