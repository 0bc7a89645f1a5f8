"""The sizes of the MLC paper's section 4 experiments (``ExperimentPlan``), as the core's trial plan.

The trials themselves are the evaluation core's (``leaderboard.plan.LeaderboardPlan``: seeds,
target signals, the FCT bound, the validity rule): ``core`` turns these sizes into that plan, and
the plan is built, so checked, when this one is. What only the MLC study has is its N_s sweep
(section 4.4, Table 5: ``ns_values``, ``ns_trials``, ``ns_max_flows``) and its paper-sized
defaults (100 trials of 120 s, a 10 GB transfer).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ...plant.registry import PlantSpec
from ...scenario import Scenario
from ..leaderboard.plan import LeaderboardPlan
from ..leaderboard.validity import ValidityRule

__all__ = ["ExperimentPlan"]


@dataclass(frozen=True)
class ExperimentPlan:
    """Sizes of the section 4 experiments. Defaults are the paper's (100 trials, 120 s, 10 GB)."""

    trials: int = 100
    duration: float = 120.0  # s, t_N of eq. (3)
    target_low: float = 0.3  # x B_max
    target_high: float = 0.7  # x B_max
    target_hold: float = 30.0  # s between target steps (>= duration: constant per trial)
    fct_target: float = 0.5  # x B_max, R*_DTN during the FCT, sweep and short-flow tests
    transfer: float = 10e9  # bytes, the DTN transfer of sections 4.3/4.4
    fct_trials: int | None = None  # None -> trials
    fct_max_time: float | None = None  # s; None -> 4 x the transfer time at R*_DTN, plus 60 s
    ns_values: tuple[int, ...] = (1, 10, 100, 1000, 10000)
    ns_trials: int = 10
    ns_max_flows: int = 20_000  # trials x N_s above this is cut to fewer trials (plant cost)
    short_duration: float = 600.0  # s, section 4.5 captured 600 s
    short_trials: int = 4
    seed: int = 0
    #: Re-runs of a trial a disturbed machine made invalid (the core's ``ValidityRule.max_reruns``);
    #: None: the core's default. Fixed before the run, like every size here.
    max_reruns: int | None = None
    #: Whether a trial the validity rule finds invalid for every policy is left out of the statistics
    #: (the leaderboard's rule). Ours: ``--quick`` on a testbed keeps them: it checks the stages on a
    #: machine that may be busy (CI), it is not evidence.
    exclude_invalid: bool = True

    def __post_init__(self) -> None:
        from ...limits import check

        # Upper bounds first (limits.BOUNDS): a count is refused before anything is allocated.
        for key in ("trials", "ns_trials", "short_trials", "ns_max_flows"):
            check(key, getattr(self, key), f"experiment plan: {key}")
        if self.fct_trials is not None:
            check("fct_trials", self.fct_trials, "experiment plan: fct_trials")
        for n in self.ns_values:
            check("ns_value", n, "experiment plan: N_s")
        if not all(int(n) >= 1 for n in self.ns_values):
            raise ValueError("experiment plan: every N_s must be >= 1")
        if self.ns_trials < 2:
            raise ValueError(f"experiment plan: ns_trials must be >= 2 (a paired test needs two trials), "
                             f"got {self.ns_trials}")
        self.core()  # the trial plan's own checks (counts, shares, seconds, bytes), once

    @classmethod
    def quick(cls, seed: int = 0) -> ExperimentPlan:
        """Small sizes for tests and ``--quick`` (meant for the small-* scenarios)."""
        return cls(
            trials=4, duration=30.0, target_hold=15.0, transfer=150e6, fct_max_time=120.0,
            ns_values=(1, 10, 100), ns_trials=2, short_duration=30.0, short_trials=2, seed=seed,
        )

    def core(self, experiments: tuple[str, ...] = ("mrae", "fct", "utilization", "short"),
             fct_trials: int | None = None) -> LeaderboardPlan:
        """The core's trial plan of these sizes for ``experiments`` (``fct_trials``: another FCT
        count, the sweep's per N_s)."""
        return LeaderboardPlan(
            trials=self.trials, fct_trials=fct_trials or self.fct_trials or self.trials,
            short_trials=self.short_trials, experiments=experiments, duration=self.duration,
            target_low=self.target_low, target_high=self.target_high, target_hold=self.target_hold,
            fct_target=self.fct_target, transfer=self.transfer, fct_max_time=self.fct_max_time,
            short_duration=self.short_duration, seed=self.seed,
            validity=ValidityRule() if self.max_reruns is None else ValidityRule(max_reruns=self.max_reruns))

    def check_for(self, scenario: Scenario, plant: str | PlantSpec = "fluid") -> None:
        """What this plan asks of ``plant`` on ``scenario``, checked before any trial runs: the plant
        exists, and a batched one stays within ``limits.MAX_BATCH_FLOWS`` (trials x flows)."""
        from ...plant.base import check_batch_flows, plant_spec
        from ..leaderboard.trialunits import CHUNK

        if not plant_spec(plant).realtime:
            # The core runs at most CHUNK trials in one batched plant.
            check_batch_flows(scenario, min(CHUNK, max(self.trials, self.fct_trials or 0, self.short_trials)))

    def fct_bound(self, scenario: Scenario) -> float:
        """Seconds an FCT trial may run before its transfer counts as unfinished (the core's bound)."""
        return self.core().fct_bound(scenario)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ns_values"] = list(self.ns_values)
        return d
