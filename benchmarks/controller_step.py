"""Controller step latency: MLC inference (NumPy forward pass of the Fig. 8 network) + anti-windup PI.

Times ``MLCPolicy.decide`` for one instance (B = 1, the live daemon's case)
and reports percentiles in microseconds as one JSON object. Target:
p99 < 1 ms. Uses a randomly initialised network of the paper's shape when no
model directory is given (the cost does not depend on the weights' values).

    python benchmarks/controller_step.py [--model DIR] [--steps 5000]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from scidmz.models.predictor import NumpyPredictor, load_predictor
from scidmz.policies.rate.mlc import Gains, MLCPolicy
from scidmz.scenario import load_scenario
from scidmz.state import History


def random_predictor(seed: int = 0, n: int = 22, hidden_factor: int = 64) -> NumpyPredictor:
    rng = np.random.default_rng(seed)
    dims = [n, hidden_factor * n, n, 1]
    arrays = {"x_mean": np.zeros(n), "x_scale": np.ones(n), "y_mean": np.array([5e8]), "y_scale": np.array([1e8])}
    for j in range(3):
        arrays[f"w{j}"] = rng.normal(scale=1 / np.sqrt(dims[j]), size=(dims[j], dims[j + 1]))
        arrays[f"b{j}"] = np.zeros(dims[j + 1])
    return NumpyPredictor(arrays, per_unit=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--scenario", default="paper-cubic")
    a = ap.parse_args()
    sc = load_scenario(a.scenario)
    pred = load_predictor(a.model) if a.model else random_predictor()
    pol = MLCPolicy(pred, Gains(0.285, 1.486, 1.565))
    pol.reset(sc, 1)
    rng = np.random.default_rng(1)
    hist = History(np.array([[5e8, 5e8, 0.1, 0.01, 0.0, 0.0, 108.0]]), capacity_hint=a.steps + 1)
    target = np.array([0.6 * sc.capacity])
    times = np.empty(a.steps)
    cpu = np.empty(a.steps)
    for k in range(a.steps):
        y = np.array([[6e8, 4e8, 0.15, 0.06, 0.05, 0.05, 108.0]]) * (1 + 0.01 * rng.standard_normal((1, 7)))
        c0 = time.thread_time()
        t0 = time.perf_counter()
        u = pol.decide(hist, target)
        times[k] = time.perf_counter() - t0
        cpu[k] = time.thread_time() - c0
        hist.append(u, y, target)
    us = times[100:] * 1e6  # skip warm-up
    cpu_us = cpu[100:] * 1e6
    print(json.dumps({
        "benchmark": "controller_step",
        "what": "MLCPolicy.decide, B=1: y_d + 22 features + NumPy ANN (22-1408-22-1) + anti-windup PI",
        "model": a.model or "random weights, paper architecture",
        "steps": int(us.size),
        "p50_us": round(float(np.percentile(us, 50)), 1),
        "p99_us": round(float(np.percentile(us, 99)), 1),
        "max_us": round(float(us.max()), 1),
        # CPU time of the step itself: what the step costs when the machine is not oversubscribed
        # (wall-clock percentiles include time the scheduler gave to other processes).
        "cpu_p50_us": round(float(np.percentile(cpu_us, 50)), 1),
        "cpu_p99_us": round(float(np.percentile(cpu_us, 99)), 1),
        "loadavg_1min": round(os.getloadavg()[0], 2),
        "target_p99_us": 1000.0,
        "ok": bool(np.percentile(us, 99) < 1000.0),
        "ok_cpu": bool(np.percentile(cpu_us, 99) < 1000.0),
    }))


if __name__ == "__main__":
    main()
