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

__all__ = ["train_model"]


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
) -> tuple[dict[str, Any], str]:
    """Train one inverse model (one per DTN CCA: the dataset's scenario fixes it)."""
    from ..identification.excitation import load_dataset
    from ..identification.regressors import build_regressors
    from ..tracking import file_sha256, tracked_run
    from .inverse import InverseModel

    if folds != 0 and folds < 2:
        raise ValueError(f"--folds must be 0 (skip cross-validation) or >= 2, got {folds}")
    trace = load_dataset(dataset)
    sha = file_sha256(dataset)
    scen = trace.meta.get("scenario") or {}
    capacity = float((scen.get("link") or {}).get("capacity", 0.0)) or None
    if per_unit and capacity is None:
        raise ValueError(f"{dataset}: no scenario capacity in the dataset metadata; use per_unit=False")
    X, y = build_regressors(trace, scenario_capacity=capacity if per_unit else None)
    params = {
        "dataset": str(dataset), "dataset_sha256": sha, "scenario": scen.get("name"),
        "dtn_cca": (scen.get("dtn") or {}).get("cca"), "epochs": epochs, "folds": folds,
        "batch_size": batch_size, "seed": seed, "per_unit": per_unit, "samples": len(y),
    }

    def work(run: Any | None) -> dict[str, Any]:
        t0 = time.perf_counter()
        cv: dict[str, Any] = {}
        if folds:
            cv = InverseModel(epochs=epochs, batch_size=batch_size, seed=seed, per_unit=per_unit).cross_validate(X, y, k=folds)
        model = InverseModel(epochs=epochs, batch_size=batch_size, seed=seed, per_unit=per_unit, progress=progress)
        model.meta.update({
            "dataset": str(dataset), "dataset_sha256": sha, "scenario": scen.get("name"),
            "dtn_cca": (scen.get("dtn") or {}).get("cca"), "capacity": capacity,
            "cv_relative_error": cv.get("relative_error"),
            # Regime and CCA it learned (issue 9): the MLC warns when used on another.
            "scenario_fingerprint": fingerprint(scen) if scen else None,
        })
        model.fit(X, y)
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

    if track:
        with tracked_run("scidmz-train", f"train-{scen.get('name', Path(dataset).stem)}", params, tracking_uri) as run:
            res = work(run)
    else:
        res = work(None)
    cv_txt = f", {folds}-fold relative validation error {100 * res['cv_relative_error']:.2f}%" if folds else ""
    human = (
        f"inverse model: {res['samples']} samples, train relative error "
        f"{100 * res['train_relative_error']:.2f}%{cv_txt}, {res['seconds']:.1f} s -> {res['model']}"
    )
    return res, human
