"""Configurations: at most one policy per place in one run (policies/configuration.py, runner.py).

Parse, canonical names and their one-line errors; per-member options; a fluid
episode of each two-place configuration with every member's effect visible;
a one-member configuration being today's policy itself; the CLI's exit-2
cases; check_policy and the gym env on configurations; a --quick leaderboard
with a configuration row (fluid plant).
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pytest

from scidmz.cli import main
from scidmz.commands.build import build_run
from scidmz.conformance import check_policy
from scidmz.plant.base import make_plant
from scidmz.policies.configuration import (
    Configuration,
    build_configuration,
    canonical_name,
    parse_configuration,
    split_member_options,
)
from scidmz.policies.registry import register_policy
from scidmz.runner import Episode, check_places, run_episode

# testbed: the scenario pi's gains ship for
SCENARIO = "testbed"


@pytest.mark.parametrize("text, canonical", [
    ("pacing", "pacing"),
    ("pi+pacing", "pacing+pi"),
    ("pacing+pi", "pacing+pi"),
    ("jenks+pacing", "pacing+jenks"),
    ("ffs+pacing", "pacing+ffs"),
    ("jenks+pi", "pi+jenks"),
    ("abc+jenks+trivial+pacing", "pacing+trivial+jenks+abc"),
    (" pi + pacing ", "pacing+pi"),
])
def test_canonical_name_orders_members_host_rate_queue_discipline(text: str, canonical: str) -> None:
    assert canonical_name(text) == canonical
    assert parse_configuration(text) == tuple(canonical.split("+"))


@pytest.mark.parametrize("text, needle", [
    ("pi+mlc", "'mlc' and 'pi' are both rate policies"),
    ("abc+ffs", "'ffs' and 'abc' are both discipline policies"),
    ("pacing+pacing", "'pacing' named twice"),
    ("pacing+bogus", "unknown policy 'bogus'"),
    ("pi+", "empty member"),
    ("", "empty member"),
])
def test_bad_configurations_are_one_line(text: str, needle: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_configuration(text)
    assert needle in str(err.value) and "\n" not in str(err.value)


def _probe(name: str, kind: str) -> None:
    """A registered policy of ``kind`` taking option ``gain`` (two of them make an ambiguous key)."""

    def factory(gain: float = 1.0) -> Any:
        raise AssertionError("never built")

    register_policy(name, kind, factory)


def test_policy_options_go_to_the_member_that_takes_them_or_are_refused() -> None:
    assert split_member_options(("pacing", "jenks"), {"queues": 3}) == {"pacing": {}, "jenks": {"queues": 3}}
    assert split_member_options(("pacing", "jenks"), {"jenks.queues": 3}) == {"pacing": {}, "jenks": {"queues": 3}}
    assert split_member_options(("pi",), {"delta_u": 1}) == {"pi": {"delta_u": 1}}
    _probe("cfgtest-host", "host")
    _probe("cfgtest-queue", "queue")
    both = ("cfgtest-host", "cfgtest-queue")
    assert split_member_options(both, {"cfgtest-queue.gain": 2}) == {"cfgtest-host": {}, "cfgtest-queue": {"gain": 2}}
    for opts, needle in (({"gain": 2}, "ambiguous, cfgtest-host and cfgtest-queue both take 'gain'"),
                         ({"queues": 2}, "unknown option 'queues'"),
                         ({"pi.gains": "x"}, "'pi' is not a member"),
                         ({"cfgtest-host.queues": 2}, "policy 'cfgtest-host': unknown option 'queues'")):
        with pytest.raises(ValueError, match=needle) as err:
            split_member_options(both, opts)
        assert "\n" not in str(err.value)


def test_one_member_is_the_policy_itself_and_several_make_a_configuration() -> None:
    from scidmz.policies.host.pacing import PacingPolicy

    one = build_configuration("pacing")
    assert type(one) is PacingPolicy and one.kind == "host"
    two = build_configuration("jenks+pacing", {"queues": 2})
    assert isinstance(two, Configuration) and two.name == "pacing+jenks" and two.kind == "host+queue"
    assert list(two.members) == ["host", "queue"] and two.members["queue"].params.queues == 2


# -- every member acts through its capability -------------------------------------------------------


class Spy:
    """A member that records what it decides (delegating everything else)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.kind = inner, inner.name, inner.kind
        self.calls: dict[str, list[Any]] = {}

    def __getattr__(self, attr: str) -> Any:
        f = getattr(self.inner, attr)
        if attr not in ("decide", "campus_rate", "configure", "weights"):
            return f

        def record(*args: Any) -> Any:
            out = f(*args)
            self.calls.setdefault(attr, []).append(np.array(out, copy=True) if isinstance(out, np.ndarray) else out)
            return out

        return record


