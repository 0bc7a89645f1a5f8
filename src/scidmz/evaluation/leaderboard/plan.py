"""The sizes of a leaderboard run (``LeaderboardPlan``) and their bounds.

Trial i of every policy has seed ``seed + i`` and the same target signal: column i of
the MLC evaluation's ``mrae_targets`` (pseudo-random steps in [0.3, 0.7] x B_max held
30 s, 120 s trials; ``--quick``: 30 s). The FCT trials move a fixed DTN transfer at
0.5 x B_max until it is done, bounded (``fct_bound``); their utilisation rho is taken
while the transfer runs (the MLC paper's Fig. 12). Short-flow trials add one Weibull
short-flow sender beside the long flows; their metric is the trial's median
short-flow FCT. Transfer sizes (ours, as the existing reports): 10 GB on the fluid
plant (the MLC paper's section 4.3), 300 MB on a real-time plant (reports/mlc-netns:
the testbed runs at 100 Mbit/s), 150 MB with ``--quick``. The plan also carries its
validity rule (``validity.ValidityRule``), fixed before the run like every size here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ...scenario import Scenario
from .validity import VALIDITY_KEYS, ValidityRule

__all__ = ["LeaderboardPlan", "ideal_fct", "DEFAULT_MAX_STARVED", "EXPERIMENTS", "UNITS", "METRICS", "MAX_TRIALS", "MAX_POLICIES", "MAX_SEED",
           "MAX_SECONDS", "MAX_TRANSFER", "PLAN_KEYS", "make_plan", "parse_experiments", "unit_of",
           "split_plan_overrides", "parse_policy_trials", "seed_block", "check_tuning_apart"]

#: What a leaderboard can rank, in report order.
EXPERIMENTS: tuple[str, ...] = ("mrae", "fct", "utilization", "short")
#: The trials that give them: the FCT trials also give the utilisation.
UNITS: tuple[str, ...] = ("mrae", "fct", "short")
#: experiment -> (ledger metric, which way is better)
METRICS: dict[str, tuple[str, str]] = {
    "mrae": ("mrae", "lower"),
    "fct": ("fct", "lower"),
    "utilization": ("utilization", "higher"),
    "short": ("short_fct_median", "lower"),
}
#: The legacy starvation rule's threshold for ledgers whose plan records none (``validity.LegacyStarvation``).
DEFAULT_MAX_STARVED = 0.05
#: Bounds on every count, checked before any work, so a typo cannot allocate or run for days (docs/safety.md).
MAX_TRIALS = 10_000
MAX_POLICIES = 16
MAX_SEED = 2**31 - 1
MAX_SECONDS = 86_400.0  # one trial at most a day
MAX_TRANSFER = 1e13  # bytes (10 TB)
#: ``--set plan.KEY=VALUE``: the plan's sizes a command line may change, and how each is read.
PLAN_KEYS: dict[str, str] = {"duration": "time", "target_low": "share", "target_high": "share",
                             "target_hold": "time", "fct_target": "share", "transfer": "size",
                             "fct_max_time": "time", "short_duration": "time", **VALIDITY_KEYS}


def ideal_fct(transfer: float, share: float, capacity: float) -> float:
    """Seconds the FCT trial's transfer (payload bytes) takes at exactly its target, ``share`` x
    ``capacity`` (bit/s of frames): ``evaluation.fct.ideal_fct``, the MLC study's formula too."""
    from ..fct import ideal_fct as ideal

    return ideal(transfer, share * capacity)


def seed_block(seed: int, n: int) -> range:
    """The plant seeds of ``n`` trials from ``seed`` (trial i: ``seed + i``; its target is drawn from
    (``seed``, i) alone, so a block of other seeds also has other targets)."""
    return range(int(seed), int(seed) + max(int(n), 0))


