"""``scidmz train``: dataset -> regressors -> k-fold CV + inverse ANN -> model directory, tracked.

Retraining from a new dataset is this one call (or ``scidmz train``); each
call is a new mlflow run holding the dataset hash, the CV error, the model
directory (Keras model, scalers, NumPy weights, metadata) and the loss curve.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..regime import fingerprint

__all__ = ["train_model", "check_training"]


@dataclass
class _Job:
    """One training request, validated: the dataset's regressors and everything recorded with the model."""

    dataset: str
    out: str
    epochs: int
    folds: int
    batch_size: int
    seed: int
    per_unit: bool
    progress: bool
    init: str | None
    X: Any
    y: Any
    sha: str
    scen: dict[str, Any]
    capacity: float | None
    start: dict[str, Any] | None
    params: dict[str, Any]

    def fresh(self) -> Any:
        """A new inverse model: from scratch, or the starting model at a tenth of its learning rate."""
        from .inverse import InverseModel

        if self.start is None:
            return InverseModel(epochs=self.epochs, batch_size=self.batch_size, seed=self.seed,
                                per_unit=self.per_unit, progress=self.progress)
        m = InverseModel.load(self.init)
        return m.set_params(warm_start=True, epochs=self.epochs, batch_size=self.batch_size, seed=self.seed,
                            progress=self.progress, learning_rate=self.start["learning_rate"] / 10.0)


def train_model(
    dataset: str,
    out: str,
    epochs: int = 30,
    folds: int = 5,
    batch_size: int = 128,
    seed: int = 0,
    per_unit: bool = True,
    tracking_uri: str | None = None,
    track: bool = True,
    progress: bool = False,
    init: str | None = None,
) -> tuple[dict[str, Any], str]:
    """Train one inverse model (one per DTN CCA: the dataset's scenario fixes it).

    ``init``: a saved model to fine-tune instead of training from scratch (its
    weights and scalers are the start; ``InverseModel.warm_start``), at a tenth of
    its learning rate (ours: the usual fine-tuning step, so a short dataset
    refines the model rather than overwriting it). The result also holds
    ``init_relative_error``, the starting model's error on this whole dataset
    (how well it transferred), and the CV folds fine-tune the same start.

    Validate, then fit, then write the model directory, then track: each a function below.
    """
    from ..tracking import optional_run

    job = _validate(dataset, out, epochs, folds, batch_size, seed, per_unit, progress, init)
    with optional_run(track, "scidmz-train", f"train-{job.scen.get('name', Path(dataset).stem)}", job.params,
                      tracking_uri) as run:
        t0 = time.perf_counter()
        model, cv = _fit(job)
        path = _write(job, model)
        wall = time.perf_counter() - t0
        res = _result(job, model, cv, path, wall)
        if run is not None:
            _track(run, model, cv, path, wall)
            res["mlflow_run_id"] = run.run_id
    return res, _human(job, res)


def _validate(dataset: str, out: str, epochs: int, folds: int, batch_size: int, seed: int, per_unit: bool,
              progress: bool, init: str | None) -> _Job:
    """The settings, the dataset (size, capacity) and the starting model, checked; one line each."""
    from ..identification.excitation import load_dataset
    from ..identification.regressors import build_regressors
    from ..tracking import file_sha256

    check_training(epochs, folds)
    trace = load_dataset(dataset)
    check_training(epochs, folds, rows=len(trace.df), where=str(dataset))
    sha = file_sha256(dataset)
    scen = trace.meta.get("scenario") or {}
    capacity = float((scen.get("link") or {}).get("capacity", 0.0)) or None
    if per_unit and capacity is None:
        raise ValueError(f"{dataset}: no scenario capacity in the dataset metadata; use per_unit=False")
    X, y = build_regressors(trace, scenario_capacity=capacity if per_unit else None)
    start = _load_init(init, per_unit) if init else None
    params = {
        "dataset": str(dataset), "dataset_sha256": sha, "scenario": scen.get("name"),
        "dtn_cca": (scen.get("dtn") or {}).get("cca"), "epochs": epochs, "folds": folds,
        "batch_size": batch_size, "seed": seed, "per_unit": per_unit, "samples": len(y),
        **({"init": str(init)} if init else {}),
    }
    return _Job(str(dataset), out, epochs, folds, batch_size, seed, per_unit, progress, init, X, y, sha, scen,
                capacity, start, params)


def _fit(job: _Job) -> tuple[Any, dict[str, Any]]:
    """k-fold CV (of training, or of fine-tuning the same start), then the model fitted on all rows."""
    from .inverse import InverseModel
    from .predictor import relative_error

    cv: dict[str, Any] = {}
    if job.folds and job.start is None:
        cv = InverseModel(epochs=job.epochs, batch_size=job.batch_size, seed=job.seed,
                          per_unit=job.per_unit).cross_validate(job.X, job.y, k=job.folds)
    elif job.folds:
        cv = _finetune_cv(job.fresh, job.X, job.y, job.folds, job.seed)
    model = job.fresh()
    if job.start is not None:
        model.meta.update({"init_model": str(job.init), "init_dataset_sha256": job.start["dataset_sha256"],
                           "init_scenario_fingerprint": job.start["fingerprint"],
                           "init_relative_error": relative_error(job.y, job.start["predictor"](job.X))})
    model.meta.update({
        "dataset": job.dataset, "dataset_sha256": job.sha, "scenario": job.scen.get("name"),
        "dtn_cca": (job.scen.get("dtn") or {}).get("cca"), "capacity": job.capacity,
        "cv_relative_error": cv.get("relative_error"),
        # The regime and CCA it learned: the MLC warns when it is used on another.
        "scenario_fingerprint": fingerprint(job.scen) if job.scen else None,
    })
    model.fit(job.X, job.y)
    _check_fitted(model, job.dataset)  # never write a model of NaN/inf weights
    return model, cv


