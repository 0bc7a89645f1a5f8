"""Conformance checks for plants and policies: ``check_plant`` and ``check_policy``.

In the spirit of scikit-learn's ``check_estimator`` and gymnasium's
``check_env``: each function runs the contract of ARCHITECTURE.md
("Interfaces", "Four places to act") on one object and raises
``ConformanceError`` (an ``AssertionError``) naming the failed check at the
first violation; on success it returns the names of the checks it ran. Every
built-in plant and policy passes them in CI (``tests/test_conformance.py``).

A third party checks their own plant or policy from their own tests::

    from scidmz.conformance import check_plant, check_policy
    from scidmz.policies.registry import register_policy

    def test_my_plant_conforms():
        check_plant(lambda scenario, batch: MyPlant(scenario, batch=batch), "small-cubic")

    def test_my_policy_conforms():
        register_policy("mine", "rate", MyPolicy)  # a policy is checked under its registered name
        check_policy(MyPolicy(), "small-cubic")

``check_plant(make, scenario)``: ``make(scenario, batch)`` builds the plant.
Checked: the ``Plant`` protocol's members; ``reset``/``step`` for batch 1 and
B (``batches``), with a scalar and a (B,) u; ``StateBatch`` of shape (B, 7)
whose values are finite and >= 0, or flagged stale (``info["stale_<field>"]``);
a non-finite u refused with ``ValueError``; ``info``'s arrays with a leading
axis of B; ``flows()``: B tables with ``plant.base.FLOW_COLUMNS`` of equal
length; the same seed giving the same trace (``simulated=True``); every
capability the plant declares (``plant.base.plant_capabilities``) actually
working through the episode runner; ``close`` twice; the context manager.
A real-time plant (netns, hardware) is checked with ``batches=(1,)`` and
``simulated=False``.

``check_policy(policy, scenario)``: its name registered with its kind; the
members of its kind's Protocol (``scidmz.kinds``); ``reset``/decisions for
batch 1 and 3 on a history recorded from the fluid plant; outputs of the
right shape, finite, and for a rate policy (and a host policy's campus rate)
within [u_min, u_max]; the same decision for the same history after a reset;
a one-line ``ValueError`` from the runner on a plant lacking the capability
its kind needs; and an episode through the runner on the fluid plant. A
configuration (``scidmz.policies.configuration``, several policies at most one
per place) is checked member by member (each check named ``MEMBER:check``),
then as a whole: its canonical name (registered members, host-rate-queue-
discipline order, the name parsing back to itself), the runner's refusal on a
plant lacking one of its places, and an episode on the fluid plant with each
member's effect recorded (a host member's ``pacing`` column).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from .kinds import (
    POLICY_KINDS,
    DisciplinePolicy,
    HostPolicy,
    QueuePolicy,
    RatePolicy,
    policy_places,
)
from .plant.base import (
    CAPABILITIES,
    FLOW_COLUMNS,
    Plant,
    StateBatch,
    capability_methods,
    make_plant,
    plant_capabilities,
)
from .policies.registry import policy_kind
from .runner import Episode, run_episode
from .scenario import Scenario, load_scenario
from .state import N_STATE, STATE_FIELDS, History

__all__ = ["check_plant", "check_policy", "ConformanceError"]

PlantFactory = Callable[[Scenario, int], Any]
_KIND_PROTOCOL: dict[str, type] = {"rate": RatePolicy, "host": HostPolicy, "queue": QueuePolicy,
                                   "discipline": DisciplinePolicy}


class ConformanceError(AssertionError):
    """A plant or a policy broke its contract; the message names the check and what was wrong."""


class _Checks:
    """Runs named checks; any failure inside one becomes a ``ConformanceError`` naming it."""

    def __init__(self, subject: str) -> None:
        self.subject = subject
        self.passed: list[str] = []

    @contextmanager
    def check(self, name: str) -> Iterator[None]:
        try:
            yield
        except ConformanceError:
            raise
        except Exception as exc:
            detail = str(exc).strip().splitlines()
            raise ConformanceError(f"{self.subject}: check '{name}' failed: {type(exc).__name__}: "
                                   f"{detail[0] if detail else ''}") from exc
        self.passed.append(name)


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)


def _as_scenario(scenario: Scenario | str) -> Scenario:
    return scenario if isinstance(scenario, Scenario) else load_scenario(scenario)


# -- plants ------------------------------------------------------------------------------------


def _plant_members() -> tuple[str, ...]:
    """The ``Plant`` protocol's members: its annotated attributes, methods and properties."""
    own = [n for n, v in vars(Plant).items()
           if not n.startswith("_") and (callable(v) or isinstance(v, property))]
    return (*Plant.__annotations__, *own, "__enter__", "__exit__")


