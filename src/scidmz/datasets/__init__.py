"""Small datasets, trained MLC models and tuned ``pi`` gains shipped inside the package, found the same way from a
notebook, a test or a wheel install (``importlib.resources``), never by guessing relative paths.

Schema and how each file was made: ``README.md`` next to this file.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["dataset_path", "dataset_names", "shipped_model", "shipped_model_names", "shipped_pi_gains",
           "shipped_pi_gains_names", "PI_GAINS_FILE"]

#: The ``pi`` policy's gains in a scenario's model directory (``models/<scenario>-<dtn cca>/``).
PI_GAINS_FILE = "pi_gains.json"


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

    d = _model_dir(scenario)
    if not (d / "meta.json").is_file() or not (d / "gains.json").is_file():
        return None
    if not _same_regime(json.loads((d / "meta.json").read_text()).get("scenario_fingerprint"), scenario):
        return None
    return Path(str(d)), Path(str(d / "gains.json"))


def shipped_pi_gains_names() -> list[str]:
    """``<scenario>-<dtn cca>`` of every scenario that ships ``pi`` gains, sorted."""
    d = resources.files(__name__) / "models"
    return sorted(p.name for p in d.iterdir() if (p / PI_GAINS_FILE).is_file()) if d.is_dir() else []


def shipped_pi_gains(scenario: Any) -> Path | None:
    """The ``pi_gains.json`` shipped for ``scenario``, or None.

    ``scidmz tune SCENARIO --policy pi`` made it (``models/<scenario>-<dtn cca>/``, see
    README.md), beside the MLC model when one ships; it is offered only for a scenario
    of that name, DTN congestion control and buffer regime (the fingerprint the tuning
    stored in the file's ``info``).
    """
    import json

    f = _model_dir(scenario) / PI_GAINS_FILE
    if not f.is_file():
        return None
    info = json.loads(f.read_text()).get("info") or {}
    if not _same_regime(info.get("scenario_fingerprint"), scenario):
        return None
    return Path(str(f))


def _model_dir(scenario: Any) -> Any:
    from ..regime import fingerprint

    now = fingerprint(scenario)
    return resources.files(__name__) / "models" / f"{now['scenario']}-{now['dtn_cca']}"


def _same_regime(stored: dict[str, Any] | None, scenario: Any) -> bool:
    from ..regime import fingerprint

    now = fingerprint(scenario)
    return bool(stored) and all(stored.get(k) == now[k] for k in ("scenario", "dtn_cca", "regime"))
