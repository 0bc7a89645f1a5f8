"""Small datasets shipped inside the package, found the same way from a notebook, a test or a
wheel install (``importlib.resources``), never by guessing relative paths.

Schema and how each file was made: ``README.md`` next to this file.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["dataset_path", "dataset_names"]


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