def _check_state(st: Any, batch: int, info: Mapping[str, Any], t_prev: float | None) -> float:
    _need(isinstance(st, StateBatch), f"reset/step must return a StateBatch, got {type(st).__name__}")
    _need(st.y.shape == (batch, N_STATE), f"StateBatch.y has shape {st.y.shape}, expected ({batch}, {N_STATE})")
    _need(np.isfinite(st.t), f"StateBatch.t is not finite ({st.t})")
    if t_prev is not None:
        _need(st.t > t_prev, f"time did not advance: t = {st.t} after {t_prev}")
    y = np.asarray(st.y, dtype=np.float64)
    for j, field in enumerate(STATE_FIELDS):
        bad = ~np.isfinite(y[:, j])
        flag = np.asarray(info.get(f"stale_{field}", 0.0), dtype=np.float64)
        stale = np.broadcast_to(flag, (batch,)) > 0 if flag.size in (1, batch) else np.zeros(batch, dtype=bool)
        _need(not np.any(bad & ~stale), f"{field} is not finite and not flagged stale: {y[:, j].tolist()}")
        _need(not np.any(y[~bad, j] < 0), f"{field} is negative: {y[:, j].tolist()}")
    return float(st.t)


def _check_info(info: Any, batch: int) -> None:
    _need(isinstance(info, Mapping), f"info must be a mapping, got {type(info).__name__}")
    for key, val in info.items():
        if isinstance(val, np.ndarray) and val.dtype.kind in "fiub":
            _need(val.ndim >= 1 and val.shape[0] == batch,
                  f"info[{key!r}] has shape {val.shape}; per-instance arrays need a leading axis of {batch}")


def _check_flows(tables: Any, batch: int) -> None:
    _need(isinstance(tables, list | tuple) and len(tables) == batch,
          f"flows() must return {batch} tables (one per instance), got {type(tables).__name__}")
    for i, tab in enumerate(tables):
        _need(isinstance(tab, Mapping), f"flows()[{i}] must be a mapping of columns, got {type(tab).__name__}")
        missing = [c for c in FLOW_COLUMNS if c not in tab]
        _need(not missing, f"flows()[{i}] lacks column(s) {', '.join(missing)}")
        lengths = {c: len(tab[c]) for c in tab}
        _need(len(set(lengths.values())) <= 1, f"flows()[{i}] columns differ in length: {lengths}")


def _steps(plant: Any, seed: int, us: list[Any], batch: int) -> np.ndarray:
    st = plant.reset(seed)
    t = _check_state(st, batch, {}, None)
    ys = [np.asarray(st.y, dtype=np.float64).copy()]
    for u in us:
        st = plant.step(u)
        t = _check_state(st, batch, plant.info, t)
        ys.append(np.asarray(st.y, dtype=np.float64).copy())
    return np.stack(ys)


