"""Reference and excitation signals, sampled once per control period.

Pseudo-random steps serve two papers' needs: the identification excitation
u(t) of MLC section 3.5 (a new value uniform in [0, B_max] every T) and the
pseudo-random target R*_DTN(t) of the GA fitness episodes (section 3.3).
All take an explicit seed: the same seed gives the same signal.

``trial_steps`` is the evaluation's per-trial form: column i is drawn from its own
generator, ``numpy.random.default_rng([seed, i])``, so trial i's target depends on
(seed, i) alone, never on how many trials a run has. ``random_steps`` with
``batch > 1`` draws one (levels x batch) matrix row-major, so its column i moves
with ``batch``: fine for a GA's or an identification's own episodes, wrong for
trials that two runs of different sizes must share (a re-check pairs with its first
run trial by trial).
"""

from __future__ import annotations

import numpy as np

__all__ = ["constant", "random_steps", "trial_steps", "signal_sha256"]


def constant(value: float, steps: int, batch: int = 1) -> np.ndarray:
    """(steps, batch) array holding ``value``."""
    return np.full((steps, batch), float(value))


def random_steps(
    steps: int,
    low: float,
    high: float,
    hold: int = 1,
    seed: int | list[int] = 0,
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


def trial_steps(steps: int, low: float, high: float, hold: int = 1, seed: int = 0, trials: int = 1,
                first: int = 0) -> np.ndarray:
    """(steps, trials) piecewise-constant targets of trials ``first`` .. ``first + trials - 1``:
    column k is ``random_steps(steps, low, high, hold, batch=1)`` drawn from
    ``default_rng([seed, first + k])`` (module docstring), the same whatever the trial count."""
    if trials < 0 or first < 0 or seed < 0:
        raise ValueError(f"trial_steps: need trials, first and seed >= 0, got {trials}, {first}, {seed}")
    out = np.empty((max(steps, 0), trials))
    for k in range(trials):
        out[:, k] = random_steps(steps, low, high, hold=hold, seed=[seed, first + k])[:, 0]
    return out


def signal_sha256(column: np.ndarray) -> str:
    """SHA-256 (first 16 hex digits) of one trial's target signal, its float64 values in order:
    what a resume, merge or re-check compares to know two trials track the same target."""
    import hashlib

    v = np.ascontiguousarray(np.asarray(column, dtype="<f8").reshape(-1))
    return hashlib.sha256(v.tobytes()).hexdigest()[:16]
