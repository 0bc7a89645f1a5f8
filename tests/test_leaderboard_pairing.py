"""Pairing that cannot break: trial i's target, seed and campus traffic depend on (plan seed, i) alone.

A re-check of a 20-trial run ran 10 trials, and ``signals.random_steps`` drew its (levels x trials)
matrix row-major, so none of the 10 targets matched the first run's. These tests run the same plan
at two sizes and require the shared trials to be identical, target by target and number by number.
"""

from __future__ import annotations

import numpy as np
import pytest

from scidmz.evaluation.leaderboard.ledger import Ledger
from scidmz.evaluation.leaderboard.plan import LeaderboardPlan
from scidmz.evaluation.leaderboard.trialunits import run_batched, target_hashes, targets
from scidmz.policies.registry import make_policy
from scidmz.scenario import load_scenario
from scidmz.signals import random_steps, signal_sha256, trial_steps


def _plan(n: int, **kw: float) -> LeaderboardPlan:
    return LeaderboardPlan(trials=n, fct_trials=n, short_trials=n, experiments=("mrae",), duration=6.0,
                           target_hold=2.0, seed=11, **kw)


def test_trial_steps_column_i_is_independent_of_the_trial_count() -> None:
    a = trial_steps(50, 1.0, 2.0, hold=5, seed=3, trials=10)
    b = trial_steps(50, 1.0, 2.0, hold=5, seed=3, trials=20)
    assert np.array_equal(a, b[:, :10])
    assert np.array_equal(b[:, 10:], trial_steps(50, 1.0, 2.0, hold=5, seed=3, trials=10, first=10))
    assert len({signal_sha256(b[:, i]) for i in range(20)}) == 20  # one pattern per trial
    # the old batched draw is what broke the re-check: its column 0 moves with the batch size
    assert not np.array_equal(random_steps(50, 1.0, 2.0, 5, 3, batch=10)[:, 0],
                              random_steps(50, 1.0, 2.0, 5, 3, batch=20)[:, 0])


def test_the_plans_targets_and_their_hashes_share_trials_across_sizes() -> None:
    sc = load_scenario("paper-cubic")
    small, big = _plan(10), _plan(20)
    t10, t20 = targets("mrae", small.variant(sc, "mrae"), small), targets("mrae", big.variant(sc, "mrae"), big)
    assert t10.shape[1] == 10 and t20.shape[1] == 20
    assert np.array_equal(t10, t20[:, :10])
    h10, h20 = target_hashes(small, sc), target_hashes(big, sc)
    assert h10["mrae"] == h20["mrae"][:10] and len(h20["mrae"]) == 20
    assert h10["mrae"][3] == signal_sha256(t10[:, 3])
    assert target_hashes(_plan(10, target_high=0.8), sc)["mrae"][0] != h10["mrae"][0]


@pytest.mark.parametrize("sizes", [(2, 4)])
def test_the_same_plan_at_two_sizes_gives_identical_shared_trials(tmp_path, sizes) -> None:
    """A real fluid run of each size: the shared trials' seeds, targets and every metric are equal."""
    sc = load_scenario("paper-cubic")
    lines = {}
    for n in sizes:
        plan = _plan(n)
        (tmp_path / str(n)).mkdir()
        with Ledger.open(tmp_path / str(n), {"plan": plan.to_dict()}, resume=False) as led:
            run_batched(sc, {"trivial": make_policy("trivial")}, plan, led)
            lines[n] = {i: led.done[("mrae", "trivial", i)] for i in range(n)}
    few, many = sizes
    for i in range(few):
        a, b = lines[few][i], lines[many][i]
        assert a["seed"] == b["seed"] == 11 + i
        assert a["metrics"] == b["metrics"]  # same target, same campus traffic: the same numbers
    assert lines[many][few]["metrics"]["mean_target"] != lines[many][0]["metrics"]["mean_target"]


def test_a_resume_onto_other_targets_is_refused_in_one_line(tmp_path) -> None:
    head = {"plan": _plan(2).to_dict(), "targets": {"mrae": ["aa", "bb"]}}
    with Ledger.open(tmp_path, head, resume=False) as led:
        led.append("mrae", "trivial", 0, {"seed": 11, "metrics": {"mrae": 0.1}})
    with pytest.raises(ValueError, match=r"targets\.mrae\[1\]: \"bb\" in the ledger, \"cc\" now") as e:
        Ledger.open(tmp_path, {**head, "targets": {"mrae": ["aa", "cc"]}}, resume=True, allow_drift=True)
    assert "\n" not in str(e.value)
    Ledger.open(tmp_path, head, resume=True).close()  # the same targets resume
