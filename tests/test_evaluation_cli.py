"""`scidmz evaluate` bad input: one clear line, exit 2, nothing written."""

from __future__ import annotations

import json

import pytest

from scidmz.cli import main


def _run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err
    return code, err


def test_missing_model_dir(tmp_path, capsys) -> None:
    gains = tmp_path / "gains.json"
    gains.write_text(json.dumps({"kp": 0.3, "ki": 1.0, "kw": 1.0}))
    out = tmp_path / "out"
    code, err = _run(capsys, "evaluate", "small-cubic", "--model", str(tmp_path / "nope"), "--gains", str(gains),
                     "--trials", "2", "--out", str(out))
    assert code == 2
    assert err.strip().splitlines()[-1].startswith("scidmz: error: model directory not found")
    assert not out.exists()


@pytest.mark.parametrize(
    "doc, msg",
    [
        ({"kp": -1.0, "ki": 1.0, "kw": 1.0}, "must be >= 0"),
        ({"kp": 0.3, "ki": "nan", "kw": 1.0}, "finite"),
        ({"kp": 0.3, "kw": 1.0}, "missing gain"),
    ],
)
def test_bad_gains(tmp_path, capsys, doc, msg) -> None:
    model = tmp_path / "model"
    model.mkdir()
    gains = tmp_path / "gains.json"
    gains.write_text(json.dumps(doc))
    code, err = _run(capsys, "evaluate", "small-cubic", "--model", str(model), "--gains", str(gains))
    assert code == 2
    line = err.strip().splitlines()[-1]
    assert line.startswith("scidmz: error:") and msg in line


def test_missing_gains_and_bad_options(tmp_path, capsys) -> None:
    model = tmp_path / "model"
    model.mkdir()
    code, err = _run(capsys, "evaluate", "small-cubic", "--model", str(model), "--gains", str(tmp_path / "g.json"))
    assert code == 2 and "gains file not found" in err
    gains = tmp_path / "g.json"
    gains.write_text(json.dumps({"kp": 0.3, "ki": 1.0, "kw": 1.0}))
    code, err = _run(capsys, "evaluate", "small-cubic", "--model", str(model), "--gains", str(gains),
                     "--experiments", "mrae,nope")
    assert code == 2 and "unknown experiment(s) nope" in err
    code, err = _run(capsys, "evaluate", "small-cubic", "--model", str(model), "--gains", str(gains),
                     "--trials", "0")
    assert code == 2 and "--trials must be >= 1" in err
    code, err = _run(capsys, "evaluate", "no-such-scenario", "--model", str(model), "--gains", str(gains))
    assert code == 2 and "unknown scenario" in err


def test_evaluate_end_to_end(tmp_path, capsys) -> None:
    """A tiny trained model + gains -> `scidmz evaluate --json` prints MLC and trivial summaries."""
    from scidmz.identification.excitation import identify
    from scidmz.identification.regressors import build_regressors
    from scidmz.models.inverse import InverseModel
    from scidmz.policies.rate.mlc import Gains
    from scidmz.scenario import load_scenario

    sc = load_scenario("small-cubic")
    X, y = build_regressors(identify(sc, duration=200, seed=1, batch=4))
    InverseModel(epochs=2, seed=0).fit(X, y).save(tmp_path / "model")
    Gains(0.3, 1.0, 1.0).save(tmp_path / "gains.json")
    out = tmp_path / "eval"
    code = main(["evaluate", "small-cubic", "--model", str(tmp_path / "model"), "--gains", str(tmp_path / "gains.json"),
                 "--trials", "2", "--quick", "--experiments", "mrae,utilization", "--out", str(out), "--json",
                 "--tracking-uri", str(tmp_path / "mlruns")])
    assert code == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert doc["experiments"] == ["mrae", "utilization"] and doc["trials"] == 2
    for pol in ("mlc", "trivial"):
        assert doc["results"]["mrae"][pol]["n"] == 2 and doc["results"]["mrae"][pol]["mean"] >= 0
        assert 0 < doc["results"]["utilization"][pol]["mean"] <= 1.05
    assert "reduction_pct" in doc["results"]["mrae"]["mlc"]
    assert (out / "results.json").is_file() and (out / "mrae_cdf.png").is_file()
    # Tracked with mlflow: one run with the metrics and the result files as artifacts.
    runs = [m.parent for m in (tmp_path / "mlruns").rglob("meta.yaml") if m.parent.parent.name != "mlruns"]
    assert len(runs) == 1
    assert (runs[0] / "metrics" / "mrae_mean_mlc").is_file()
    assert any((runs[0] / "artifacts" / "results").rglob("mrae.csv"))


def test_simulate_without_target_uses_half_of_bmax():
    from scidmz.commands.build import build_run
    from scidmz.evaluation.simulate import simulate
    from scidmz.scenario import load_scenario

    run = build_run("small-cubic", duration="5s")
    assert run.target == 0.5 * load_scenario("small-cubic").capacity
    res, _ = simulate(run.scenario, run.policy, run.target)
    assert res["target"] == run.target and res["duration"] == 5.0


def test_simulate_speed_figures_say_what_they_measure():
    import subprocess
    import sys

    # A fresh process: the one-off kernel load is reported apart from the episode, and the
    # summary path does not import pandas (a whole simulate run should cost less than it).
    code = (
        "import json, sys\n"
        "from scidmz.commands.build import build_run\n"
        "from scidmz.evaluation.simulate import simulate\n"
        "run = build_run('small-cubic', duration='20s')\n"
        "r, human = simulate(run.scenario, run.policy, run.target)\n"
        "print(json.dumps({'r': r, 'human': human, 'pandas': 'pandas' in sys.modules}))\n"
    )
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                    check=True).stdout.strip().splitlines()[-1])
    r = out["r"]
    assert not out["pandas"]
    assert 0 < r["kernel_load_s"] < r["wall_s"]
    assert r["speedup"] == pytest.approx(r["duration"] / (r["wall_s"] - r["kernel_load_s"]))
    assert f"{r['wall_s'] - r['kernel_load_s']:.2f} s" in out["human"]
