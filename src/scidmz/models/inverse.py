"""The inverse ANN of the MLC, section 3.5 and Fig. 8 (Keras, TensorFlow backend).

A fully connected network: input |I| = 22 (``identification.regressors``),
a hidden layer of 64 x |I| = 1408 ReLU units, a pre-output layer of |I| = 22
ReLU units and one linear output, the predicted u(t). Inputs and target are
standardised with scikit-learn scalers saved next to the Keras model.

Training defaults (``epochs=30``, ``batch_size=128``, Adam 1e-3, MSE) take
about a minute for the paper's 28,800 samples on 2 cores; ``cross_validate``
reports the relative validation error the paper quotes (about 1%) as
mean |u_hat - u| / mean |u| over k held-out folds.

A saved model directory holds ``model.keras`` (Keras), ``scalers.joblib``
(sklearn), ``weights.npz`` (the same network as NumPy arrays, for the
control loop, which does not need TensorFlow) and ``meta.json`` (feature
order, per-unit scaling, scenario/CCA, dataset hash, training settings).
TensorFlow is imported only when a Keras model is built, trained or loaded.

``ensemble=n`` (default 1, the paper's single network) trains n copies of the
same Fig. 8 network with seeds seed, seed+1, ... on the same data and
predicts their mean. Averaging cancels part of each net's seed-dependent
error: on the fluid plant a mean of 3 made the MLC's paired CUBIC MRAE 3.5 %
better than the trivial TBF instead of 6.6 % worse, but its DTN FCT lost
significantly on BBRv2 (reports/mlc/analysis.md), so ``scidmz reproduce``
keeps the paper's single network; this is an opt-in.
Members 1..n-1 are saved as ``member_<k>/`` model directories inside the
ensemble's directory, and ``weights.npz`` holds every member (keys
``m<k>_*`` for k >= 1) so ``load_predictor`` stays TensorFlow-free.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..identification.regressors import FEATURE_NAMES, N_FEATURES, RATE_FEATURES

__all__ = ["InverseModel", "NumpyPredictor", "load_predictor", "relative_error"]

FORMAT_VERSION = 1


@contextlib.contextmanager
def _native_stderr_muted() -> Iterator[None]:
    """Hide what native code writes to fd 2 (TensorFlow's absl/oneDNN start-up lines).

    TensorFlow prints those before absl's logging is initialised, so
    TF_CPP_MIN_LOG_LEVEL cannot hide them. What was written is replayed if the
    body raises, so a failed import still explains itself.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            sink.seek(0)
            sys.stderr.write(sink.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _keras() -> Any:
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with _native_stderr_muted():
        import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        with _native_stderr_muted():
            tf.constant(0.0)  # absl's one-time "before InitializeLog" line comes with the first op
        # Retracing notices from predict() on folds of different sizes are noise here.
        tf.get_logger().setLevel("ERROR")
    return keras


def relative_error(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """mean |u_hat - u| / mean |u| (the paper's relative validation error, as a fraction)."""
    yt = np.asarray(y_true, dtype=np.float64).ravel()
    yp = np.asarray(y_pred, dtype=np.float64).ravel()
    denom = float(np.mean(np.abs(yt)))
    return float(np.mean(np.abs(yp - yt)) / denom) if denom > 0 else float("nan")


def _check_xy(X: Any, y: Any | None, n_features: int) -> tuple[np.ndarray, np.ndarray | None]:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X.reshape(1, -1)
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ValueError(f"inverse model expects {n_features} input features, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("inverse model input contains NaN/inf")
    if y is None:
        return X, None
    yy = np.asarray(y, dtype=np.float64).ravel()
    if yy.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {yy.shape[0]}")
    if not np.all(np.isfinite(yy)):
        raise ValueError("inverse model target contains NaN/inf")
    return X, yy


class NumpyPredictor:
    """The trained network as NumPy arrays: X (n, 22) in model units -> u (n,).

    Picklable (a GA can ship it to worker processes) and TensorFlow-free.
    ``per_unit``: the model works in units of B_max for the rate features
    and for u; the controller scales inputs/outputs with the scenario's B_max.
    """

    def __init__(self, arrays: dict[str, np.ndarray], per_unit: bool, meta: dict[str, Any] | None = None) -> None:
        self.x_mean = np.asarray(arrays["x_mean"], dtype=np.float64)
        self.x_scale = np.asarray(arrays["x_scale"], dtype=np.float64)
        self.y_mean = float(np.asarray(arrays["y_mean"]).ravel()[0])
        self.y_scale = float(np.asarray(arrays["y_scale"]).ravel()[0])
        self.layers = []
        i = 0
        while f"w{i}" in arrays:
            self.layers.append((np.asarray(arrays[f"w{i}"], dtype=np.float64), np.asarray(arrays[f"b{i}"], dtype=np.float64)))
            i += 1
        if not self.layers:
            raise ValueError("predictor arrays hold no layers")
        self.n_features = self.layers[0][0].shape[0]
        self.per_unit = bool(per_unit)
        self.meta = dict(meta or {})
        # Ensemble members 1..n-1 (their arrays prefixed "m<k>_"); member 0 is this net.
        self.members: list[NumpyPredictor] = []
        k = 1
        while f"m{k}_w0" in arrays:
            pre = f"m{k}_"
            sub = {key[len(pre):]: v for key, v in arrays.items() if key.startswith(pre)}
            member = NumpyPredictor(sub, per_unit=per_unit)
            if member.n_features != self.n_features:
                raise ValueError(f"ensemble member {k} takes {member.n_features} inputs, member 0 {self.n_features}")
            self.members.append(member)
            k += 1

    def __call__(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"inverse model expects {self.n_features} input features, got shape {X.shape}")
        out = self._net(X)
        if self.members:
            for m in self.members:
                out += m._net(X)
            out /= 1 + len(self.members)
        return out

    def _net(self, X: np.ndarray) -> np.ndarray:
        h = (X - self.x_mean) / self.x_scale
        last = len(self.layers) - 1
        for j, (w, b) in enumerate(self.layers):
            h = h @ w + b
            if j < last:
                np.maximum(h, 0.0, out=h)
        return h[:, 0] * self.y_scale + self.y_mean

    def arrays(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {
            "x_mean": self.x_mean,
            "x_scale": self.x_scale,
            "y_mean": np.array([self.y_mean]),
            "y_scale": np.array([self.y_scale]),
        }
        for j, (w, b) in enumerate(self.layers):
            out[f"w{j}"] = w
            out[f"b{j}"] = b
        for k, m in enumerate(self.members, start=1):
            out.update({f"m{k}_{key}": v for key, v in m.arrays().items()})
        return out


class InverseModel:
    """u(t) = f(y(t), y(t-T), y(t-2T), u(t-T)); scikit-learn style fit/predict (section 3.5, Fig. 8)."""

    def __init__(
        self,
        hidden_factor: int = 64,
        epochs: int = 30,
        batch_size: int = 128,
        learning_rate: float = 1e-3,
        seed: int = 0,
        n_features: int = N_FEATURES,
        per_unit: bool = False,
        verbose: int = 0,
        progress: bool = False,
        ensemble: int = 1,
    ) -> None:
        if hidden_factor < 1 or epochs < 1 or batch_size < 1:
            raise ValueError("hidden_factor, epochs and batch_size must be >= 1")
        if isinstance(ensemble, bool) or int(ensemble) != ensemble or ensemble < 1:
            raise ValueError(f"ensemble (number of averaged networks) must be a whole number >= 1, got {ensemble!r}")
        self.ensemble = int(ensemble)
        self._members: list[InverseModel] = []
        self.hidden_factor = int(hidden_factor)
        self.epochs = int(epochs)
        self.batch_size = int(batch_size)
        self.learning_rate = float(learning_rate)
        self.seed = int(seed)
        self.n_features = int(n_features)
        self.per_unit = bool(per_unit)
        self.verbose = int(verbose)
        self.progress = bool(progress)
        self.meta: dict[str, Any] = {}
        self.history: dict[str, list[float]] = {}
        self._model: Any = None
        self._x_scaler: Any = None
        self._y_scaler: Any = None

    # -- network -----------------------------------------------------------
    def _build(self) -> Any:
        keras = _keras()
        n = self.n_features
        return keras.Sequential(
            [
                keras.Input(shape=(n,)),
                keras.layers.Dense(self.hidden_factor * n, activation="relu", name="hidden"),
                keras.layers.Dense(n, activation="relu", name="pre_output"),
                keras.layers.Dense(1, activation="linear", name="output"),
            ]
        )

    def _seed(self) -> None:
        keras = _keras()
        keras.utils.set_random_seed(self.seed)
        try:
            import tensorflow as tf

            tf.config.experimental.enable_op_determinism()
        except Exception:  # determinism is best effort on exotic backends
            pass

    # -- sklearn-style API ------------------------------------------------------
    def fit(self, X: Any, y: Any) -> InverseModel:
        from sklearn.preprocessing import StandardScaler

        X, yy = _check_xy(X, y, self.n_features)
        assert yy is not None
        self._seed()
        keras = _keras()
        self._x_scaler = StandardScaler().fit(X)
        self._y_scaler = StandardScaler().fit(yy.reshape(-1, 1))
        xs = self._x_scaler.transform(X).astype(np.float32)
        ys = self._y_scaler.transform(yy.reshape(-1, 1)).astype(np.float32)
        self._model = self._build()
        self._model.compile(optimizer=keras.optimizers.Adam(self.learning_rate), loss="mse")
        t0 = time.perf_counter()
        callbacks = [_tqdm_epochs(keras, self.epochs)] if self.progress else []
        try:
            hist = self._model.fit(
                xs, ys, epochs=self.epochs, batch_size=self.batch_size, shuffle=True,
                verbose=self.verbose, callbacks=callbacks,
            )
        finally:
            for cb in callbacks:
                cb.close()
        self.history = {k: [float(v) for v in vals] for k, vals in hist.history.items()}
        self._members = [self._clone(seed=self.seed + k, ensemble=1).fit(X, yy) for k in range(1, self.ensemble)]
        self.meta.update(
            {
                "n_samples": int(X.shape[0]),
                "train_seconds": round(time.perf_counter() - t0, 2),
                "train_relative_error": relative_error(yy, self.predict(X)),
            }
        )
        return self

    def _need(self) -> None:
        if self._model is None:
            raise RuntimeError("inverse model is not trained: call fit() or InverseModel.load()")

    def predict(self, X: Any) -> np.ndarray:
        """Keras inference (batch); the control loop uses ``numpy_predictor()`` instead."""
        self._need()
        X, _ = _check_xy(X, None, self.n_features)
        xs = self._x_scaler.transform(X).astype(np.float32)
        out = self._model.predict(xs, verbose=0, batch_size=4096)
        u = self._y_scaler.inverse_transform(np.asarray(out, dtype=np.float64).reshape(-1, 1))[:, 0]
        if self._members:
            u = (u + sum(m.predict(X) for m in self._members)) / (1 + len(self._members))
        return u

    def cross_validate(self, X: Any, y: Any, k: int = 5) -> dict[str, Any]:
        """k-fold CV (scikit-learn KFold, shuffled with ``seed``): relative validation error per fold."""
        from sklearn.model_selection import KFold

        X, yy = _check_xy(X, y, self.n_features)
        assert yy is not None
        if k < 2 or k > X.shape[0]:
            raise ValueError(f"cross-validation needs 2 <= k <= {X.shape[0]} folds, got {k}")
        errs: list[float] = []
        rmse_range: list[float] = []
        span = float(np.ptp(yy)) or 1.0
        for i, (tr, va) in enumerate(KFold(n_splits=k, shuffle=True, random_state=self.seed).split(X)):
            m = self._clone(seed=self.seed + i * self.ensemble, ensemble=self.ensemble)
            m.fit(X[tr], yy[tr])
            pred = m.predict(X[va])
            errs.append(relative_error(yy[va], pred))
            rmse_range.append(float(np.sqrt(np.mean((pred - yy[va]) ** 2)) / span))
        return {
            "folds": k,
            "relative_error": float(np.mean(errs)),
            "relative_error_folds": errs,
            "nrmse_range": float(np.mean(rmse_range)),
        }

    def _clone(self, seed: int, ensemble: int = 1) -> InverseModel:
        return InverseModel(
            ensemble=ensemble,
            hidden_factor=self.hidden_factor,
            epochs=self.epochs,
            batch_size=self.batch_size,
            learning_rate=self.learning_rate,
            seed=seed,
            n_features=self.n_features,
            per_unit=self.per_unit,
        )

    # -- fast path --------------------------------------------------------------
    def numpy_predictor(self) -> NumpyPredictor:
        """The same network as NumPy matrix products (no TensorFlow), for the control loop."""
        self._need()
        arrays: dict[str, np.ndarray] = {
            "x_mean": np.asarray(self._x_scaler.mean_, dtype=np.float64),
            "x_scale": np.asarray(self._x_scaler.scale_, dtype=np.float64),
            "y_mean": np.asarray(self._y_scaler.mean_, dtype=np.float64),
            "y_scale": np.asarray(self._y_scaler.scale_, dtype=np.float64),
        }
        for j, layer in enumerate(self._model.layers):
            w, b = layer.get_weights()
            arrays[f"w{j}"] = np.asarray(w, dtype=np.float64)
            arrays[f"b{j}"] = np.asarray(b, dtype=np.float64)
        for k, m in enumerate(self._members, start=1):
            arrays.update({f"m{k}_{key}": v for key, v in m.numpy_predictor().arrays().items()})
        return NumpyPredictor(arrays, per_unit=self.per_unit, meta=self.meta)

    # -- persistence ------------------------------------------------------------
    def _meta_doc(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "architecture": "Dense(64|I|, relu) -> Dense(|I|, relu) -> Dense(1) (MLC Fig. 8)",
            "n_features": self.n_features,
            "feature_names": list(FEATURE_NAMES) if self.n_features == N_FEATURES else None,
            "rate_features": list(RATE_FEATURES),
            "per_unit": self.per_unit,
            "hidden_factor": self.hidden_factor,
            "epochs": self.epochs,
            "batch_size": self.batch_size,
            "learning_rate": self.learning_rate,
            "seed": self.seed,
            "ensemble": self.ensemble,
            **self.meta,
        }

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write the model directory atomically (built in a temp dir, then renamed into place)."""
        import joblib

        from ..fileio import check_model_destination, replace_dir

        self._need()
        directory = check_model_destination(directory)
        tmp = Path(tempfile.mkdtemp(prefix=directory.name + ".", suffix=".tmp", dir=directory.parent))
        try:
            tmp.chmod(0o755)  # mkdtemp makes 0700; a model directory is meant to be shared
            self._model.save(tmp / "model.keras")
            joblib.dump({"x": self._x_scaler, "y": self._y_scaler}, tmp / "scalers.joblib")
            for k, m in enumerate(self._members, start=1):
                m.save(tmp / f"member_{k}")
            np.savez(tmp / "weights.npz", **self.numpy_predictor().arrays())
            (tmp / "meta.json").write_text(json.dumps(self._meta_doc(), indent=2, default=str))
            replace_dir(tmp, directory)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return directory

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> InverseModel:
        import joblib

        directory = Path(directory)
        meta = _read_meta(directory)
        m = cls(
            hidden_factor=int(meta.get("hidden_factor", 64)),
            epochs=int(meta.get("epochs", 30)),
            batch_size=int(meta.get("batch_size", 128)),
            learning_rate=float(meta.get("learning_rate", 1e-3)),
            seed=int(meta.get("seed", 0)),
            n_features=int(meta["n_features"]),
            per_unit=bool(meta.get("per_unit", False)),
            ensemble=int(meta.get("ensemble", 1)),
        )
        known = set(m._meta_doc())
        m.meta = {k: v for k, v in meta.items() if k not in known or k in ("n_samples", "train_seconds", "train_relative_error")}
        keras = _keras()
        m._model = keras.models.load_model(directory / "model.keras", compile=False)
        sc = joblib.load(directory / "scalers.joblib")
        m._x_scaler, m._y_scaler = sc["x"], sc["y"]
        m._members = [cls.load(directory / f"member_{k}") for k in range(1, m.ensemble)]
        return m


def _tqdm_epochs(keras: Any, epochs: int) -> Any:
    """A Keras callback showing one tqdm bar (stderr) over the epochs."""
    from tqdm import tqdm

    class _Cb(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.bar = tqdm(total=epochs, desc="training", unit="epoch", leave=False)

        def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            self.bar.update(1)
            if logs and "loss" in logs:
                self.bar.set_postfix(loss=f"{logs['loss']:.4g}")

        def close(self) -> None:
            self.bar.close()

    return _Cb()


def _read_meta(directory: Path) -> dict[str, Any]:
    if not directory.is_dir():
        raise FileNotFoundError(f"model directory not found: {directory}")
    mf = directory / "meta.json"
    if not mf.exists():
        raise ValueError(f"{directory}: not an inverse-model directory (no meta.json)")
    try:
        meta = json.loads(mf.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{mf}: invalid JSON ({exc})") from None
    if "n_features" not in meta:
        raise ValueError(f"{mf}: missing 'n_features'")
    return meta


def load_predictor(directory: str | os.PathLike[str]) -> NumpyPredictor:
    """Load only the NumPy network of a saved model (fast, TensorFlow-free)."""
    directory = Path(directory)
    meta = _read_meta(directory)
    from ..fileio import load_npz

    wf = directory / "weights.npz"
    if not wf.exists():
        raise ValueError(f"{directory}: missing weights.npz")
    arrays = load_npz(wf, "weights file")
    try:
        pred = NumpyPredictor(arrays, per_unit=bool(meta.get("per_unit", False)), meta=meta)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"weights file {wf}: not an inverse model's weights ({exc})") from None
    if pred.n_features != int(meta["n_features"]):
        raise ValueError(
            f"{directory}: weights take {pred.n_features} inputs but meta.json says {meta['n_features']}"
        )
    return pred
