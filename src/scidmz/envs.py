"""Gymnasium environments over the ``Plant`` protocol, for reinforcement-learning users.

``ScidmzEnv`` is one plant instance as a ``gymnasium.Env``; ``ScidmzVectorEnv``
is B instances of the batched fluid plant as a ``gymnasium.vector.VectorEnv``
(one seed per instance, stepped in one kernel call). They wrap a plant; they
do not replace the ``Plant`` protocol (ARCHITECTURE.md).

- action: u, the campus egress rate in bit/s, a Box [u_min, u_max] of shape (1,);
- observation: the seven NetworkState variables (Table 3 order, SI units) of
  the last ``history + 1`` periods, newest first, followed by the current
  target R*_DTN. The target is in the observation by our choice: an agent
  cannot track a target it cannot see, and the MLC's inverse model gets the
  same information through y_d;
- reward: ``-|R_DTN - R*| / R*`` by default (the per-period term of MRAE,
  MLC paper eq. 3), or any ``reward(y, u, target) -> float``;
- ``terminated`` when a finite DTN transfer (``dtn.transfer``) completes,
  ``truncated`` at the scenario's duration;
- targets: a constant, an array with one value per period, or ``"steps"``:
  pseudo-random steps in [0.1, 0.9] B_max held 10 periods, drawn from the
  episode's seed (the GA fitness episodes of MLC section 3.3 use the same
  generator).

Both drive their plant through the one episode runner (``runner.Episode``):
the agent's action is a rate policy (``AgentAction``) whose next decision is
the action just given, so the same checks (one line on a non-finite action)
and the same bounds [u_min, u_max] apply as for every other policy.

``places``: policies acting in the other places while the agent sets the
campus rate, as a configuration (``"pacing"``, ``"pacing+jenks"``: at most one
per place, none a rate policy; ``scidmz.policies.configuration``). The agent
and they run as one configuration, each member through its plant capability;
a plant lacking one of the places is one ``ValueError`` line.

The same seed gives the same episode. Gymnasium is an optional extra
(``pip install scidmz[rl]``); it is imported only here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .kinds import policy_places
from .runner import Episode, check_places
from .scenario import Scenario, load_scenario
from .signals import constant, random_steps
from .state import N_STATE, History

try:
    import gymnasium as gym
    from gymnasium import spaces
    from gymnasium.vector import AutoresetMode, VectorEnv
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("scidmz.envs needs gymnasium: pip install 'scidmz[rl]'") from exc

__all__ = ["ScidmzEnv", "ScidmzVectorEnv", "AgentAction", "relative_error_reward", "agent_configuration"]

RewardFn = Callable[[np.ndarray, float, float], float]
TargetSpec = float | str | np.ndarray

# our choice for the "steps" target signal: a value every 10 periods in [0.1, 0.9] B_max,
# away from the edges where no rate u can move R_DTN any more
_STEP_HOLD = 10
_STEP_RANGE = (0.1, 0.9)
# The agent reads its observation, not the Episode's history: a few periods suffice (the runner's minimum).
_KEEP = 4


class AgentAction:
    """The agent's action as a rate policy: ``decide`` returns the action set by ``act`` (B,) bit/s."""

    name = "agent"
    kind = "rate"

    def __init__(self) -> None:
        self._u: np.ndarray | None = None

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        self._u = None

    def act(self, u: np.ndarray) -> None:
        self._u = np.asarray(u, dtype=np.float64)

    def decide(self, history: History, target: np.ndarray) -> np.ndarray:
        if self._u is None:
            raise RuntimeError("AgentAction.decide() before act(u)")
        return np.broadcast_to(self._u, (history.batch,))


