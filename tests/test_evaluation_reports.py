"""Every committed report is rendered from its results file: the tables cannot drift from the numbers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from scidmz.cli import main

REPORTS = Path(__file__).resolve().parents[1] / "reports"


def _tables(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|") and not line.startswith("|---")]


@pytest.mark.parametrize("paper", ["jenks", "abc", "ffs", "disciplines-dmz", "mlc", "mlc-netns"])
def test_committed_report_tables_are_the_results_files_rendered(paper: str, tmp_path: Path) -> None:
    src = REPORTS / paper
    out = tmp_path / paper
    shutil.copytree(src, out, ignore=shutil.ignore_patterns("*.png", "*.csv", "*.parquet", "model*", "tune"))
    before = {p: p.read_bytes() for p in out.rglob("results.json")}
    assert main(["reproduce", paper.removesuffix("-netns"), "--render-only", "--out", str(out)]) == 0
    assert {p: p.read_bytes() for p in out.rglob("results.json")} == before  # a render writes no results
    fresh = _tables((out / "report.md").read_text())
    committed = set(_tables((src / "report.md").read_text()))
    assert fresh and [row for row in fresh if row not in committed] == []


def test_render_only_needs_a_results_file(tmp_path: Path, capsys) -> None:
    for paper in ("jenks", "abc", "ffs", "disciplines-dmz"):
        assert main(["reproduce", paper, "--render-only", "--out", str(tmp_path / paper)]) == 2
        err = capsys.readouterr().err
        assert "first" in err and len(err.strip().splitlines()) == 1


def test_keep_netns_reruns_the_fluid_part_and_keeps_the_kernel_part(tmp_path: Path) -> None:
    out = tmp_path / "ffs"
    out.mkdir()
    old = json.loads((REPORTS / "ffs" / "results.json").read_text())
    (out / "results.json").write_text(json.dumps(old))
    assert main(["reproduce", "ffs", "--quick", "--keep-netns", "--out", str(out)]) == 0
    new = json.loads((out / "results.json").read_text())
    assert new["netns_table3"] == old["netns_table3"]
    assert new["fluid_table3"]["duration_s"] == 30.0  # the quick fluid part was re-run
    assert new["meta"]["format_version"] >= 1 and "kept from an earlier run" in new["netns_note"]
    text = (out / "report.md").read_text()
    assert "Table III on the kernel" in text and "kept from an earlier run" in text
    assert main(["reproduce", "ffs", "--netns", "--keep-netns", "--out", str(out)]) == 2
