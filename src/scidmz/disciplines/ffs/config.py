"""FFS's configuration and the layout of the arrays its decision core reads (no numba here).

Wyss et al., "Lightweight Internet Bandwidth Allocation and Isolation with
Fractional Fair Shares": one egress j with capacity C and its fairness-matrix
column M_(.,j) (section IV); the estimator constant K (section XII) and the
Appendix A tau period. The algorithm and our choices are in :mod:`.core`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ..base import BottleneckDiscipline, DisciplineConfigError, check_at_least, check_positive

P_CAP, P_K, P_TAU_PERIOD, P_DELTA, P_TAU_MIN, P_TAU_MAX = range(6)
N_PARAMS = 6
# Egress state: R_*, A, time of last arrival, tau, time of last tau update.
S_RSTAR, S_A, S_TLAST, S_TAU, S_TTAU, S_CONG = range(6)  # S_CONG: 1 while congested
N_STATE = 6
# Per-ingress state: R_(i,j), F^pre_(i,j), time of last arrival on that ingress.
I_R, I_F, I_TLAST = range(3)


@dataclass(frozen=True)
class FFSConfig(BottleneckDiscipline):
    """One FFS egress: capacity C (bit/s) and its fairness-matrix column M_(.,j) (bit/s)."""

    kind: ClassVar[str] = "ffs"
    matrix_col_bps: tuple[float, ...] = field(default=())
    estimator_s: float = 0.010
    tau_period_s: float = 0.001
    delta_bps: float | None = None
    tau_init: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        col = tuple(float(x) for x in self.matrix_col_bps)
        if not col:
            raise DisciplineConfigError("matrix_col_bps must list one entry per ingress")
        if any(not math.isfinite(x) or x < 0 for x in col) or max(col) <= 0:
            raise DisciplineConfigError(f"matrix_col_bps entries must be finite, >= 0, one > 0: {col}")
        if abs(sum(col) - self.capacity_bps) > 1e-9 * self.capacity_bps:
            raise DisciplineConfigError(
                f"fairness-matrix column sums to {sum(col):g} bit/s, not the capacity {self.capacity_bps:g} bit/s"
            )
        object.__setattr__(self, "matrix_col_bps", col)
        object.__setattr__(self, "estimator_s", check_positive("estimator_s", self.estimator_s))
        object.__setattr__(self, "tau_period_s", check_positive("tau_period_s", self.tau_period_s))
        if self.delta_bps is not None:
            object.__setattr__(self, "delta_bps", check_at_least("delta_bps", self.delta_bps, 0.0, "bit/s"))
        object.__setattr__(self, "tau_init", check_positive("tau_init", self.tau_init))

    @property
    def matrix(self) -> np.ndarray:
        return np.asarray(self.matrix_col_bps)

    def params(self) -> np.ndarray:
        c = self.capacity_bps
        p = np.empty(N_PARAMS)
        p[P_CAP] = c
        p[P_K] = self.estimator_s
        p[P_TAU_PERIOD] = self.tau_period_s
        p[P_DELTA] = 9.0 * c if self.delta_bps is None else self.delta_bps
        p[P_TAU_MIN] = 1e-3
        m = self.matrix
        p[P_TAU_MAX] = 4.0 * c / m[m > 0].min()
        return p

    def new_state(self, t0: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Fresh (egress, per-ingress) state at time ``t0``."""
        st = np.zeros(N_STATE)
        st[S_TLAST] = t0
        st[S_TAU] = self.tau_init
        st[S_TTAU] = t0
        ing = np.zeros((len(self.matrix_col_bps), 3))
        ing[:, I_TLAST] = t0
        return st, ing
