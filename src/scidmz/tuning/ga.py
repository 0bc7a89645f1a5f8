"""GA tuning of the anti-windup PI gains (Kp, Ki, Kw), MLC section 3.3, Algorithm 1, Table 2, eq. (2).

PyGAD with the paper's settings: 100 generations, 3 genes, 15 parents
mating, population (mating pool) 30, crossover probability 0.9, mutation
probability 0.1, steady-state parent selection; genes bounded to a
non-negative ``gene_space`` so Kp, Ki, Kw >= 0. Fitness = -IAE, eq. (2):
the integral of |R*_DTN(t) - R_DTN(t)| over a 120 s closed-loop episode
whose target R*_DTN(t) is a pseudo-random step signal.

Fairness and speed: every individual ever evaluated sees the same target
signal and the same plant seed (instance seeds do not depend on an
individual's position), so the GA compares gains, not luck, and an elite
carried to the next generation keeps a comparable fitness. PyGAD hands the
whole generation to the fitness function at once (``fitness_batch_size`` =
population); it is split into chunks, each chunk is ONE batched closed
loop (``run_episode`` on a plant of B = chunk size, with per-instance gains
in ``MLCPolicy``), and chunks go to an optional ``concurrent.futures.Executor``
(a process pool now, a cluster executor later).

The same GA tunes ``pi`` (the MLC's loop without the inverse model,
``policies.rate.pi``): with no model (``model=None``) every individual is a
``PIPolicy`` with the same gains, saturator and fitness.

``episodes`` > 1 scores each individual by its mean IAE over that many
episodes (different target signals and plant seeds, still one batched call):
the paper uses one, but on a stochastic plant a single episode rewards lucky
gains (measured: BBRv2 gains that beat the trivial TBF 4x on the tuning
episode lost to it on fresh trials), so more episodes buy robustness at a
proportional cost.
"""

from __future__ import annotations

import csv
import json
import math
import os
import time
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..executors import executor_width
from ..fileio import atomic_write_text
from ..plant.base import plant_entry
from ..policies.rate.antiwindup import DEFAULT_DELTA_U, DEFAULT_LIMITER, Gains
from ..scenario import Scenario
from ..signals import random_steps

__all__ = [
    "TuneResult",
    "tune",
    "evaluate_gains",
    "fitness_targets",
    "loop_policy",
    "DEFAULT_GENE_SPACE",
]

#: Search range of each gene (Kp, Ki, Kw); Table 4's values lie well inside it.
DEFAULT_GENE_SPACE: tuple[dict[str, float], ...] = (
    {"low": 0.0, "high": 2.5},
    {"low": 0.0, "high": 2.5},
    {"low": 0.0, "high": 2.5},
)
#: The fitness target steps between these fractions of B_max, holding each level HOLD s
#: (the same kind of signal as the MRAE evaluation's, evaluation/leaderboard/trialunits.py, so the
#: GA tunes for the conditions the controller is judged on; a different seed).
TARGET_RANGE = (0.3, 0.7)
TARGET_HOLD = 30.0
_SEED_OFFSET = 1_000_000