def _plant_calls(plant: Any) -> dict[str, int]:
    """Count the plant's capability calls (the runner's only way to act in a place)."""
    counts = {"set_pacing": 0, "apply_queues": 0, "set_discipline": 0, "set_discipline_weights": 0}
    for name in counts:
        orig = getattr(plant, name)

        def wrapped(*a: Any, _orig: Any = orig, _name: str = name, **k: Any) -> Any:
            counts[_name] += 1
            return _orig(*a, **k)

        setattr(plant, name, wrapped)
    return counts


def _episode(text: str, steps: int = 20, batch: int = 2) -> tuple[Configuration, Any, dict[str, int], list[Any]]:
    run = build_run(SCENARIO, policy=text, duration="10s")
    config = Configuration([Spy(m) for m in run.policy.members.values()])
    plant = make_plant("fluid", run.scenario, batch=batch)
    calls = _plant_calls(plant)
    targets = np.linspace(0.3, 0.6, steps) * run.scenario.capacity
    try:
        traces = run_episode(plant, config, targets, seed=3)
    finally:
        plant.close()
    return config, run.scenario, calls, traces


def _clip(u: np.ndarray, sc: Any) -> np.ndarray:
    return np.clip(u, sc.u_min, sc.u_max)


def test_pacing_pi_paces_the_dtn_and_the_pi_sets_u() -> None:
    config, sc, calls, traces = _episode("pi+pacing")
    host, rate = config.members["host"], config.members["rate"]
    assert config.name == "pacing+pi" and all(t.meta["policy"] == "pacing+pi" for t in traces)
    pi_u = np.vstack(rate.calls["decide"])  # (steps, batch)
    for i, t in enumerate(traces):
        assert np.array_equal(t.df["pacing"].to_numpy(), t.df["target"].to_numpy())  # the DTN paced at target
        assert np.array_equal(t.df["u"].to_numpy(), _clip(pi_u[:, i], sc))  # u is the PI's
    assert "campus_rate" not in host.calls  # with a rate policy present, the host policy sets no u
    trivial = np.clip(sc.capacity - traces[0].df["target"].to_numpy(), sc.u_min, sc.u_max)
    assert not np.allclose(traces[0].df["u"].to_numpy(), trivial)
    assert calls["set_pacing"] == 20 and calls["apply_queues"] == 0


def test_pacing_jenks_paces_the_dtn_separates_queues_and_keeps_the_trivial_tbf() -> None:
    config, sc, calls, traces = _episode("pacing+jenks")
    assert calls["set_pacing"] == 20 and calls["apply_queues"] == 20
    assert len(config.members["queue"].calls["decide"]) == 20
    for t in traces:
        df = t.df
        assert np.array_equal(df["pacing"].to_numpy(), df["target"].to_numpy())
        # no rate member: the campus rate place keeps its neutral setting, the host's trivial TBF
        trivial = np.clip(sc.capacity - df["target"].to_numpy(), sc.u_min, sc.u_max)
        assert np.allclose(df["u"].to_numpy(), trivial)
        assert df["rate_dtn"].to_numpy()[5:].max() <= 1.05 * df["target"].to_numpy().max()


def test_pi_jenks_separates_queues_and_the_pi_sets_u() -> None:
    config, sc, calls, traces = _episode("jenks+pi")
    assert config.name == "pi+jenks" and calls["apply_queues"] == 20 and calls["set_pacing"] == 0
    pi_u = np.vstack(config.members["rate"].calls["decide"])
    for i, t in enumerate(traces):
        assert np.array_equal(t.df["u"].to_numpy(), _clip(pi_u[:, i], sc))
        assert "pacing" not in t.df.columns


