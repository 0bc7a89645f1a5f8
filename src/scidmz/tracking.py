"""Experiment tracking with mlflow: every identify/train/tune run is a recorded run.

Thin helpers only. mlflow is imported lazily inside ``tracked_run`` so that
``import scidmz`` stays fast. The default store is the local ``./mlruns``
directory (ARCHITECTURE.md); ``tracking_uri=`` or ``MLFLOW_TRACKING_URI``
point at a server or another store. mlflow >= 3.x refuses the file store
unless ``MLFLOW_ALLOW_FILE_STORE`` is set: the project's convention is that
file store, so we opt in for file URIs only (a database or server URI is
used as given).

External services are bounded: before mlflow is imported its own
HTTP settings get our defaults (``MLFLOW_HTTP_DEFAULTS``: a 3 s request
timeout, one retry, instead of mlflow's 120 s and 7 retries with
exponential back-off, which kept a command silent for minutes on a dead
server); an exported value wins. Every mlflow failure becomes one line:
"no such model/version" is bad input (``ValueError``), anything else (server
unreachable, store unwritable) a runtime failure (``RuntimeError``). Tracking
URIs and model references are checked before any request (scheme, syntax,
``limits.MAX_NAME``).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

__all__ = ["TrackedRun", "tracked_run", "optional_run", "resolve_tracking_uri", "file_sha256", "is_model_uri", "register_model",
           "attach_gains", "resolve_model", "local_store", "check_model_ref", "check_model_name", "MLFLOW_HTTP_DEFAULTS",
           "STORE_SCHEMES"]

DEFAULT_STORE = "mlruns"
#: mlflow's own HTTP settings, our defaults (an exported value wins): a dead tracking server is
#: one line within 10 s of the command's start (refused: ~1 s after mlflow's import; silent: two
#: attempts of 3 s, urllib3 does not back off before the first retry; measured 3.0 s apart), not
#: minutes of back-off. The timeout is per socket read, so a long artifact download that keeps
#: receiving is not cut by it.
#: Importing mlflow alone took 2-6 s on this machine under load, hence 3 s and not more.
MLFLOW_HTTP_DEFAULTS: dict[str, str] = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "3",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0",
}
#: Tracking-store schemes mlflow ships (a SQLAlchemy ``dialect+driver`` counts by its dialect).
STORE_SCHEMES = ("file", "http", "https", "sqlite", "postgresql", "mysql", "mssql", "databricks", "databricks-uc",
                 "uc")


def resolve_tracking_uri(tracking_uri: str | None = None) -> str:
    """Explicit URI > ``MLFLOW_TRACKING_URI`` > ``./mlruns`` (as an absolute file URI); an unknown
    scheme is a one-line ``ValueError``."""
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_STORE
    if len(uri) > 4096:
        raise ValueError(f"tracking URI of {len(uri)} characters; at most 4096")
    head = uri.split(":", 1)[0].split("+", 1)[0].lower()
    if "://" not in uri and not uri.startswith("file:"):
        if ":" in uri and head in STORE_SCHEMES:  # "sqlite:x.db" is a mistyped URI, not a directory name
            raise ValueError(f"tracking URI {uri[:80]!r}: a {head} URI needs '//' (e.g. sqlite:///mlflow.db)")
        uri = Path(uri).resolve().as_uri()
    scheme = uri.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme not in STORE_SCHEMES:
        src = "--tracking-uri" if tracking_uri else "MLFLOW_TRACKING_URI"
        raise ValueError(f"{src} {uri[:80]!r}: unknown tracking-store scheme '{scheme}' "
                         f"(mlflow knows {', '.join(STORE_SCHEMES)})")
    return uri


def local_store(tracking_uri: str | None = None) -> tuple[Path, str] | None:
    """The local path a tracking store writes, and whether it is a directory (file store) or a file
    (SQLite); None for a server or database URI. The CLI's path policy checks it before any work."""
    uri = resolve_tracking_uri(tracking_uri)
    scheme = uri.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme == "file":
        return Path(unquote(urlparse(uri).path)), "dir"
    if scheme == "sqlite":
        rest = uri.split(":", 1)[1]
        if not rest.startswith("///"):
            raise ValueError(f"tracking URI {uri[:80]!r}: expected sqlite:///relative.db or sqlite:////absolute.db")
        path = unquote(rest[3:])
        if path in ("", ":memory:"):
            return None
        return Path(path), "file"
    return None


def _mlflow() -> Any:
    """mlflow, imported with our bounded HTTP defaults in place (module doc)."""
    for key, value in MLFLOW_HTTP_DEFAULTS.items():
        os.environ.setdefault(key, value)
    import logging

    import mlflow

    # "Experiment ... does not exist. Creating a new experiment." is start-up chatter, not news.
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    return mlflow


@contextmanager
def _mlflow_errors(uri: str) -> Iterator[None]:
    """mlflow's exceptions as one line: a missing resource is bad input, anything else a runtime failure."""
    try:
        yield
    except Exception as exc:
        if not type(exc).__module__.startswith(("mlflow", "requests", "urllib3", "sqlalchemy")):
            raise
        code = str(getattr(exc, "error_code", ""))
        text = " ".join(str(exc).split())
        why = _cause(text)
        if code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE", "BAD_REQUEST"):
            raise ValueError(f"mlflow ({_where(uri)}): {why}") from None
        raise RuntimeError(f"mlflow tracking store {_where(uri)} failed: {why}") from None


