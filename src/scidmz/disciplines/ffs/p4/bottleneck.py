"""The control plane of ``ffs_bottleneck.p4``: its table names and what the controller writes in them.

FFS (Wyss et al., section VI and Appendix A): the weights are the fairness-matrix column,
rescaled to the configuration's capacity (as the NFQUEUE stage's decider does); the program
takes log2 M_i in Q8. The capacity constants (C K, delta K, log2(C + delta)) and tau's bounds
come from the configuration's parameter vector, in the fixed point of :mod:`.gen_tables`.
The plant's discipline place (``plant/hardware_discipline.py``) reads this module through the
discipline registry.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..config import P_CAP, P_DELTA, P_K, P_TAU_MAX, P_TAU_MIN, FFSConfig
from .gen_tables import TABLE_II_MBPS

PROGRAM = "ffs_bottleneck.p4"
CLASS = ("ing_of", "h.ip.src", "set_ing", "ing")
WEIGHT = ("ing_weight", "m.ing", "set_m", "v")


def check(config: FFSConfig) -> None:
    """The program's decay tables are generated for K and the tau period of :mod:`.gen_tables`: refuse others."""
    ref = FFSConfig(**TABLE_II_MBPS)
    for f in ("estimator_s", "tau_period_s", "tau_init"):
        if not math.isclose(float(getattr(config, f)), float(getattr(ref, f)), rel_tol=1e-9):
            raise ValueError(f"discipline ffs: {f} = {getattr(config, f)!r}, but the P4 program's tables are "
                             f"generated for {getattr(ref, f)!r} (python -m scidmz.disciplines.ffs.p4.gen_tables)")


def weight_values(config: FFSConfig, w: np.ndarray) -> list[int]:
    """log2 M_i (Q8) of the column ``w`` rescaled to the capacity."""
    return [round(math.log2(x) * 256) for x in w / w.sum() * float(config.capacity_bps)]


def initial_weights(config: FFSConfig) -> np.ndarray:
    return np.asarray(config.matrix_col_bps, dtype=np.float64)


def params(config: FFSConfig) -> dict[str, Any]:
    """The ``params`` table's default action (signed values as Q8 two's complement)."""
    p = config.params()
    k, cap, delta = p[P_K], p[P_CAP], p[P_DELTA]
    return {"ck_q8": round(cap * k * 256), "dk_q8": round(delta * k * 256),
            "log_cd_q8": round(math.log2(cap + delta) * 256) & 0xFFFFFFFF,
            "tau_min_q8": round(math.log2(p[P_TAU_MIN]) * 256) & 0xFFFFFFFF,
            "tau_max_q8": round(math.log2(p[P_TAU_MAX]) * 256) & 0xFFFFFFFF}
