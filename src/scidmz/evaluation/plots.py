"""Figures: y(t), u(t) and the target of a trace; CDFs; GA convergence. matplotlib (Agg), PNG out."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["plot_trace", "plot_cdfs", "plot_convergence", "save_figure"]


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | os.PathLike[str]) -> Path:
    """Save atomically (temp + rename) and close the figure."""
    from ..fileio import atomic_path

    path = Path(path)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=110, bbox_inches="tight", format=path.suffix.lstrip(".") or "png")
    finally:
        _plt().close(fig)
    return path


def plot_trace(trace: Any, path: str | os.PathLike[str], capacity: float | None = None) -> Path:
    """Rates (DTN, campus, u, target), RTTs and queuing delays, active flows over time."""
    plt = _plt()
    df = trace.df
    t = df["t"].to_numpy()
    fig, ax = plt.subplots(4, 1, figsize=(9, 9), sharex=True)
    ax[0].plot(t, df["rate_dtn"] / 1e6, label="R_DTN")
    ax[0].plot(t, df["target"] / 1e6, "k--", label="R*_DTN (target)")
    ax[0].plot(t, df["rate_campus"] / 1e6, label="R_campus")
    ax[0].step(t, df["u"] / 1e6, where="pre", alpha=0.7, label="u (campus TBF)")
    if capacity:
        ax[0].axhline(capacity / 1e6, color="grey", lw=0.8, label="B_max")
    ax[0].set_ylabel("Mbit/s")
    ax[0].legend(fontsize=8, ncol=3)
    ax[1].plot(t, df["rtt_dtn"] * 1e3, label="RTT DTN")
    ax[1].plot(t, df["rtt_campus"] * 1e3, label="RTT campus")
    ax[1].set_ylabel("ms")
    ax[1].legend(fontsize=8)
    ax[2].plot(t, df["qdelay_dtn"] * 1e3, label="queue delay DTN")
    ax[2].plot(t, df["qdelay_campus"] * 1e3, label="queue delay campus")
    ax[2].set_ylabel("ms")
    ax[2].legend(fontsize=8)
    ax[3].plot(t, df["active_flows"], label="active flows")
    ax[3].set_ylabel("flows")
    ax[3].set_xlabel("t [s]")
    title = f"{trace.meta.get('policy', '')} on {trace.meta.get('scenario', {}).get('name', '')}"
    fig.suptitle(title)
    return save_figure(fig, path)


def plot_cdfs(
    samples: Mapping[str, Sequence[float]], path: str | os.PathLike[str], xlabel: str, title: str = ""
) -> Path:
    """Empirical CDFs of several sample sets on one axis (the papers' Figs. 10-12, 14)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, vals in samples.items():
        v = np.sort(np.asarray(vals, dtype=np.float64))
        v = v[np.isfinite(v)]
        if v.size:
            ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("CDF")
    ax.grid(alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    return save_figure(fig, path)


def plot_convergence(curves: Mapping[str, Sequence[float]], path: str | os.PathLike[str]) -> Path:
    """Best IAE per GA generation (the MLC paper's Fig. 9)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, vals in curves.items():
        ax.plot(np.arange(1, len(vals) + 1), vals, label=name)
    ax.set_xlabel("generation")
    ax.set_ylabel("best IAE [Gbit]")
    ax.grid(alpha=0.3)
    ax.legend()
    return save_figure(fig, path)
