"""The hardware plant's host place without root: ``AgentPacer`` against the agent's real HTTP API.

The agent's own app (``agent.api.build_app``) is served in-process over a core
that records what the controller asked (no sockets are paced: that needs
rights and is what ``tests/test_rehearsal_dtn_agent.py`` does on real
namespaces). Checked: the split among several agents on their reported demand, the token pairing
rules, the start-up check as one line, a lost agent as ``HostAgentError`` (the
controller's ``host_agent`` cause), the lease renewed in periods without a rate,
the lift at close, and that the plant declares the host capability only with
agents.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("uvicorn")

from scidmz.actuators.host_agent import (  # noqa: E402
    FLOOR,
    AgentPacer,
    HostAgentError,
    agent_token_files,
    split_on_demand,
)


class RecordingCore:
    """What the agent's API calls on its core, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.leased = False
        self.sent: float | None = None  # what the DTN "delivered" over the agent's last period

    def delivered(self) -> float | None:
        return self.sent

    def set_rate(self, bps: float) -> float:
        self.calls.append(("rate", bps))
        self.leased = True
        return bps

    def renew(self) -> bool:
        self.calls.append(("renew", None))
        return self.leased

    def lift(self, why: str) -> int:
        self.calls.append(("lift", why))
        self.leased = False
        return 3

    def status(self) -> dict[str, Any]:
        return {"state": "pacing" if self.leased else "idle", "connections": []}

    class lease:  # noqa: N801 - the attribute the API reads
        @staticmethod
        def remaining() -> float:
            return 1.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[list[tuple[str, Path, RecordingCore, Any]]]:
    from scidmz.agent.api import AgentServer, build_app

    out = []
    try:
        for i in range(2):
            core, tok = RecordingCore(), tmp_path / f"a{i}.token"
            tok.write_text(json.dumps({"token": f"secret-token-number-{i}"}))
            os.chmod(tok, 0o600)
            srv = AgentServer("127.0.0.1", 0)
            _, port = srv.bind()
            srv.start(build_app(core, f"secret-token-number-{i}"))
            out.append((f"http://127.0.0.1:{port}", tok, core, srv))
        yield out
    finally:
        for *_, srv in out:
            srv.stop()


def test_split_renew_lift(agents: list[tuple[str, Path, RecordingCore, Any]]) -> None:
    pacer = AgentPacer([a[0] for a in agents], [str(a[1]) for a in agents], period=1.0)
    assert len(pacer.check()) == 2
    pacer.set_pacing(np.array([300e6]))
    assert [a[2].calls for a in agents] == [[("rate", 150e6)], [("rate", 150e6)]]
    pacer.keep()  # a rate was set this period: no renewal needed
    pacer.keep()  # a period without one (the controller's fallback): the lease is renewed
    assert all(a[2].calls[-1] == ("renew", None) for a in agents)
    agents[1][2].leased = False  # that agent restarted: it is given its rate again
    pacer.keep()
    assert agents[1][2].calls[-1] == ("rate", 150e6)
    assert [s["error"] for s in pacer.status()] == [None, None]
    pacer.close()
    assert all(a[2].calls[-1][0] == "lift" for a in agents)


def test_the_split_follows_what_each_dtn_delivered(agents: list[tuple[str, Path, RecordingCore, Any]]) -> None:
    pacer = AgentPacer([a[0] for a in agents], [str(a[1]) for a in agents], period=1.0)
    pacer.set_pacing(300e6)  # nothing measured yet: both unbounded, an even split
    assert [a[2].calls[-1] for a in agents] == [("rate", 150e6), ("rate", 150e6)]
    agents[0][2].sent, agents[1][2].sent = 10e6, 149e6  # DTN 0 held back by its disks, DTN 1 saturated
    pacer.keep()  # the renewal's answer carries the new readings
    pacer.keep()
    assert [s["delivered"] for s in pacer.status()] == [10e6, 149e6]
    pacer.set_pacing(300e6)
    floor = FLOOR * 150e6  # 1.25 x 10 Mbit/s is below DTN 0's floor: the floor, the rest to DTN 1
    assert [a[2].calls[-1] for a in agents] == [("rate", floor), ("rate", 300e6 - floor)]


@pytest.mark.parametrize(("delivered", "last", "want"), [
    ([None, None, None], [None, None, None], [100e6, 100e6, 100e6]),  # nothing known: even
    ([0.0, 150e6], [150e6, 150e6], [15e6, 285e6]),  # an idle DTN keeps its floor only
    # both held back (1.25 x delivered granted), what neither wants spread evenly over both
    ([100e6, 95e6], [150e6, 150e6], [153.125e6, 146.875e6]),
    ([40e6, 200e6], [100e6, 200e6], [50e6, 250e6]),  # held back to 1.25 x 40, the saturated one takes the rest
])
def test_split_on_demand_table(delivered: list, last: list, want: list[float]) -> None:
    got = split_on_demand(sum(want), delivered, last)
    assert got == pytest.approx(want)


