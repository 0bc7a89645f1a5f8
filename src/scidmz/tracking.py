"""Experiment tracking with mlflow: every identify/train/tune run is a recorded run.

Thin helpers only. mlflow is imported lazily inside ``tracked_run`` so that
``import scidmz`` stays fast. The default store is the local ``./mlruns``
directory (ARCHITECTURE.md); ``tracking_uri=`` or ``MLFLOW_TRACKING_URI``
point at a server or another store. mlflow >= 3.x refuses the file store
unless ``MLFLOW_ALLOW_FILE_STORE`` is set: the project's convention is that
file store, so we opt in for file URIs only (a database or server URI is
used as given).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["TrackedRun", "tracked_run", "resolve_tracking_uri", "file_sha256"]

DEFAULT_STORE = "mlruns"


def resolve_tracking_uri(tracking_uri: str | None = None) -> str:
    """Explicit URI > ``MLFLOW_TRACKING_URI`` > ``./mlruns`` (as an absolute file URI)."""
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_STORE
    if "://" not in uri and not uri.startswith("file:"):
        uri = Path(uri).resolve().as_uri()
    return uri


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file (datasets are identified by content, not by name)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class TrackedRun:
    """The object ``tracked_run`` yields: log metrics, artifacts, tags into one mlflow run."""

    def __init__(self, mlflow: Any, run: Any, tracking_uri: str) -> None:
        self._mlflow = mlflow
        self.run = run
        self.run_id: str = run.info.run_id
        self.tracking_uri = tracking_uri

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        clean = {k: float(v) for k, v in metrics.items() if v is not None and _finite(v)}
        if clean:
            self._mlflow.log_metrics(clean, step=step)

    def log_metric_series(self, name: str, values: list[float]) -> None:
        """One metric over steps (e.g. the GA's best IAE per generation)."""
        for i, v in enumerate(values):
            if _finite(v):
                self._mlflow.log_metric(name, float(v), step=i)

    def log_params(self, params: Mapping[str, Any]) -> None:
        if params:
            self._mlflow.log_params({k: _short(v) for k, v in params.items()})

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        self._mlflow.set_tags({k: _short(v) for k, v in tags.items()})

    def log_artifact(self, path: str | os.PathLike[str], artifact_path: str | None = None) -> None:
        p = Path(path)
        if p.is_dir():
            self._mlflow.log_artifacts(str(p), artifact_path=artifact_path or p.name)
        else:
            self._mlflow.log_artifact(str(p), artifact_path=artifact_path)


@contextmanager
def tracked_run(
    experiment: str,
    run_name: str,
    params: Mapping[str, Any] | None = None,
    tracking_uri: str | None = None,
) -> Iterator[TrackedRun]:
    """Open an mlflow run in ``experiment``; the run ends FAILED if the body raises."""
    uri = resolve_tracking_uri(tracking_uri)
    if uri.startswith("file:"):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    import logging

    import mlflow

    # "Experiment ... does not exist. Creating a new experiment." is start-up chatter, not news.
    logging.getLogger("mlflow").setLevel(logging.WARNING)

    prev_uri = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
    mlflow.set_tracking_uri(uri)
    try:
        mlflow.set_experiment(experiment)
        with mlflow.start_run(run_name=run_name) as run:
            tr = TrackedRun(mlflow, run, uri)
            tr.log_params(dict(params or {}))
            yield tr
    finally:
        if prev_uri is not None:
            mlflow.set_tracking_uri(prev_uri)


def _finite(v: Any) -> bool:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return False
    return f == f and f not in (float("inf"), float("-inf"))


def _short(v: Any) -> str:
    # mlflow limits a param value to a few KB; keep long values readable but bounded.
    s = str(v)
    return s if len(s) <= 500 else s[:497] + "..."
