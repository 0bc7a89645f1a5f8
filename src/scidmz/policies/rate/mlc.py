"""The machine-learning controller (MLC): control law eq. (1), Table 3, anti-windup PI of Fig. 5.

Per control period k (deciding u_k, applied over [kT, (k+1)T)):

1. Desired state y_d(k) (section 3.6, Table 3): R*_DTN; B_max - R*_DTN; the
   DTN and campus base RTTs (100 ms and 10 ms in the paper's testbed; here
   the scenario's); queuing delays 0; the last measured active-flow count.
2. Control law, eq. (1): u_hat(k) = f(y_d(k), y(k-1), y(k-2), u(k-1); phi),
   f being the inverse ANN (models.inverse), fed in the feature order of
   identification.regressors (y_d takes the place of y(t)).
3. Anti-windup PI, Fig. 5, around u_hat (``antiwindup.AntiWindupRatePolicy``,
   shared with ``pi``, the same loop with u_hat = B_max - R*_DTN): e = y_DTN -
   y_d,DTN; u = sat(u_hat + Kp e + I) to [u_min, u_max] and the +-Delta_u(t)
   interval (a band around the trivial rate, or a slew-rate limit); the
   integral is back-calculated (Kw) while u is saturated.

A non-finite model output never reaches the actuator: that instance gets the
trivial rate B_max - R*_DTN for the period, ``fallbacks`` counts it and a
warning is issued once per policy.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...identification.regressors import N_FEATURES, RATE_FEATURES, feature_row
from ...scenario import Scenario
from ...state import STATE_FIELDS, History
from ..registry import register_policy
from .antiwindup import (
    DEFAULT_DELTA_U,
    DEFAULT_LIMITER,
    LIMITERS,
    AntiWindupPI,
    AntiWindupRatePolicy,
    Gains,
)

# Gains, AntiWindupPI and the saturator's constants live in antiwindup.py (shared with ``pi``);
# they are re-exported here, where users of the MLC have always found them.
__all__ = ["Gains", "desired_state", "AntiWindupPI", "MLCPolicy", "DEFAULT_DELTA_U", "DEFAULT_LIMITER", "LIMITERS",
           "mlc_files"]

#: How y_d's RTT and queuing-delay entries are filled: "table3" (base RTTs, zero queues,
#: as the paper's Table 3) or "measured" (the last measured values, see MLCPolicy).
YD_FILLS = ("measured", "table3")
_I_AF = STATE_FIELDS.index("active_flows")


def desired_state(
    target: np.ndarray | float,
    capacity: float,
    last_active_flows: np.ndarray | float,
    rtt_dtn: float = 0.100,
    rtt_campus: float = 0.010,
) -> np.ndarray:
    """y_d per Table 3 as (B, 7): [R*, B_max - R*, RTT_DTN, RTT_campus, 0, 0, last AF]."""
    tg = np.atleast_1d(np.asarray(target, dtype=np.float64))
    if not np.all(np.isfinite(tg)) or np.any(tg < 0):
        raise ValueError("target rate must be a finite number >= 0 bit/s")
    if np.any(tg > capacity * (1 + 1e-12)):
        raise ValueError(
            f"target rate {tg.max() / 1e6:.1f} Mbit/s is above the bottleneck capacity "
            f"B_max = {capacity / 1e6:.1f} Mbit/s"
        )
    af = np.broadcast_to(np.asarray(last_active_flows, dtype=np.float64), tg.shape)
    yd = np.zeros((tg.shape[0], len(STATE_FIELDS)))
    yd[:, 0] = tg
    yd[:, 1] = capacity - tg
    yd[:, 2] = rtt_dtn
    yd[:, 3] = rtt_campus
    yd[:, _I_AF] = af
    return yd


Predictor = Callable[[np.ndarray], np.ndarray]


class MLCPolicy(AntiWindupRatePolicy):
    """The MLC as a ``Policy`` (name "mlc"): inverse ANN (eq. 1) + anti-windup PI (Fig. 5).

    ``model``: an ``InverseModel`` (its NumPy predictor is used), a
    ``NumpyPredictor`` or any callable X (B, 22) -> u_hat (B,). A predictor
    with ``per_unit = True`` works in units of B_max for rates; the policy
    scales with the scenario's capacity at ``reset``. Everything but u_hat is
    the loop of ``antiwindup.AntiWindupRatePolicy``, which ``pi`` shares.
    """

    name = "mlc"
    _fallback_what = "MLC: the inverse model"

    def __init__(
        self,
        model: Any,
        gains: Gains | Sequence[Gains],
        delta_u: float | None = None,
        yd_fill: str = "table3",
    ) -> None:
        super().__init__(gains, delta_u)
        if yd_fill not in YD_FILLS:
            raise ValueError(f"yd_fill must be one of {', '.join(YD_FILLS)}, got {yd_fill!r}")
        self.yd_fill = yd_fill
        if hasattr(model, "numpy_predictor"):
            model = model.numpy_predictor()
        if not callable(model):
            raise TypeError("model must be an InverseModel, a NumpyPredictor or a callable X -> u")
        n_in = getattr(model, "n_features", N_FEATURES)
        if n_in != N_FEATURES:
            raise ValueError(f"inverse model takes {n_in} input features; the MLC feeds {N_FEATURES}")
        self.predictor: Predictor = model
        self.per_unit = bool(getattr(model, "per_unit", False))

    @classmethod
    def from_paths(cls, model: Any, gains: Any, delta_u: float | None = None, yd_fill: str = "table3") -> MLCPolicy:
        """The registry's factory: ``model`` a saved model directory (its NumPy weights; no
        TensorFlow) or a model object, ``gains`` a gains JSON or a ``Gains``; ``delta_u`` and
        ``yd_fill`` as for ``MLCPolicy`` (``--set policy.yd_fill=measured``)."""
        from ...models.predictor import load_predictor

        if isinstance(model, str | os.PathLike):
            model = load_predictor(model)
        if isinstance(gains, str | os.PathLike):
            gains = Gains.load(gains)
        return cls(model, gains, delta_u=delta_u, yd_fill=yd_fill)

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        from ...regime import mismatch

        msg = mismatch((getattr(self.predictor, "meta", None) or {}).get("scenario_fingerprint"), scenario,
                       "inverse model")
        if msg and getattr(self, "_regime_warned", None) != scenario.name:
            self._regime_warned = scenario.name
            warnings.warn(msg, stacklevel=2)
        super().reset(scenario, batch)
        self._u0 = scenario.shaper.rate if scenario.shaper.rate is not None else scenario.u_max

    def features(self, history: History, target: np.ndarray) -> np.ndarray:
        """The (B, 22) model input of eq. (1): [y_d(t), y(t-T), y(t-2T), u(t-T)], in model units."""
        s = self._need()
        y1 = history.last_y(1)
        y2 = history.last_y(2)
        u1 = history.last_u(self._u0)
        yd = desired_state(target, s.capacity, y1[:, _I_AF], s.dtn.rtt, s.campus.rtt)
        if self.yd_fill == "measured":
            yd[:, 2:6] = y1[:, 2:6]
        X = feature_row(yd, y1, y2, u1)
        if self.per_unit:
            X[:, list(RATE_FEATURES)] /= s.capacity
        return X

    def u_hat(self, history: History, target: np.ndarray) -> np.ndarray:
        """Eq. (1): the inverse ANN's campus rate for y_d, in bit/s."""
        s = self._need()
        X = self.features(history, target)
        u_hat = np.asarray(self.predictor(X), dtype=np.float64).reshape(history.batch)
        return u_hat * s.capacity if self.per_unit else u_hat


