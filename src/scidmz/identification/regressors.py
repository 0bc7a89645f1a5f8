"""Regressors of the inverse model, MLC section 3.5 and eq. (1).

Predictors I = {y(t), y(t-T), y(t-2T), u(t-T)} (7 + 7 + 7 + 1 = 22 features),
target u(t). With the project's alignment (ARCHITECTURE.md: u_k is applied
over [kT, (k+1)T) and y_k is measured at the end of that interval), trace row
k holds (y_k, u_k) and sample k is

    X_k = [y_k (7), y_{k-1} (7), y_{k-2} (7), u_{k-1}]      ->  target u_k

for every k >= 2 of one episode: the rate u_k that, from the recent past
(y_{k-1}, y_{k-2}, u_{k-1}), produced y_k. At control time (policies.rate.mlc)
u_k is decided before y_k exists, so y_k is replaced by the desired state
y_d(k) of Table 3 and y_{k-1}, y_{k-2}, u_{k-1} come from the History
(``last_y(1)``, ``last_y(2)``, ``last_u``). Samples never straddle two
episodes (the ``episode`` column written by ``Trace.concat``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..state import N_STATE, STATE_FIELDS, Trace

__all__ = ["FEATURE_NAMES", "N_FEATURES", "RATE_FEATURES", "build_regressors", "feature_row", "to_per_unit"]

FEATURE_NAMES: tuple[str, ...] = (
    *(f"{f}(t)" for f in STATE_FIELDS),
    *(f"{f}(t-T)" for f in STATE_FIELDS),
    *(f"{f}(t-2T)" for f in STATE_FIELDS),
    "u(t-T)",
)
N_FEATURES = len(FEATURE_NAMES)  # 22
#: Feature columns holding rates in bit/s (scaled by B_max in per-unit mode).
RATE_FEATURES: tuple[int, ...] = tuple(
    lag * N_STATE + STATE_FIELDS.index(f) for lag in range(3) for f in ("rate_dtn", "rate_campus")
) + (N_FEATURES - 1,)


def feature_row(y_t: np.ndarray, y_1: np.ndarray, y_2: np.ndarray, u_1: np.ndarray) -> np.ndarray:
    """Stack (B,7), (B,7), (B,7), (B,) into the (B, 22) feature matrix in FEATURE_NAMES order."""
    return np.concatenate(
        [np.atleast_2d(y_t), np.atleast_2d(y_1), np.atleast_2d(y_2), np.reshape(u_1, (-1, 1))], axis=1
    )


def to_per_unit(X: np.ndarray, capacity: float) -> np.ndarray:
    """Divide the rate features (and nothing else) by B_max, in a copy."""
    if not capacity > 0:
        raise ValueError(f"capacity must be > 0 bit/s, got {capacity!r}")
    out = np.array(X, dtype=np.float64, copy=True)
    out[:, list(RATE_FEATURES)] /= capacity
    return out


def _episodes(tr: Trace) -> list[tuple[np.ndarray, np.ndarray]]:
    df = tr.df
    y = tr.y
    u = df["u"].to_numpy(dtype=np.float64)
    if "episode" not in df.columns:
        return [(y, u)]
    ep = df["episode"].to_numpy()
    # Episodes are contiguous blocks; a change of value starts a new one.
    cuts = np.flatnonzero(ep[1:] != ep[:-1]) + 1
    bounds = [0, *cuts.tolist(), len(df)]
    return [(y[a:b], u[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def build_regressors(
    trace_or_traces: Trace | Sequence[Trace],
    scenario_capacity: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Return X (n, 22) in FEATURE_NAMES order and target u (n,), see the module docstring.

    ``scenario_capacity``: if given, the rate features and the target are
    expressed per unit of B_max (so one model serves any capacity; the model
    records this in its metadata and the controller scales the same way).
    """
    traces = [trace_or_traces] if isinstance(trace_or_traces, Trace) else list(trace_or_traces)
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    for tr in traces:
        for y, u in _episodes(tr):
            if len(u) < 3:
                continue
            xs.append(feature_row(y[2:], y[1:-1], y[:-2], u[1:-1]))
            ys.append(u[2:])
    if not xs:
        raise ValueError("no regressors: every episode is shorter than 3 periods")
    X = np.concatenate(xs)
    target = np.concatenate(ys)
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(target))):
        raise ValueError("regressors contain NaN/inf; validate the dataset first (load_dataset)")
    if scenario_capacity is not None:
        X = to_per_unit(X, scenario_capacity)
        target = target / scenario_capacity
    return X, target
