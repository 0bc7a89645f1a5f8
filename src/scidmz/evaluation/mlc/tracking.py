"""mlflow tracking of the MLC study's evaluations, in one place (``scidmz evaluate``, ``reproduce mlc``).

An evaluation is one mlflow run: its parameters (scenario, plan, policies), one
metric per experiment, policy and statistic (``summary_metrics``), and the
results files as artifacts. ``tracked(...)`` opens the run, or nothing when
tracking is off (``enabled=False``: the caller then gets ``None``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = ["EVALUATE_EXPERIMENT", "REPRODUCE_EXPERIMENT", "tracked", "summary_metrics", "log_results"]

#: mlflow experiment of ``scidmz evaluate`` runs
EVALUATE_EXPERIMENT = "scidmz-evaluate"
#: mlflow experiment of every stage of ``scidmz reproduce mlc``
REPRODUCE_EXPERIMENT = "scidmz-reproduce"


@contextmanager
def tracked(experiment: str, run_name: str, params: Mapping[str, Any], tracking_uri: str | None,
            enabled: bool = True) -> Iterator[Any]:
    """An mlflow run (``tracking.tracked_run``) when ``enabled``, else ``None``."""
    if not enabled:
        yield None
        return
    from ...tracking import tracked_run

    with tracked_run(experiment, run_name, dict(params), tracking_uri) as run:
        yield run


def summary_metrics(summaries: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """``{experiment}_{statistic}_{policy}`` (median for short flows, else mean) and
    ``sweep_fct_ns{N}_{policy}`` from the experiments' JSON summaries. mlflow allows no ``+`` in a
    name, so a configuration's members are joined by ``:`` there (``pacing:pi`` for ``pacing+pi``)."""
    out: dict[str, float] = {}
    for name, summ in summaries.items():
        if name == "sweep":
            for row in summ.get("rows", []):
                for pol, v in row.items():
                    if isinstance(v, Mapping):
                        out[f"sweep_fct_ns{row['n_s']}_{_mlflow_name(pol)}"] = _num(v.get("mean"))
            continue
        key = "median" if name == "short" else "mean"
        for pol, v in summ.items():
            if isinstance(v, Mapping):
                out[f"{name}_{key}_{_mlflow_name(pol)}"] = _num(v.get(key))
    return out


def _mlflow_name(policy: str) -> str:
    return policy.replace("+", ":")


def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


def log_results(run: Any, summaries: Mapping[str, Mapping[str, Any]],
                artifacts: Iterable[str | os.PathLike[str]] = (), tags: Mapping[str, Any] | None = None) -> None:
    """Log the summaries' metrics, the result files (``results/``) and ``tags`` on ``run`` (None: nothing)."""
    if run is None:
        return
    if tags:
        run.set_tags(dict(tags))
    run.log_metrics(summary_metrics(summaries))
    for path in artifacts:
        run.log_artifact(path, artifact_path="results")
