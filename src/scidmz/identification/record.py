"""``scidmz identify``: record an identification dataset and track the run with mlflow."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..scenario import Scenario

__all__ = ["record_dataset"]


def record_dataset(
    scenario: str | Scenario,
    duration: str | float,
    out: str,
    overrides: list[str] | None = None,
    seed: int = 0,
    batch: int | None = None,
    plant: str = "fluid",
    tracking_uri: str | None = None,
    track: bool = True,
    progress: bool = False,
    plot: str | None = None,
) -> tuple[dict[str, Any], str]:
    """Run the section 3.5 excitation, write the dataset (Parquet) and log the run.

    Returns (JSON-able result, one-line human summary). ``batch`` None: 32 episodes side by
    side on the fluid plant, one on a real-time plant (netns, hardware), which runs one at a time.
    """
    from ..fileio import check_output_file
    from ..plots import check_figure_path
    from ..scenario import resolve_scenario
    from ..tracking import file_sha256, optional_run
    from ..units import parse_time
    from .excitation import check_identification, dataset_summary, identify, write_dataset

    sc = resolve_scenario(scenario, overrides)
    dur = parse_time(duration, what="--duration")
    if batch is None:
        from ..plant.base import plant_entry

        batch = plant_entry(plant).max_batch or 32  # ours: 32 side by side on a batched plant
    check_identification(sc, dur, batch, plant)
    out_path = Path(out)
    if out_path.exists() and out_path.is_dir():
        raise ValueError(f"--out must be a file path (.parquet), got a directory: {out_path}")
    if plot:  # the figure is drawn after the work: its path is checked before
        check_output_file(check_figure_path(plot, "--plot"), "--plot")
    params = {"scenario": sc.name, "dtn_cca": sc.dtn.cca, "duration": dur, "seed": seed, "batch": batch, "plant": str(plant)}

    def work(run: Any | None) -> dict[str, Any]:
        t0 = time.perf_counter()
        trace = identify(sc, dur, seed=seed, batch=batch, plant=plant, progress=progress)
        wall = time.perf_counter() - t0
        path = write_dataset(trace, out_path)
        sha = file_sha256(path)
        summary = dataset_summary(trace)
        res = {"dataset": str(path), "sha256": sha, "seconds": round(wall, 2), **summary, **params}
        if plot:
            from ..plots import plot_trace, save_figure
            from ..state import Trace

            # The paper's Fig. 7: the first 300 periods of the first episode, excitation and response.
            df = trace.df[trace.df["episode"] == trace.df["episode"].iloc[0]].head(300).copy()
            df["target"] = float("nan")  # no target during identification
            first = Trace(df, {**trace.meta, "policy": "excitation (MLC section 3.5)"})
            res["plot"] = str(save_figure(plot_trace(first, capacity=sc.capacity), plot))
        if run is not None:
            run.set_tags({"dataset_sha256": sha, "dataset": str(path)})
            run.log_metrics({"rows": summary["rows"], "episodes": summary["episodes"], "seconds": wall})
            run.log_artifact(path, artifact_path="dataset")
            res["mlflow_run_id"] = run.run_id
        return res

    with optional_run(track, "scidmz-identify", f"identify-{sc.name}", params, tracking_uri) as run:
        res = work(run)
    human = (
        f"identification dataset: {res['rows']} periods ({res['episodes']} episodes) of {sc.name} "
        f"in {res['seconds']:.1f} s -> {res['dataset']} (sha256 {res['sha256'][:12]})"
    )
    return res, human
