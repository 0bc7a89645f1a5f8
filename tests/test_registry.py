"""The mlflow model registry as an ML engineer uses it: train --register, tune attaches the gains,
an alias is set, and simulate / the daemon load ``models:/NAME@ALIAS`` (a local file store)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mlflow")
pytest.importorskip("keras")

from scidmz.cli import main  # noqa: E402
from scidmz.datasets import dataset_path  # noqa: E402


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_register_tune_alias_and_load_by_reference(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    store = str(tmp_path / "mlruns")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)  # simulate and control have no --tracking-uri
    ds = str(dataset_path("small-cubic-400s"))
    assert main(["train", ds, "--out", str(tmp_path / "m1"), "--epochs", "2", "--folds", "0",
                 "--register", "dtn-cubic", "--tracking-uri", store, "--json"]) == 0
    reg = _last_json(capsys)["registered"]
    assert reg["uri"] == "models:/dtn-cubic/1"
    assert main(["tune", "small-cubic", "--model", "models:/dtn-cubic/1", "--out", str(tmp_path / "g"),
                 "--generations", "1", "--population", "4", "--parents", "2", "--episode", "10",
                 "--tracking-uri", store, "--json"]) == 0
    tuned = _last_json(capsys)
    assert tuned["attached"]["model"] == "models:/dtn-cubic/1"

    import mlflow

    client = mlflow.MlflowClient(tracking_uri=store, registry_uri=store)
    client.set_registered_model_alias("dtn-cubic", "production", "1")
    mv = client.get_model_version("dtn-cubic", "1")
    assert mv.tags["dtn_cca"] == "cubic" and mv.tags["scenario"] == "small-cubic"
    assert json.loads(mv.tags["scenario_fingerprint"])  # the regime it learned travels with it
    assert mv.tags["scidmz.gains"] == "gains/gains.json"

    # simulate by alias, with the gains tune attached (no --gains)
    assert main(["simulate", "small-cubic", "--policy", "mlc", "--model", "models:/dtn-cubic@production",
                 "--duration", "5", "--json"]) == 0
    sim = _last_json(capsys)
    assert sim["policy"] == "mlc"
    cached = tmp_path / "cache" / "scidmz" / "models" / "dtn-cubic" / "1"
    assert (cached / "model" / "weights.npz").is_file() and (cached / "gains.json").is_file()
    assert json.loads((cached / "gains.json").read_text())["kp"] == tuned["gains"]["kp"]

    # the daemon takes the same reference (fluid plant, no API, a few periods)
    assert main(["control", "run", "small-cubic", "--plant", "fluid", "--policy", "mlc", "--model",
                 "models:/dtn-cubic@production", "--target", "40M", "--duration", "3", "--no-api",
                 "--set", "period=0.5", "--json"]) == 0
    assert _last_json(capsys)["periods"] >= 2


@pytest.mark.parametrize("ref, needle", [
    ("models:/nope/1", "no version 1 of model 'nope'"),
    ("models:/dtn/x", "version must be a number"),
    ("models:/dtn@staging", "no alias 'staging' of model 'dtn'"),
    ("models:/dtn", "expected models:/NAME/VERSION"),
])
def test_unknown_registry_references_are_one_line(tmp_path, capsys, monkeypatch, ref, needle):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", str(tmp_path / "mlruns"))
    assert main(["simulate", "small-cubic", "--policy", "mlc", "--model", ref, "--duration", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err