def _where(uri: str) -> str:
    p = urlparse(uri)
    return f"{p.scheme}://{p.netloc}" if p.netloc else uri[:120]


def _cause(text: str) -> str:
    """The useful end of mlflow's long messages ("... [Errno 111] Connection refused'))")."""
    m = re.search(r"\[Errno -?\d+\] ([^'\")]+)", text)
    if m:
        return m.group(1).strip()
    for hint in ("Read timed out", "timed out", "Max retries exceeded"):
        if hint in text:
            return hint.lower() if hint != "Max retries exceeded" else "unreachable (retries exhausted)"
    return text[:200]


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
    mlflow = _mlflow()

    prev_uri = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
    # mlflow.set_tracking_uri also writes $MLFLOW_TRACKING_URI: restore it exactly, or a later
    # call in the same process (a notebook, the registry resolver) would read another store.
    prev_env = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(uri)
    try:
        with _mlflow_errors(uri):
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
    mlflow = _mlflow()
    with _mlflow_errors(uri):
        return mlflow, mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri), uri


_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_ALIAS_RE = re.compile(r"[A-Za-z0-9_-]+")


def check_model_name(name: str, what: str = "registered model name") -> str:
    """A registry name: a letter or digit, then letters, digits, '.', '_', '-', at most
    ``limits.MAX_NAME`` characters (ours: also a safe directory name in a file store)."""
    from .limits import MAX_NAME

    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} must not be empty")
    if len(name) > MAX_NAME:
        raise ValueError(f"{what} of {len(name)} characters; at most {MAX_NAME}")
    if not _NAME_RE.fullmatch(name):
        raise ValueError(f"{what} must start with a letter or digit and hold only letters, digits, "
                         f"'.', '_' or '-', got {name!r}")
    return name


def check_model_ref(spec: str) -> tuple[str, str | None, str | None]:
    """``models:/NAME/VERSION`` or ``models:/NAME@ALIAS`` -> (name, version, alias), checked before any
    request; one-line ``ValueError`` otherwise."""
    ref = spec[len(MODEL_URI_PREFIX):]
    shown = spec if len(spec) <= 80 else spec[:77] + "..."
    name, alias, version = ref, None, None
    if "@" in ref:
        name, alias = ref.split("@", 1)
    elif "/" in ref:
        name, version = ref.rsplit("/", 1)
    if not name or not (alias or version):
        raise ValueError(f"model reference {shown!r}: expected models:/NAME/VERSION or models:/NAME@ALIAS")
    check_model_name(name, f"model reference {shown!r}: the name")
    if version is not None and not (version.isdigit() and len(version) <= 18):
        raise ValueError(f"model reference {shown!r}: version must be a number (or use @ALIAS)")
    if alias is not None and not (_ALIAS_RE.fullmatch(alias) and len(alias) <= 255):
        raise ValueError(f"model reference {shown!r}: an alias holds letters, digits, '_' and '-' only")
    return name, version, alias


def _model_version(client: Any, spec: str) -> Any:
    from mlflow.exceptions import MlflowException

    name, version, alias = check_model_ref(spec)
    try:
        if alias:
            return client.get_model_version_by_alias(name, alias)
        return client.get_model_version(name, version)
    except MlflowException as exc:
        if str(getattr(exc, "error_code", "")) not in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
            raise  # a store that cannot answer: _mlflow_errors makes it a runtime failure
        what = f"alias '{alias}' of model '{name}'" if alias else f"version {version} of model '{name}'"
        raise ValueError(f"{spec}: no {what} in the registry ({str(exc).splitlines()[0][:120]})") from None


def register_model(run_id: str, name: str, tracking_uri: str | None = None,
                   tags: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Register the ``model`` artifact directory of run ``run_id`` (``scidmz train``'s) as a new
    version of ``name``; ``tags`` (CV error, scenario fingerprint, ...) go on the version."""
    from mlflow.exceptions import MlflowException

    check_model_name(name)
    _, client, uri = _client(tracking_uri)
    with _mlflow_errors(uri):
        try:
            client.get_registered_model(name)
        except MlflowException as exc:
            if str(getattr(exc, "error_code", "")) != "RESOURCE_DOES_NOT_EXIST":
                raise
            client.create_registered_model(name, description="scidmz inverse model (MLC section 3.5)")
        source = f"{client.get_run(run_id).info.artifact_uri}/model"
        mv = client.create_model_version(name, source=source, run_id=run_id,
                                         tags={k: _short(v) for k, v in (tags or {}).items() if v is not None})
    return {"name": name, "version": int(mv.version), "uri": f"{MODEL_URI_PREFIX}{name}/{mv.version}",
            "source": source}


def attach_gains(spec: str, gains_file: str | os.PathLike[str], tracking_uri: str | None = None) -> dict[str, Any]:
    """Store ``gains_file`` with the model version ``spec`` (in its run, under ``gains/``) and tag it."""
    _, client, uri = _client(tracking_uri)
    with _mlflow_errors(uri):
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
    check_model_ref(spec)
    mlflow, client, uri = _client(tracking_uri)
    with _mlflow_errors(uri):
        return _fetch(mlflow, client, spec, cache)


def _fetch(mlflow: Any, client: Any, spec: str, cache: str | os.PathLike[str] | None) -> tuple[str, str | None]:
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
