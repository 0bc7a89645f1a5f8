"""The one closed-loop episode runner: a policy drives a plant, recorded as Traces.

Batched: one call runs B plant instances in lock-step, so a GA generation or a
multi-trial experiment is one loop. Alignment (ARCHITECTURE.md): at step k the
policy sees y_0..y_{k-1} and the reset state, decides u_k, the plant applies
it over [kT, (k+1)T) and returns y_k.

``Episode`` is the step-wise form (``reset(seed)``, then ``step(target)`` once
per period) that the daemon drives in real time; ``run_episode`` is the
batched form built on it, with an until-done hook for bounded FCT runs.

Policy kinds (``scidmz.kinds``), each applied through a plant capability
(``plant.base``), checked once when the ``Episode`` is built (one line if the
plant lacks it). A policy is run as a *configuration* of at most one policy
per place (``kinds.policy_places``: a single policy is a configuration of one
member, run exactly as before); every period each member acts through its
capability, host first, then queue and discipline, and u comes last:

- host: the DTN's pacing ``policy.decide(history, target)`` goes to
  ``plant.set_pacing`` before the period (recorded as the ``pacing`` column);
- queue: ``policy.decide(history, target, plant.flows())`` goes to
  ``plant.apply_queues`` before the period;
- discipline: ``policy.configure(scenario)`` is loaded with
  ``plant.set_discipline`` before the plant's reset, and every period the
  weights the target implies with ``plant.set_discipline_weights``;
- rate: u = ``policy.decide(history, target)``.

u is the rate member's decision; without one, the campus rate place keeps its
neutral setting: the host member's ``campus_rate(scenario, target)`` (the
trivial TBF) when there is a host member, the open shaper (u_max) otherwise.
So with a rate policy present, a host policy no longer sets u.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from .kinds import (
    POLICY_KINDS,
    DisciplinePolicy,
    HostPolicy,
    Policy,
    QueuePolicy,
    RatePolicy,
    policy_places,
)
from .plant.base import (
    DisciplinePlant,
    HostPlant,
    Plant,
    QueuePlant,
    StateBatch,
    plant_capabilities,
)
from .state import History, Trace
from .units import check_rates

__all__ = ["Episode", "run_episode", "check_runnable", "check_places"]

#: What a plant lacking a capability is told, per policy kind.
_MISSING = {
    "host": "cannot pace the DTN's streams",
    "queue": "has no queues",
    "discipline": "runs no bottleneck discipline",
}


def check_runnable(plant: Plant, policy: Policy) -> str:
    """The policy's kind, once checked against the plant's capabilities; one-line ValueError otherwise.

    A configuration's kind is its places joined by ``+`` (``host+rate``), each checked (``check_places``).
    """
    return "+".join(check_places(plant, policy))


def check_places(plant: Plant | type, policy: Policy) -> dict[str, Any]:
    """The policy's members by place (``kinds.policy_places``), each kind checked against the plant's
    capabilities; one-line ValueError naming the member and the place the plant lacks.

    ``plant``: a plant, or a plant class (to check before building one)."""
    name = getattr(policy, "name", type(policy).__name__)
    pname = plant.__name__ if isinstance(plant, type) else type(plant).__name__
    places = policy_places(policy)
    caps = plant_capabilities(plant)
    for kind, member in places.items():
        mname = getattr(member, "name", type(member).__name__)
        label = f"'{mname}'" if member is policy else f"'{mname}' (of configuration {name})"
        if kind not in POLICY_KINDS:
            raise ValueError(f"policy {label} declares no kind (kind = {kind!r}; choose from {', '.join(POLICY_KINDS)})")
        if kind not in caps:
            raise ValueError(f"plant '{pname}' {_MISSING[kind]}; {kind} policy {label} needs one "
                             f"(it runs: {', '.join(caps)} policies)")
    return places


class Episode:
    """One episode of ``policy`` on ``plant``, advanced one control period at a time."""

    def __init__(self, plant: Plant, policy: Policy, steps_hint: int = 0, keep: int | None = None) -> None:
        """``keep``: bound the history to the last ``keep`` periods and record no trace (a daemon
        runs for months); None keeps everything for ``traces()``."""
        self.plant = plant
        self.policy = policy
        self.batch = int(plant.batch)
        self._hint = int(steps_hint)
        if keep is not None and keep < 4:
            raise ValueError(f"Episode keep must be at least 4 periods (the regressors look 3 back), got {keep}")
        self.keep = keep
        self.history: History | None = None
        self.times: list[float] = []
        self._extras: dict[str, list[np.ndarray]] = {}
        self._pacing: np.ndarray | None = None
        self.seed: int | None = None
        self.places = check_places(plant, policy)
        self.kind = "+".join(self.places)

    def reset(self, seed: int | None = None) -> StateBatch:
        """Reset plant and policy; returns the reset state (y_{-1})."""
        self.seed = seed
        if "discipline" in self.places:
            # loaded before the reset: the plant builds its discipline state there
            config = cast(DisciplinePolicy, self.places["discipline"]).configure(self.plant.scenario)
            cast(DisciplinePlant, self.plant).set_discipline(config)
        state0 = self.plant.reset(seed)
        self.policy.reset(self.plant.scenario, self.batch)
        self.history = History(state0.y, capacity_hint=self.keep * 4 if self.keep else self._hint)
        self.times = []
        self._extras = {}
        return state0

    def propose(self, target: np.ndarray) -> np.ndarray:
        """The policy's raw decision for the next period, unchecked (B,).

        A host, queue or discipline member's decision is applied to the plant
        here (module docstring); what is returned is u. ``decide`` checks and
        bounds the proposal; the daemon calls ``propose`` itself so that it can
        fall back on a non-finite output instead of stopping.
        """
        if self.history is None:
            raise RuntimeError("Episode.propose() before reset()")
        history, places = self.history, self.places
        tg = np.broadcast_to(np.asarray(target, dtype=np.float64), (self.batch,))
        if "host" in places:
            self._pace(cast(HostPolicy, places["host"]), history, tg)
        if "queue" in places:
            plant = cast(QueuePlant, self.plant)
            plant.apply_queues(cast(QueuePolicy, places["queue"]).decide(history, tg, plant.flows()))
        if "discipline" in places:
            w = cast(DisciplinePolicy, places["discipline"]).weights(self.plant.scenario, tg)
            cast(DisciplinePlant, self.plant).set_discipline_weights(w)
        if "rate" in places:
            return np.asarray(cast(RatePolicy, places["rate"]).decide(history, tg), dtype=np.float64)
        if "host" in places:
            return np.asarray(cast(HostPolicy, places["host"]).campus_rate(self.plant.scenario, tg), dtype=np.float64)
        return np.full(self.batch, self.plant.scenario.u_max)

    def _pace(self, policy: HostPolicy, history: History, target: np.ndarray) -> None:
        pacing = check_rates(policy.decide(history, target), self.batch, 0.0, np.inf,
                             f"host policy '{policy.name}' pacing", clip=False)
        cast(HostPlant, self.plant).set_pacing(pacing)
        self._pacing = pacing

    def decide(self, target: np.ndarray) -> np.ndarray:
        """The next period's u (B,): the policy's proposal, checked (one line on NaN) and clipped."""
        sc = self.plant.scenario
        return check_rates(self.propose(target), self.batch, sc.u_min, sc.u_max, f"policy '{self.policy.name}'")

    def observe(self, u: np.ndarray, state: StateBatch, target: np.ndarray) -> None:
        """Record one period: u applied over it, the state measured at its end, the target it had."""
        if self.history is None:
            raise RuntimeError("Episode.observe() before reset()")
        self.history.append(u, state.y, target)
        if self.keep is not None:
            if len(self.history) >= self.keep * 4:
                self.history = _trim(self.history, self.keep)
            return
        k = len(self.times)
        self.times.append(state.t)
        info = dict(self.plant.info)
        if self._pacing is not None:
            info["pacing"] = self._pacing
        for key, val in info.items():
            arr = np.asarray(val)
            if arr.shape == (self.batch,) and arr.dtype.kind in "fiub":
                self._extras.setdefault(key, [np.full(self.batch, np.nan)] * k).append(arr.astype(np.float64))
        for col in self._extras.values():
            if len(col) < k + 1:  # a key the plant stopped reporting
                col.append(np.full(self.batch, np.nan))

    def step(self, target: np.ndarray | float) -> tuple[StateBatch, np.ndarray]:
        """Decide u for the next period from the history and ``target`` (shape (B,) or scalar), apply it.

        Returns the plant's state after the period and the applied u (B,).
        """
        if self.history is None:
            raise RuntimeError("Episode.step() before reset()")
        tg = np.broadcast_to(np.asarray(target, dtype=np.float64), (self.batch,))
        u = self.decide(tg)
        st = self.plant.step(u)
        self.observe(u, st, tg)
        return st, u

    def traces(self, meta: dict[str, Any] | None = None) -> list[Trace]:
        """One ``Trace`` per instance, with the plant's per-period ground truth as extra columns."""
        if self.history is None:
            raise RuntimeError("Episode.traces() before reset()")
        if self.keep is not None:
            raise RuntimeError("a bounded Episode (keep=...) records no traces")
        n = len(self.times)
        ex = {key: np.vstack(v[:n]) if n else np.empty((0, self.batch)) for key, v in self._extras.items()}
        base = {
            "scenario": self.plant.scenario.to_dict(),
            "policy": self.policy.name,
            "seed": self.seed,
            "plant": type(self.plant).__name__,
            # the simulator's model version (fluid plant); None for real networks
            "plant_model": getattr(self.plant, "model_version", None),
        }
        base.update(meta or {})
        h = self.history
        return [
            Trace.from_arrays(
                np.asarray(self.times), h.y[:, i, :], h.u[:, i], h.target[:, i],
                extra={key: v[:, i] for key, v in ex.items()}, meta={**base, "instance": i},
            )
            for i in range(self.batch)
        ]