def agent_configuration(agent: AgentAction, places: str | Any | None) -> Any:
    """The agent as the rate place, with ``places`` (a configuration string or policy object, no rate
    member) in the others; the agent alone without ``places``. One line for a rate member."""
    if places is None:
        return agent
    from .policies.configuration import Configuration, build_configuration, parse_configuration
    from .policies.registry import policy_kind

    # the kinds first: a rate member is refused before anything is built (pi would want its gains)
    kinds = [policy_kind(n) for n in parse_configuration(places)] if isinstance(places, str) \
        else list(policy_places(places))
    if "rate" in kinds:
        name = places if isinstance(places, str) else getattr(places, "name", places)
        raise ValueError(f"places={name!r}: the agent's action is the campus rate; give policies for the other "
                         "places only (host, queue, discipline)")
    pol = build_configuration(places) if isinstance(places, str) else places
    return Configuration([agent, *policy_places(pol).values()])


def relative_error_reward(y: np.ndarray, u: float, target: float) -> float:
    """-|R_DTN - R*| / R*: one period's contribution to MRAE (MLC paper eq. 3), negated."""
    return -abs(float(y[0]) - target) / max(target, 1.0)


def _as_scenario(scenario: Scenario | str) -> Scenario:
    return scenario if isinstance(scenario, Scenario) else load_scenario(scenario)


def _target_signal(spec: TargetSpec, sc: Scenario, steps: int, seed: int, batch: int) -> np.ndarray:
    """(steps, batch) R*_DTN per period from a target spec."""
    if isinstance(spec, str):
        if spec != "steps":
            raise ValueError(f"target must be a rate, an array or 'steps', got {spec!r}")
        lo, hi = (f * sc.capacity for f in _STEP_RANGE)
        return random_steps(steps, lo, hi, hold=_STEP_HOLD, seed=seed, batch=batch)
    arr = np.asarray(spec, dtype=np.float64)
    if arr.ndim == 0:
        sig = constant(float(arr), steps, batch)
    elif arr.ndim == 1 and arr.size == steps:
        sig = np.repeat(arr[:, None], batch, axis=1)
    else:
        raise ValueError(f"target array must have one value per period ({steps}), got shape {arr.shape}")
    for v in (float(sig.min()), float(sig.max())):
        sc.check_target(v)
    if float(sig.min()) <= 0:
        raise ValueError("target must be > 0 bit/s (the reward divides by it)")
    return sig


def _spaces(sc: Scenario, history: int) -> tuple[spaces.Box, spaces.Box]:
    n = N_STATE * (history + 1) + 1
    obs = spaces.Box(low=0.0, high=np.inf, shape=(n,), dtype=np.float64)
    act = spaces.Box(low=np.float32(sc.u_min), high=np.float32(sc.u_max), shape=(1,), dtype=np.float32)
    return obs, act


class _Window:
    """The last ``history + 1`` states of B instances, newest first, as observation rows."""

    def __init__(self, history: int, batch: int) -> None:
        self.buf = np.zeros((batch, history + 1, N_STATE))

    def fill(self, rows: np.ndarray, y: np.ndarray) -> None:
        self.buf[rows] = y[rows, None, :]

    def push(self, y: np.ndarray) -> None:
        self.buf[:, 1:] = self.buf[:, :-1]
        self.buf[:, 0] = y

    def obs(self, target: np.ndarray) -> np.ndarray:
        b = self.buf.shape[0]
        return np.concatenate([self.buf.reshape(b, -1), target.reshape(b, 1)], axis=1)


