"""Where a rate controller can win against the trivial TBF: the trivial TBF's tracking error, taken apart.

For each scenario (fluid plant), the trivial TBF (MLC section 3.7, u = B_max - R*_DTN)
runs the MRAE evaluation's stepping target (``evaluation.leaderboard.trialunits.mrae_targets``:
R*_DTN ~ U[0.3, 0.7] x B_max held 30 s, ``--trials`` trials of 120 s), and we report

* ``mrae``: eq. (3) over the whole trial, as the evaluation computes it;
* ``transient``: the mean relative error |R_DTN - R*| / R* over the first
  ``--transient`` seconds after each target step (episode start included);
* ``steady``: the same after that, with its ``bias`` (mean signed error) and
  ``std``: a controller acting on u once per period can remove bias; it cannot
  remove zero-mean period-to-period noise, only add its own;
* ``fill``: mean R_DTN / mean R*.

Then the step-up experiment: the plant is held at R* = 0.3 B_max for 40 s, the
target steps to 0.7 B_max, and u is set to the trivial rate minus ``extra`` x
B_max for the first 5 s (extra = 0 is the trivial TBF; larger values are what an
MLC inside a +-Delta_u band could do at most), then to the trivial rate. Reported:
R_DTN / R* in each of the 15 s after the step. If lowering u does not speed up the
DTN's ramp, the transient is the congestion control's own and no campus rate can
shorten it.

    python benchmarks/mlc_headroom.py [--scenarios paper-cubic,paper-bbr2] [--trials 8]

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from scidmz.evaluation.leaderboard.trialunits import mrae_targets
from scidmz.evaluation.mlc.experiments import ExperimentPlan
from scidmz.evaluation.trials import run_trials
from scidmz.plant.base import make_plant
from scidmz.policies import TrivialPolicy
from scidmz.scenario import load_scenario

EXTRAS = (0.0, 0.02, 0.05, 0.10)


def decompose(name: str, trials: int, transient: float, seed: int) -> dict[str, float]:
    sc = load_scenario(name)
    plan = ExperimentPlan(trials=trials, duration=120.0, target_hold=30.0, seed=seed)
    sc = sc.replace(duration=plan.duration, dtn={"transfer": None})
    targets = mrae_targets(sc, plan.core(("mrae",)))
    traces, _ = run_trials(sc, TrivialPolicy(), targets, seed=seed)
    n_tr = max(1, int(round(transient / sc.period)))
    rows = []
    for tr in traces:
        rate, tg = tr.column("rate_dtn"), tr.column("target")
        err = (rate - tg) / tg
        steps = [0] + [i for i in range(1, len(tg)) if tg[i] != tg[i - 1]]
        ends = [*steps[1:], len(tg)]
        trans = np.concatenate([err[s:min(s + n_tr, e)] for s, e in zip(steps, ends, strict=True)])
        steady = np.concatenate([err[s + n_tr:e] for s, e in zip(steps, ends, strict=True)])
        rows.append((np.abs(err).mean(), np.abs(trans).mean(), np.abs(steady).mean(), steady.mean(), steady.std(),
                     rate.mean() / tg.mean()))
    m = np.mean(np.array(rows), axis=0)
    keys = ("mrae", "transient", "steady", "steady_bias", "steady_std", "fill")
    return {k: float(v) for k, v in zip(keys, m, strict=True)}


def step_up(name: str, batch: int, seed: int) -> dict[str, list[float]]:
    sc = load_scenario(name).replace(duration=60.0)
    cap = sc.capacity
    out: dict[str, list[float]] = {}
    for extra in EXTRAS:
        with make_plant("fluid", sc, batch=batch) as plant:
            plant.reset(seed)
            for _ in range(40):
                plant.step(np.full(batch, 0.7 * cap))
            fills = []
            for k in range(15):
                u = 0.3 * cap - (extra * cap if k < 5 else 0.0)
                fills.append(float(plant.step(np.full(batch, u)).y[:, 0].mean() / (0.7 * cap)))
        out[f"{extra:g}"] = fills
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", default="paper-cubic,paper-bbr2")
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--transient", type=float, default=5.0, help="seconds after each step counted as transient")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    t0 = time.perf_counter()
    res = {"benchmark": "mlc_headroom", "trials": a.trials, "transient_s": a.transient, "seed": a.seed,
           "extras_b_max": list(EXTRAS), "scenarios": {}}
    for name in [s.strip() for s in a.scenarios.split(",") if s.strip()]:
        res["scenarios"][name] = {"trivial": decompose(name, a.trials, a.transient, a.seed),
                                  "step_up_fill": step_up(name, a.trials, a.seed)}
    res["wall_s"] = time.perf_counter() - t0
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