def _write(job: _Job, model: Any) -> Path:
    """The model directory, with the loss curve and predicted vs actual u next to it (training data; the
    CV error is the held-out figure)."""
    from ..plots import plot_training, save_figure

    path = model.save(job.out)
    n = min(len(job.y), 20_000)
    pred = model.predict(job.X[:n])
    scale = job.capacity if job.per_unit and job.capacity else 1.0
    save_figure(plot_training(model.history_.get("loss", []), job.y[:n] * scale, pred * scale),
                path / "training.png")
    return path


def _result(job: _Job, model: Any, cv: dict[str, Any], path: Path, wall: float) -> dict[str, Any]:
    return {
        "model": str(path), "samples": int(len(job.y)), "seconds": round(wall, 2),
        "train_relative_error": model.meta["train_relative_error"],
        **({"init_relative_error": model.meta["init_relative_error"]} if job.start is not None else {}),
        "cv": cv, "cv_relative_error": cv.get("relative_error"),
        **{k: v for k, v in job.params.items() if k != "samples"},
    }


def _track(run: Any, model: Any, cv: dict[str, Any], path: Path, wall: float) -> None:
    """The errors, the loss curve and the model directory into the mlflow run."""
    run.log_metrics({
        "train_relative_error": model.meta["train_relative_error"],
        "cv_relative_error": cv.get("relative_error"), "cv_nrmse_range": cv.get("nrmse_range"),
        "seconds": wall,
    })
    run.log_metric_series("loss", model.history_.get("loss", []))
    run.log_artifact(path, artifact_path="model")


def _human(job: _Job, res: dict[str, Any]) -> str:
    cv_txt = f", {job.folds}-fold relative validation error {100 * res['cv_relative_error']:.2f}%" if job.folds else ""
    if job.start is not None:
        cv_txt += f"; fine-tuned from {job.init} (its error on this dataset: {100 * res['init_relative_error']:.2f}%)"
    return (f"inverse model: {res['samples']} samples, train relative error "
            f"{100 * res['train_relative_error']:.2f}%{cv_txt}, {res['seconds']:.1f} s -> {res['model']}")


def check_training(epochs: int, folds: int, rows: int | None = None, where: str = "dataset") -> None:
    """The training settings (and, given ``rows``, the dataset's size), checked before any work:
    epochs and folds within ``limits.BOUNDS``, at least ``limits.MIN_DATASET_ROWS`` rows and at
    least one row per fold."""
    from ..limits import MIN_DATASET_ROWS, check

    check("epochs", epochs, "--epochs")
    if folds != 0 and isinstance(folds, int) and folds < 2:
        raise ValueError(f"--folds must be 0 (skip cross-validation) or >= 2, got {folds}")
    check("folds", folds, "--folds")
    if rows is None:
        return
    if rows < MIN_DATASET_ROWS:
        raise ValueError(f"{where}: {rows} rows; training needs at least {MIN_DATASET_ROWS} periods")
    check("train_rows", rows, f"{where}: rows")
    if folds > rows:
        raise ValueError(f"--folds {folds}: more folds than the {rows} rows of {where}")


def _check_fitted(model: Any, dataset: str) -> None:
    """A fitted network whose weights or training error are not finite is refused before it is saved."""
    import math

    import numpy as np

    arrays = model.numpy_predictor().arrays()
    bad = sorted(k for k, v in arrays.items() if not np.all(np.isfinite(v)))
    err = model.meta.get("train_relative_error")
    if bad or (err is not None and not math.isfinite(err)):
        raise ValueError(f"{dataset}: training on it gave non-finite {'weights' if bad else 'errors'}; "
                         "no model written (are its values in a useful range?)")


def _load_init(init: str, per_unit: bool) -> dict[str, Any]:
    """What fine-tuning needs of the starting model, checked up front (one-line errors)."""
    from .predictor import load_predictor, read_model_meta

    meta = read_model_meta(init)
    if bool(meta.get("per_unit", False)) != per_unit:
        raise ValueError(f"--init {init}: its rates are {'per unit of B_max' if meta.get('per_unit') else 'in bit/s'}; "
                         "a fine-tuned model must keep them")
    if int(meta.get("ensemble", 1)) != 1 and not (Path(init) / "member_1").is_dir():
        raise ValueError(f"--init {init}: ensemble members are missing")
    return {"learning_rate": float(meta.get("learning_rate", 1e-3)), "dataset_sha256": meta.get("dataset_sha256"),
            "fingerprint": meta.get("scenario_fingerprint"), "predictor": load_predictor(init)}


def _finetune_cv(fresh: Any, X: Any, y: Any, folds: int, seed: int) -> dict[str, Any]:
    """k-fold relative error of fine-tuning: each fold starts again from the initial model."""
    import numpy as np
    from sklearn.model_selection import KFold

    from .predictor import relative_error

    if folds > len(y):
        raise ValueError(f"cross-validation needs 2 <= k <= {len(y)} folds, got {folds}")
    errs = []
    for tr, te in KFold(n_splits=folds, shuffle=True, random_state=int(seed)).split(X):
        m = fresh().set_params(progress=False).fit(X[tr], y[tr])
        errs.append(relative_error(y[te], m.predict(X[te])))
    return {"folds": folds, "relative_error": float(np.mean(errs)), "relative_error_folds": [float(e) for e in errs],
            "fine_tuned": True}