class ScidmzEnv(gym.Env):
    """One plant instance as a Gymnasium environment (see the module docstring).

    ``plant`` is a backend name (``fluid``, ``netns``, ``hardware``) or a
    factory ``plant(scenario) -> Plant``; real-time plants make real-time
    episodes. ``plant_kwargs`` go to the backend. ``places``: the policies
    acting in the other places (module docstring).
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        scenario: Scenario | str = "small-cubic",
        target: TargetSpec = "steps",
        history: int = 0,
        reward: RewardFn | None = None,
        plant: str | Callable[[Scenario], Any] = "fluid",
        plant_kwargs: dict[str, Any] | None = None,
        places: str | Any | None = None,
    ) -> None:
        if int(history) != history or history < 0:
            raise ValueError(f"history must be a whole number >= 0, got {history!r}")
        self.scenario = _as_scenario(scenario)
        self.target = target
        self.history = int(history)
        self.reward_fn = reward or relative_error_reward
        self.plant_spec = plant
        self.plant_kwargs = dict(plant_kwargs or {})
        self.observation_space, self.action_space = _spaces(self.scenario, self.history)
        # fail on a bad target now, not at the first reset
        _target_signal(target, self.scenario, self.scenario.steps, 0, 1)
        self._plant: Any = None
        self._agent = AgentAction()
        self._policy = agent_configuration(self._agent, places)
        if places is not None and isinstance(plant, str):  # the places checked now, not at the first reset
            from .plant.base import check_plant_options

            cls = check_plant_options(plant, 1, self.plant_kwargs).cls
            if isinstance(cls, type):
                check_places(cls, self._policy)
        self._episode: Episode | None = None
        self._k = 0

    def _make_plant(self) -> Any:
        if callable(self.plant_spec):
            return self.plant_spec(self.scenario)
        from .plant.base import make_plant

        return make_plant(self.plant_spec, self.scenario, batch=1, **self.plant_kwargs)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if self._plant is None:
            self._plant = self._make_plant()
            self._episode = Episode(self._plant, self._policy, keep=_KEEP)
        episode_seed = int(self.np_random.integers(0, 2**31 - 1))
        spec = (options or {}).get("target", self.target)
        self._targets = _target_signal(spec, self.scenario, self.scenario.steps, episode_seed, 1)[:, 0]
        state = self._episode.reset(episode_seed)
        self._window = _Window(self.history, 1)
        self._window.fill(np.array([0]), state.y)
        self._k = 0
        info = {"t": state.t, "seed": episode_seed}
        return self._window.obs(self._targets[:1])[0], info

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._plant is None:
            raise RuntimeError("call reset() before step()")
        self._agent.act(np.asarray(action, dtype=np.float64).reshape(-1)[:1])
        target = float(self._targets[self._k])
        state, applied = self._episode.step(target)
        u = float(applied[0])
        y = state.y[0]
        reward = float(self.reward_fn(y, u, target))
        self._window.push(state.y)
        self._k += 1
        ground = self._plant.info
        fct = np.asarray(ground.get("dtn_fct", [np.nan]), dtype=np.float64)
        terminated = bool(np.isfinite(fct[0]))
        truncated = self._k >= len(self._targets)
        nxt = self._targets[min(self._k, len(self._targets) - 1)]
        # plant ground truth as plain floats; "not yet" values (NaN, e.g. dtn_fct) are left out
        truth = {k: float(np.asarray(v).reshape(-1)[0]) for k, v in ground.items()}
        info = {"t": state.t, "u": u, "target": target,
                **{k: v for k, v in truth.items() if v == v}}
        return self._window.obs(np.array([nxt]))[0], reward, terminated, truncated, info

    def close(self) -> None:
        if self._plant is not None:
            self._plant.close()
            self._plant = None
            self._episode = None


class ScidmzVectorEnv(VectorEnv):
    """B instances of the batched fluid plant as one Gymnasium ``VectorEnv``.

    All instances advance in one kernel call; instance i of an episode seeded
    ``s`` uses the seed ``s + i`` (a list of seeds gives each its own).
    Autoreset is Gymnasium's next-step mode: the step after an instance ends
    returns its reset observation with reward 0, while the others go on.
    ``places``: the policies acting in the other places (module docstring).
    """

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        num_envs: int,
        scenario: Scenario | str = "small-cubic",
        target: TargetSpec = "steps",
        history: int = 0,
        reward: RewardFn | None = None,
        places: str | Any | None = None,
    ) -> None:
        if int(num_envs) != num_envs or num_envs < 1:
            raise ValueError(f"num_envs must be a whole number >= 1, got {num_envs!r}")
        from .plant.fluid import FluidPlant

        self.num_envs = int(num_envs)
        self.scenario = _as_scenario(scenario)
        self.target = target
        self.history = int(history)
        self.reward_fn = reward or relative_error_reward
        self.single_observation_space, self.single_action_space = _spaces(self.scenario, self.history)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)
        _target_signal(target, self.scenario, self.scenario.steps, 0, 1)
        self._plant = FluidPlant(self.scenario, batch=self.num_envs)
        self._agent = AgentAction()
        self._episode = Episode(self._plant, agent_configuration(self._agent, places), keep=_KEEP)
        self._window = _Window(self.history, self.num_envs)
        self._k = np.zeros(self.num_envs, dtype=np.int64)
        self._needs_reset = np.zeros(self.num_envs, dtype=bool)
        self._seeds = np.zeros(self.num_envs, dtype=np.int64)

    def _draw_targets(self, rows: np.ndarray) -> None:
        for i in rows:
            self._targets[:, i] = _target_signal(
                self.target, self.scenario, self.scenario.steps, int(self._seeds[i]), 1)[:, 0]

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is None:
            seeds = np.random.default_rng().integers(0, 2**31 - 1, self.num_envs)
        elif isinstance(seed, int | np.integer):
            seeds = int(seed) + np.arange(self.num_envs)
        else:
            seeds = np.asarray(list(seed), dtype=np.int64)
            if seeds.shape != (self.num_envs,):
                raise ValueError(f"need {self.num_envs} seeds, got {len(seeds)}")
        self._seeds = seeds.astype(np.int64)
        self._targets = np.empty((self.scenario.steps, self.num_envs))
        self._draw_targets(np.arange(self.num_envs))
        # A plant reset seeds instance i with seed + i; other seeds (a list, or drawn) are set per instance.
        state = self._episode.reset(int(self._seeds[0]))
        if np.any(self._seeds != self._seeds[0] + np.arange(self.num_envs)):
            state = self._plant.reset_instances(np.arange(self.num_envs), self._seeds)
        self._window.fill(np.arange(self.num_envs), state.y)
        self._k[:] = 0
        self._needs_reset[:] = False
        return self._window.obs(self._targets[0]), {"seed": self._seeds.copy()}

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        self._agent.act(np.asarray(actions, dtype=np.float64).reshape(self.num_envs, -1)[:, 0])
        steps = self.scenario.steps
        target = self._targets[np.minimum(self._k, steps - 1), np.arange(self.num_envs)]
        state, u = self._episode.step(target)
        rewards = np.array([self.reward_fn(state.y[i], float(u[i]), float(target[i]))
                            for i in range(self.num_envs)])
        self._window.push(state.y)
        self._k += 1
        fct = np.asarray(self._plant.info.get("dtn_fct", np.full(self.num_envs, np.nan)))
        terminated = np.isfinite(fct)
        truncated = self._k >= steps
        # next-step autoreset: instances that ended on the previous step restart now
        restart = np.flatnonzero(self._needs_reset)
        if restart.size:
            self._seeds[restart] += self.num_envs  # a fresh, still deterministic, episode seed
            self._draw_targets(restart)
            # The other instances go on, so the Episode is not reset: its history of the restarted
            # rows keeps their last episode, which the agent never reads (it sees the window).
            st = self._plant.reset_instances(restart, self._seeds[restart])
            self._window.fill(restart, st.y)
            self._k[restart] = 0
            rewards[restart] = 0.0
            terminated[restart] = False
            truncated[restart] = False
        self._needs_reset = terminated | truncated
        nxt = self._targets[np.minimum(self._k, steps - 1), np.arange(self.num_envs)]
        info = {"u": u, "target": target, "dtn_fct": fct}
        return self._window.obs(nxt), rewards, terminated, truncated, info

    def close_extras(self, **kwargs: Any) -> None:
        self._plant.close()