def test_split_on_demand_always_sums_to_the_target_and_keeps_every_floor() -> None:
    rng = np.random.default_rng(7)
    for _ in range(500):
        n = int(rng.integers(1, 6))
        total = float(rng.uniform(1e6, 1e10))
        last = [None if rng.random() < 0.2 else float(rng.uniform(0, total)) for _ in range(n)]
        delivered = [None if rng.random() < 0.2 else float(rng.uniform(0, 2 * total)) for _ in range(n)]
        got = split_on_demand(total, delivered, last)
        assert sum(got) == pytest.approx(total, rel=1e-9)
        assert min(got) >= FLOOR * total / n * (1 - 1e-12)


def test_a_lost_agent_is_a_host_agent_error(agents: list[tuple[str, Path, RecordingCore, Any]]) -> None:
    pacer = AgentPacer([a[0] for a in agents], [str(a[1]) for a in agents], period=1.0)
    agents[0][3].stop()
    with pytest.raises(HostAgentError, match="1 of 2 DTN agent"):
        pacer.set_pacing(200e6)
    assert agents[1][2].calls == [("rate", 100e6)]  # the other one is still set
    assert pacer.status()[0]["error"] and pacer.status()[1]["error"] is None
    pacer.keep()  # never raises


def test_the_agents_are_asked_at_once(agents: list[tuple[str, Path, RecordingCore, Any]]) -> None:
    """Each period's calls, the renewals and the lift reach every agent at the same time: both agents'
    cores wait on one barrier, which only concurrent requests pass (asked one after the other, the
    first would wait out the client's timeout and the period would fail)."""
    import threading

    barrier = threading.Barrier(2, timeout=5.0)

    def meeting(f: Any) -> Any:
        def meet(*a: Any) -> Any:
            barrier.wait()
            return f(*a)
        return meet

    for _, _, core, _ in agents:
        for name in ("set_rate", "renew", "lift"):
            setattr(core, name, meeting(getattr(core, name)))
    pacer = AgentPacer([a[0] for a in agents], [str(a[1]) for a in agents], period=8.0)  # a 2 s timeout
    pacer.set_pacing(200e6)
    assert [a[2].calls for a in agents] == [[("rate", 100e6)], [("rate", 100e6)]]
    pacer.keep()
    pacer.keep()
    assert [s["error"] for s in pacer.status()] == [None, None]
    pacer.close()
    assert [a[2].calls[-1][0] for a in agents] == ["lift", "lift"] and pacer._pool is None


def test_start_up_check_is_one_line(agents: list[tuple[str, Path, RecordingCore, Any]], tmp_path: Path) -> None:
    from scidmz.plant.hardware_host import open_host
    from scidmz.scenario import load_scenario

    sc = load_scenario("testbed")
    url, tok = agents[0][0], agents[0][1]
    wrong = tmp_path / "wrong.token"
    wrong.write_text(json.dumps({"token": "x" * 20}))
    with pytest.raises(PermissionError, match="refused the token"):
        open_host(sc, [url], str(wrong))
    with pytest.raises(ValueError, match="does not answer"):
        open_host(sc, [f"http://127.0.0.1:{_free_port()}"], str(tok))
    assert open_host(sc, None, None) is None
    with pytest.raises(ValueError, match="is for a --dtn-agent URL"):
        open_host(sc, None, [str(tok)])


def test_token_pairing() -> None:
    assert agent_token_files(["u1", "u2"], ["t"]) == ["t", "t"]
    assert agent_token_files(["u1", "u2"], ["t1", "t2"]) == ["t1", "t2"]
    with pytest.raises(ValueError, match="needs the agent's token file"):
        agent_token_files(["u1"], None)
    with pytest.raises(ValueError, match="one per agent in the same order"):
        agent_token_files(["u1", "u2", "u3"], ["t1", "t2"])


