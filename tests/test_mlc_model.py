"""Inverse ANN (section 3.5, Fig. 8): architecture, NumPy predictor == Keras, save/load, bad input, CV."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("keras")

from scidmz.models.inverse import InverseModel, load_predictor  # noqa: E402
from scidmz.policies.rate.mlc import Gains, MLCPolicy  # noqa: E402


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 22)) * 1e8 + 5e8  # rate-like magnitudes: the scalers must handle them
    y = 0.5 * X[:, 1] + 0.2 * X[:, 21] + 1e7 * np.sin(X[:, 0] / 1e8)
    return X, y


@pytest.fixture(scope="module")
def model(data) -> InverseModel:
    X, y = data
    return InverseModel(hidden_factor=64, epochs=3, batch_size=64, seed=1).fit(X, y)


def test_architecture_matches_fig8(model: InverseModel) -> None:
    dims = [layer.get_weights()[0].shape for layer in model.model_.layers]
    assert dims == [(22, 64 * 22), (64 * 22, 22), (22, 1)]


def test_numpy_predictor_equals_keras(model: InverseModel, data) -> None:
    X, _ = data
    keras_out = model.predict(X[:100])
    np_out = model.numpy_predictor()(X[:100])
    np.testing.assert_allclose(np_out, keras_out, rtol=1e-4, atol=1e-6 * np.abs(keras_out).max())


def test_save_load_round_trip(model: InverseModel, data, tmp_path) -> None:
    X, _ = data
    model.meta["dataset_sha256"] = "abc"
    d = model.save(tmp_path / "m")
    meta = json.loads((d / "meta.json").read_text())
    assert meta["n_features"] == 22 and meta["feature_names"][21] == "u(t-T)"
    assert meta["dataset_sha256"] == "abc"
    back = InverseModel.load(d)
    np.testing.assert_array_equal(back.predict(X[:20]), model.predict(X[:20]))
    pred = load_predictor(d)
    np.testing.assert_allclose(pred(X[:20]), model.numpy_predictor()(X[:20]))
    # Saving again over an existing directory replaces it whole (no temp dirs left behind).
    model.save(d)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_same_seed_same_model(data) -> None:
    X, y = data
    a = InverseModel(hidden_factor=4, epochs=2, seed=5).fit(X[:200], y[:200]).predict(X[:10])
    b = InverseModel(hidden_factor=4, epochs=2, seed=5).fit(X[:200], y[:200]).predict(X[:10])
    np.testing.assert_array_equal(a, b)


def test_width_mismatch_is_clear(model: InverseModel, data, tmp_path) -> None:
    X, y = data
    with pytest.raises(ValueError, match="expects 22 input features"):
        model.predict(X[:, :21])
    with pytest.raises(ValueError, match="expects 22 input features"):
        model.numpy_predictor()(X[:, :21])
    with pytest.raises(ValueError, match="expects 22 input features"):
        InverseModel(epochs=1).fit(X[:, :20], y)
    narrow = InverseModel(hidden_factor=2, epochs=1, n_features=21).fit(X[:50, :21], y[:50])
    d = narrow.save(tmp_path / "narrow")
    with pytest.raises(ValueError, match="21 input features"):
        MLCPolicy.from_paths(model=str(d), gains=Gains(0.1, 0.1, 0.1))


def test_bad_training_data(data) -> None:
    X, y = data
    Xn = X.copy()
    Xn[3, 4] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        InverseModel(epochs=1).fit(Xn, y)
    with pytest.raises(ValueError, match="rows"):
        InverseModel(epochs=1).fit(X, y[:-1])
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError, match="not trained"):
        InverseModel().predict(X)


def test_load_errors(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        load_predictor(tmp_path / "none")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="not an inverse-model directory"):
        load_predictor(tmp_path / "empty")


def test_cross_validate_reports_relative_error(data) -> None:
    X, y = data
    cv = InverseModel(hidden_factor=4, epochs=2, seed=0).cross_validate(X[:200], y[:200], k=2)
    assert cv["folds"] == 2 and len(cv["relative_error_folds"]) == 2
    assert 0.0 < cv["relative_error"] < 1.0
    with pytest.raises(ValueError, match="folds"):
        InverseModel().cross_validate(X, y, k=1)


def test_ensemble_is_mean_of_seeded_members(data, tmp_path) -> None:
    X, y = data
    kw = {"hidden_factor": 2, "epochs": 2, "batch_size": 64}
    ens = InverseModel(seed=3, ensemble=2, **kw).fit(X, y)
    singles = [InverseModel(seed=s, **kw).fit(X, y).predict(X[:30]) for s in (3, 4)]
    np.testing.assert_allclose(ens.predict(X[:30]), np.mean(singles, axis=0), rtol=1e-6)
    np.testing.assert_allclose(ens.numpy_predictor()(X[:30]), ens.predict(X[:30]), rtol=1e-4)
    d = ens.save(tmp_path / "e")
    assert json.loads((d / "meta.json").read_text())["ensemble"] == 2
    np.testing.assert_allclose(load_predictor(d)(X[:30]), ens.numpy_predictor()(X[:30]))
    np.testing.assert_array_equal(InverseModel.load(d).predict(X[:30]), ens.predict(X[:30]))
    # A single-net directory (no m1_* arrays) still loads as one net.
    assert load_predictor(d / "member_1").members == []
    with pytest.raises(ValueError, match="ensemble"):
        InverseModel(ensemble=0).fit(X, y)


def test_scikit_learn_estimator_contract(data) -> None:
    """__init__ stores parameters; clone/get_params/set_params work; fitted state ends in '_'."""
    from sklearn.base import clone
    from sklearn.exceptions import NotFittedError

    X, y = data
    m = InverseModel(hidden_factor=2, epochs=1, batch_size=64, seed=5)
    assert m.get_params()["hidden_factor"] == 2 and clone(m).get_params() == m.get_params()
    assert not [k for k in vars(m) if k.endswith("_")]  # nothing fitted before fit()
    with pytest.raises(NotFittedError):
        m.predict(X[:3])
    m.fit(X, y)
    assert {"model_", "x_scaler_", "y_scaler_", "members_", "history_"} <= set(vars(m))
    c = clone(m).set_params(seed=6)
    assert not hasattr(c, "model_") and c.seed == 6
    assert m.score(X[:50], y[:50]) <= 1.0  # RegressorMixin's R^2


def test_fine_tuning_starts_from_the_saved_model_keeps_its_scalers_and_fits_the_new_data(data, tmp_path) -> None:
    """`scidmz train NEW --init OLD`: warm start (scikit-learn's meaning) from a saved model."""
    from scidmz.datasets import dataset_path
    from scidmz.identification.excitation import load_dataset
    from scidmz.identification.regressors import build_regressors
    from scidmz.models.predictor import relative_error
    from scidmz.models.train import train_model

    ds = dataset_path("small-cubic-400s")
    base, _ = train_model(str(ds), str(tmp_path / "base"), epochs=2, folds=0, track=False)
    # "Another plant": the same dataset with the DTN's answer changed, as a testbed's map differs
    # from the fluid plant's (the rows u -> y are what the inverse model learns).
    tr = load_dataset(ds)
    tr.df["rate_dtn"] = tr.df["rate_dtn"] * 0.85
    other = tmp_path / "other.parquet"
    tr.to_parquet(other)
    res, human = train_model(str(other), str(tmp_path / "tuned"), epochs=8, folds=2, track=False,
                             init=str(tmp_path / "base"))
    assert "fine-tuned from" in human and res["cv"]["fine_tuned"] and len(res["cv"]["relative_error_folds"]) == 2
    old, new = InverseModel.load(tmp_path / "base"), InverseModel.load(tmp_path / "tuned")
    np.testing.assert_array_equal(new.x_scaler_.mean_, old.x_scaler_.mean_)  # the inputs keep their meaning
    assert new.meta["init_model"] == str(tmp_path / "base") and new.learning_rate == old.learning_rate / 10
    assert new.meta["init_relative_error"] == res["init_relative_error"]
    X, y = build_regressors(load_dataset(other), scenario_capacity=tr.meta["scenario"]["link"]["capacity"])
    # It learned the new data: better on it than the model it started from.
    assert relative_error(y, load_predictor(tmp_path / "tuned")(X)) < res["init_relative_error"]
    with pytest.raises(ValueError, match="--init"):
        train_model(str(other), str(tmp_path / "x"), epochs=1, folds=0, track=False, per_unit=False,
                    init=str(tmp_path / "base"))
