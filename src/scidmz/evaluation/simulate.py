"""One episode of a policy on a plant, summarised: the library side of ``scidmz simulate``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from ..metrics import summarize_trace
from ..scenario import Scenario, resolve_scenario
from ..signals import constant
from ..units import format_rate, format_time, parse_rate

__all__ = ["simulate", "DEFAULT_TARGET_FRACTION"]

#: --target default as a fraction of the scenario's bottleneck capacity B_max.
DEFAULT_TARGET_FRACTION = 0.5


def simulate(
    scenario: str | Scenario,
    overrides: list[str] | None = None,
    policy: str = "trivial",
    plant: str = "fluid",
    target: str | float | None = None,
    duration: str | float | None = None,
    seed: int | None = None,
    model: str | None = None,
    gains: str | None = None,
    out: str | None = None,
    plot: str | None = None,
    progress: bool = False,
) -> tuple[dict[str, Any], str]:
    """Run one episode; return (JSON-able summary, human summary). Writes ``out``/``plot`` if given."""
    from ..plant.base import make_plant
    from ..policies import make_policy, split_policy_overrides
    from ..runner import run_episode

    scen_over, pol_opts = split_policy_overrides(policy, overrides)
    sc = resolve_scenario(scenario, scen_over, duration, seed)
    # Ours: without --target, half of B_max, a target every scenario can reach.
    tgt = sc.check_target(DEFAULT_TARGET_FRACTION * sc.capacity if target is None else parse_rate(target, what="--target"))
    kwargs: dict[str, Any] = {}
    if policy == "mlc":
        from ..policies.rate.mlc import mlc_files

        model, gains = mlc_files(sc, model, gains)
        kwargs = {"model": model, "gains": gains}
    kwargs.update(pol_opts)
    pol = make_policy(policy, **kwargs)
    # Validate output paths before spending time on the run.
    for path in (out, plot):
        if path and not Path(path).parent.exists():
            Path(path).parent.mkdir(parents=True, exist_ok=True)

    t0 = time.perf_counter()
    with make_plant(plant, sc, batch=1) as pl:
        trace = run_episode(pl, pol, constant(tgt, sc.steps)[:, 0], seed=sc.seed, progress=progress)[0]
        load = float(getattr(pl, "kernel_load_s", None) or 0.0)
    wall = time.perf_counter() - t0
    run = max(wall - load, 1e-9)

    summary = summarize_trace(trace, sc.capacity)
    result: dict[str, Any] = {
        "scenario": sc.name,
        "policy": pol.name,
        "plant": plant,
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