def run_episode(
    plant: Plant,
    policy: Policy,
    targets: np.ndarray,
    seed: int | None = None,
    until_done: bool = False,
    progress: bool = False,
    meta: dict[str, Any] | None = None,
    on_period: Callable[[int, Plant], bool | None] | None = None,
) -> list[Trace]:
    """Run ``policy`` on ``plant`` for ``len(targets)`` periods.

    ``targets``: R*_DTN per period, shape (steps,) (same for every instance) or
    (steps, B). With ``until_done`` the episode stops early once every
    instance's DTN transfer has finished (``info['dtn_fct']`` finite), so a
    bounded FCT run costs only what it needs. ``on_period(k, plant)`` is called
    after period k: it may read what the trace does not keep (the per-flow table
    ``plant.flows()``, per-flow ``info`` arrays) and ends the episode by
    returning True. Returns one ``Trace`` per plant instance.
    """
    scenario = plant.scenario
    batch = int(plant.batch)
    tg = np.asarray(targets, dtype=np.float64)
    if tg.ndim == 1:
        tg = np.repeat(tg[:, None], batch, axis=1)
    if tg.ndim != 2 or tg.shape[1] != batch:
        raise ValueError(f"targets must have shape (steps,) or (steps, {batch}), got {tg.shape}")
    for v in (tg.min(initial=0.0), tg.max(initial=0.0)):
        scenario.check_target(float(v))
    steps = tg.shape[0]
    ep = Episode(plant, policy, steps_hint=steps)
    ep.reset(seed)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=steps, desc=f"{policy.name} on {scenario.name} x{batch}", unit="period", leave=False)
    done = np.zeros(batch, dtype=bool)
    try:
        for k in range(steps):
            ep.step(tg[k])
            if bar is not None:
                bar.update(1)
            if on_period is not None and on_period(k, plant):
                break
            if until_done and "dtn_fct" in plant.info:
                done |= np.isfinite(np.asarray(plant.info["dtn_fct"], dtype=np.float64).reshape(-1))
                if done.all():
                    break
    finally:
        if bar is not None:
            bar.close()
    return ep.traces(meta)


def _trim(hist: History, keep: int) -> History:
    """The last ``keep`` periods of ``hist`` as a new History (bounded memory, same last_y/last_u)."""
    n = len(hist)
    out = History(hist.y[n - keep - 1], capacity_hint=keep * 4)
    for j in range(n - keep, n):
        out.append(hist.u[j], hist.y[j], hist.target[j])
    return out