def check_tuning_apart(evaluation: range, **tuning: range) -> None:
    """Tuning apart from testing: each named block of tuning or selection seeds (GA fitness episodes, a
    study's selection trials) must share no seed with the evaluation's trials, or a configuration
    would be chosen on the trials it is then judged on. One-line ValueError naming the overlap."""
    for name, block in tuning.items():
        both = range(max(block.start, evaluation.start), min(block.stop, evaluation.stop))
        if len(both):
            raise ValueError(f"plan: the {name} seeds [{block.start}, {block.stop}) overlap the evaluation seeds "
                             f"[{evaluation.start}, {evaluation.stop}) at seed {both.start}; tune and select on "
                             "seeds apart from the trials they are judged on")


def unit_of(experiment: str) -> str:
    """The trial kind (``UNITS``) that gives ``experiment``."""
    return "fct" if experiment == "utilization" else experiment


def parse_experiments(spec: str | None, plant: str) -> tuple[str, ...]:
    """``mrae,fct`` -> ('mrae', 'fct'); None: all four on the fluid plant, short flows left out on a
    real-time plant (they are asked for there). One line for an unknown name, and for an empty list
    (``--experiments ""`` used to run everything, the opposite of what it says)."""
    from ...plant.base import plant_entry

    if spec is not None and not spec.replace(",", "").strip():
        raise ValueError(f"--experiments {spec!r}: no experiment named (choose from all, {', '.join(EXPERIMENTS)})")
    if spec is None or spec.strip() == "all":
        return EXPERIMENTS if not plant_entry(plant).realtime or spec == "all" else EXPERIMENTS[:3]
    items = [s.strip() for s in spec.split(",") if s.strip()]
    bad = [s for s in items if s not in EXPERIMENTS]
    if bad or not items:
        raise ValueError(f"--experiments: unknown experiment {bad[0] if bad else spec!r} "
                         f"(choose from {', '.join(EXPERIMENTS)})")
    return tuple(e for e in EXPERIMENTS if e in items)


