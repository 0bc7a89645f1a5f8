"""Figures at the bottom layer: y(t), u(t) and the target of a trace; CDFs; GA convergence; FCT sweep;
per-flow rate series (Jenks Exp 5); two-client goodputs (ABC Figs. 4-6); a leaderboard's ranking and
its tracking / short-flow trade-off.

Every plot takes ``ax=`` (an existing axis, or for ``plot_trace`` four axes)
and returns the figure, so notebooks compose them; ``save_figure`` writes a
figure atomically (PNG by default) and closes it. matplotlib runs headless
(Agg) and is imported only when a plot is drawn.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["pyplot", "plot_trace", "plot_states", "plot_cdfs", "plot_convergence", "plot_training", "plot_sweep",
           "plot_rate_series", "plot_goodput_pairs", "plot_ranking", "plot_tradeoff", "save_figure", "check_figure_path", "FIGURE_FORMATS"]

#: Formats matplotlib writes, by file suffix; a path without a suffix is written as PNG.
FIGURE_FORMATS = ("png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp", "pgf", "raw",
                  "rgba")


def check_figure_path(path: str | os.PathLike[str], what: str = "figure") -> Path:
    """``path`` if its suffix names a format matplotlib writes (or it has none: PNG); one line otherwise,
    before anything is drawn (a bad ``--plot d.xyz`` must not fail only after the work is done)."""
    p = Path(path)
    fmt = p.suffix.lstrip(".").lower()
    if fmt and fmt not in FIGURE_FORMATS:
        raise ValueError(f"{what} {p}: unknown figure format '.{fmt}' (use .png, .pdf, .svg, .jpg, ...; "
                         "no suffix means PNG)")
    return p


def pyplot() -> Any:
    """matplotlib.pyplot on the headless Agg backend (imported lazily: ``scidmz --help`` stays instant)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _axes(ax: Any, n: int = 1, figsize: tuple[float, float] = (6, 4)) -> tuple[Any, Any]:
    if ax is not None:
        first = ax[0] if n > 1 else ax
        return first.figure, ax
    fig, axes = pyplot().subplots(n, 1, figsize=figsize, sharex=n > 1)
    return fig, axes


def save_figure(fig: Any, path: str | os.PathLike[str]) -> Path:
    """Save atomically (temp + rename) and close the figure."""
    from .fileio import atomic_path

    path = check_figure_path(path)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=110, bbox_inches="tight", format=path.suffix.lstrip(".") or "png")
    finally:
        pyplot().close(fig)
    return path


def plot_trace(trace: Any, capacity: float | None = None, ax: Sequence[Any] | None = None) -> Any:
    """Rates (DTN, campus, u, target), RTTs and queuing delays, active flows over time (four axes)."""
    fig, ax = _axes(ax, 4, (9, 9))
    df = trace.df
    t = df["t"].to_numpy()
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
    fig.suptitle(f"{trace.meta.get('policy', '')} on {trace.meta.get('scenario', {}).get('name', '')}")
    return fig


def plot_states(series: Sequence[Mapping[str, float]], stale: Sequence[Sequence[str]] | None = None,
                title: str = "", ax: Sequence[Any] | None = None) -> Any:
    """y(t) as telemetry measured it (``telemetry replay|capture``): rates, RTTs, queuing delays,
    active flows; a period whose value was held from an earlier one (``stale``) is drawn hollow."""
    fig, ax = _axes(ax, 4, (9, 9))
    t = [float(y["t"]) for y in series]
    panels = [
        (("rate_dtn", "rate_campus"), 1e-6, "Mbit/s"),
        (("rtt_dtn", "rtt_campus"), 1e3, "ms"),
        (("qdelay_dtn", "qdelay_campus"), 1e3, "ms"),
        (("active_flows",), 1.0, "flows"),
    ]
    for a, (keys, scale, unit) in zip(ax, panels, strict=True):
        for key in keys:
            v = [float(y[key]) * scale for y in series]
            (line,) = a.plot(t, v, label=key)
            if stale:
                held = [(ti, vi) for ti, vi, st in zip(t, v, stale, strict=True) if key in st]
                if held:
                    a.plot(*zip(*held, strict=True), "o", mfc="none", color=line.get_color(), ms=4,
                           label=f"{key} held (no fresh sample)")
        a.set_ylabel(unit)
        a.legend(fontsize=8)
    ax[-1].set_xlabel("t [s]")
    if title:
        fig.suptitle(title)
    return fig


def plot_cdfs(samples: Mapping[str, Sequence[float]], xlabel: str, title: str = "", ax: Any = None) -> Any:
    """Empirical CDFs of several sample sets on one axis (the papers' Figs. 10-12, 14)."""
    fig, ax = _axes(ax)
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
    return fig


def plot_convergence(curves: Mapping[str, Sequence[float]], ax: Any = None) -> Any:
    """Best IAE per GA generation (the MLC paper's Fig. 9)."""
    fig, ax = _axes(ax)
    for name, vals in curves.items():
        ax.plot(np.arange(1, len(vals) + 1), vals, label=name)
    ax.set_xlabel("generation")
    ax.set_ylabel("best IAE [Gbit]")
    ax.grid(alpha=0.3)
    ax.legend()
    return fig


