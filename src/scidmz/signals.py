"""Reference and excitation signals, sampled once per control period.

Pseudo-random steps serve two papers' needs: the identification excitation
u(t) of MLC section 3.5 (a new value uniform in [0, B_max] every T) and the
pseudo-random target R*_DTN(t) of the GA fitness episodes (section 3.3).
All take an explicit seed: the same seed gives the same signal.
"""

from __future__ import annotations

import numpy as np

__all__ = ["constant", "random_steps"]


def constant(value: float, steps: int, batch: int = 1) -> np.ndarray:
    """(steps, batch) array holding ``value``."""
    return np.full((steps, batch), float(value))


def random_steps(
    steps: int,
    low: float,
    high: float,
    hold: int = 1,
    seed: int = 0,
    batch: int = 1,
) -> np.ndarray:
    """(steps, batch) piecewise-constant signal: a value uniform in [low, high] every ``hold`` periods."""
    if steps < 0 or hold < 1:
        raise ValueError(f"random_steps: need steps >= 0 and hold >= 1, got steps={steps}, hold={hold}")
    if not (np.isfinite(low) and np.isfinite(high)) or high < low:
        raise ValueError(f"random_steps: need finite low <= high, got [{low}, {high}]")
    rng = np.random.default_rng(seed)
    n_levels = -(-steps // hold)
    levels = rng.uniform(low, high, size=(n_levels, batch))
    return np.repeat(levels, hold, axis=0)[:steps]
