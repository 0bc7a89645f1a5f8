"""The machine-learning controller (MLC): control law eq. (1), Table 3, anti-windup PI of Fig. 5.

Per control period k (deciding u_k, applied over [kT, (k+1)T)):

1. Desired state y_d(k) (section 3.6, Table 3): R*_DTN; B_max - R*_DTN; the
   DTN and campus base RTTs (100 ms and 10 ms in the paper's testbed; here
   the scenario's); queuing delays 0; the last measured active-flow count.
2. Control law, eq. (1): u_hat(k) = f(y_d(k), y(k-1), y(k-2), u(k-1); phi),
   f being the inverse ANN (models.inverse), fed in the feature order of
   identification.regressors (y_d takes the place of y(t)).
3. Anti-windup PI, Fig. 5 (``AntiWindupPI``): e = y_DTN - y_d,DTN, i.e. the
   last measured DTN rate minus the target;
       u_bar = u_hat + Kp e + I
       u     = sat(u_bar) to [u_min, u_max] and to the +-Delta_u(t) interval
       w     = u - u_bar                       (back-calculation)
       I    += T (Ki e + Kw w)
   The +-Delta_u(t) interval (``Gains.limiter``) is centred either on the
   administrator's trivial rate B_max - R*_DTN(t) ("band", the default: the
   MLC refines the trivial setting by at most Delta_u and follows target
   steps at once) or on u(k-1) ("rate": a slew-rate limit).
   Sign convention: a DTN below its target (e < 0) lowers the campus rate,
   giving the DTN more of the bottleneck; a DTN above it (e > 0) raises it.
   While u is saturated, w opposes the integrator's growth (Kw > 0), so the
   integral does not wind up and recovers quickly once the error reverses.

A non-finite model output never reaches the actuator: that instance gets the
trivial rate B_max - R*_DTN for the period, ``fallbacks`` counts it and a
warning is issued once per policy.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ...fileio import atomic_write_text, strict_json
from ...identification.regressors import N_FEATURES, RATE_FEATURES, feature_row
from ...scenario import Scenario
from ...state import STATE_FIELDS, History
from ..registry import register_policy

__all__ = ["Gains", "desired_state", "AntiWindupPI", "MLCPolicy", "DEFAULT_DELTA_U", "mlc_files"]

#: Default Delta_u of the +-Delta_u(t) saturator, as a fraction of B_max.
DEFAULT_DELTA_U = 0.02
#: Where the +-Delta_u(t) interval of Fig. 5 is centred: "band" -> around the
#: administrator's trivial rate B_max - R*_DTN(t) (moves with the target, so
#: Delta_u(t) bounds how far the MLC may deviate from it); "rate" -> around
#: u(t-T) (a slew-rate limit).
LIMITERS = ("band", "rate")
DEFAULT_LIMITER = "band"
#: How y_d's RTT and queuing-delay entries are filled: "table3" (base RTTs, zero queues,
#: as the paper's Table 3) or "measured" (the last measured values, see MLCPolicy).
YD_FILLS = ("measured", "table3")
_I_DTN = STATE_FIELDS.index("rate_dtn")
_I_AF = STATE_FIELDS.index("active_flows")


@dataclass(frozen=True)
class Gains:
    """Anti-windup PI gains (Kp, Ki, Kw) of Fig. 5 / Table 4, plus the change limit Delta_u.

    ``delta_u`` is the largest change of u per period as a fraction of B_max
    (the ``+-Delta u(t)`` saturator of Fig. 5; not tuned by the GA).
    """

    kp: float
    ki: float
    kw: float
    delta_u: float = DEFAULT_DELTA_U
    limiter: str = DEFAULT_LIMITER

    def __post_init__(self) -> None:
        if self.limiter not in LIMITERS:
            raise ValueError(f"limiter must be one of {', '.join(LIMITERS)}, got {self.limiter!r}")
        for name in ("kp", "ki", "kw", "delta_u"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise ValueError(f"gain {name} must be a finite number, got {v!r}")
            if v < 0:
                raise ValueError(f"gain {name} must be >= 0, got {v!r}")
            object.__setattr__(self, name, float(v))
        if self.delta_u <= 0:
            raise ValueError(f"gain delta_u (change limit, fraction of B_max) must be > 0, got {self.delta_u!r}")

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def save(self, path: str | os.PathLike[str], extra: dict[str, Any] | None = None) -> Path:
        """JSON, written atomically; ``extra`` (provenance) is stored alongside and ignored on load."""
        doc = {**self.to_dict(), **({"info": extra} if extra else {})}
        return atomic_write_text(path, strict_json(doc, indent=2))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Gains:
        """Read gains JSON (a file, or a directory holding ``gains.json``)."""
        path = Path(path)
        if path.is_dir():
            path = path / "gains.json"
        if not path.exists():
            raise FileNotFoundError(f"gains file not found: {path}")
        from ...fileio import read_json_input

        doc = read_json_input(path, "gains file")
        if not isinstance(doc, dict):
            raise ValueError(f"{path}: expected a JSON object with kp, ki, kw")
        missing = [k for k in ("kp", "ki", "kw") if k not in doc]
        if missing:
            raise ValueError(f"{path}: missing gain(s): {', '.join(missing)}")
        try:
            return cls(
                doc["kp"], doc["ki"], doc["kw"], doc.get("delta_u", DEFAULT_DELTA_U),
                doc.get("limiter", DEFAULT_LIMITER),
            )
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None


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


class AntiWindupPI:
    """The anti-windup filter of Fig. 5 (back-calculation), vectorised over B instances.

    ``step(u_hat, e, center)`` returns the saturated rate u; the integral
    state ``integral`` and the last back-calculation signal ``w`` are kept.
    """

    def __init__(
        self,
        gains: Gains | Sequence[Gains],
        u_min: float,
        u_max: float,
        delta_u: float,
        period: float = 1.0,
        batch: int = 1,
    ) -> None:
        if not u_max > u_min:
            raise ValueError(f"need u_max > u_min, got [{u_min}, {u_max}]")
        if not delta_u > 0:
            raise ValueError(f"change limit delta_u must be > 0 bit/s, got {delta_u}")
        self.gains = gains
        glist = [gains] if isinstance(gains, Gains) else list(gains)
        if not glist or not all(isinstance(g, Gains) for g in glist):
            raise TypeError("gains must be a Gains or a non-empty sequence of Gains (one per instance)")
        if len(glist) > 1 and len(glist) != batch:
            raise ValueError(f"{len(glist)} gain sets given for a batch of {batch} instances")
        # Per-instance gains let a whole GA generation run as one batched loop.
        self.kp = np.array([g.kp for g in glist])
        self.ki = np.array([g.ki for g in glist])
        self.kw = np.array([g.kw for g in glist])
        self.u_min = float(u_min)
        self.u_max = float(u_max)
        self.delta_u = float(delta_u)
        self.period = float(period)
        self.reset(batch)

    def reset(self, batch: int = 1) -> None:
        self.integral = np.zeros(batch)
        self.w = np.zeros(batch)

    def step(
        self,
        u_hat: np.ndarray,
        e: np.ndarray,
        center: np.ndarray,
        active: np.ndarray | None = None,
    ) -> np.ndarray:
        """One period: u = sat(u_hat + Kp e + I); I += T (Ki e + Kw (u - u_bar)).

        The saturator clips to [u_min, u_max] and to ``center`` +- Delta_u
        (``center`` is u(t-T) for a slew-rate limit, or the trivial rate for
        a band around it). ``active`` (bool mask) limits the integral update
        to those instances (the others, e.g. on a model fallback, keep theirs).
        """
        u_bar = u_hat + self.kp * e + self.integral
        lo = np.minimum(np.maximum(self.u_min, center - self.delta_u), self.u_max)
        hi = np.maximum(np.minimum(self.u_max, center + self.delta_u), self.u_min)
        u = np.minimum(np.maximum(u_bar, lo), hi)
        w = u - u_bar
        d_int = self.period * (self.ki * e + self.kw * w)
        if active is not None:
            d_int = np.where(active, d_int, 0.0)
            w = np.where(active, w, 0.0)
        self.integral = self.integral + d_int
        self.w = w
        return u


Predictor = Callable[[np.ndarray], np.ndarray]


class MLCPolicy:
    """The MLC as a ``Policy`` (name "mlc"): inverse ANN (eq. 1) + anti-windup PI (Fig. 5).

    ``model``: an ``InverseModel`` (its NumPy predictor is used), a
    ``NumpyPredictor`` or any callable X (B, 22) -> u_hat (B,). A predictor
    with ``per_unit = True`` works in units of B_max for rates; the policy
    scales with the scenario's capacity at ``reset``.
    """

    name = "mlc"
    kind: Literal["rate"] = "rate"

    def __init__(
        self,
        model: Any,
        gains: Gains | Sequence[Gains],
        delta_u: float | None = None,
        yd_fill: str = "table3",
    ) -> None:
        if delta_u is not None and not (isinstance(delta_u, int | float) and 0 < delta_u <= 1):
            raise ValueError(f"delta_u must be a fraction of B_max in (0, 1], got {delta_u!r}")
        if yd_fill not in YD_FILLS:
            raise ValueError(f"yd_fill must be one of {', '.join(YD_FILLS)}, got {yd_fill!r}")
        self.yd_fill = yd_fill
        glist = [gains] if isinstance(gains, Gains) else list(gains)
        if not glist or not all(isinstance(g, Gains) for g in glist):
            raise TypeError("gains must be a Gains or a sequence of Gains (one per batch instance)")
        if hasattr(model, "numpy_predictor"):
            model = model.numpy_predictor()
        if not callable(model):
            raise TypeError("model must be an InverseModel, a NumpyPredictor or a callable X -> u")
        n_in = getattr(model, "n_features", N_FEATURES)
        if n_in != N_FEATURES:
            raise ValueError(f"inverse model takes {n_in} input features; the MLC feeds {N_FEATURES}")
        self.predictor: Predictor = model
        self.per_unit = bool(getattr(model, "per_unit", False))
        self.gains = gains
        self.delta_u_frac = float(delta_u if delta_u is not None else glist[0].delta_u)
        self.limiter = glist[0].limiter
        self.fallbacks = 0
        self._warned = False
        self._scenario: Scenario | None = None
        self.pi: AntiWindupPI | None = None

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
        self._scenario = scenario
        self.pi = AntiWindupPI(
            self.gains,
            scenario.u_min,
            scenario.u_max,
            delta_u=self.delta_u_frac * scenario.capacity,
            period=scenario.period,
            batch=batch,
        )
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

    def decide(self, history: History, target: np.ndarray) -> np.ndarray:
        s = self._need()
        assert self.pi is not None
        b = history.batch
        tg = np.broadcast_to(np.asarray(target, dtype=np.float64), (b,))
        X = self.features(history, tg)
        with np.errstate(all="ignore"):
            u_hat = np.asarray(self.predictor(X), dtype=np.float64).reshape(b)
            if self.per_unit:
                u_hat = u_hat * s.capacity
        e = history.last_y(1)[:, _I_DTN] - tg
        trivial = np.clip(s.capacity - tg, s.u_min, s.u_max)
        if self.limiter == "band":
            center = trivial
        else:
            # Before the first decision there is no previous command of ours: start
            # bumpless from the administrator's trivial setting.
            center = history.last_u(trivial) if len(history) else trivial
            center = np.where(np.isfinite(center), center, trivial)
        ok = np.isfinite(u_hat) & np.isfinite(e)
        safe_hat = np.where(ok, u_hat, 0.0)
        safe_e = np.where(ok, e, 0.0)
        with np.errstate(all="ignore"):
            u = self.pi.step(safe_hat, safe_e, center, active=ok)
        ok &= np.isfinite(u)
        if not ok.all():
            n_bad = int((~ok).sum())
            self.fallbacks += n_bad
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"MLC: the inverse model gave a non-finite rate for {n_bad} instance(s); "
                    "using the trivial rate B_max - R*_DTN there (counted in policy.fallbacks)",
                    RuntimeWarning,
                    stacklevel=2,
                )
            u = np.where(ok, u, trivial)
        return u

    def _need(self) -> Scenario:
        if self._scenario is None:
            raise RuntimeError("policy 'mlc' used before reset(scenario)")
        return self._scenario


def mlc_files(scenario: Scenario, model: str | None, gains: str | None) -> tuple[str, str]:
    """The model directory and gains file the MLC runs with on ``scenario``.

    Given ones win. With neither, the model shipped for this scenario (``scidmz.data``,
    made by ``scidmz reproduce mlc``) is used and named on stderr; otherwise one-line error.
    """
    if model and gains:
        return str(model), str(gains)
    if not model and not gains:
        from ...data import shipped_model, shipped_model_names

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


register_policy("mlc", "rate", MLCPolicy.from_paths)