@dataclass(frozen=True)
class LeaderboardPlan:
    """How many trials of what; everything a resumed run must share with the ledger."""

    trials: int  # MRAE trials per policy
    fct_trials: int  # FCT / utilisation trials per policy
    short_trials: int  # short-flow trials per policy
    experiments: tuple[str, ...] = EXPERIMENTS
    duration: float = 120.0  # s per MRAE trial (t_N of the MLC paper's eq. (3))
    target_low: float = 0.3  # x B_max
    target_high: float = 0.7  # x B_max
    target_hold: float = 30.0  # s between target steps
    fct_target: float = 0.5  # x B_max during FCT and short-flow trials
    transfer: float = 10e9  # bytes of payload, the DTN transfer of an FCT trial
    fct_max_time: float | None = None  # s; None: 4 x the transfer at the target + 60 s
    short_duration: float = 120.0  # s per short-flow trial
    seed: int = 0
    #: fewer trials for some policies: (name, MRAE and short-flow trials, FCT trials), each at most
    #: the plan's count; trials 0..n-1 of such a policy are paired with the same trials of the others
    policy_trials: tuple[tuple[str, int, int], ...] = ()
    #: The validity rule, fixed before the run and recorded in the ledger header with the plan (a
    #: resume under another rule is refused): a trial is invalid for every policy when any policy's
    #: unit of it ran on a disturbed machine, judged from signals no policy moves (``validity``),
    #: never from its outcome; an invalid trial is run again.
    validity: ValidityRule = field(default_factory=ValidityRule)
    #: The rule of ledgers written before ``validity``: a trial was invalid when any unit's starved
    #: share exceeded this. None in new plans: the starved share is evidence, not validity
    #: (``validity`` module docstring: it depends on what the policy did).
    max_starved: float | None = None

    def __post_init__(self) -> None:
        for name in ("trials", "fct_trials", "short_trials"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not 2 <= v <= MAX_TRIALS:
                raise ValueError(f"--{name.replace('_', '-')} must be a whole number in [2, {MAX_TRIALS}] "
                                 f"(a paired test needs two trials), got {v!r}")
        if not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED - MAX_TRIALS:
            raise ValueError(f"--seed must be in [0, {MAX_SEED - MAX_TRIALS}], got {self.seed!r}")
        bad = [e for e in self.experiments if e not in EXPERIMENTS]
        if bad or not self.experiments:
            raise ValueError(f"leaderboard plan: unknown experiments {bad or '(none)'}")
        for key in ("duration", "target_hold", "short_duration", "fct_max_time"):
            v = getattr(self, key)
            if v is not None and not 0 < v <= MAX_SECONDS:
                raise ValueError(f"plan.{key} must be in (0, {MAX_SECONDS:g}] s, got {v!r}")
        if not 0 < self.target_low <= self.target_high <= 1:
            raise ValueError("plan: need 0 < target_low <= target_high <= 1 (shares of B_max)")
        if not 0 < self.fct_target <= 1:
            raise ValueError(f"plan.fct_target must be a share of B_max in (0, 1], got {self.fct_target!r}")
        if not 0 < self.transfer <= MAX_TRANSFER:
            raise ValueError(f"plan.transfer must be in (0, {MAX_TRANSFER:g}] bytes, got {self.transfer!r}")
        if self.max_starved is not None and not (
                isinstance(self.max_starved, int | float) and 0.0 <= self.max_starved <= 1.0):
            raise ValueError(f"--max-starved must be a share in [0, 1], got {self.max_starved!r}")
        if not isinstance(self.validity, ValidityRule):
            raise ValueError(f"plan.validity must be a ValidityRule, got {self.validity!r}")
        self._check_policy_trials()

    def _check_policy_trials(self) -> None:
        seen: set[str] = set()
        for item in self.policy_trials:
            name, n, m = item
            if name in seen:
                raise ValueError(f"--policy-trials: {name} given twice")
            seen.add(name)
            for v, most, what in ((n, self.trials, "--trials"), (m, self.fct_trials, "--fct-trials")):
                if not isinstance(v, int) or isinstance(v, bool) or not 2 <= v <= most:
                    raise ValueError(f"--policy-trials: {name}'s counts must be whole numbers in [2, {what} = "
                                     f"{most}] (a paired test needs two trials), got {v!r}")

    @property
    def units(self) -> tuple[str, ...]:
        """The trial kinds this plan runs, in ``UNITS`` order."""
        wanted = {unit_of(e) for e in self.experiments}
        return tuple(u for u in UNITS if u in wanted)

    def count(self, unit: str, policy: str | None = None) -> int:
        """Trials of one unit kind: the plan's (the most any policy runs), or ``policy``'s own."""
        n = {"mrae": self.trials, "fct": self.fct_trials, "short": self.short_trials}[unit]
        for name, mrae_n, fct_n in self.policy_trials:
            if name == policy:
                return min(n, fct_n if unit == "fct" else mrae_n)
        return n

    def fct_bound(self, scenario: Scenario) -> float:
        """Seconds an FCT trial may run before its transfer counts as unfinished."""
        if self.fct_max_time is not None:
            return self.fct_max_time
        return 4.0 * ideal_fct(self.transfer, self.fct_target, scenario.capacity) + 60.0

    def variant(self, scenario: Scenario, unit: str) -> Scenario:
        """The scenario one kind of trial runs: unlimited DTN (MRAE), the transfer (FCT), one
        short-flow sender (short)."""
        if unit == "mrae":
            return scenario.replace(duration=self.duration, dtn={"transfer": None})
        if unit == "fct":
            return scenario.replace(duration=self.fct_bound(scenario), dtn={"transfer": self.transfer})
        return scenario.replace(duration=self.short_duration, dtn={"transfer": None},
                                campus={"short_flow_senders": 1})

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["experiments"] = list(self.experiments)
        d["validity"] = self.validity.to_dict()
        if self.max_starved is None:
            d.pop("max_starved")
        # Left out when unused: a plan without per-policy counts keeps the header it always had.
        d.pop("policy_trials")
        if self.policy_trials:
            d["policy_trials"] = {name: [n, m] for name, n, m in self.policy_trials}
        return d


def split_plan_overrides(items: list[str] | None) -> tuple[list[str], dict[str, float]]:
    """``--set`` items -> (the rest, the plan's ``plan.KEY=VALUE`` in SI units); one line if unknown."""
    import math

    from ...scenario import parse_override
    from ...units import parse_size, parse_time

    rest, plan = [], {}
    for item in items or []:
        if not item.strip().startswith("plan."):
            rest.append(item)
            continue
        key, val = parse_override(item.strip()[len("plan."):])
        how = PLAN_KEYS.get(key)
        if how is None:
            raise ValueError(f"--set plan.{key}: unknown plan key (choose from {', '.join(PLAN_KEYS)})")
        what = f"plan.{key}"
        v = parse_time(val, what) if how == "time" else parse_size(val, what) if how == "size" else val
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise ValueError(f"--set {what}: expected a finite number, got {val!r}")
        if how == "count" and v != int(v):
            raise ValueError(f"--set {what}: expected a whole number, got {val!r}")
        plan[key] = int(v) if how == "count" else float(v)
    return rest, plan


def parse_policy_trials(spec: str | None) -> tuple[tuple[str, int, int], ...]:
    """``--policy-trials jenks=10/5,abc=10`` -> (("jenks", 10, 5), ("abc", 10, 10)): N MRAE (and
    short-flow) trials, M FCT trials (M defaults to N). One line for a malformed item."""
    out = []
    for item in (s.strip() for s in (spec or "").split(",")):
        if not item:
            continue
        name, eq, counts = item.partition("=")
        n, _, m = counts.partition("/")
        try:
            out.append((name.strip(), int(n), int(m or n)))
        except ValueError:
            raise ValueError(f"--policy-trials: expected NAME=N or NAME=N/M (MRAE/FCT trials), got {item!r}") from None
        if not eq or not name.strip():
            raise ValueError(f"--policy-trials: expected NAME=N or NAME=N/M (MRAE/FCT trials), got {item!r}")
    return tuple(out)


def make_plan(plant: str, trials: int | None, fct_trials: int | None, experiments: tuple[str, ...],
              quick: bool = False, seed: int = 0, overrides: dict[str, float] | None = None,
              policy_trials: tuple[tuple[str, int, int], ...] = (),
              max_starved: float | None = None) -> LeaderboardPlan:
    """The plan of a command line: ``--quick`` sizes, per-plant transfer, counts defaulting to ``trials``
    (4 with ``--quick``, else 50 on the fluid plant, 20 on a real-time one), then ``overrides``
    (``--set plan.KEY=VALUE``, ``split_plan_overrides``) and fewer trials for some policies
    (``--policy-trials``, ``parse_policy_trials``). The validity rule's thresholds come from
    ``overrides`` too (``plan.max_cpu_pressure`` ...; ``validity.VALIDITY_KEYS``). ``max_starved``: only
    to rebuild a plan of a ledger written under the legacy starvation rule."""
    from ...plant.base import plant_entry, plant_names

    entry = plant_entry(plant)
    if not entry.replays:
        # Paired trials need trial i's traffic played again for every policy; a live network plays none.
        raise ValueError(f"--plant {plant}: the leaderboard runs paired trials, each replaying the scenario's "
                         f"traffic for every policy, and the {plant} plant plays no scenario (choose from "
                         f"{', '.join(n for n in plant_names() if plant_entry(n).replays)})")
    realtime = entry.realtime
    n = trials if trials is not None else (4 if quick else (20 if realtime else 50))
    kw: dict[str, Any] = {}
    if quick:
        kw = {"duration": 30.0, "short_duration": 30.0, "transfer": 150e6}
    elif realtime:
        kw = {"transfer": 300e6}
    over = dict(overrides or {})
    rule = ValidityRule(**{k: over.pop(k) for k in list(over) if k in VALIDITY_KEYS})
    return LeaderboardPlan(trials=n, fct_trials=fct_trials if fct_trials is not None else n, short_trials=n,
                           experiments=experiments, seed=seed, policy_trials=tuple(policy_trials),
                           max_starved=None if max_starved is None else float(max_starved), validity=rule,
                           **{**kw, **over})
