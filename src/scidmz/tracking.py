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

__all__ = ["TrackedRun", "tracked_run", "optional_run", "resolve_tracking_uri", "file_sha256", "is_model_uri", "register_model",
           "attach_gains", "resolve_model"]

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
    # mlflow.set_tracking_uri also writes $MLFLOW_TRACKING_URI: restore it exactly, or a later
    # call in the same process (a notebook, the registry resolver) would read another store.
    prev_env = os.environ.get("MLFLOW_TRACKING_URI")
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
        if prev_env is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = prev_env


@contextmanager
def optional_run(
    track: bool,
    experiment: str,
    run_name: str,
    params: Mapping[str, Any] | None = None,
    tracking_uri: str | None = None,
) -> Iterator[TrackedRun | None]:
    """``tracked_run(...)`` when ``track``, else nothing: yields the run or None.

    The one form of "track this unless told not to" (``track=False`` in tests and
    in reproductions that track the whole chain themselves)::

        with optional_run(track, "scidmz-train", name, params, uri) as run:
            res = work(run)  # work logs into run when it is not None
    """
    if not track:
        yield None
        return
    with tracked_run(experiment, run_name, params, tracking_uri) as run:
        yield run


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


# -- the mlflow model registry -----------------------------------------------------------------

MODEL_URI_PREFIX = "models:/"
#: Model-version tag naming the run artifact that holds the version's gains.json (set by `tune`).
GAINS_TAG = "scidmz.gains"


def is_model_uri(spec: str | os.PathLike[str] | None) -> bool:
    """``models:/NAME/VERSION`` or ``models:/NAME@ALIAS`` (a registry reference, not a path)."""
    return isinstance(spec, str) and spec.startswith(MODEL_URI_PREFIX)


def _client(tracking_uri: str | None) -> tuple[Any, Any, str]:
    uri = resolve_tracking_uri(tracking_uri)
    if uri.startswith("file:"):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    import logging

    import mlflow

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    return mlflow, mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri), uri


def _model_version(client: Any, spec: str) -> Any:
    from mlflow.exceptions import MlflowException

    ref = spec[len(MODEL_URI_PREFIX):]
    name, alias, version = ref, None, None
    if "@" in ref:
        name, alias = ref.split("@", 1)
    elif "/" in ref:
        name, version = ref.rsplit("/", 1)
    if not name or not (alias or version) or "/" in name:
        raise ValueError(f"model reference {spec!r}: expected models:/NAME/VERSION or models:/NAME@ALIAS")
    try:
        if alias:
            return client.get_model_version_by_alias(name, alias)
        if not version.isdigit():
            raise ValueError(f"model reference {spec!r}: version must be a number (or use @ALIAS)")
        return client.get_model_version(name, version)
    except MlflowException as exc:
        what = f"alias '{alias}' of model '{name}'" if alias else f"version {version} of model '{name}'"
        raise ValueError(f"{spec}: no {what} in the registry ({str(exc).splitlines()[0][:120]})") from None


def register_model(run_id: str, name: str, tracking_uri: str | None = None,
                   tags: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Register the ``model`` artifact directory of run ``run_id`` (``scidmz train``'s) as a new
    version of ``name``; ``tags`` (CV error, scenario fingerprint, ...) go on the version."""
    from mlflow.exceptions import MlflowException

    if not name or not all(c.isalnum() or c in "-_." for c in name):
        raise ValueError(f"registered model name must be letters, digits, '-', '_' or '.', got {name!r}")
    _, client, _ = _client(tracking_uri)
    try:
        client.get_registered_model(name)
    except MlflowException:
        client.create_registered_model(name, description="scidmz inverse model (MLC section 3.5)")
    source = f"{client.get_run(run_id).info.artifact_uri}/model"
    mv = client.create_model_version(name, source=source, run_id=run_id,
                                     tags={k: _short(v) for k, v in (tags or {}).items() if v is not None})
    return {"name": name, "version": int(mv.version), "uri": f"{MODEL_URI_PREFIX}{name}/{mv.version}",
            "source": source}


def attach_gains(spec: str, gains_file: str | os.PathLike[str], tracking_uri: str | None = None) -> dict[str, Any]:
    """Store ``gains_file`` with the model version ``spec`` (in its run, under ``gains/``) and tag it."""
    _, client, _ = _client(tracking_uri)
    mv = _model_version(client, spec)
    client.log_artifact(mv.run_id, str(gains_file), artifact_path="gains")
    path = f"gains/{Path(gains_file).name}"
    client.set_model_version_tag(mv.name, mv.version, GAINS_TAG, path)
    return {"model": f"{MODEL_URI_PREFIX}{mv.name}/{mv.version}", "gains_artifact": path}


def resolve_model(spec: str, tracking_uri: str | None = None,
                  cache: str | os.PathLike[str] | None = None) -> tuple[str, str | None]:
    """A registry reference -> (local model directory, local gains.json or None).

    Downloads once into ``cache`` (default ``~/.cache/scidmz/models/NAME/VERSION``); a path
    that is not a ``models:/`` reference is returned unchanged. Unknown names, versions and
    aliases are a one-line ``ValueError`` naming them.
    """
    if not is_model_uri(spec):
        return spec, None
    mlflow, client, uri = _client(tracking_uri)
    mv = _model_version(client, spec)
    root = Path(cache) if cache else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "scidmz" / "models"
    dest = root / mv.name / str(mv.version)
    model_dir = dest / "model"
    if not (model_dir / "meta.json").is_file():
        import shutil
        import tempfile

        dest.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=dest, prefix=".dl-"))
        try:
            got = Path(mlflow.artifacts.download_artifacts(artifact_uri=mv.source, dst_path=str(tmp)))
            shutil.rmtree(model_dir, ignore_errors=True)
            got.replace(model_dir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    gains = None
    tag = (mv.tags or {}).get(GAINS_TAG)
    if tag:
        # Always fetched (a few hundred bytes): `tune` may have attached newer gains since.
        gains_path = dest / Path(tag).name
        # Through the run's artifact URI (this client's store), not run_id: mlflow resolves a
        # run_id against its process-wide tracking URI.
        art = f"{client.get_run(mv.run_id).info.artifact_uri}/{tag}"
        got = mlflow.artifacts.download_artifacts(artifact_uri=art, dst_path=str(dest / ".gains"))
        Path(got).replace(gains_path)
        gains = str(gains_path)
    return str(model_dir), gains
