"""Saving a model never breaks another one or leaves anything behind; bad weights get one line."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("keras")

from scidmz.fileio import DestinationError  # noqa: E402
from scidmz.models.inverse import InverseModel, load_predictor  # noqa: E402


@pytest.fixture(scope="module")
def model() -> InverseModel:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 22)) * 1e8 + 5e8
    y = 0.5 * X[:, 1] + 0.2 * X[:, 21]
    return InverseModel(hidden_factor=2, epochs=1, batch_size=64, seed=1).fit(X, y)


def test_replacing_a_model_leaves_nothing_behind(model, tmp_path):
    d = model.save(tmp_path / "model1")
    before = (d / "weights.npz").read_bytes()
    model.save(d)
    model.save(d)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model1"]  # no model1.old-PID, no *.tmp
    assert (d / "weights.npz").read_bytes() == before
    load_predictor(d)


def test_out_inside_a_model_directory_is_refused_and_the_model_survives(model, tmp_path):
    d = model.save(tmp_path / "model1")
    snapshot = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}
    with pytest.raises(DestinationError, match="inside the model directory"):
        model.save(d / "weights.npz")
    with pytest.raises(DestinationError, match="inside the model directory"):
        model.save(d / "nested")
    assert {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()} == snapshot
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model1"]
    load_predictor(d)


def test_a_foreign_directory_is_never_replaced(model, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("keep me")
    with pytest.raises(DestinationError, match="not a model directory"):
        model.save(home)
    assert (home / "notes.txt").read_text() == "keep me"
    with pytest.raises(DestinationError, match="does not exist"):
        model.save(tmp_path / "no" / "such" / "model")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]


@pytest.mark.parametrize("damage", ["truncate", "random", "empty"])
def test_damaged_weights_get_one_line_naming_the_file(model, tmp_path, damage):
    d = model.save(tmp_path / "m")
    w = d / "weights.npz"
    data = w.read_bytes()
    w.write_bytes({"truncate": data[: len(data) // 3], "random": np.random.default_rng(1).bytes(2048),
                   "empty": b""}[damage])
    with pytest.raises(ValueError) as ei:
        load_predictor(d)
    msg = str(ei.value)
    assert "\n" not in msg and str(w) in msg and "pickled" not in msg, msg
