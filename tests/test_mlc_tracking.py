"""mlflow tracking: tracked_run records params/metrics/artifacts; identify -> train -> tune via the CLI."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mlflow")

from scidmz.cli import main  # noqa: E402
from scidmz.tracking import resolve_tracking_uri, tracked_run  # noqa: E402


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def test_tracked_run_records_everything(tmp_path) -> None:
    uri = (tmp_path / "store").as_uri()
    art = tmp_path / "a.txt"
    art.write_text("hello")
    with tracked_run("exp-x", "run-1", {"alpha": 1, "name": "cubic"}, tracking_uri=uri) as run:
        run.log_metrics({"iae": 2.5, "skip_nan": float("nan")})
        run.log_metric_series("curve", [3.0, 2.0, 1.0])
        run.log_artifact(art)
    c = _client(uri)
    exp = c.get_experiment_by_name("exp-x")
    r = c.get_run(run.run_id)
    assert r.info.experiment_id == exp.experiment_id and r.info.status == "FINISHED"
    assert r.data.params == {"alpha": "1", "name": "cubic"}
    assert r.data.metrics["iae"] == 2.5 and "skip_nan" not in r.data.metrics
    assert [m.value for m in c.get_metric_history(run.run_id, "curve")] == [3.0, 2.0, 1.0]
    assert [f.path for f in c.list_artifacts(run.run_id)] == ["a.txt"]


def test_failed_body_marks_run_failed(tmp_path) -> None:
    uri = (tmp_path / "store").as_uri()
    with pytest.raises(RuntimeError):
        with tracked_run("exp-y", "boom", {}, tracking_uri=uri) as run:
            raise RuntimeError("boom")
    assert _client(uri).get_run(run.run_id).info.status == "FAILED"


def test_default_store_is_local_mlruns(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    assert resolve_tracking_uri() == (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://example:5000")
    assert resolve_tracking_uri() == "http://example:5000"
    assert resolve_tracking_uri("sqlite:///x.db") == "sqlite:///x.db"


def _json_tail(capsys) -> dict:
    out = capsys.readouterr().out.strip().splitlines()
    return json.loads(out[-1])


def test_cli_identify_train_tune_are_tracked_runs(tmp_path, capsys) -> None:
    pytest.importorskip("keras")
    uri = (tmp_path / "mlruns").as_uri()
    ds = tmp_path / "ds.parquet"
    assert main(["identify", "small-cubic", "--duration", "30", "--batch", "3", "--out", str(ds),
                 "--plot", str(tmp_path / "fig7.png"), "--tracking-uri", uri, "--json"]) == 0
    ident = _json_tail(capsys)
    assert ident["rows"] == 30 and ident["episodes"] == 3 and ds.exists()
    assert (tmp_path / "fig7.png").stat().st_size > 10_000 and ident["plot"] == str(tmp_path / "fig7.png")

    model = tmp_path / "model"
    assert main(["train", str(ds), "--out", str(model), "--epochs", "2", "--folds", "0",
                 "--tracking-uri", uri, "--json"]) == 0
    tr = _json_tail(capsys)
    assert tr["dataset_sha256"] == ident["sha256"] and (model / "weights.npz").exists()
    assert (model / "training.png").stat().st_size > 10_000  # loss curve + predicted vs actual

    gains = tmp_path / "gains.json"
    assert main(["tune", "small-cubic", "--model", str(model), "--out", str(gains), "--generations", "1",
                 "--population", "3", "--parents", "2", "--episode", "4", "--tracking-uri", uri, "--json"]) == 0
    tu = _json_tail(capsys)
    assert gains.exists() and set(tu["gains"]) >= {"kp", "ki", "kw"}

    c = _client(uri)
    runs = {}
    for name in ("scidmz-identify", "scidmz-train", "scidmz-tune"):
        exp = c.get_experiment_by_name(name)
        assert exp is not None, name
        (run,) = c.search_runs([exp.experiment_id])
        runs[name] = run
    assert runs["scidmz-identify"].data.tags["dataset_sha256"] == ident["sha256"]
    assert runs["scidmz-train"].data.params["dataset_sha256"] == ident["sha256"]
    assert "best_iae" in runs["scidmz-tune"].data.metrics
    assert {a.path for a in c.list_artifacts(runs["scidmz-train"].info.run_id)} == {"model"}

    # Retraining on a new dataset is one command and a new run.
    assert main(["train", str(ds), "--out", str(tmp_path / "model2"), "--epochs", "1", "--folds", "0",
                 "--tracking-uri", uri, "--json"]) == 0
    exp = c.get_experiment_by_name("scidmz-train")
    assert len(c.search_runs([exp.experiment_id])) == 2


def test_cli_bad_inputs_one_line_errors(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.parquet"
    import pandas as pd

    pd.DataFrame({"t": [1.0, 2.0]}).to_parquet(bad)
    assert main(["train", str(bad), "--out", str(tmp_path / "m"), "--folds", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("scidmz: error:") and "missing column" in err and "\n" not in err
    assert not (tmp_path / "m").exists()
    g = tmp_path / "g.json"
    g.write_text(json.dumps({"kp": -1, "ki": 0, "kw": 0}))
    from scidmz.policies.rate.mlc import Gains

    with pytest.raises(ValueError, match="kp must be >= 0"):
        Gains.load(g)