def plot_training(loss: Sequence[float], u_true: Sequence[float], u_pred: Sequence[float],
                  ax: Sequence[Any] | None = None) -> Any:
    """The inverse ANN's training: loss per epoch, and predicted vs actual u (MLC Fig. 8's net)."""
    if ax is None:
        fig, axes = pyplot().subplots(1, 2, figsize=(10, 4))
    else:
        fig, axes = ax[0].figure, ax
    axes[0].plot(np.arange(1, len(loss) + 1), loss)
    axes[0].set_xlabel("epoch")
    axes[0].set_ylabel("training loss (MSE, standardised)")
    axes[0].set_yscale("log")
    axes[0].grid(alpha=0.3)
    t = np.asarray(u_true, dtype=np.float64) / 1e6
    pr = np.asarray(u_pred, dtype=np.float64) / 1e6
    axes[1].scatter(t, pr, s=3, alpha=0.3)
    lo, hi = float(min(t.min(initial=0), pr.min(initial=0))), float(max(t.max(initial=1), pr.max(initial=1)))
    axes[1].plot([lo, hi], [lo, hi], color="k", lw=0.8)
    axes[1].set_xlabel("u actual [Mbit/s]")
    axes[1].set_ylabel("u predicted [Mbit/s]")
    axes[1].grid(alpha=0.3)
    return fig


def plot_sweep(rows: Sequence[Mapping[str, Any]], title: str = "", ax: Any = None) -> Any:
    """Mean DTN FCT per N_s and policy (Fig. 13 / Table 5), error bars = 95% CI.

    ``rows``: one mapping per N_s with ``n_s`` and, per policy, ``{"mean", "ci95"}``.
    """
    fig, ax = _axes(ax)
    names = [n for n in rows[0] if isinstance(rows[0][n], Mapping)] if rows else []
    x = np.arange(len(rows))
    w = 0.8 / max(len(names), 1)
    for j, name in enumerate(names):
        means = [r[name]["mean"] for r in rows]
        err = [r[name]["ci95"] for r in rows]
        ax.bar(x + j * w, means, w, yerr=err, label=name, capsize=3)
    ax.set_xticks(x + w * (len(names) - 1) / 2, [str(r["n_s"]) for r in rows])
    ax.set_xlabel("campus streams N_s")
    ax.set_ylabel("mean DTN FCT [s]")
    ax.grid(alpha=0.3, axis="y")
    ax.legend()
    if title:
        ax.set_title(title)
    return fig


def plot_rate_series(runs: Sequence[Mapping[str, Any]], title: str = "{cca}", ax: Sequence[Any] | None = None) -> Any:
    """Per-flow delivered rate and utilisation over time, one panel per run (the Jenks papers' Exp 5).

    ``runs``: mappings with ``rate_series`` (per period, per flow, bit/s), ``util_series``
    (per period, fraction of C) and the fields ``title`` formats (e.g. ``cca``).
    """
    if ax is None:
        fig, axes = pyplot().subplots(1, len(runs), figsize=(5 * len(runs), 3.2), squeeze=False)
        axes = axes[0]
    else:
        fig, axes = ax[0].figure, ax
    for a, r in zip(axes, runs, strict=True):
        rates = np.asarray(r["rate_series"], dtype=np.float64) / 1e6
        t = np.arange(1, rates.shape[0] + 1)
        for i in range(rates.shape[1]):
            a.plot(t, rates[:, i], label=f"flow {i + 1}")
        a.plot(t, np.asarray(r["util_series"], dtype=np.float64) * 100, "k:", label="utilisation (%)")
        a.set_title(title.format(**r))
        a.set_xlabel("time (s)")
        a.set_ylabel("Mbit/s")
        a.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_goodput_pairs(rows: Sequence[Mapping[str, Any]], xkey: str, xlabel: str, names: tuple[str, str],
                       scale: float = 1.0, ax: Sequence[Any] | None = None) -> Any:
    """Goodput of two clients vs ``xkey`` without and with ABC, two panels (ABC paper Figs. 4-6).

    ``rows``: mappings with ``xkey`` and ``{fifo,abc}_goodput{0,1}_bps``; ``scale`` multiplies x.
    """
    if ax is None:
        fig, axes = pyplot().subplots(1, 2, figsize=(9, 3.4), sharey=True)
    else:
        fig, axes = ax[0].figure, ax
    x = [r[xkey] * scale for r in rows]
    for a, name in zip(axes, ("fifo", "abc"), strict=True):
        a.plot(x, [r[f"{name}_goodput0_bps"] / 1e6 for r in rows], "o-", label=names[0])
        a.plot(x, [r[f"{name}_goodput1_bps"] / 1e6 for r in rows], "s-", label=names[1])
        a.set_title("without ABC" if name == "fifo" else "with ABC")
        a.set_xlabel(xlabel)
        a.grid(alpha=0.3)
    axes[0].set_ylabel("goodput (Mbit/s)")
    axes[0].legend()
    fig.tight_layout()
    return fig


