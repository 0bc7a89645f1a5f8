"""The papers' metrics, each a small pure function on arrays (SI units).

- ``mrae``: Mean Relative Absolute Error of set-point tracking, MLC eq. (3).
- ``iae``: Integral Absolute Error, MLC eq. (2), the GA's objective.
- ``utilization``: bottleneck link utilisation rho(t), MLC eq. (4).
- ``fct``: flow completion time, first packet sent to last packet received.
- ``jain_index``: Jain's fairness index (used by the Jenks, ABC and FFS papers).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["mrae", "iae", "utilization", "fct", "jain_index", "summarize_trace", "reduction_pct"]


def mrae(target: np.ndarray, measured: np.ndarray) -> float:
    """MLC eq. (3): (1/t_N) sum_t |R*(t) - R(t)| / R*(t). Samples with R* = 0 are skipped."""
    tg = np.asarray(target, dtype=np.float64)
    ms = np.asarray(measured, dtype=np.float64)
    if tg.shape != ms.shape:
        raise ValueError(f"mrae: target and measured shapes differ ({tg.shape} vs {ms.shape})")
    ok = tg > 0
    if not ok.any():
        raise ValueError("mrae: every target sample is zero; relative error is undefined")
    return float(np.mean(np.abs(tg[ok] - ms[ok]) / tg[ok]))


def iae(target: np.ndarray, measured: np.ndarray, period: float = 1.0) -> float:
    """MLC eq. (2): integral of |R*(t) - R(t)| dt, rectangle rule with step T (bit/s x s = bit)."""
    tg = np.asarray(target, dtype=np.float64)
    ms = np.asarray(measured, dtype=np.float64)
    if tg.shape != ms.shape:
        raise ValueError(f"iae: target and measured shapes differ ({tg.shape} vs {ms.shape})")
    return float(np.sum(np.abs(tg - ms)) * period)


def utilization(rate_dtn: np.ndarray, rate_campus: np.ndarray, capacity: float) -> np.ndarray:
    """MLC eq. (4): rho(t) = (R_DTN(t) + sum_h R_s_h(t)) / B_max, per sample."""
    if capacity <= 0:
        raise ValueError(f"utilization: capacity must be > 0, got {capacity}")
    return (np.asarray(rate_dtn, dtype=np.float64) + np.asarray(rate_campus, dtype=np.float64)) / capacity


def fct(start: np.ndarray, finish: np.ndarray) -> np.ndarray:
    """Flow completion times finish - start; unfinished flows (finish NaN) stay NaN."""
    s = np.asarray(start, dtype=np.float64)
    f = np.asarray(finish, dtype=np.float64)
    if np.any(f < s):
        raise ValueError("fct: a flow finishes before it starts")
    return f - s


def jain_index(x: np.ndarray) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 = equal shares, 1/n = one takes all."""
    v = np.asarray(x, dtype=np.float64).ravel()
    if v.size == 0:
        raise ValueError("jain_index: no values")
    if np.any(v < 0):
        raise ValueError("jain_index: values must be >= 0")
    sq = float(np.sum(v * v))
    return 1.0 if sq == 0 else float(np.sum(v) ** 2 / (v.size * sq))


def reduction_pct(baseline: float, candidate: float) -> float:
    """How much lower ``candidate`` is than ``baseline``, in % of the baseline."""
    return 100.0 * (baseline - candidate) / baseline


def _nanmean(x: np.ndarray) -> float:
    """Mean over the non-NaN samples (as pandas' ``mean`` did), NaN if there are none."""
    x = x[~np.isnan(x)]
    return float(np.mean(x)) if x.size else float("nan")


def summarize_trace(trace: Any, capacity: float, skip: int = 0) -> dict[str, float]:
    """The headline numbers of one episode: MRAE, IAE, rho and mean rates (after ``skip`` periods)."""
    def col(name: str) -> np.ndarray:
        return np.asarray(trace.column(name), dtype=np.float64)[skip:]

    period = float(trace.meta.get("scenario", {}).get("period", 1.0))
    tg, rd, rc = col("target"), col("rate_dtn"), col("rate_campus")
    return {
        "mrae": mrae(tg, rd) if np.any(tg > 0) else float("nan"),
        "iae": float(iae(tg, rd, period)),
        "utilization": float(np.mean(utilization(rd, rc, capacity))),
        "mean_rate_dtn": float(np.mean(rd)),
        "mean_rate_campus": float(np.mean(rc)),
        "mean_u": _nanmean(col("u")),
        "mean_rtt_dtn": _nanmean(col("rtt_dtn")),
        "mean_rtt_campus": _nanmean(col("rtt_campus")),
        "mean_qdelay_dtn": _nanmean(col("qdelay_dtn")),
        "mean_qdelay_campus": _nanmean(col("qdelay_campus")),
    }
