"""Speed of the fluid plant; prints one JSON object (numbers are wall-clock, noisy on a shared machine).

    python benchmarks/plant_speed.py [--duration 120] [--batch 30] [--sweep 1,10,100,1000,10000]

- ``single``: paper-cubic, ``duration`` s with the trivial policy through
  ``scidmz.runner.run_episode`` (goal: >= 1000x real time).
- ``batch``: the same with ``batch`` instances in one plant (goal: at most
  10x the wall time of one instance).
- ``sweep``: campus long streams N_s (MLC Table 5) on paper-cubic, seconds of
  wall time per simulated second, for the MLC engineer's cost estimates.
Each measurement is the best of ``--repeat`` interleaved runs after a warm-up
that loads the numba cache; ``cold_s`` is the first construction + step in this process.
``*_cpu_s`` is the process CPU time of the same runs: on a machine shared with
other jobs it estimates what the wall time would be on an idle one.
- ``cli``: the whole ``scidmz simulate paper-cubic --target 500M --json`` as a new
  process (best of ``--repeat``; goal, ours: under 0.5 s), beside two floors
  measured the same way: ``python -c "import numpy"`` and a process that only
  imports numba and calls one cached ``@njit`` function (what any numba-cached
  kernel costs per process, whatever it computes).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def _episode_walls(cases: dict[str, tuple], duration: float, repeat: int) -> dict[str, tuple[float, float]]:
    """Best wall and CPU time (this process, all threads) of one episode per case.

    ``cases``: name -> (scenario, batch). The cases' runs are interleaved, so a
    burst of load from other jobs on the machine hits them alike.
    """
    from scidmz.plant.base import make_plant
    from scidmz.policies import make_policy
    from scidmz.runner import run_episode

    plants, best = {}, {}
    try:
        for name, (scenario, batch) in cases.items():
            sc = scenario.replace(duration=duration)
            plant = make_plant("fluid", sc, batch=batch)
            run_episode(plant, make_policy("trivial"), np.full(2, 600e6))  # warm-up: load the kernel
            plants[name] = (plant, sc)
            best[name] = (np.inf, np.inf)
        for _ in range(repeat):
            for name, (plant, sc) in plants.items():
                t0, c0 = time.perf_counter(), time.process_time()
                run_episode(plant, make_policy("trivial"), np.full(sc.steps, 600e6), seed=sc.seed)
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    finally:
        for plant, _ in plants.values():
            plant.close()
    return best


_NUMBA_FLOOR = """
from numba import njit


@njit(cache=True)
def one(x):
    return x + 1.0


one(1.0)
"""


def _process_wall(argv: list[str], repeat: int, cwd: str | None = None) -> float:
    import subprocess

    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, cwd=cwd)
        best = min(best, time.perf_counter() - t0)
    return best


def cli_walls(repeat: int) -> dict[str, float]:
    """Wall seconds of a whole `scidmz simulate` process and of its two floors (best of ``repeat``)."""
    import shutil
    import sys
    import tempfile

    exe = shutil.which("scidmz")
    sim = [exe] if exe else [sys.executable, "-m", "scidmz.cli"]
    sim += ["simulate", "paper-cubic", "--target", "500M", "--json"]
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "floor.py"), "w") as fh:
            fh.write(_NUMBA_FLOOR)
        floor = [sys.executable, "floor.py"]
        _process_wall(floor, 1, cwd=d)  # compiles and writes its cache once
        _process_wall(sim, 1)
        return {
            "python_numpy_s": _process_wall([sys.executable, "-c", "import numpy"], repeat),
            "numba_cached_floor_s": _process_wall(floor, repeat, cwd=d),
            "simulate_s": _process_wall(sim, repeat),
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=120.0)
    ap.add_argument("--batch", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sweep", default="1,10,100,1000,10000", help="campus streams N_s ('' to skip)")
    ap.add_argument("--sweep-duration", type=float, default=10.0)
    a = ap.parse_args()

    import numba

    from scidmz.plant.fluid import FluidPlant
    from scidmz.scenario import load_scenario

    sc = load_scenario("paper-cubic")
    t0 = time.perf_counter()
    FluidPlant(sc).step(400e6)
    cold = time.perf_counter() - t0

    walls = _episode_walls(
        {"single": (sc, 1), "batch": (sc, a.batch), "bbr2": (load_scenario("paper-bbr2"), 1)},
        a.duration,
        a.repeat,
    )
    (single, single_cpu), (batch, batch_cpu), (bbr2, _) = walls["single"], walls["batch"], walls["bbr2"]
    result = {
        "scenario": sc.name,
        "duration_s": a.duration,
        "cpu_count": os.cpu_count(),
        "numba_threads": numba.get_num_threads(),
        "loadavg_1min": os.getloadavg()[0],
        "cold_s": cold,
        "single_wall_s": single,
        "single_speedup": a.duration / single,
        "single_cpu_s": single_cpu,
        "single_cpu_speedup": a.duration / single_cpu,
        "paper_bbr2_wall_s": bbr2,
        "paper_bbr2_speedup": a.duration / bbr2,
        "batch": a.batch,
        "batch_wall_s": batch,
        "batch_over_single": batch / single,
        "batch_cpu_s": batch_cpu,
        "batch_cpu_over_single_cpu": batch_cpu / single_cpu,
        "batch_instance_speedup": a.duration * a.batch / batch,
        "sweep": [],
        "cli": cli_walls(a.repeat),
    }
    for ns in [int(x) for x in a.sweep.split(",") if x.strip()]:
        s = sc.replace(campus={"hosts": ns, "flows_per_host": 1})
        wall, _ = _episode_walls({"n": (s, 1)}, a.sweep_duration, 1)["n"]
        result["sweep"].append(
            {"campus_streams": ns, "wall_per_sim_s": wall / a.sweep_duration, "speedup": a.sweep_duration / wall}
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
