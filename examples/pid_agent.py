"""A baseline agent trained on the gymnasium environment: a PI agent beside random and trivial.

    python examples/pid_agent.py [--scenario small-cubic] [--episodes 3] [--seed 0]

No RL library is needed. "Training" is a grid search of the PI agent's two
gains on training seeds; the trained agent is then scored on held-out seeds
beside a random agent and the trivial TBF (u = B_max - target). It prints
one JSON object with each agent's mean per-period reward (-MRAE, MLC paper
eq. 3), so an RL agent trained on ``ScidmzEnv`` has numbers to beat. Any
agent with ``act(obs) -> action`` plugs into ``run``.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from scidmz.envs import ScidmzEnv


class PIAgent:
    """u_{k+1} = u_k + Kp·Δe + Ki·e, e = (R_DTN − R*) / B_max (incremental PI on the observation)."""

    def __init__(self, env: ScidmzEnv, kp: float = 0.4, ki: float = 0.2) -> None:
        self.env, self.kp, self.ki = env, kp, ki
        self.u = None
        self.e_prev = 0.0

    def act(self, obs: np.ndarray) -> np.ndarray:
        sc = self.env.scenario
        target = float(obs[-1])
        if self.u is None:
            self.u = sc.trivial_rate(target)
        e = (float(obs[0]) - target) / sc.capacity
        self.u = float(np.clip(self.u + (self.kp * (e - self.e_prev) + self.ki * e) * sc.capacity,
                               sc.u_min, sc.u_max))
        self.e_prev = e
        return np.array([self.u], np.float32)


class RandomAgent:
    def __init__(self, env: ScidmzEnv) -> None:
        self.env = env

    def act(self, obs: np.ndarray) -> np.ndarray:
        return self.env.action_space.sample()


class TrivialAgent:
    """The paper's trivial TBF: u = B_max − R* (section 3.7)."""

    def __init__(self, env: ScidmzEnv) -> None:
        self.env = env

    def act(self, obs: np.ndarray) -> np.ndarray:
        return np.array([self.env.scenario.trivial_rate(float(obs[-1]))], np.float32)


def run(env: ScidmzEnv, agent_cls, episodes: int, seed: int) -> float:
    """Mean per-period reward over ``episodes`` episodes (seeds seed, seed+1, ...)."""
    env.action_space.seed(seed)
    total, n = 0.0, 0
    for ep in range(episodes):
        agent = agent_cls(env)
        obs, _ = env.reset(seed=seed + ep)
        done = False
        while not done:
            obs, r, term, trunc, _ = env.step(agent.act(obs))
            total += r
            n += 1
            done = term or trunc
    return total / max(n, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="small-cubic")
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    env = ScidmzEnv(args.scenario, target="steps")
    train_seed, test_seed = args.seed, args.seed + 1000
    grid = [(kp, ki) for kp in (0.0, 0.1, 0.3) for ki in (0.02, 0.05, 0.1, 0.2)]
    scores = {g: run(env, lambda e, g=g: PIAgent(e, *g), args.episodes, train_seed) for g in grid}
    kp, ki = max(scores, key=scores.get)
    agents = {"pi": lambda e: PIAgent(e, kp, ki), "random": RandomAgent, "trivial": TrivialAgent}
    out = {name: run(env, make, args.episodes, test_seed) for name, make in agents.items()}
    env.close()
    print(json.dumps({"scenario": args.scenario, "episodes": args.episodes,
                      "pi_gains": {"kp": kp, "ki": ki}, "mean_reward_held_out": out,
                      "reward": "-|R_DTN - R*| / R* per period"}))


if __name__ == "__main__":
    main()
