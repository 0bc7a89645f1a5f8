"""The datasets shipped in the package are found from anywhere, and match today's scenario."""

from __future__ import annotations

import pytest

from scidmz.data import dataset_names, dataset_path
from scidmz.identification.excitation import load_dataset
from scidmz.scenario import load_scenario


def test_shipped_dataset_is_found_from_the_package_and_matches_its_scenario(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no relative-path guessing: any working directory works
    assert "small-cubic-400s" in dataset_names()
    ds = load_dataset(dataset_path("small-cubic-400s"))
    assert len(ds) == 400
    # Recorded on the current built-in (shallow-buffer) small-cubic, not an older regime.
    assert ds.meta["scenario"]["link"]["buffer_bdp"] == load_scenario("small-cubic").to_dict()["link"]["buffer_bdp"]


def test_unknown_dataset_is_one_line_naming_what_exists():
    with pytest.raises(ValueError, match="no shipped dataset 'nope' .*small-cubic-400s"):
        dataset_path("nope")