def check_plant(
    make: PlantFactory,
    scenario: Scenario | str = "small-cubic",
    *,
    batches: Iterable[int] = (1, 3),
    steps: int = 3,
    seed: int = 7,
    simulated: bool = True,
    capabilities: Iterable[str] | None = None,
) -> tuple[str, ...]:
    """Check the plant ``make(scenario, batch)`` builds (module docstring); returns the checks run.

    ``capabilities``: which declared capabilities to exercise (default: all the
    plant declares; each gets a fresh plant). ``simulated``: also require the
    same trace for the same seed.
    """
    sc = _as_scenario(scenario)
    c = _Checks(f"plant {getattr(make, '__name__', make)!s}")
    us_for = {b: [0.5 * sc.u_max, np.linspace(0.3, 0.9, b) * sc.u_max, sc.u_max][:steps] for b in batches}
    for b in batches:
        with c.check(f"build_batch{b}"):
            plant = make(sc, b)
        try:
            _check_one_plant(c, plant, sc, b, us_for[b], seed, simulated)
        finally:
            plant.close()
        with c.check(f"close_twice_batch{b}"):
            plant.close()
    b0 = next(iter(batches))
    with c.check("context_manager"), make(sc, b0) as p:
        _need(p is not None, "__enter__ returned None")
    declared = plant_capabilities(p)
    for kind in declared if capabilities is None else capabilities:
        if kind == "rate":
            continue
        with c.check(f"capability_{kind}_declared"):
            _need(kind in declared, f"the plant does not declare the {kind} capability "
                                    f"({', '.join(capability_methods(CAPABILITIES[kind]))})")
        with c.check(f"capability_{kind}"):
            _exercise_capability(kind, make(sc, b0), sc, b0, seed, steps)
    return tuple(c.passed)


def _check_one_plant(c: _Checks, plant: Any, sc: Scenario, b: int, us: list[Any], seed: int,
                     simulated: bool) -> None:
    with c.check(f"protocol_batch{b}"):
        missing = [m for m in _plant_members() if inspect.getattr_static(plant, m, None) is None]
        _need(not missing, f"missing Plant member(s): {', '.join(missing)}")
        _need(plant.batch == b, f"plant.batch is {plant.batch}, asked for {b}")
        _need(isinstance(plant.scenario, Scenario), "plant.scenario is not a Scenario")
        _need(np.isfinite(plant.period) and plant.period > 0, f"period must be > 0 s, got {plant.period}")
    with c.check(f"reset_step_batch{b}"):
        trace = _steps(plant, seed, us, b)
    with c.check(f"info_batch{b}"):
        _check_info(plant.info, b)
    with c.check(f"flows_batch{b}"):
        _check_flows(plant.flows(), b)
    with c.check(f"rejects_nonfinite_u_batch{b}"):
        try:
            plant.step(np.full(b, np.nan))
        except ValueError:
            pass
        else:
            raise AssertionError("step(NaN) was accepted; a plant refuses a non-finite u (ValueError)")
    if simulated:
        with c.check(f"same_seed_same_trace_batch{b}"):
            again = _steps(plant, seed, us, b)
            _need(np.array_equal(trace, again, equal_nan=True), "two episodes with the same seed and u differ")


def _exercise_capability(kind: str, plant: Any, sc: Scenario, batch: int, seed: int, steps: int) -> None:
    """Run a built-in policy of ``kind`` on ``plant`` through the runner: the capability must work."""
    from .policies.registry import make_policy

    policy = {"queue": lambda: make_policy("jenks", queues=2), "discipline": lambda: make_policy("abc"),
              "host": lambda: _HalfTargetPacing()}[kind]()
    try:
        traces = run_episode(plant, policy, np.full(steps, 0.5 * sc.capacity), seed=seed)
        _need(len(traces) == batch and len(traces[0].df) == steps, "the episode did not run every period")
        if kind == "host":
            _need("pacing" in traces[0].columns, "the runner recorded no pacing")
    finally:
        plant.close()


class _HalfTargetPacing:
    """The host capability's probe: paces the DTN at half its target, the campus shaper open."""

    name = "conformance-pacing"
    kind = "host"

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        self.scenario = scenario

    def decide(self, history: History, target: np.ndarray) -> np.ndarray:
        return 0.5 * np.asarray(target, dtype=np.float64)

    def campus_rate(self, scenario: Scenario, target: np.ndarray) -> np.ndarray:
        return np.full(len(target), scenario.u_max)


# -- policies ----------------------------------------------------------------------------------


