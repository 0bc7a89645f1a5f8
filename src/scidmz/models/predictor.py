"""The trained inverse ANN as NumPy arrays (MLC section 3.5, Fig. 8): what the control loop runs.

No TensorFlow and no scikit-learn: a daemon, a GA worker or a notebook loads
``weights.npz`` and ``meta.json`` of a saved model directory
(``models.inverse.InverseModel.save``) and evaluates the network with a few
matrix products.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["NumpyPredictor", "ROW_BLOCK", "load_predictor", "read_model_meta", "relative_error"]

#: Ours: every matrix product runs on blocks of exactly this many rows (the last one padded with
#: zeros), so a row's output does not depend on the batch it came in. BLAS picks its kernel, tiling
#: and threading by shape (one row is a GEMV, thirty a GEMM on other tiles), and they round
#: differently: a trial's MLC numbers moved with the executor's chunk size (quick reproduce, cubic
#: MLC FCT 18.2005 s locally, 18.1980 s on processes:2). One shape, one code path: bit-identical rows
#: on one machine and BLAS build, for a padding cost of at most ROW_BLOCK - 1 rows per call.
ROW_BLOCK = 16


def relative_error(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """mean |u_hat - u| / mean |u| (the paper's relative validation error, as a fraction)."""
    yt = np.asarray(y_true, dtype=np.float64).ravel()
    yp = np.asarray(y_pred, dtype=np.float64).ravel()
    denom = float(np.mean(np.abs(yt)))
    return float(np.mean(np.abs(yp - yt)) / denom) if denom > 0 else float("nan")


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
        n = X.shape[0]
        h = np.zeros((n + (-n % ROW_BLOCK), X.shape[1]))
        h[:n] = (X - self.x_mean) / self.x_scale
        out = np.concatenate([self._block(h[i:i + ROW_BLOCK]) for i in range(0, h.shape[0], ROW_BLOCK)] or [h[:, 0]])
        return out[:n] * self.y_scale + self.y_mean

    def _block(self, h: np.ndarray) -> np.ndarray:
        """The network on one ``ROW_BLOCK``-row block of normalised inputs: its raw output column."""
        last = len(self.layers) - 1
        for j, (w, b) in enumerate(self.layers):
            h = h @ w + b
            if j < last:
                np.maximum(h, 0.0, out=h)
        return h[:, 0]

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


def read_model_meta(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """``meta.json`` of a saved model directory; one-line errors for a missing or broken one."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"model directory not found: {directory}")
    mf = directory / "meta.json"
    if not mf.exists():
        raise ValueError(f"{directory}: not an inverse-model directory (no meta.json)")
    from ..fileio import read_json_input

    meta = read_json_input(mf, "model metadata")
    if not isinstance(meta, dict):
        raise ValueError(f"{mf}: expected a JSON object")
    if "n_features" not in meta:
        raise ValueError(f"{mf}: missing 'n_features'")
    return meta


def load_predictor(directory: str | os.PathLike[str]) -> NumpyPredictor:
    """Load only the NumPy network of a saved model (fast, TensorFlow-free)."""
    directory = Path(directory)
    meta = read_model_meta(directory)
    from ..fileio import load_npz

    wf = directory / "weights.npz"
    if not wf.exists():
        raise ValueError(f"{directory}: missing weights.npz")
    arrays = load_npz(wf, "weights file")
    bad = sorted(k for k, v in arrays.items() if v.dtype.kind in "fc" and not np.all(np.isfinite(v)))
    if bad:
        raise ValueError(f"weights file {wf}: non-finite values in {', '.join(bad[:4])}; not a usable model")
    try:
        pred = NumpyPredictor(arrays, per_unit=bool(meta.get("per_unit", False)), meta=meta)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"weights file {wf}: not an inverse model's weights ({exc})") from None
    if pred.n_features != int(meta["n_features"]):
        raise ValueError(
            f"{directory}: weights take {pred.n_features} inputs but meta.json says {meta['n_features']}"
        )
    return pred