@dataclass
class TuneResult:
    """Best gains, their IAE (bit, eq. 2), the best IAE per generation (Fig. 9) and details."""

    gains: Gains
    best_iae: float
    curve: list[float]
    history: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gains": self.gains.to_dict(),
            "best_iae": self.best_iae,
            "curve": list(self.curve),
            "history": self.history,
            "info": self.info,
        }

    #: What ``save`` writes into its directory (and all that a tracked run logs of it).
    FILES: ClassVar[tuple[str, ...]] = ("gains.json", "convergence.csv", "convergence.png", "result.json")

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write gains.json, convergence.csv, convergence.png (Fig. 9) and result.json into a directory."""
        from ..fileio import ensure_dir
        from ..plots import plot_convergence, save_figure

        # Checked as the CLI checks it (a symlink, a file in the way: one line), then made.
        d = ensure_dir(directory, "tune output directory", parents=True)
        self.gains.save(d / "gains.json", extra={"best_iae": self.best_iae, **self.info})
        rows = [
            {
                "generation": h["generation"],
                "best_iae": h["best_iae"],
                "mean_iae": h.get("mean_iae", float("nan")),
                "kp": h["gains"][0],
                "ki": h["gains"][1],
                "kw": h["gains"][2],
            }
            for h in self.history
        ]
        _atomic_write(d / "convergence.csv", _csv_text(rows, ["generation", "best_iae", "mean_iae", "kp", "ki", "kw"]))
        name = str(self.info.get("scenario", "MLC"))
        save_figure(plot_convergence({name: [v / 1e9 for v in self.curve]}), d / "convergence.png")
        _atomic_write(d / "result.json", json.dumps(self.to_dict(), indent=2, default=str))
        return d


def fitness_targets(scenario: Scenario, episode: float, seed: int = 0, episodes: int = 1) -> np.ndarray:
    """The pseudo-random R*_DTN(t) steps of the fitness episode(s): (steps,), or (steps, episodes)."""
    steps = int(round(episode / scenario.period))
    if steps < 3:
        raise ValueError(f"fitness episode must last at least 3 periods, got {episode} s")
    if episodes < 1:
        raise ValueError(f"episodes per individual must be >= 1, got {episodes}")
    hold = max(1, int(round(TARGET_HOLD / scenario.period)))
    lo, hi = TARGET_RANGE
    sig = random_steps(steps, lo * scenario.capacity, hi * scenario.capacity, hold=hold, seed=seed, batch=episodes)
    return sig[:, 0] if episodes == 1 else sig


def loop_policy(predictor: Any, gains: Gains | Sequence[Gains]) -> Any:
    """The anti-windup loop the GA scores: the MLC with ``predictor``, or ``pi`` when it is None."""
    if predictor is None:
        from ..policies.rate.pi import PIPolicy

        return PIPolicy(gains)
    from ..policies.rate.mlc import MLCPolicy

    return MLCPolicy(predictor, gains)


def evaluate_gains(
    scenario: Scenario,
    predictor: Any,
    gains: np.ndarray | Sequence[Gains],
    targets: np.ndarray,
    seed: int = 0,
    plant: str = "fluid",
    delta_u: float = DEFAULT_DELTA_U,
    limiter: str = DEFAULT_LIMITER,
) -> np.ndarray:
    """IAE (eq. 2, bit) of each gain set over batched closed-loop episodes; shape (n,).

    ``gains``: an (n, 3) array of (Kp, Ki, Kw) or a list of ``Gains``;
    ``predictor`` None scores ``pi`` instead of the MLC (``loop_policy``).
    ``targets``: (steps,) for one episode or (steps, M) for M episodes per
    gain set (the IAE is then the mean over them). All n x M instances run
    in one plant call; episode m has the same plant seed for every gain set.
    """
    from ..metrics import iae
    from ..plant.base import make_plant
    from ..runner import run_episode

    glist = (
        [Gains(float(k[0]), float(k[1]), float(k[2]), delta_u, limiter) for k in np.atleast_2d(gains)]
        if isinstance(gains, np.ndarray)
        else list(gains)
    )
    n = len(glist)
    tg = np.asarray(targets, dtype=np.float64)
    m = 1 if tg.ndim == 1 else tg.shape[1]
    tg2 = np.tile(tg.reshape(tg.shape[0], m), (1, n))  # instance j = i * m + episode
    policy = loop_policy(predictor, [g for g in glist for _ in range(m)])
    if "scenarios" in plant_entry(plant).options():
        # The fluid plant seeds instance j with its scenario's seed + j: offsetting each
        # instance's scenario seed gives episode e the same randomness for every gain set.
        common = int(seed) + _SEED_OFFSET
        scs = [scenario.replace(seed=common + (j % m) - j) for j in range(n * m)]
        pl_cm = make_plant(plant, scenario, batch=n * m, scenarios=scs)
        run_seed = None
    else:
        pl_cm = make_plant(plant, scenario, batch=n * m)
        run_seed = int(seed)
    with pl_cm as pl:
        traces = run_episode(pl, policy, tg2, seed=run_seed)
    per = np.array([
        iae(tr.df["target"].to_numpy(), tr.df["rate_dtn"].to_numpy(), scenario.period) for tr in traces
    ])
    out = per.reshape(n, m).mean(axis=1)
    # A diverging individual (non-finite measurement) is simply the worst.
    out[~np.isfinite(out)] = np.inf
    return out


def _chunks(n: int, k: int) -> list[slice]:
    k = max(1, min(k, n))
    edges = np.linspace(0, n, k + 1).round().astype(int)
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]


def _as_predictor(model: Any) -> Any:
    if model is None:  # pi: the loop without an inverse model
        return None
    if isinstance(model, str | os.PathLike):
        from ..models.predictor import load_predictor

        return load_predictor(model)
    if hasattr(model, "numpy_predictor"):
        return model.numpy_predictor()
    if not callable(model):
        raise TypeError("model must be a model directory, an InverseModel or a predictor callable")
    return model


def tune(
    scenario: Scenario,
    model: Any,
    generations: int = 100,
    population: int = 30,
    parents: int = 15,
    crossover: float = 0.9,
    mutation: float = 0.1,
    episode: float = 120.0,
    seed: int = 0,
    executor: Executor | None = None,
    gene_space: Sequence[dict[str, float]] = DEFAULT_GENE_SPACE,
    progress: bool = False,
    plant: str = "fluid",
    chunks: int | None = None,
    delta_u: float = DEFAULT_DELTA_U,
    limiter: str = DEFAULT_LIMITER,
    episodes: int = 1,
) -> TuneResult:
    """Tune (Kp, Ki, Kw) with PyGAD (Table 2 defaults); see the module docstring.

    ``model``: the MLC's inverse model (a directory, an ``InverseModel`` or a predictor),
    or None to tune ``pi``. Validate, then run the GA, then describe the run: each a
    function below (writing is ``run.write_tune``'s job, tracking ``run.tune_from_paths``').
    """
    _check_ga_args(generations, population, parents, crossover, mutation, gene_space)
    predictor = _as_predictor(model)
    targets = fitness_targets(scenario, episode, seed, episodes=episodes)
    fitness = _Fitness(scenario, predictor, targets, seed, plant, delta_u, limiter, executor,
                       executor_width(executor) if chunks is None else chunks)
    recorder = _Recorder(generations if progress else 0, scenario.name)
    t0 = time.perf_counter()
    ga = _run_ga(fitness, recorder, generations, population, parents, crossover, mutation, gene_space, seed)
    wall = time.perf_counter() - t0
    sol, fit, _ = ga.best_solution(ga.last_generation_fitness)
    best = Gains(*(max(0.0, float(x)) for x in sol), delta_u=delta_u, limiter=limiter)
    curve = [h["best_iae"] for h in recorder.history]
    settings = {"generations": int(generations), "population": int(population), "parents": int(parents),
                "crossover": float(crossover), "mutation": float(mutation), "episode": float(episode),
                "episodes_per_individual": int(episodes), "seed": int(seed), "plant": str(plant),
                "delta_u": float(delta_u), "limiter": limiter, "gene_space": [dict(g) for g in gene_space]}
    info = _run_info(scenario, predictor is not None, settings, curve, fitness, wall, seed)
    return TuneResult(gains=best, best_iae=float(-fit), curve=curve, history=recorder.history, info=info)


class _Fitness:
    """PyGAD's batch fitness: -IAE of each gain set over the fitness episodes, on the executor's chunks;
    counts the evaluations and batch sizes it is asked for."""

    def __init__(self, scenario: Scenario, predictor: Any, targets: np.ndarray, seed: int, plant: str,
                 delta_u: float, limiter: str, executor: Executor | None, chunks: int) -> None:
        self.fixed = (scenario, predictor, targets, seed, plant, delta_u, limiter)
        self.executor, self.chunks = executor, chunks
        self.evaluations, self.batches, self.batch_sizes = 0, 0, []

    def __call__(self, ga: Any, solutions: np.ndarray, indices: Any) -> list[float]:
        sols = np.atleast_2d(np.asarray(solutions, dtype=np.float64))
        self.batches += 1
        self.batch_sizes.append(len(sols))
        self.evaluations += len(sols)
        sc, predictor, targets, seed, plant, delta_u, limiter = self.fixed
        args = [(sc, predictor, sols[sl], targets, seed, plant, delta_u, limiter)
                for sl in _chunks(len(sols), self.chunks)]
        if self.executor is None:
            results = [evaluate_gains(*a) for a in args]
        else:
            futs = [self.executor.submit(evaluate_gains, *a) for a in args]
            results = [f.result() for f in futs]
        iaes = np.concatenate(results)
        return [-float(v) if math.isfinite(v) else -1e300 for v in iaes]


class _Recorder:
    """PyGAD's ``on_generation``: each generation's best and mean IAE and best gains, and a progress bar
    (``bar_total`` generations; 0: none)."""

    def __init__(self, bar_total: int, name: str) -> None:
        self.history: list[dict[str, Any]] = []
        self.bar = None
        if bar_total:
            from tqdm import tqdm

            self.bar = tqdm(total=bar_total, desc=f"GA on {name}", unit="gen", leave=False)

    def __call__(self, ga: Any) -> None:
        fit = np.asarray(ga.last_generation_fitness, dtype=np.float64)
        best = int(np.argmax(fit))
        ok = fit > -1e299
        self.history.append({
            "generation": ga.generations_completed,
            "best_iae": float(-fit[best]),
            "mean_iae": float(-np.mean(fit[np.isfinite(fit) & ok])) if np.any(ok) else float("inf"),
            "gains": [float(x) for x in ga.population[best]],
        })
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(best_iae=f"{-fit[best] / 1e9:.2f} Gbit")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _run_ga(fitness: _Fitness, recorder: _Recorder, generations: int, population: int, parents: int,
            crossover: float, mutation: float, gene_space: Sequence[dict[str, float]], seed: int) -> Any:
    """PyGAD with Table 2's operators, run to the end; returns the finished ``pygad.GA``."""
    import pygad

    ga = pygad.GA(
        num_generations=int(generations),
        num_parents_mating=int(parents),
        sol_per_pop=int(population),
        num_genes=3,
        fitness_func=fitness,
        fitness_batch_size=int(population),
        gene_space=[dict(g) for g in gene_space],
        gene_type=float,
        parent_selection_type="sss",
        crossover_type="single_point",
        crossover_probability=float(crossover),
        mutation_type="random",
        mutation_probability=float(mutation),
        keep_elitism=1,
        random_seed=int(seed),
        on_generation=recorder,
        suppress_warnings=True,
        logger=_quiet_logger(),
    )
    try:
        ga.run()
    finally:
        recorder.close()
    return ga