#: Axis labels of the leaderboard's experiments (``plot_ranking``).
_RANKING_LABELS = {"mrae": "MRAE of R_DTN vs R*_DTN", "fct": "DTN FCT [s]", "utilization": "bottleneck utilisation rho",
                   "short": "median short-flow FCT [s]"}


def plot_ranking(rows: Sequence[Mapping[str, Any]], title: str = "", ax: Sequence[Any] | None = None) -> Any:
    """A leaderboard's ranking: per experiment (one axis each), every policy's mean with its 95 %
    interval, best at the top; the trivial baseline in black, rows the plant does not model on
    equal footing (``comparable`` false) in grey at the bottom, marked "not comparable".

    ``rows``: a leaderboard results file's ``rows`` (``plant, policy, experiment, mean, ci95,
    rank, better, comparable``).
    """
    exps = list(dict.fromkeys(str(r["experiment"]) for r in rows))
    if ax is None:  # one axis per experiment, each on its own scale (not _axes: it shares x)
        fig, axes = pyplot().subplots(max(len(exps), 1), 1, figsize=(7, 1.0 + 2.0 * max(len(exps), 1)))
    else:
        fig, axes = _axes(ax, max(len(exps), 1))
    axes = list(np.atleast_1d(axes))
    for a, exp in zip(axes, exps, strict=False):
        rs = [r for r in rows if r["experiment"] == exp and r.get("mean") is not None]
        rs.sort(key=lambda r: (not r.get("comparable", True), r.get("rank") or 1e9))
        y = np.arange(len(rs))[::-1]
        for yi, r in zip(y, rs, strict=True):
            lo, hi = (r.get("ci95") or [None, None])[:2]
            m = float(r["mean"])
            err = [[m - lo if lo is not None else 0.0], [hi - m if hi is not None else 0.0]]
            color = "0.6" if not r.get("comparable", True) else ("k" if r["policy"] == "trivial" else "C0")
            a.errorbar([m], [yi], xerr=err, fmt="s" if r["policy"] == "trivial" else "o", color=color, capsize=3)
        a.set_yticks(y)
        a.set_yticklabels([f"{r['policy']}" + ("" if r.get("comparable", True) else " (not comparable)")
                           for r in rs])
        better = rs[0].get("better", "lower") if rs else "lower"
        a.set_xlabel(f"{_RANKING_LABELS.get(exp, exp)} ({better} is better)")
        a.grid(alpha=0.3, axis="x")
    if title:
        axes[0].set_title(title)
    fig.tight_layout()
    return fig


def plot_tradeoff(regime: Mapping[str, Any], ax: Any = None) -> Any:
    """One regime's trade-off: the DTN's tracking error (MRAE, x) against campus short-flow FCT (y), a
    point per policy with its 95 % intervals on both axes; the trivial TBF in black, rows not
    comparable on the plant hollow and grey. Where the run has no short-flow trials the MRAE alone
    is drawn on one line and the axes say so (nothing is invented).

    ``regime``: one item of ``evaluation.decision.tradeoff_points`` (``label``, ``has_short``,
    ``points``: ``policy``, ``comparable``, ``mrae`` and ``short`` as ``{mean, lo, hi}``).
    """
    fig, a = _axes(ax, 1, figsize=(5.5, 4))
    pts = list(regime.get("points") or [])
    for i, p in enumerate(pts):
        x = p["mrae"]
        y = p.get("short") if regime.get("has_short") else None
        yv = y["mean"] if y else float(len(pts) - 1 - i)
        color = "0.6" if not p.get("comparable", True) else ("k" if p["policy"] == "trivial" else f"C{i % 10}")
        a.errorbar([x["mean"]], [yv], xerr=_err(x), yerr=_err(y) if y else None, capsize=3, color=color,
                   fmt="s" if p["policy"] == "trivial" else "o",
                   mfc="none" if not p.get("comparable", True) else color)
        label = p["policy"] + ("" if p.get("comparable", True) else " (not comparable)")
        a.annotate(label, (x["mean"], yv), textcoords="offset points", xytext=(5, 4), fontsize=8, color=color)
    a.set_xlabel("DTN tracking error: MRAE of R_DTN vs R*_DTN (lower is better)")
    if regime.get("has_short"):
        a.set_ylabel("campus short-flow FCT, median [s] (lower is better)")
    else:
        a.set_yticks([])
        a.text(0.5, 0.98, "no campus short-flow FCT in this run:\nonly the DTN's MRAE is shown",
               transform=a.transAxes, ha="center", va="top", fontsize=8)
    a.set_title(str(regime.get("label", "")))
    a.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _err(v: Mapping[str, Any] | None) -> list[list[float]] | None:
    """An errorbar's [[below], [above]] from ``{mean, lo, hi}`` (0 where a bound is missing)."""
    if not v:
        return None
    m = float(v["mean"])
    return [[m - v["lo"] if v.get("lo") is not None else 0.0], [v["hi"] - m if v.get("hi") is not None else 0.0]]
