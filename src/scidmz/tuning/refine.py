"""Refining the GA's gains on the real plant: detuning along the GA's ray (ours, not in the paper).

The paper tunes (Kp, Ki, Kw) with the GA on the plant it evaluates on (section 3.3).
scidmz runs the GA on the fluid plant, where a generation costs seconds; on the netns
testbed one 120 s episode costs 120 s, so a GA there is out of reach. Measured
(reports/mlc-netns/analysis.md): the fluid GA's best gains for the ``testbed`` scenario
(Kp, Ki, Kw = 0.94, 1.04, 1.72) made the MLC lose to the trivial TBF on real kernel
CUBIC (MRAE -18.8 %, 10 pairs), while an earlier model of the same chain with gains five
to ten times smaller (0.18, 0.05, 0.16) won a 3-pair pilot (MRAE +16 %). The kernel's per-period DTN rate is noisier than the fluid plant's at this buffer
(packet-level queue fluctuations the fluid model does not have, reports/mlc/regime), and
gains a GA fits to a cleaner plant feed that noise back into u.

``refine_gains`` therefore scores a short list of candidates on the real plant and keeps
the best: the GA's gains scaled by each of ``factors`` (1 = the GA's own), i.e. a
one-dimensional search that keeps the ratios the GA chose (the PI's zero Ki/Kp and the
back-calculation ratio Kw/Ki) and only detunes the loop, the classic way to make a
controller designed on a model robust on the real process. Fitness is the GA's (IAE,
eq. 2, over the same kind of stepping target), averaged over ``episodes`` episodes whose
targets and plant seeds are disjoint from the evaluation's trials. Episodes run
episode-major (every candidate's episode 1, then every candidate's episode 2, ...), so a
slow change of the machine's load hits all candidates alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..policies.rate.antiwindup import Gains
from ..scenario import Scenario

__all__ = ["RefineResult", "refine_gains", "DETUNE_FACTORS", "REFINE_SEED_OFFSET"]

#: Scale factors tried along the GA's ray (ours): a decade in four steps plus the GA's own.
DETUNE_FACTORS: tuple[float, ...] = (1.0, 0.3, 0.1, 0.03)
#: Refinement episodes use seed + this for targets and plant, apart from the evaluation's seeds.
REFINE_SEED_OFFSET = 2_000_000


@dataclass
class RefineResult:
    """The chosen gains and every candidate's mean IAE (bit) and starved periods on the plant."""

    gains: Gains
    factor: float
    rows: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


def refine_gains(
    scenario: Scenario,
    model: Any,
    gains: Gains,
    plant: str = "netns",
    factors: Sequence[float] = DETUNE_FACTORS,
    episodes: int = 2,
    episode: float = 120.0,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> RefineResult:
    """Score ``gains`` x each factor on ``plant`` (mean IAE over ``episodes``); return the best.

    ``model`` None refines ``pi``'s gains (the loop without the inverse model).
    """
    from ..metrics import iae
    from ..plant.base import make_plant
    from ..runner import run_episode
    from .ga import _as_predictor, fitness_targets, loop_policy

    if episodes < 1:
        raise ValueError(f"refinement episodes must be >= 1, got {episodes}")
    facs = [float(f) for f in factors]
    if not facs or any(not np.isfinite(f) or f < 0 for f in facs):
        raise ValueError(f"refinement factors must be finite numbers >= 0, got {list(factors)}")
    predictor = _as_predictor(model)
    rs = int(seed) + REFINE_SEED_OFFSET
    targets = fitness_targets(scenario, episode, rs, episodes=episodes).reshape(-1, episodes)
    sc = scenario.replace(duration=targets.shape[0] * scenario.period)
    cands = [replace(gains, kp=gains.kp * f, ki=gains.ki * f, kw=gains.kw * f) for f in facs]
    scores = np.zeros((len(cands), episodes))
    starved = np.zeros((len(cands), episodes), dtype=int)
    # One plant for every episode, as the evaluation core runs its trials: an episode's reset returns
    # it to its default, and a testbed built per episode cost more than a short episode itself.
    with make_plant(plant, sc, batch=1) as pl:
        for e in range(episodes):
            for i, g in enumerate(cands):
                tr = run_episode(pl, loop_policy(predictor, g), targets[:, e : e + 1], seed=rs + e)[0]
                scores[i, e] = iae(tr.column("target"), tr.column("rate_dtn"), sc.period)
                if "starved" in tr.columns:
                    starved[i, e] = int(np.asarray(tr.column("starved"), dtype=bool).sum())
                if log is not None:
                    log(f"   refine on {plant}: factor {facs[i]:g} episode {e + 1}/{episodes}: "
                        f"IAE {scores[i, e] / 1e6:.1f} Mbit, {starved[i, e]} starved periods")
    mean = scores.mean(axis=1)
    mean[~np.isfinite(mean)] = np.inf
    best = int(np.argmin(mean))
    rows = [{"factor": facs[i], "kp": c.kp, "ki": c.ki, "kw": c.kw, "iae_mean": float(mean[i]),
             "iae": [float(v) for v in scores[i]], "starved_periods": int(starved[i].sum())}
            for i, c in enumerate(cands)]
    info = {"plant": plant, "episodes": int(episodes), "episode": float(episode), "seed": rs,
            "factors": facs, "ga_gains": gains.to_dict()}
    return RefineResult(gains=cands[best], factor=facs[best], rows=rows, info=info)
