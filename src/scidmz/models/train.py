"""``scidmz train``: dataset -> regressors -> k-fold CV + inverse ANN -> model directory, tracked.

Retraining from a new dataset is this one call (or ``scidmz train``); each
call is a new mlflow run holding the dataset hash, the CV error, the model
directory (Keras model, scalers, NumPy weights, metadata) and the loss curve.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..regime import fingerprint

__all__ = ["train_model", "check_training"]


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
    """
    from ..identification.excitation import load_dataset
    from ..identification.regressors import build_regressors
    from ..tracking import file_sha256, optional_run
    from .inverse import InverseModel
    from .predictor import relative_error

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

    def fresh() -> InverseModel:
        if start is None:
            return InverseModel(epochs=epochs, batch_size=batch_size, seed=seed, per_unit=per_unit, progress=progress)
        m = InverseModel.load(init)
        return m.set_params(warm_start=True, epochs=epochs, batch_size=batch_size, seed=seed, progress=progress,
                            learning_rate=start["learning_rate"] / 10.0)

    def work(run: Any | None) -> dict[str, Any]:
        t0 = time.perf_counter()
        cv: dict[str, Any] = {}
        if folds and start is None:
            cv = InverseModel(epochs=epochs, batch_size=batch_size, seed=seed, per_unit=per_unit).cross_validate(X, y, k=folds)
        elif folds:
            cv = _finetune_cv(fresh, X, y, folds, seed)
        model = fresh()
        if start is not None:
            model.meta.update({"init_model": str(init), "init_dataset_sha256": start["dataset_sha256"],
                               "init_scenario_fingerprint": start["fingerprint"],
                               "init_relative_error": relative_error(y, start["predictor"](X))})
        model.meta.update({
            "dataset": str(dataset), "dataset_sha256": sha, "scenario": scen.get("name"),
            "dtn_cca": (scen.get("dtn") or {}).get("cca"), "capacity": capacity,
            "cv_relative_error": cv.get("relative_error"),
            # Regime and CCA it learned (issue 9): the MLC warns when used on another.
            "scenario_fingerprint": fingerprint(scen) if scen else None,
        })
        model.fit(X, y)
        _check_fitted(model, dataset)  # never write a model of NaN/inf weights
        path = model.save(out)
        # The loss curve and predicted vs actual u, next to the model (training data; the CV
        # error above is the held-out figure).
        from ..plots import plot_training, save_figure

        n = min(len(y), 20_000)
        pred = model.predict(X[:n])
        scale = capacity if per_unit and capacity else 1.0
        save_figure(plot_training(model.history_.get("loss", []), y[:n] * scale, pred * scale), path / "training.png")
        wall = time.perf_counter() - t0
        res = {
            "model": str(path), "samples": int(len(y)), "seconds": round(wall, 2),
            "train_relative_error": model.meta["train_relative_error"],
            **({"init_relative_error": model.meta["init_relative_error"]} if start is not None else {}),
            "cv": cv, "cv_relative_error": cv.get("relative_error"), **{k: v for k, v in params.items() if k != "samples"},
        }
        if run is not None:
            run.log_metrics({
                "train_relative_error": model.meta["train_relative_error"],
                "cv_relative_error": cv.get("relative_error"), "cv_nrmse_range": cv.get("nrmse_range"),
                "seconds": wall,
            })
            run.log_metric_series("loss", model.history_.get("loss", []))
            run.log_artifact(path, artifact_path="model")
            res["mlflow_run_id"] = run.run_id
        return res

    with optional_run(track, "scidmz-train", f"train-{scen.get('name', Path(dataset).stem)}", params,
                      tracking_uri) as run:
        res = work(run)
    cv_txt = f", {folds}-fold relative validation error {100 * res['cv_relative_error']:.2f}%" if folds else ""
    if start is not None:
        cv_txt += f"; fine-tuned from {init} (its error on this dataset: {100 * res['init_relative_error']:.2f}%)"
    human = (
        f"inverse model: {res['samples']} samples, train relative error "
        f"{100 * res['train_relative_error']:.2f}%{cv_txt}, {res['seconds']:.1f} s -> {res['model']}"
    )
    return res, human


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
