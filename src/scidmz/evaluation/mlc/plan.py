"""The sizes of the MLC paper's section 4 experiments (``ExperimentPlan``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ...plant.registry import PlantSpec
from ...scenario import Scenario

__all__ = ["ExperimentPlan"]


@dataclass(frozen=True)
class ExperimentPlan:
    """Sizes of the section 4 experiments. Defaults are the paper's (100 trials, 120 s, 10 GB)."""

    trials: int = 100
    duration: float = 120.0  # s, t_N of eq. (3)
    target_low: float = 0.3  # x B_max
    target_high: float = 0.7  # x B_max
    target_hold: float = 30.0  # s between target steps (>= duration: constant per trial)
    skip: float = 0.0  # s of each MRAE trial left out of the metric (0 = the paper's t = 1..t_N)
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

    def __post_init__(self) -> None:
        def need(cond: bool, what: str) -> None:
            if not cond:
                raise ValueError(f"experiment plan: {what}")

        from ...limits import check

        # Upper bounds first (limits.BOUNDS): a count is refused before anything is allocated.
        for key in ("trials", "ns_trials", "short_trials", "ns_max_flows"):
            check(key, getattr(self, key), f"experiment plan: {key}")
        if self.fct_trials is not None:
            check("fct_trials", self.fct_trials, "experiment plan: fct_trials")
        for n in self.ns_values:
            check("ns_value", n, "experiment plan: N_s")
        need(self.trials >= 1, f"trials must be >= 1, got {self.trials}")
        need(self.duration > 0, f"duration must be > 0, got {self.duration}")
        need(0 < self.target_low <= self.target_high <= 1, "need 0 < target_low <= target_high <= 1")
        need(self.target_hold > 0, "target_hold must be > 0")
        need(0 <= self.skip < self.duration, "skip must be in [0, duration)")
        need(0 < self.fct_target <= 1, "fct_target must be in (0, 1] x B_max")
        need(self.transfer > 0, "transfer must be > 0 bytes")
        need(self.fct_trials is None or self.fct_trials >= 1, "fct_trials must be >= 1")
        need(self.fct_max_time is None or self.fct_max_time > 0, "fct_max_time must be > 0")
        need(all(int(n) >= 1 for n in self.ns_values), "every N_s must be >= 1")
        need(self.ns_trials >= 1 and self.short_trials >= 1, "ns_trials and short_trials must be >= 1")
        need(self.short_duration > 0, "short_duration must be > 0")

    @classmethod
    def quick(cls, seed: int = 0) -> ExperimentPlan:
        """Small sizes for tests and ``--quick`` (meant for the small-* scenarios)."""
        return cls(
            trials=4, duration=30.0, target_hold=15.0, transfer=150e6, fct_max_time=120.0,
            ns_values=(1, 10, 100), ns_trials=2, short_duration=30.0, short_trials=2, seed=seed,
        )

    def check_for(self, scenario: Scenario, plant: str | PlantSpec = "fluid") -> None:
        """What this plan asks of ``plant`` on ``scenario``, checked before any trial runs: the plant
        exists, and a batched one stays within ``limits.MAX_BATCH_FLOWS`` (trials x flows)."""
        from ...plant.base import check_batch_flows, plant_spec

        if not plant_spec(plant).realtime:
            check_batch_flows(scenario, max(self.trials, self.fct_trials or 0, self.short_trials))

    def fct_bound(self, scenario: Scenario) -> float:
        """Seconds an FCT trial may run before its transfer counts as unfinished."""
        if self.fct_max_time is not None:
            return self.fct_max_time
        from ..fct import ideal_fct

        ideal = ideal_fct(self.transfer, self.fct_target * scenario.capacity)
        return 4.0 * ideal + 60.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ns_values"] = list(self.ns_values)
        return d
