"""System identification data: the pseudo-random step excitation of MLC section 3.5.

The paper drives the campus shaper with a new rate drawn uniformly in
[0, B_max] every T for 28,800 s and records y(t) (Fig. 7). Here the signal
comes from ``signals.random_steps`` and is applied through the ordinary
closed-loop runner (``scidmz.runner.run_episode``) by an open-loop
``ExcitationPolicy``, so the recorded dataset is a ``Trace`` like any other
run. ``batch > 1`` splits the duration into B shorter episodes run in one
batched plant call and concatenated (``Trace.concat`` adds ``episode``);
regressors never cross an episode boundary.

Dataset schema (src/scidmz/datasets/README.md): the Trace columns ``t``, the seven
Table 3 state columns, ``u``, ``target`` (0 during identification: there is
no DTN set-point), ``episode``, plus the plant's ground-truth columns.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..scenario import Scenario
from ..signals import random_steps
from ..state import STATE_FIELDS, TRACE_COLUMNS, History, Trace

__all__ = ["ExcitationPolicy", "identify", "write_dataset", "load_dataset", "DATASET_COLUMNS"]

#: Columns every identification dataset must hold (finite values).
DATASET_COLUMNS: tuple[str, ...] = (*TRACE_COLUMNS, "episode")


class ExcitationPolicy:
    """Open loop: replays a precomputed (steps, B) rate signal, ignoring the history."""

    name = "excitation"
    kind = "rate"

    def __init__(self, u: np.ndarray) -> None:
        self.u = np.atleast_2d(np.asarray(u, dtype=np.float64))
        if self.u.ndim != 2:
            raise ValueError(f"excitation signal must be (steps, B), got shape {self.u.shape}")

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        if batch != self.u.shape[1]:
            raise ValueError(f"excitation signal has {self.u.shape[1]} column(s) but the plant batch is {batch}")

    def decide(self, history: History, target: np.ndarray) -> np.ndarray:
        return self.u[len(history)]


def check_identification(scenario: Scenario, duration: float, batch: int, plant: str = "fluid") -> None:
    """Everything ``identify`` checks before it allocates or builds anything (one-line ``ValueError``):
    a duration of at least one period and at most ``limits.MAX_STEPS`` periods, a bounded batch, a
    plant that exists and takes that batch."""
    from ..limits import check
    from ..plant.base import check_plant_options

    if not (isinstance(duration, int | float) and math.isfinite(duration)) or duration < scenario.period:
        raise ValueError(f"identification duration must be at least one period ({scenario.period} s), got {duration!r}")
    check("steps", math.ceil(duration / scenario.period - 1e-9), "identification periods (duration / period)")
    if isinstance(batch, bool) or int(batch) != batch:
        raise ValueError(f"batch must be a whole number >= 1, got {batch!r}")
    check("batch", int(batch), "--batch")
    check_plant_options(plant, int(batch))


def identify(
    scenario: Scenario,
    duration: float,
    seed: int = 0,
    batch: int = 1,
    plant: str = "fluid",
    progress: bool = False,
) -> Trace:
    """Record an identification dataset (MLC section 3.5): u ~ U[u_min, u_max], a new value every T.

    ``duration`` (s) is the total recorded time; with ``batch`` = B the plant
    runs B episodes of ceil(duration / (B T)) periods each in one batched call
    (the total is rounded up to whole periods per episode). Instance i uses
    plant seed ``seed + i`` and its own excitation column; same seed, same data.
    """
    from ..plant.base import make_plant
    from ..runner import run_episode

    check_identification(scenario, duration, batch, plant)
    batch = int(batch)
    total = int(math.ceil(duration / scenario.period - 1e-9))
    batch = min(batch, total)
    steps = int(math.ceil(total / batch))
    u = random_steps(steps, scenario.u_min, scenario.u_max, hold=1, seed=seed, batch=batch)
    targets = np.zeros((steps, batch))
    meta = {
        "kind": "identification",
        "excitation": "pseudo-random steps, uniform [u_min, u_max], hold T (MLC section 3.5)",
        "duration": float(duration),
        "excitation_seed": int(seed),
        "batch": batch,
        "plant_kind": str(plant),
    }
    with make_plant(plant, scenario, batch=batch) as pl:
        traces = run_episode(pl, ExcitationPolicy(u), targets, seed=seed, progress=progress, meta=meta)
    out = Trace.concat(traces)
    out.meta["instance"] = None
    return out


def write_dataset(trace: Trace, path: str | os.PathLike[str]) -> Path:
    """Validate the schema and write Parquet atomically (nothing half-written)."""
    _check_schema(trace, str(path))
    return trace.to_parquet(path)


def load_dataset(path: str | os.PathLike[str]) -> Trace:
    """Read an identification dataset; one-line ValueError for missing columns, NaN/inf or values out of
    range, and (from the file's footer, before reading it) more rows than ``limits.BOUNDS["dataset_rows"]``."""
    from ..limits import check

    try:
        import pyarrow.parquet as pq

        rows = pq.ParquetFile(path).metadata.num_rows
    except Exception:  # noqa: BLE001 - unreadable: Trace.read_parquet says why, in one line
        rows = None
    if rows is not None:
        check("dataset_rows", rows, f"{path}: rows")
    tr = Trace.read_parquet(path)
    if "episode" not in tr.df.columns:
        # A plain single-episode Trace is a valid dataset too.
        tr.df["episode"] = 0
    _check_schema(tr, str(path))
    return tr


def _check_schema(trace: Trace, where: str) -> None:
    df = trace.df
    missing = [c for c in DATASET_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{where}: dataset is missing column(s): {', '.join(missing)}")
    cols = [*STATE_FIELDS, "t", "u"]
    vals = df[cols].to_numpy(dtype=np.float64)
    bad = ~np.isfinite(vals)
    if bad.any():
        names = sorted({cols[j] for j in np.argwhere(bad)[:, 1]})
        raise ValueError(
            f"{where}: dataset has {int(bad.sum())} NaN/inf value(s) in column(s): {', '.join(names)}"
        )
    from ..limits import DATASET_RANGES

    # Finite is not enough (u = 1e300 trained a model of NaN weights): every column
    # within the range a scenario can produce (limits.DATASET_RANGES), rates and times >= 0.
    for j, c in enumerate(cols):
        hi = DATASET_RANGES.get(c)
        if hi is None:
            continue
        v = vals[:, j]
        if v.size and (v.min() < 0 or v.max() > hi):
            worst = v.max() if v.max() > hi else v.min()
            raise ValueError(f"{where}: column {c} holds {worst:g}, outside [0, {hi:g}]")
    if len(df) < 3:
        raise ValueError(f"{where}: dataset has {len(df)} row(s); regressors need at least 3 periods")


def dataset_summary(trace: Trace) -> dict[str, Any]:
    """Small JSON-able description: rows, episodes, u range, scenario name."""
    df = trace.df
    return {
        "rows": len(df),
        "episodes": int(df["episode"].nunique()) if "episode" in df.columns else 1,
        "u_min": float(df["u"].min()),
        "u_max": float(df["u"].max()),
        "scenario": (trace.meta.get("scenario") or {}).get("name"),
    }