def mlc_files(scenario: Scenario, model: str | None, gains: str | None) -> tuple[str, str]:
    """The model directory and gains file the MLC runs with on ``scenario``.

    Given ones win. With neither, the model shipped for this scenario (``scidmz.datasets``,
    made by ``scidmz reproduce mlc``) is used and named on stderr; otherwise one-line error.
    """
    if model and gains:
        return str(model), str(gains)
    if not model and not gains:
        from ...datasets import shipped_model, shipped_model_names

        found = shipped_model(scenario)
        if found is not None:
            import sys

            print(f"scidmz: policy mlc: using the model and gains shipped for '{scenario.name}' ({found[0]})",
                  file=sys.stderr)
            return str(found[0]), str(found[1])
        have = ", ".join(shipped_model_names()) or "none"
        raise ValueError(f"policy mlc needs --model DIR and --gains FILE (no model ships for '{scenario.name}' "
                         f"with DTN {scenario.dtn.cca}; shipped: {have})")
    raise ValueError("policy mlc needs both --model DIR and --gains FILE")


def mlc_trained_files(scenario: Scenario, *, model: str | None = None, gains: str | None = None) -> dict[str, str]:
    """The registry's resolver of the MLC's files (``mlc_files``), checked: a missing model directory or
    gains file, or unreadable gains, is one line before any plant is built."""
    m, g = mlc_files(scenario, model, gains)
    check_trained_files(model=m, gains=g)
    return {"model": m, "gains": g}


def check_trained_files(*, model: str | None = None, gains: str | None = None) -> None:
    """One line for a missing model directory or gains file, or unreadable gains."""
    from pathlib import Path

    if model is not None:
        mp = Path(model)
        if not mp.exists():
            raise FileNotFoundError(f"model directory not found: {mp}")
        if not mp.is_dir():
            raise ValueError(f"--model must be a model directory (from `scidmz train`), got a file: {mp}")
    if gains is not None:
        if not Path(gains).exists():
            raise FileNotFoundError(f"gains file not found: {gains}")
        Gains.load(gains)  # a bad gains file is one line here, even when the model is also wrong


register_policy("mlc", "rate", MLCPolicy.from_paths, files=mlc_trained_files)