class _RateOnlyPlant:
    """A plant with no capability beyond the campus rate: the runner must refuse any other kind on it.

    Only built, never run (the runner checks capabilities when an Episode is made).
    """

    def __init__(self, scenario: Scenario, batch: int) -> None:
        self.scenario, self.batch = scenario, batch

    @property
    def period(self) -> float:
        return self.scenario.period

    @property
    def info(self) -> dict[str, Any]:
        return {}

    def reset(self, seed: int | None = None) -> StateBatch:
        raise RuntimeError("the conformance suite's capability probe is never run")

    def step(self, u: Any) -> StateBatch:
        raise RuntimeError("the conformance suite's capability probe is never run")

    def flows(self) -> list[dict[str, list[Any]]]:
        return [{col: [] for col in FLOW_COLUMNS} for _ in range(self.batch)]

    def close(self) -> None:
        pass

    def __enter__(self) -> _RateOnlyPlant:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _recorded(sc: Scenario, batch: int, seed: int, periods: int = 4) -> tuple[History, np.ndarray, list[Any]]:
    """A history of ``periods`` periods of the trivial TBF on the fluid plant, the target, its flow tables."""
    from .policies.registry import make_policy

    target = np.linspace(0.4, 0.6, batch) * sc.capacity
    with make_plant("fluid", sc, batch=batch) as plant:
        ep = Episode(plant, make_policy("trivial"), steps_hint=periods)
        ep.reset(seed)
        for _ in range(periods):
            ep.step(target)
        assert ep.history is not None
        return ep.history, target, plant.flows()


def _decide(policy: Any, kind: str, sc: Scenario, hist: History, target: np.ndarray,
            flows: list[Any]) -> Any:
    if kind in ("rate", "host"):
        return np.asarray(policy.decide(hist, target), dtype=np.float64)
    if kind == "queue":
        return policy.decide(hist, target, flows)
    return np.asarray(policy.weights(sc, target), dtype=np.float64)


def _check_decision(policy: Any, kind: str, sc: Scenario, out: Any, b: int, target: np.ndarray) -> None:
    if kind in ("rate", "host"):
        _need(out.shape == (b,), f"decide returned shape {out.shape}, expected ({b},)")
        _need(bool(np.all(np.isfinite(out))), f"decide returned a non-finite rate: {out.tolist()}")
    if kind == "rate":
        _need(bool(np.all((out >= sc.u_min * (1 - 1e-9)) & (out <= sc.u_max * (1 + 1e-9)))),
              f"u = {out.tolist()} is outside [u_min, u_max] = [{sc.u_min}, {sc.u_max}]")
    if kind == "host":
        _need(bool(np.all(out >= 0)), f"pacing rate below 0: {out.tolist()}")
        u = np.asarray(policy.campus_rate(sc, target), dtype=np.float64)
        _need(u.shape == (b,) and bool(np.all(np.isfinite(u))), f"campus_rate returned {u.tolist()}")
        _need(bool(np.all((u >= sc.u_min * (1 - 1e-9)) & (u <= sc.u_max * (1 + 1e-9)))),
              f"campus rate {u.tolist()} is outside [u_min, u_max]")
    if kind == "queue":
        _need(isinstance(out, list | tuple) and len(out) == b, f"decide must return {b} QueueConfigs (a list)")
        for cfg in out:
            cfg.validate()
    if kind == "discipline":
        _need(out.ndim == 2 and out.shape[0] == b, f"weights must have shape ({b}, aggregates), got {out.shape}")
        _need(bool(np.all(np.isfinite(out) & (out > 0))), f"weights must be finite rates > 0: {out.tolist()}")
        cfg = policy.configure(sc)
        _need(getattr(cfg, "kind", None) is not None, f"configure returned {cfg!r}, not a discipline configuration")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b, equal_nan=True)
    return a == b