def test_pacing_ffs_loads_the_discipline_and_its_weights_and_paces_the_dtn() -> None:
    config, sc, calls, traces = _episode("ffs+pacing")
    assert config.name == "pacing+ffs"
    assert calls["set_discipline"] == 1 and calls["set_discipline_weights"] == 20 and calls["set_pacing"] == 20
    assert len(config.members["discipline"].calls["weights"]) == 20
    for t in traces:
        assert np.array_equal(t.df["pacing"].to_numpy(), t.df["target"].to_numpy())
        assert np.allclose(t.df["u"].to_numpy(), np.clip(sc.capacity - t.df["target"].to_numpy(),
                                                         sc.u_min, sc.u_max))


def test_a_place_the_plant_lacks_is_one_line_naming_the_member() -> None:
    class RateOnly:
        pass

    config = build_configuration("pacing+jenks")
    with pytest.raises(ValueError) as err:
        check_places(RateOnly, config)
    msg = str(err.value)
    assert "host policy 'pacing' (of configuration pacing+jenks)" in msg and "\n" not in msg


def test_check_policy_runs_on_configurations() -> None:
    for text in ("pacing+pi", "pacing+jenks"):
        passed = check_policy(build_run(SCENARIO, policy=text).policy, SCENARIO, batches=(1, 2))
        assert {"canonical_name", "refused_without_capability", "episode_batch2"} <= set(passed)
        assert any(p.startswith("pacing:") for p in passed)


def test_gym_env_runs_the_agent_beside_other_places() -> None:
    pytest.importorskip("gymnasium")
    from scidmz.envs import ScidmzEnv

    env = ScidmzEnv(SCENARIO, target=50e6, places="jenks+pacing")
    env.reset(seed=1)
    for _ in range(3):
        _, _, _, _, info = env.step(np.array([30e6], dtype=np.float32))
    assert info["u"] == pytest.approx(30e6, rel=1e-6)  # the agent's action is u, not the host's trivial TBF
    assert isinstance(env._episode, Episode) and env._episode.kind == "host+rate+queue"
    env.close()
    with pytest.raises(ValueError, match="the agent's action is the campus rate"):
        ScidmzEnv(SCENARIO, places="pacing+pi")


# -- the command line ----------------------------------------------------------------------------------


