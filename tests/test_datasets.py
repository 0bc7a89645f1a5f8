"""The datasets shipped in the package are found from anywhere, and match today's scenario."""

from __future__ import annotations

import pytest

from scidmz.datasets import dataset_names, dataset_path
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


def test_shipped_mlc_is_offered_only_where_made_and_runs_without_tensorflow(tmp_path, monkeypatch):
    import json

    import numpy as np

    from scidmz.datasets import shipped_model
    from scidmz.models.predictor import load_predictor
    from scidmz.plant.base import make_plant
    from scidmz.policies.rate.mlc import Gains, MLCPolicy, mlc_files
    from scidmz.runner import run_episode

    monkeypatch.chdir(tmp_path)
    sc = load_scenario("testbed")
    model_dir, gains_file = shipped_model(sc)
    meta = json.loads((model_dir / "meta.json").read_text())
    # Made by `scidmz reproduce mlc --plant netns` for this scenario, on its regime and CCA.
    assert meta["scenario_fingerprint"]["scenario"] == "testbed" and meta["dtn_cca"] == "cubic"
    assert Gains.load(gains_file).delta_u == 0.05
    assert mlc_files(sc, None, None) == (str(model_dir), str(gains_file))
    # Not offered where it was not made: another scenario, another DTN CCA, another regime.
    for other in (load_scenario("small-cubic"), sc.replace(dtn={"cca": "reno"}), sc.replace(link={"buffer_bdp": 1.0})):
        assert shipped_model(other) is None
        with pytest.raises(ValueError, match="needs --model DIR and --gains FILE .*shipped: .*testbed-cubic"):
            mlc_files(other, None, None)
    with pytest.raises(ValueError, match="needs both"):
        mlc_files(sc, "m", None)
    # The kernel BBR v1 DTN's own model (reports/mlc-netns-bbr), offered for testbed with dtn.cca = bbr only.
    bm, bg = shipped_model(sc.replace(dtn={"cca": "bbr"}))
    assert bm.name == "testbed-bbr" and json.loads((bm / "meta.json").read_text())["dtn_cca"] == "bbr"
    assert Gains.load(bg).delta_u == 0.05
    # The paper scenarios' models (reports/mlc) ship for their own scenario and DTN CCA only.
    for name, cca in (("paper-cubic", "cubic"), ("paper-bbr2", "bbr2")):
        psc = load_scenario(name)
        pm, _ = shipped_model(psc)
        assert json.loads((pm / "meta.json").read_text())["scenario_fingerprint"]["dtn_cca"] == cca
        assert shipped_model(psc.replace(dtn={"cca": "cubic" if cca == "bbr2" else "bbr2"})) is None
    # It is a working controller: a short fluid episode stays inside its band every period.
    pol = MLCPolicy(load_predictor(model_dir), Gains.load(gains_file))
    with make_plant("fluid", sc.replace(duration=20.0), batch=1) as pl:
        tr = run_episode(pl, pol, np.full(20, 50e6), seed=0)[0]
    u = tr.column("u")
    assert np.all(np.abs(u - 50e6) <= 0.05 * sc.capacity + 1)