def _run_info(scenario: Scenario, with_model: bool, settings: dict[str, Any], curve: list[float],
              fitness: _Fitness, wall: float, seed: int) -> dict[str, Any]:
    """What the run was (policy, scenario, the GA's settings) and what it cost, for the gains' file."""
    from ..regime import fingerprint

    return {
        "policy": "mlc" if with_model else "pi",
        "scenario": scenario.name,
        "cca": scenario.dtn.cca,
        "scenario_fingerprint": fingerprint(scenario),
        **settings,
        "best_generation": int(np.argmin(curve)) + 1 if curve else 0,
        "evaluations": fitness.evaluations,
        "fitness_calls": fitness.batches,
        "max_fitness_batch": max(fitness.batch_sizes, default=0),
        "fitness_batch_sizes": list(fitness.batch_sizes),
        "seconds": round(wall, 2),
        "target_signal": {"range_frac": list(TARGET_RANGE), "hold_s": TARGET_HOLD, "seed": int(seed)},
    }


def _quiet_logger() -> Any:
    """A logger for PyGAD that prints nothing: PyGAD logs any exception of a run with its traceback
    before re-raising it, and the CLI reports that exception itself, in one line."""
    import logging

    lg = logging.getLogger("scidmz.tuning.pygad")
    lg.propagate = False
    lg.setLevel(logging.CRITICAL + 1)
    if not lg.handlers:
        lg.addHandler(logging.NullHandler())
    return lg


def _check_ga_args(
    generations: int, population: int, parents: int, crossover: float, mutation: float, gene_space: Sequence[dict[str, float]]
) -> None:
    from ..limits import check

    check("generations", generations)
    check("population", population)
    check("parents", parents)
    if not 1 <= parents <= population:
        raise ValueError(f"parents mating must be in [1, population={population}], got {parents}")
    for name, p in (("crossover", crossover), ("mutation", mutation)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} probability must be in [0, 1], got {p}")
    if len(gene_space) != 3:
        raise ValueError(f"gene_space needs 3 ranges (Kp, Ki, Kw), got {len(gene_space)}")
    for g in gene_space:
        lo, hi = float(g.get("low", -1)), float(g.get("high", -1))
        if not (0.0 <= lo < hi and math.isfinite(hi)):
            raise ValueError(f"gene range must satisfy 0 <= low < high (gains are >= 0), got {g}")


def _csv_text(rows: list[dict[str, Any]], cols: list[str]) -> str:
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def _atomic_write(path: Path, text: str) -> None:
    atomic_write_text(path, text)
