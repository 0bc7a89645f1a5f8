"""Small datasets and trained MLC models shipped inside the package, found the same way from a
notebook, a test or a wheel install (``importlib.resources``), never by guessing relative paths.

Schema and how each file was made: ``README.md`` next to this file.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["dataset_path", "dataset_names", "shipped_model", "shipped_model_names"]


def dataset_names() -> list[str]:
    """Names of the shipped datasets (file stems), sorted."""
    return sorted(p.name.removesuffix(".parquet") for p in resources.files(__name__).iterdir()
                  if p.name.endswith(".parquet"))


def dataset_path(name: str) -> Path:
    """Path of a shipped dataset, e.g. ``dataset_path("small-cubic-400s")``; one-line error if unknown."""
    p = resources.files(__name__) / f"{name}.parquet"
    if not p.is_file():
        raise ValueError(f"no shipped dataset '{name}' (have: {', '.join(dataset_names()) or 'none'})")
    return Path(str(p))


def shipped_model_names() -> list[str]:
    """``<scenario>-<dtn cca>`` of every shipped MLC model, sorted."""
    d = resources.files(__name__) / "models"
    return sorted(p.name for p in d.iterdir() if (p / "meta.json").is_file()) if d.is_dir() else []


def shipped_model(scenario: Any) -> tuple[Path, Path] | None:
    """(model directory, gains.json) of the MLC shipped for ``scenario``, or None.

    A model ships for a built-in scenario when ``scidmz reproduce mlc`` made it for
    that scenario (``models/<scenario>-<dtn cca>/``, see README.md); it is offered
    only for a scenario of that name, DTN congestion control and buffer regime.
    """
    import json

    from ..regime import fingerprint

    now = fingerprint(scenario)
    d = resources.files(__name__) / "models" / f"{now['scenario']}-{now['dtn_cca']}"
    if not (d / "meta.json").is_file() or not (d / "gains.json").is_file():
        return None
    stored = json.loads((d / "meta.json").read_text()).get("scenario_fingerprint") or {}
    if any(stored.get(k) != now[k] for k in ("scenario", "dtn_cca", "regime")):
        return None
    return Path(str(d)), Path(str(d / "gains.json"))