def check_policy(
    policy: Any,
    scenario: Scenario | str = "small-cubic",
    *,
    batches: Iterable[int] = (1, 3),
    seed: int = 7,
    registered: bool = True,
    episode: int = 3,
) -> tuple[str, ...]:
    """Check ``policy`` (module docstring); returns the names of the checks run.

    ``registered=False`` skips the registry check (a policy not meant to be
    built by name). ``episode``: periods of the runner episode on the fluid
    plant (0: none).
    """
    sc = _as_scenario(scenario)
    name = getattr(policy, "name", type(policy).__name__)
    if len(policy_places(policy)) > 1:
        return _check_configuration(policy, sc, batches=batches, seed=seed, registered=registered, episode=episode)
    c = _Checks(f"policy {name!r}")
    kind = getattr(policy, "kind", None)
    with c.check("kind"):
        _need(kind in POLICY_KINDS, f"kind must be one of {', '.join(POLICY_KINDS)}, got {kind!r}")
    with c.check("protocol"):
        proto = _KIND_PROTOCOL[str(kind)]
        members = [m for m, v in vars(proto).items() if not m.startswith("_") and callable(v)]
        missing = [m for m in ("name", *members) if not hasattr(policy, m)]
        _need(not missing, f"missing {kind} policy member(s): {', '.join(missing)}")
    if registered:
        with c.check("registered"):
            _need(policy_kind(name) == kind, f"registered as a {policy_kind(name)} policy, but its kind is {kind}")
    for b in batches:
        hist, target, flows = _recorded(sc, b, seed)
        with c.check(f"decide_batch{b}"):
            policy.reset(sc, b)
            first = _decide(policy, str(kind), sc, hist, target, flows)
            _check_decision(policy, str(kind), sc, first, b, target)
        with c.check(f"deterministic_batch{b}"):
            policy.reset(sc, b)
            _need(_same(first, _decide(policy, str(kind), sc, hist, target, flows)),
                  "a second decision on the same history after reset differs")
    if kind != "rate":
        with c.check("refused_without_capability"):
            try:
                Episode(_RateOnlyPlant(sc, 1), policy)
            except ValueError as exc:
                _need("\n" not in str(exc), f"the refusal is not one line: {exc!r}")
            else:
                raise AssertionError(f"the runner accepted a {kind} policy on a plant without the capability")
    if episode:
        b = max(batches)
        with c.check(f"episode_batch{b}"), make_plant("fluid", sc, batch=b) as plant:
            traces = run_episode(plant, policy, np.full(episode, 0.5 * sc.capacity), seed=seed)
            _need(len(traces) == b and all(len(t.df) == episode for t in traces), "the episode was cut short")
    return tuple(c.passed)


def _check_configuration(config: Any, sc: Scenario, *, batches: Iterable[int], seed: int, registered: bool,
                         episode: int) -> tuple[str, ...]:
    """``check_policy`` of a configuration (module docstring)."""
    name = getattr(config, "name", type(config).__name__)
    places = policy_places(config)
    passed = [f"{getattr(m, 'name', kind)}:{check}" for kind, m in places.items()
              for check in check_policy(m, sc, batches=batches, seed=seed, registered=registered, episode=0)]
    c = _Checks(f"configuration {name!r}")
    c.passed = passed
    with c.check("canonical_name"):
        from .policies.configuration import POLICY_KINDS_ORDER, SEPARATOR, parse_configuration

        order = [k for k in POLICY_KINDS_ORDER if k in places]
        _need(list(places) == order, f"members by place {list(places)}, expected the canonical order {order}")
        expected = SEPARATOR.join(str(getattr(m, "name", "")) for m in places.values())
        _need(name == expected, f"name {name!r}, expected {expected!r} (its members in canonical order)")
        if registered:
            _need(SEPARATOR.join(parse_configuration(name)) == name, f"{name!r} does not parse back to itself")
    if set(places) != {"rate"}:
        with c.check("refused_without_capability"):
            try:
                Episode(_RateOnlyPlant(sc, 1), config)
            except ValueError as exc:
                _need("\n" not in str(exc), f"the refusal is not one line: {exc!r}")
            else:
                raise AssertionError("the runner accepted a configuration on a plant lacking its places")
    if episode:
        b = max(batches)
        with c.check(f"episode_batch{b}"), make_plant("fluid", sc, batch=b) as plant:
            traces = run_episode(plant, config, np.full(episode, 0.5 * sc.capacity), seed=seed)
            _need(len(traces) == b and all(len(t.df) == episode for t in traces), "the episode was cut short")
            _need(all(t.meta.get("policy") == name for t in traces), "the traces do not name the configuration")
            if "host" in places:
                _need("pacing" in traces[0].columns, "the runner recorded no pacing for the host member")
    return tuple(c.passed)