def test_simulate_names_the_configuration_canonically(capsys) -> None:
    assert main(["simulate", SCENARIO, "--policy", "pi+pacing", "--duration", "3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert doc["policy"] == "pacing+pi"


@pytest.mark.parametrize("argv, needle", [
    (["--policy", "pi+mlc"], "both rate policies"),
    (["--policy", "pacing+bogus"], "unknown policy 'bogus'"),
    (["--policy", "pacing+jenks", "--set", "policy.bogus=1"], "unknown option 'bogus'"),
    (["--policy", "pacing+jenks", "--set", "policy.pi.gains=x"], "'pi' is not a member of pacing+jenks"),
    (["--policy", "pacing+jenks", "--gains", __file__], "policy pacing takes no --gains"),
])
def test_simulate_bad_configuration_is_one_line_exit_2(argv: list[str], needle: str, capsys) -> None:
    assert main(["simulate", SCENARIO, "--duration", "3", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_simulate_refuses_a_place_the_plant_lacks(capsys) -> None:
    from scidmz.plant.base import register_plant
    from scidmz.plant.fluid import FluidPlant

    class CampusOnlyPlant:  # the fluid plant's rate place only: no pacing, queues or discipline
        def __init__(self, scenario: Any, batch: int = 1) -> None:
            self._inner = FluidPlant(scenario, batch=batch)

        def __getattr__(self, attr: str) -> Any:
            if attr in ("set_pacing", "apply_queues", "set_discipline", "set_discipline_weights"):
                raise AttributeError(attr)
            return getattr(self._inner, attr)

    register_plant("cfgtest-campus-only", CampusOnlyPlant)
    assert main(["simulate", SCENARIO, "--duration", "3", "--plant", "cfgtest-campus-only",
                 "--policy", "pi+pacing"]) == 2
    err = [line for line in capsys.readouterr().err.strip().splitlines() if "error" in line]
    assert len(err) == 1 and "cannot pace the DTN's streams" in err[0] and "pacing+pi" in err[0]


def test_evaluate_runs_a_configuration_and_tracks_it_in_mlflow(tmp_path, capsys) -> None:
    uri = (tmp_path / "mlruns").as_uri()
    assert main(["evaluate", "small-cubic", "--policies", "jenks+pacing", "--quick", "--trials", "2",
                 "--experiments", "mrae", "--tracking-uri", uri, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "pacing+jenks" in json.dumps(doc) and "jenks+pacing" not in json.dumps(doc)
    from scidmz.evaluation.mlc.tracking import summary_metrics

    assert "mrae_mean_pacing:jenks" in summary_metrics({"mrae": {"pacing+jenks": {"mean": 0.1}}})


def test_control_run_logs_the_configuration_by_its_canonical_name(tmp_path, capsys) -> None:
    log = tmp_path / "control.jsonl"
    assert main(["control", "run", SCENARIO, "--plant", "fluid", "--policy", "pi+pacing", "--target", "50M",
                 "--duration", "2s", "--no-api", "--log", str(log), "--json"]) == 0
    capsys.readouterr()
    start = json.loads(log.read_text().splitlines()[0])
    assert start["event"] == "start" and start["policy"] == "pacing+pi"


def test_leaderboard_quick_has_a_configuration_row(tmp_path, capsys) -> None:
    out = tmp_path / "lb"
    assert main(["leaderboard", "small-cubic", "--quick", "--trials", "2", "--experiments", "mrae,short",
                 "--policies", "trivial,jenks+pacing", "--out", str(out), "--json"]) == 0
    capsys.readouterr()
    doc = json.loads((out / "results.json").read_text())
    rows = {(r["policy"], r["experiment"]): r for r in doc["rows"]}
    assert set(rows) == {(p, e) for p in ("trivial", "pacing+jenks") for e in ("mrae", "short")}
    cfg = rows[("pacing+jenks", "mrae")]
    # a host member makes the row "not comparable" on the fluid plant: its packet-noise model gives a
    # paced DTN no burstiness, which nobody measured against the kernel (FluidPlant.NOISE_KINDS)
    assert cfg["kind"] == "host+queue" and cfg["trials"] == 2 and not cfg["comparable"]
    header = json.loads((out / "ledger.jsonl").read_text().splitlines()[0])
    assert set(header["policies"]) == {"trivial", "pacing+jenks"}
    # the same configuration spelled the other way resumes the same ledger: one name everywhere
    assert main(["leaderboard", "small-cubic", "--quick", "--trials", "2", "--experiments", "mrae,short",
                 "--policies", "trivial,pacing+jenks", "--out", str(out), "--resume", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["units_run"] == 0


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")
def test_netns_pacing_pi_paces_the_kernel_dtn_while_the_pi_sets_u() -> None:
    from scidmz.scenario import load_scenario

    sc = load_scenario(SCENARIO).with_overrides(["campus.hosts=2", "link.capacity=40M", "dtn.streams=2"])
    config = Configuration([Spy(m) for m in build_run(SCENARIO, policy="pi+pacing").policy.members.values()])
    tg = np.repeat([12e6, 20e6], 5)
    with make_plant("netns", sc, prefix=f"cfg{os.getpid() % 10000}", telemetry="kernel") as pl:
        tr = run_episode(pl, config, tg, seed=4)[0]
    assert tr.meta["policy"] == "pacing+pi" and np.all(np.isfinite(tr.column("rate_dtn")))
    np.testing.assert_array_equal(tr.column("pacing"), tg)  # the kernel DTN's sockets paced at the target
    assert tr.column("dtn_paced_sockets")[-1] >= 2
    pi_u = np.vstack(config.members["rate"].calls["decide"])[:, 0]
    np.testing.assert_array_equal(tr.column("u"), np.clip(pi_u, sc.u_min, sc.u_max))  # u is the PI's
