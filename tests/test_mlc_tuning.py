"""GA tuning (section 3.3, Table 2, eq. 2) wiring on the real fluid plant (small scenario, tiny GA)."""

from __future__ import annotations

from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pygad")

from scidmz.policies.rate.mlc import Gains  # noqa: E402
from scidmz.scenario import load_scenario  # noqa: E402
from scidmz.tuning.ga import TuneResult, evaluate_gains, fitness_targets, tune  # noqa: E402

SC = load_scenario("small-cubic")


class TrivialLike:
    """A stand-in inverse model: u_hat = B_max - y_d,DTN (absolute units), TensorFlow-free."""

    n_features = 22
    per_unit = False

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return SC.capacity - X[:, 0]


class CountingExecutor(Executor):
    """Wraps a thread pool and records every submission (stands in for a cluster executor)."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=2)
        self._max_workers = 2
        self.submitted = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future:
        self.submitted += 1
        return self.pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, **kwargs: Any) -> None:
        self.pool.shutdown(wait=wait)


def test_fitness_targets_seeded_and_in_range() -> None:
    a = fitness_targets(SC, 40.0, seed=2)
    assert a.shape == (40,)
    assert np.all((a >= 0.3 * SC.capacity) & (a <= 0.7 * SC.capacity))
    np.testing.assert_array_equal(a, fitness_targets(SC, 40.0, seed=2))
    with pytest.raises(ValueError, match="at least 3 periods"):
        fitness_targets(SC, 2.0)


def test_evaluation_is_fair_across_batch_positions() -> None:
    """The same gains give the same IAE wherever they sit in the batch (same plant randomness)."""
    tg = fitness_targets(SC, 8.0, seed=0)
    gains = np.array([[0.3, 0.5, 1.0], [0.0, 0.0, 0.0], [0.3, 0.5, 1.0]])
    iae = evaluate_gains(SC, TrivialLike(), gains, tg, seed=4)
    assert iae.shape == (3,) and np.all(iae > 0)
    assert iae[0] == iae[2]
    alone = evaluate_gains(SC, TrivialLike(), gains[1:2], tg, seed=4)
    assert alone[0] == iae[1]


def test_ga_wiring_batches_executor_and_monotone_curve(tmp_path) -> None:
    ex = CountingExecutor()
    try:
        res = tune(SC, TrivialLike(), generations=3, population=6, parents=3, episode=6.0, seed=1, executor=ex)
    finally:
        ex.shutdown()
    assert isinstance(res, TuneResult) and isinstance(res.gains, Gains)
    # One fitness call per generation (plus the initial population), each the whole batch.
    assert res.info["max_fitness_batch"] == 6
    assert res.info["fitness_calls"] <= 1 + 3
    sizes = res.info["fitness_batch_sizes"]
    assert len(sizes) == res.info["fitness_calls"] and sizes[0] == 6
    # Each batch is split in (up to) one chunk per worker of the executor, all submitted to it.
    assert ex.submitted == sum(min(2, n) for n in sizes)
    assert min(res.gains.kp, res.gains.ki, res.gains.kw) >= 0
    assert len(res.curve) == 3
    assert all(b <= a for a, b in zip(res.curve, res.curve[1:], strict=False))
    assert res.best_iae == pytest.approx(res.curve[-1])
    out = res.save(tmp_path / "tune")
    assert {p.name for p in out.iterdir()} >= {"gains.json", "convergence.csv", "convergence.png", "result.json"}
    assert Gains.load(out / "gains.json") == res.gains
    lines = (out / "convergence.csv").read_text().strip().splitlines()
    assert lines[0].startswith("generation,best_iae") and len(lines) == 4


def test_ga_same_seed_same_result() -> None:
    kw = dict(generations=2, population=4, parents=2, episode=5.0, seed=3)
    a = tune(SC, TrivialLike(), **kw)
    b = tune(SC, TrivialLike(), **kw)
    assert a.gains == b.gains and a.curve == b.curve


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"generations": 0}, "generations"),
        ({"parents": 40}, "parents"),
        ({"mutation": 1.5}, "mutation"),
        ({"gene_space": [{"low": -1.0, "high": 1.0}] * 3}, "gains are >= 0"),
    ],
)
def test_ga_bad_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        tune(SC, TrivialLike(), **kwargs)


def test_several_episodes_per_individual_average_their_iae() -> None:
    tg = fitness_targets(SC, 6.0, seed=1, episodes=2)
    assert tg.shape == (6, 2)
    g = np.array([[0.2, 0.3, 0.5], [0.0, 0.0, 0.0]])
    both = evaluate_gains(SC, TrivialLike(), g, tg, seed=2)
    first = evaluate_gains(SC, TrivialLike(), g, tg[:, :1], seed=2)
    # Episode 0 of the pair is exactly the single-episode run (same seed, same signal).
    assert np.all(both > 0) and both.shape == (2,)
    single0 = evaluate_gains(SC, TrivialLike(), g, tg[:, 0], seed=2)
    np.testing.assert_array_equal(first, single0)
    res = tune(SC, TrivialLike(), generations=1, population=3, parents=2, episode=5.0, episodes=2)
    assert res.info["episodes_per_individual"] == 2


def test_refinement_scores_the_detuned_gains_on_the_plant_and_keeps_the_best() -> None:
    """tuning.refine: the GA's gains x each factor, mean IAE over episodes on the plant, lowest kept."""
    from scidmz.metrics import iae
    from scidmz.plant.base import make_plant
    from scidmz.runner import run_episode
    from scidmz.tuning.refine import REFINE_SEED_OFFSET, refine_gains

    ga = Gains(0.8, 0.9, 1.5, delta_u=0.05)
    logged: list[str] = []
    rr = refine_gains(SC, TrivialLike(), ga, plant="fluid", factors=(1.0, 0.1, 0.0), episodes=2, episode=20.0,
                      seed=3, log=logged.append)
    assert [r["factor"] for r in rr.rows] == [1.0, 0.1, 0.0] and len(logged) == 6
    best = min(rr.rows, key=lambda r: r["iae_mean"])
    assert rr.factor == best["factor"] and rr.gains.kp == pytest.approx(0.8 * best["factor"])
    assert rr.gains.delta_u == 0.05 and rr.gains.limiter == ga.limiter  # only the loop gains are scaled
    assert rr.info["ga_gains"]["kp"] == 0.8 and rr.info["seed"] == 3 + REFINE_SEED_OFFSET
    # Each score is the IAE of an ordinary closed-loop episode with those gains (reproducible).
    from scidmz.policies.rate.mlc import MLCPolicy

    tg = fitness_targets(SC, 20.0, 3 + REFINE_SEED_OFFSET, episodes=2)
    with make_plant("fluid", SC.replace(duration=20.0), batch=1) as pl:
        tr = run_episode(pl, MLCPolicy(TrivialLike(), rr.gains), tg[:, 1:2], seed=3 + REFINE_SEED_OFFSET + 1)[0]
    row = next(r for r in rr.rows if r["factor"] == rr.factor)
    assert row["iae"][1] == pytest.approx(iae(tr.column("target"), tr.column("rate_dtn"), SC.period))
    for bad, match in (({"episodes": 0}, "episodes"), ({"factors": (1.0, -1.0)}, "factors")):
        with pytest.raises(ValueError, match=match):
            refine_gains(SC, TrivialLike(), ga, plant="fluid", episode=20.0, **bad)


