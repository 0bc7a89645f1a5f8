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
