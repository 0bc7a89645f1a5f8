"""The closed loop: a policy drives a plant for a whole episode, recorded as Traces.

One call runs B instances in lock-step (a batched plant and a batched
policy), so a GA generation or a multi-trial experiment is one loop.
Alignment (ARCHITECTURE.md): at step k the policy sees y_0..y_{k-1} and the
reset state, decides u_k, the plant applies it over [kT, (k+1)T) and returns
y_k.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..plant.base import Plant
from ..policies.base import Policy
from ..state import History, Trace

__all__ = ["run_episode", "check_rates"]


def check_rates(u: np.ndarray, batch: int, u_min: float, u_max: float, policy: str) -> np.ndarray:
    """Shape and clip a policy's output; NaN never reaches the plant (one-line error instead)."""
    arr = np.broadcast_to(np.asarray(u, dtype=np.float64), (batch,))
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"policy '{policy}' returned a non-finite rate")
    return np.clip(arr, u_min, u_max)


def run_episode(
    plant: Plant,
    policy: Policy,
    targets: np.ndarray,
    seed: int | None = None,
    progress: bool = False,
    meta: dict[str, Any] | None = None,
) -> list[Trace]:
    """Run ``policy`` on ``plant`` for ``len(targets)`` periods.

    ``targets``: R*_DTN per period, shape (steps,) (same for every instance) or
    (steps, B). Returns one ``Trace`` per plant instance, with the plant's
    per-period ground truth (``plant.info``) as extra columns.
    """
    scenario = plant.scenario
    batch = plant.batch
    tg = np.asarray(targets, dtype=np.float64)
    if tg.ndim == 1:
        tg = np.repeat(tg[:, None], batch, axis=1)
    if tg.ndim != 2 or tg.shape[1] != batch:
        raise ValueError(f"targets must have shape (steps,) or (steps, {batch}), got {tg.shape}")
    for v in (tg.min(initial=0.0), tg.max(initial=0.0)):
        scenario.check_target(float(v))
    steps = tg.shape[0]

    state0 = plant.reset(seed)
    policy.reset(scenario, batch)
    hist = History(state0.y, capacity_hint=steps)
    times = np.empty(steps)
    extras: dict[str, np.ndarray] = {}
    it = range(steps)
    if progress:
        from tqdm import tqdm

        it = tqdm(it, desc=f"{policy.name} on {scenario.name}", unit="period", leave=False)
    for k in it:
        u = check_rates(policy.decide(hist, tg[k]), batch, scenario.u_min, scenario.u_max, policy.name)
        st = plant.step(u)
        hist.append(u, st.y, tg[k])
        times[k] = st.t
        for key, val in plant.info.items():
            arr = np.asarray(val)
            if arr.shape != (batch,):
                continue  # only per-instance scalars become trace columns
            if key not in extras:
                extras[key] = np.full((steps, batch), np.nan)
            extras[key][k] = arr

    base_meta = {
        "scenario": scenario.to_dict(),
        "policy": policy.name,
        "seed": seed,
        "plant": type(plant).__name__,
    }
    base_meta.update(meta or {})
    return [
        Trace.from_arrays(
            times,
            hist.y[:, i, :],
            hist.u[:, i],
            hist.target[:, i],
            extra={k: v[:, i] for k, v in extras.items()},
            meta={**base_meta, "instance": i},
        )
        for i in range(batch)
    ]