def test_the_host_capability_comes_with_agents(agents: list[tuple[str, Path, RecordingCore, Any]]) -> None:
    from scidmz.plant.base import plant_capabilities
    from scidmz.plant.hardware import HardwarePlant, HostHardwarePlant
    from scidmz.scenario import load_scenario

    class Act:
        def set_rate(self, bps: float) -> None: ...
        def current_rate(self) -> float: return 0.0
        def close(self) -> None: ...

    class View:
        def clock(self) -> float: return 0.0
        def read_class_counters(self) -> Any: ...
        def read_register(self, *a: Any) -> Any: ...
        def drain_digests(self) -> list[Any]: return []

    sc = load_scenario("testbed")
    assert "host" not in plant_capabilities(HardwarePlant(sc, Act(), View()))
    pacer = AgentPacer([agents[0][0]], [str(agents[0][1])], period=1.0)
    plant = HostHardwarePlant(sc, Act(), View(), host=pacer)
    assert "host" in plant_capabilities(plant)
    plant.set_pacing(np.array([50e6]))
    assert agents[0][2].calls == [("rate", 50e6)]
    plant.close()
    plant.close()
    assert [c[0] for c in agents[0][2].calls] == ["rate", "lift"]  # lifted once


def test_plant_flags_are_the_hardware_plants() -> None:
    from scidmz.commands.build import plant_choice

    spec = plant_choice("hardware", telemetry="ebpf:a,b", dev="b", dtn_agent=["http://192.0.2.7:8643"],
                        dtn_agent_token=["/etc/scidmz/agent.token"])
    assert spec.options["dtn_agent"] == ["http://192.0.2.7:8643"]
    with pytest.raises(ValueError, match="--dtn-agent: for --plant hardware only"):
        plant_choice("fluid", dtn_agent=["http://192.0.2.7:8643"])
    assert "dtn_agent" not in plant_choice("fluid", dtn_agent=[]).options


def test_the_loop_falls_back_on_a_lost_agent_and_recovers(tmp_path: Path) -> None:
    """The live loop with the fluid plant whose host place fails for a while: cause ``host_agent``, the
    trivial rate, the loop keeps running, the policy takes over again once the agent answers."""
    import threading
    import time

    from scidmz.controller.loop import ControlLoop
    from scidmz.plant import make_plant
    from scidmz.policies import make_policy
    from scidmz.scenario import load_scenario

    sc = load_scenario("testbed").replace(period=0.05)
    inner = make_plant("fluid", sc)
    inner.reset(0)
    inner.step(50e6)  # JIT-compiles the fluid kernel now, not as a late first sample of the loop

    class LosesItsAgent:
        """The fluid plant, whose ``set_pacing`` fails as an unreachable agent does while ``lost`` is set."""

        lost = threading.Event()

        def __getattr__(self, name: str) -> Any:
            return getattr(inner, name)

        def set_pacing(self, rates: np.ndarray) -> None:
            if self.lost.is_set():
                raise HostAgentError("cannot set the rate on 1 of 1 DTN agent(s): agent http://x does not answer")
            inner.set_pacing(rates)

    plant = LosesItsAgent()
    # A loaded machine's late sample must not turn into a telemetry fallback here: only the agent's is tested.
    loop = ControlLoop(plant, make_policy("pacing"), 60e6, log=tmp_path / "loop.jsonl", telemetry_timeout=10.0)
    t = threading.Thread(target=loop.run)
    t.start()
    try:
        deadline = time.monotonic() + 30
        while loop.k < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        plant.lost.set()
        while loop.fallback_cause != "host_agent" and time.monotonic() < deadline:
            time.sleep(0.02)
        st = loop.status()
        k_lost = loop.k
        while loop.k < k_lost + 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert loop.fallback_cause == "host_agent" and t.is_alive()  # still running, still on the fallback
        plant.lost.clear()
        while loop.fallback and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not loop.fallback
    finally:
        loop.stop("test over")
        t.join(15)
    assert st["fallback_reason"].startswith("DTN agent unreachable") and st["u"] == sc.trivial_rate(60e6)
    assert st["errors"].get("host_agent", 0) >= 1


def test_shadow_mode_sets_no_rate_on_the_agents(agents: list[tuple[str, Path, RecordingCore, Any]]) -> None:
    """``control run --shadow`` with agents: they are checked, the shares are reported, nothing is set."""
    from scidmz.controller.build import _shadow_options
    from scidmz.plant.hardware_host import open_host
    from scidmz.scenario import load_scenario

    opts = _shadow_options("hardware", {"telemetry": "ebpf:a,b", "dev": "b", "dtn_agent": [agents[0][0]],
                                        "dtn_agent_token": [str(agents[0][1])]})
    assert opts["host_shadow"] is True
    pacer = open_host(load_scenario("testbed"), [a[0] for a in agents], [str(a[1]) for a in agents], shadow=True)
    pacer.set_pacing(80e6)
    pacer.keep()
    pacer.keep()
    pacer.close()
    assert [a[2].calls for a in agents] == [[], []]
    assert [s["rate"] for s in pacer.status()] == [40e6, 40e6] and pacer.status()[0]["shadow"]
