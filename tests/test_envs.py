"""The gymnasium environments: API conformance, seeding, termination, vectorised autoreset."""

from __future__ import annotations

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402

from scidmz.envs import ScidmzEnv, ScidmzVectorEnv  # noqa: E402
from scidmz.scenario import load_scenario  # noqa: E402


def _short(duration: float = 12.0, **dtn: object):
    sc = load_scenario("small-cubic")
    return sc.replace(duration=duration, dtn=dtn) if dtn else sc.replace(duration=duration)


def test_check_env_passes():
    env = ScidmzEnv(_short(), history=2)
    check_env(env, skip_render_check=True)
    assert env.observation_space.shape == (7 * 3 + 1,)
    env.close()


def test_same_seed_same_episode_and_actions_matter():
    def run(seed, frac):
        env = ScidmzEnv(_short(), target=40e6)
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for _ in range(6):
            obs, r, term, trunc, info = env.step(np.array([frac * env.scenario.u_max], np.float32))
            out.append(obs)
        env.close()
        return np.array(out)

    a, b = run(3, 0.5), run(3, 0.5)
    np.testing.assert_array_equal(a, b)
    # a tighter campus cap leaves the DTN more: the action reaches the plant
    low = run(3, 0.1)
    assert low[-1, 0] > a[-1, 0]


def test_reward_is_relative_error_and_truncation_at_duration():
    env = ScidmzEnv(_short(duration=5.0), target=30e6)
    env.reset(seed=0)
    trunc = False
    steps = 0
    while not trunc:
        obs, r, term, trunc, info = env.step(np.array([50e6], np.float32))
        steps += 1
        assert r == pytest.approx(-abs(obs[0] - 30e6) / 30e6)
        assert not term
    assert steps == env.scenario.steps == 5
    env.close()


def test_terminated_when_finite_transfer_completes():
    env = ScidmzEnv(_short(duration=60.0, transfer=20e6), target=50e6)
    env.reset(seed=1)
    for _ in range(60):
        _, _, term, trunc, info = env.step(np.array([10e6], np.float32))
        if term:
            break
    assert term and not trunc, "a 20 MB transfer at ~90 Mbit/s must finish well inside 60 s"
    assert np.isfinite(info["dtn_fct"]) and info["dtn_fct"] > 0
    env.close()


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(ValueError, match="history"):
        ScidmzEnv(_short(), history=-1)
    with pytest.raises(ValueError, match="target"):
        ScidmzEnv(_short(), target="sine")
    with pytest.raises(ValueError, match="above the bottleneck"):
        ScidmzEnv(_short(), target=1e12)


def test_vector_env_instances_match_single_instance_runs():
    sc = _short()
    venv = ScidmzVectorEnv(3, sc, target=40e6)
    obs, info = venv.reset(seed=[5, 6, 7])
    assert obs.shape == (3, 8)
    acts = np.array([[20e6], [50e6], [80e6]], np.float32)
    for _ in range(4):
        obs, rew, term, trunc, _ = venv.step(acts)
    venv.close()
    # instance 1 of the batch equals a batch of one with the same seed and action
    one = ScidmzVectorEnv(1, sc, target=40e6)
    o1, _ = one.reset(seed=[6])
    for _ in range(4):
        o1, *_ = one.step(acts[1:2])
    one.close()
    np.testing.assert_allclose(obs[1], o1[0], rtol=1e-12)
    assert venv.observation_space.shape == (3, 8)
    assert venv.single_action_space.contains(acts[0])


def test_vector_env_autoresets_next_step():
    venv = ScidmzVectorEnv(2, _short(duration=3.0), target=40e6)
    obs0, _ = venv.reset(seed=0)
    act = np.full((2, 1), 40e6, np.float32)
    for _ in range(3):
        obs, rew, term, trunc, _ = venv.step(act)
    assert trunc.all()
    obs, rew, term, trunc, _ = venv.step(act)  # the reset step
    assert not trunc.any() and np.all(rew == 0.0)
    # reset observation: rates zero, RTTs at their base values
    assert np.all(obs[:, 0] == 0.0) and np.all(obs[:, 2] > 0)
    obs, rew, term, trunc, _ = venv.step(act)
    assert np.all(obs[:, 0] > 0)
    venv.close()


def test_example_agent_runs_and_beats_random(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root / "src"))
    out = subprocess.run([sys.executable, str(root / "examples" / "pid_agent.py"), "--episodes", "1"],
                         capture_output=True, text=True, timeout=300, env=env, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    scores = res["mean_reward_held_out"]
    assert scores["pi"] > scores["random"]
