"""GA tuning speed on the fluid plant: Table 2 settings (population 30, 15 parents), 120 s episodes.

Runs ``scidmz.tuning.ga.tune`` for ``--generations`` generations (default
100, the paper's) and prints one JSON object: wall time, seconds per
generation, plant-seconds simulated per wall second, and the projected time
of the full 100-generation run. Target: the GA alone under 5
minutes on paper-cubic. A model directory is optional: without one the
inverse model is a stand-in u_hat = B_max - y_d,DTN (the GA's cost is the
plant's, the 22-1408-22-1 forward pass is negligible, see controller_step.py).

    python benchmarks/ga_speed.py [--scenario paper-cubic] [--generations 100] [--model DIR] [--workers N]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from scidmz.models.predictor import load_predictor
from scidmz.scenario import load_scenario
from scidmz.tuning.ga import tune


class TrivialLike:
    n_features = 22
    per_unit = True

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return 1.0 - X[:, 0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="paper-cubic")
    ap.add_argument("--generations", type=int, default=100)
    ap.add_argument("--population", type=int, default=30)
    ap.add_argument("--episode", type=float, default=120.0)
    ap.add_argument("--model", default=None)
    ap.add_argument("--workers", type=int, default=0)
    a = ap.parse_args()
    sc = load_scenario(a.scenario)
    pred = load_predictor(a.model) if a.model else TrivialLike()
    executor = None
    if a.workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        executor = ProcessPoolExecutor(max_workers=a.workers)
    t0 = time.perf_counter()
    try:
        res = tune(sc, pred, generations=a.generations, population=a.population, parents=a.population // 2,
                   episode=a.episode, executor=executor)
    finally:
        if executor is not None:
            executor.shutdown()
    wall = time.perf_counter() - t0
    evals = res.info["evaluations"]
    per_gen = wall / a.generations
    print(json.dumps({
        "benchmark": "ga_speed",
        "scenario": sc.name,
        "generations": a.generations,
        "population": a.population,
        "episode_s": a.episode,
        "evaluations": evals,
        "fitness_calls": res.info["fitness_calls"],
        "wall_s": round(wall, 1),
        "s_per_generation": round(per_gen, 2),
        "plant_s_per_wall_s": round(evals * a.episode / wall, 1),
        "projected_100_generations_s": round(wall * 100 / a.generations, 1),
        "target_s": 300.0,
        "ok": bool(wall * 100 / a.generations < 300.0),
        "workers": a.workers,
        "loadavg_1min": round(os.getloadavg()[0], 2),
    }))


if __name__ == "__main__":
    main()