def test_tune_with_refinement_writes_the_refined_gains_and_keeps_the_gas(tmp_path) -> None:
    from scidmz.datasets import dataset_path
    from scidmz.models.train import train_model
    from scidmz.tuning.run import tune_from_paths

    pytest.importorskip("keras")
    train_model(str(dataset_path("small-cubic-400s")), str(tmp_path / "m"), epochs=1, folds=0, track=False)
    doc, human = tune_from_paths("small-cubic", str(tmp_path / "m"), str(tmp_path / "g"), generations=2,
                                 population=4, parents=2, episode=20.0, track=False, refine_plant="fluid",
                                 refine_episodes=1, refine_factors=[1.0, 0.5])
    saved = Gains.load(tmp_path / "g" / "gains.json")
    ref = doc["refine"]
    assert "refined on fluid" in human and ref["factor"] in (1.0, 0.5)
    assert saved.kp == pytest.approx(ref["ga_gains"]["kp"] * ref["factor"])
    import json

    info = json.loads((tmp_path / "g" / "gains.json").read_text())["info"]
    assert [c["factor"] for c in info["refine"]["candidates"]] == [1.0, 0.5]
    with pytest.raises(ValueError, match="refine-plant"):
        tune_from_paths("small-cubic", str(tmp_path / "m"), str(tmp_path / "x"), generations=1, population=2,
                        parents=1, episode=20.0, track=False, refine_plant="warp")
