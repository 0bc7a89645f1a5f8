"""The anti-windup PI loop of the MLC paper's Fig. 5, shared by ``mlc`` and ``pi``.

Per control period k (deciding u_k, applied over [kT, (k+1)T)), given a
feed-forward estimate u_hat(k) of the campus rate:

    e     = y_DTN(k-1) - R*_DTN(k)          (last measured DTN rate minus the target)
    u_bar = u_hat + Kp e + I
    u     = sat(u_bar) to [u_min, u_max] and to the +-Delta_u(t) interval
    w     = u - u_bar                       (back-calculation)
    I    += T (Ki e + Kw w)

The +-Delta_u(t) interval (``Gains.limiter``) is centred either on the
administrator's trivial rate B_max - R*_DTN(t) ("band", the default: the loop
refines the trivial setting by at most Delta_u and follows target steps at
once) or on u(k-1) ("rate": a slew-rate limit). Sign convention: a DTN below its
target (e < 0) lowers the campus rate, giving the DTN more of the bottleneck; a
DTN above it (e > 0) raises it. While u is saturated, w opposes the
integrator's growth (Kw > 0), so the integral does not wind up and recovers
quickly once the error reverses.

``AntiWindupRatePolicy`` is that loop as a rate policy; a subclass only says how
u_hat is made (``u_hat``): the MLC's inverse ANN (eq. 1, ``mlc.MLCPolicy``) or the
trivial rate B_max - R*_DTN (``pi.PIPolicy``, the MLC without its model). A
non-finite u_hat or measurement never reaches the actuator: that instance gets
the trivial rate for the period, ``fallbacks`` counts it and a warning is issued
once per policy.
"""

from __future__ import annotations

import abc
import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ...fileio import atomic_write_text, strict_json
from ...scenario import Scenario
from ...state import STATE_FIELDS, History

__all__ = ["Gains", "AntiWindupPI", "AntiWindupRatePolicy", "DEFAULT_DELTA_U", "DEFAULT_LIMITER", "LIMITERS"]

#: Default Delta_u of the +-Delta_u(t) saturator, as a fraction of B_max.
DEFAULT_DELTA_U = 0.02
#: Where the +-Delta_u(t) interval of Fig. 5 is centred: "band" -> around the
#: administrator's trivial rate B_max - R*_DTN(t) (moves with the target, so
#: Delta_u(t) bounds how far the loop may deviate from it); "rate" -> around
#: u(t-T) (a slew-rate limit).
LIMITERS = ("band", "rate")
DEFAULT_LIMITER = "band"
_I_DTN = STATE_FIELDS.index("rate_dtn")


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

        doc = read_json_input(path, "gains file")  # size and nesting bounded (limits), one line naming the file
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


def _gain_list(gains: Gains | Sequence[Gains]) -> list[Gains]:
    glist = [gains] if isinstance(gains, Gains) else list(gains)
    if not glist or not all(isinstance(g, Gains) for g in glist):
        raise TypeError("gains must be a Gains or a sequence of Gains (one per batch instance)")
    return glist


class AntiWindupRatePolicy(abc.ABC):
    """The Fig. 5 loop as a rate policy; subclasses make u_hat (``u_hat``). See the module docstring.

    ``gains``: one ``Gains`` or one per batch instance (a GA generation);
    ``delta_u`` (a fraction of B_max in (0, 1]) overrides the gains' own.
    """

    name = "anti-windup"
    kind: Literal["rate"] = "rate"
    #: The once-per-policy warning on a fallback: what gave the non-finite rate.
    _fallback_what = "anti-windup PI: the feed-forward estimate or the measurement"

    def __init__(self, gains: Gains | Sequence[Gains], delta_u: float | None = None) -> None:
        if delta_u is not None and not (isinstance(delta_u, int | float) and 0 < delta_u <= 1):
            raise ValueError(f"delta_u must be a fraction of B_max in (0, 1], got {delta_u!r}")
        glist = _gain_list(gains)
        self.gains = gains
        self.delta_u_frac = float(delta_u if delta_u is not None else glist[0].delta_u)
        self.limiter = glist[0].limiter
        self.fallbacks = 0
        self._warned = False
        self._scenario: Scenario | None = None
        self.pi: AntiWindupPI | None = None

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        self._scenario = scenario
        self.pi = AntiWindupPI(
            self.gains,
            scenario.u_min,
            scenario.u_max,
            delta_u=self.delta_u_frac * scenario.capacity,
            period=scenario.period,
            batch=batch,
        )

    @abc.abstractmethod
    def u_hat(self, history: History, target: np.ndarray) -> np.ndarray:
        """The feed-forward campus rate u_hat (B,) bit/s for the next period: the inverse ANN's
        (``MLCPolicy``) or the trivial rate B_max - R* (``PIPolicy``)."""

    def decide(self, history: History, target: np.ndarray) -> np.ndarray:
        s = self._need()
        assert self.pi is not None
        b = history.batch
        tg = np.broadcast_to(np.asarray(target, dtype=np.float64), (b,))
        with np.errstate(all="ignore"):
            u_hat = np.asarray(self.u_hat(history, tg), dtype=np.float64).reshape(b)
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
            u = self._fall_back(ok, u, trivial)
        return u

    def _fall_back(self, ok: np.ndarray, u: np.ndarray, trivial: np.ndarray) -> np.ndarray:
        n_bad = int((~ok).sum())
        self.fallbacks += n_bad
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"{self._fallback_what} gave a non-finite rate for {n_bad} instance(s); "
                "using the trivial rate B_max - R*_DTN there (counted in policy.fallbacks)",
                RuntimeWarning,
                stacklevel=3,
            )
        return np.where(ok, u, trivial)

    def _need(self) -> Scenario:
        if self._scenario is None:
            raise RuntimeError(f"policy '{self.name}' used before reset(scenario)")
        return self._scenario
