"""One episode of a policy on a plant, summarised: the library side of ``scidmz simulate``.

It takes objects (a ``Scenario``, a policy, a plant spec or name, a target in bit/s);
``scidmz.commands.build.build_run`` makes them from the command line, and checks the
target there; the runner checks it for a library caller.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..kinds import Policy
from ..metrics import summarize_trace
from ..plant.registry import PlantSpec
from ..scenario import Scenario
from ..signals import constant
from ..units import format_rate, format_time

__all__ = ["simulate"]


def simulate(
    scenario: Scenario,
    policy: Policy,
    target: float,
    plant: str | PlantSpec = "fluid",
    plant_options: Mapping[str, Any] | None = None,
    out: str | None = None,
    plot: str | None = None,
    progress: bool = False,
) -> tuple[dict[str, Any], str]:
    """Run one episode of ``policy`` on a ``plant`` backend at a constant ``target`` (bit/s) for the
    scenario's duration, seeded by the scenario; return (JSON-able summary, human summary).
    ``plant``: a ``PlantSpec`` (built as it is) or a name with ``plant_options``.
    Writes the Trace to ``out`` (Parquet) and a plot to ``plot`` if given."""
    from ..plant.base import make_plant
    from ..runner import run_episode

    sc = scenario
    tgt = float(target)
    # Output directories exist before time is spent on the run.
    for path in (out, plot):
        if path and not Path(path).parent.exists():
            Path(path).parent.mkdir(parents=True, exist_ok=True)

    t0 = time.perf_counter()
    with make_plant(plant, sc, batch=1, **(plant_options or {})) as pl:
        trace = run_episode(pl, policy, constant(tgt, sc.steps)[:, 0], seed=sc.seed, progress=progress)[0]
        load = float(getattr(pl, "kernel_load_s", None) or 0.0)
    wall = time.perf_counter() - t0
    run = max(wall - load, 1e-9)

    summary = summarize_trace(trace, sc.capacity)
    result: dict[str, Any] = {
        "scenario": sc.name,
        "policy": policy.name,
        "plant": str(plant),
        "target": tgt,
        "duration": sc.duration,
        "seed": sc.seed,
        **summary,
        # wall_s: plant build + episode; kernel_load_s: its one-off part (the fluid plant's
        # first kernel call loads numba and the cached machine code); speedup: simulated
        # seconds per wall second of the rest, i.e. what a longer run or a second episode gets.
        "wall_s": wall,
        "kernel_load_s": load,
        "speedup": sc.duration / run,
    }
    for col in ("dtn_fct", "dtn_bytes", "campus_bytes", "dtn_lost_bytes", "campus_lost_bytes"):
        if col in trace.columns:
            vals = np.asarray(trace.column(col), dtype=np.float64)
            if col == "dtn_fct":
                fin = vals[np.isfinite(vals)]
                result["dtn_fct"] = float(fin[-1]) if fin.size else None
            else:
                result[f"total_{col}"] = float(np.nansum(vals))
    if out:
        trace.to_parquet(out)
        result["out"] = str(out)
    if plot:
        from ..plots import plot_trace, save_figure

        save_figure(plot_trace(trace, capacity=sc.capacity), plot)
        result["plot"] = str(plot)
    return result, _human(result)


def _human(r: dict[str, Any]) -> str:
    lines = [
        f"scenario {r['scenario']} | policy {r['policy']} | plant {r['plant']} | "
        f"{r['duration']:.0f} s simulated in {r['wall_s'] - r['kernel_load_s']:.2f} s ({r['speedup']:.0f}x real time)"
        + (f" + {r['kernel_load_s']:.2f} s for numba's kernels (compiled on a first run, then cached)"
           if r["kernel_load_s"] > 0.05 else ""),
        f"  DTN target      {format_rate(r['target'])}",
        f"  DTN rate        {format_rate(r['mean_rate_dtn'])} mean   MRAE {100 * r['mrae']:.1f} %   "
        f"IAE {r['iae'] / 1e9:.2f} Gbit",
        f"  campus rate     {format_rate(r['mean_rate_campus'])} mean   shaper u {format_rate(r['mean_u'])} mean",
        f"  utilisation     {100 * r['utilization']:.1f} %",
        f"  RTT DTN/campus  {format_time(r['mean_rtt_dtn'])} / {format_time(r['mean_rtt_campus'])}   "
        f"queue delay {format_time(r['mean_qdelay_dtn'])} / {format_time(r['mean_qdelay_campus'])}",
    ]
    if r.get("dtn_fct") is not None:
        lines.append(f"  DTN transfer    completed in {r['dtn_fct']:.1f} s")
    if r.get("out"):
        lines.append(f"  trace written to {r['out']}")
    if r.get("plot"):
        lines.append(f"  plot written to {r['plot']}")
    return "\n".join(lines)

