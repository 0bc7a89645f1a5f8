"""``scidmz agent`` on real kernel TCP: a DTN namespace sending to a receiver namespace through a veth.

The agent runs in the DTN namespace as an admin runs it (the CLI, a state
directory, its token file) and is driven over a management veth from the test,
through ``AgentClient``. The senders are unmodified iperf3 processes. What the
kernel did is read independently of the agent: each socket's maximum pacing
rate from ``ss -tin`` (``pacing_rate X/Ybps``: Y is ``SO_MAX_PACING_RATE``) and the
delivered rate from the receiver interface's byte counter (Ethernet frame bytes).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scidmz.agent.client import AgentClient

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 missing (apt-get install iperf3)")]

TAG = f"agt{os.getpid() % 100000}"
DTN, RCV = f"{TAG}d", f"{TAG}r"
DTN_IP, RCV_IP, OTHER_IP = "10.251.1.1", "10.251.1.2", "10.251.1.3"  # OTHER_IP: a peer outside the prefix
_M = os.getpid() % 250 + 1
MGMT_ROOT, MGMT_DTN = f"169.254.{_M}.1", f"169.254.{_M}.2"
PERIOD = 0.5
SRC = str(Path(__file__).resolve().parents[1] / "src")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def net() -> Iterator[list[subprocess.Popen]]:
    _ip("netns", "add", DTN)
    _ip("netns", "add", RCV)
    servers: list[subprocess.Popen] = []
    try:
        _ip("link", "add", f"{TAG}a", "netns", DTN, "type", "veth", "peer", "name", f"{TAG}b", "netns", RCV)
        _ip("link", "add", f"{TAG}m", "type", "veth", "peer", "name", f"{TAG}n", "netns", DTN)
        _ip("-n", DTN, "addr", "add", f"{DTN_IP}/24", "dev", f"{TAG}a")
        _ip("-n", RCV, "addr", "add", f"{RCV_IP}/24", "dev", f"{TAG}b")
        _ip("-n", RCV, "addr", "add", f"{OTHER_IP}/24", "dev", f"{TAG}b")
        _ip("addr", "add", f"{MGMT_ROOT}/30", "dev", f"{TAG}m")
        _ip("-n", DTN, "addr", "add", f"{MGMT_DTN}/30", "dev", f"{TAG}n")
        for ns, dev in ((DTN, f"{TAG}a"), (RCV, f"{TAG}b"), (DTN, f"{TAG}n"), (DTN, "lo"), (RCV, "lo")):
            _ip("-n", ns, "link", "set", dev, "up")
        _ip("link", "set", f"{TAG}m", "up")
        for port in (5201, 5202, 5203, 5204):
            servers.append(subprocess.Popen(["ip", "netns", "exec", RCV, "iperf3", "-s", "-p", str(port)],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.5)
        yield servers
    finally:
        for p in servers:
            p.kill()
            p.wait()
        subprocess.run(["ip", "link", "del", f"{TAG}m"], capture_output=True)
        subprocess.run(["ip", "netns", "del", DTN], capture_output=True)
        subprocess.run(["ip", "netns", "del", RCV], capture_output=True)


class Agent:
    """``scidmz agent`` in the DTN namespace; stderr kept for its log lines."""

    def __init__(self, state: Path, *extra: str) -> None:
        self.state = state
        self.token = state / "agent.token"
        env = {**os.environ, "PYTHONPATH": SRC}
        self.err = open(state / "agent.err", "a")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", DTN, sys.executable, "-m", "scidmz.cli", "agent", "--prefix", f"{RCV_IP}/32",
             "--api", f"{MGMT_DTN}:8643", "--state-dir", str(state), "--period", f"{PERIOD}s",
             "--lease-periods", "2", "--json", *extra],
            env=env, stdout=subprocess.PIPE, stderr=self.err, text=True)
        deadline = time.monotonic() + 20
        while "API at" not in self.log():
            assert self.proc.poll() is None and time.monotonic() < deadline, self.log()
            time.sleep(0.1)
        self.client = AgentClient(f"http://{MGMT_DTN}:8643", self.token)

    def log(self) -> str:
        return (self.state / "agent.err").read_text()

    def stop(self, sig: int = signal.SIGTERM) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        out, _ = self.proc.communicate(timeout=15)
        self.err.close()
        return out


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path


#: Both mechanisms: pidfd_getfd + setsockopt (the default) and the BPF TCP iterator.
MECHANISMS = pytest.mark.parametrize("mech", ["pidfd", "bpf"])


def iperf(port: int, streams: int, secs: float, dst: str = RCV_IP, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(["ip", "netns", "exec", DTN, "iperf3", "-c", dst, "-p", str(port), "-P", str(streams),
                             "-t", str(secs), "-C", "cubic", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def ss_max_rates(dst: str, port: int) -> list[int | None]:
    """Each established data socket's SO_MAX_PACING_RATE in bit/s (None: not set), per ss."""
    out = subprocess.run(["ip", "netns", "exec", DTN, "ss", "-tin", "dst", f"{dst}:{port}"],
                         capture_output=True, text=True, check=True).stdout
    rates = []
    for block in out.split("\nESTAB")[1:]:
        m = re.search(r"bytes_acked:(\d+)", block)
        if m is None or int(m.group(1)) < 20000:
            continue  # iperf3's control connection (a few hundred bytes) is not a data stream
        m = re.search(r"pacing_rate \d+bps/(\d+)bps", block)
        rates.append(int(m.group(1)) if m else None)
    return rates


def rx_rate(seconds: float) -> float:
    """Frame bit/s arriving at the receiver over ``seconds``."""
    def rx() -> int:
        out = subprocess.run(["ip", "-n", RCV, "-s", "-j", "link", "show", "dev", f"{TAG}b"], capture_output=True,
                             text=True, check=True).stdout
        return int(json.loads(out)[0]["stats64"]["rx"]["bytes"])

    a, t = rx(), time.monotonic()
    time.sleep(seconds)
    return (rx() - a) * 8 / (time.monotonic() - t)


class Renewer:
    """Renews the agent's lease every period, as the controller does, while in a ``with``."""

    def __init__(self, client: AgentClient) -> None:
        import threading

        self.client, self.stop = client, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(PERIOD):
            self.client.renew()

    def __enter__(self) -> Renewer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def wait_for(cond, timeout: float) -> bool:  # noqa: ANN001 - a test helper
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return bool(cond())


@MECHANISMS
def test_the_dtn_follows_the_rate_new_connections_join_and_sigterm_lifts(net: list, state: Path, mech: str) -> None:
    agent = Agent(state, "--mechanism", mech)
    try:
        agent.client.set_rate(200e6)
        flows = iperf(5201, 4, 14)
        with Renewer(agent.client):
            assert wait_for(lambda: len(ss_max_rates(RCV_IP, 5201)) == 4 and None not in ss_max_rates(RCV_IP, 5201),
                            2 * PERIOD + 1), ss_max_rates(RCV_IP, 5201)
            time.sleep(1.0)
            r200 = rx_rate(2.0)
            agent.client.set_rate(100e6)
            time.sleep(2 * PERIOD)  # re-target within two periods
            r100 = rx_rate(2.0)
            # four more connections of another sender join: each is paced within a period (polled by ss)
            more = iperf(5202, 4, 6)
            assert wait_for(lambda: len(ss_max_rates(RCV_IP, 5202)) == 4, 3.0)
            t_seen = time.monotonic()
            assert wait_for(lambda: None not in ss_max_rates(RCV_IP, 5202), PERIOD + 0.5), \
                (ss_max_rates(RCV_IP, 5202), agent.log())
            joined = time.monotonic() - t_seen
            time.sleep(PERIOD)
            r8 = rx_rate(1.5)
            st = agent.client.status()
        # 8 data streams and each iperf3's control connection: all to the prefix, all paced
        assert len(st["connections"]) == 10 and st["paced"] == 10, st["connections"]
        assert abs(sum(c["share"] for c in st["connections"]) - 100e6) < 1e3  # the shares sum to R
        assert all(c["delivery_rate"] is not None for c in st["connections"])
        out = agent.stop()
        # SIGTERM: every cap lifted while the transfers go on
        assert ss_max_rates(RCV_IP, 5201) and all(r is None for r in ss_max_rates(RCV_IP, 5201))
        assert json.loads(out.strip().splitlines()[-1])["sets"] >= 8
        flows.kill()
        more.kill()
    finally:
        agent.stop(signal.SIGKILL)
    print(f"rates: {r200 / 1e6:.1f} {r100 / 1e6:.1f} {r8 / 1e6:.1f} Mbit/s; new connections paced in {joined:.2f} s")
    assert abs(r200 / 200e6 - 1) < 0.15, r200
    assert abs(r100 / 100e6 - 1) < 0.15, r100
    assert abs(r8 / 100e6 - 1) < 0.2, r8


def test_the_lease_runs_out_pacing_is_lifted_and_reported(net: list, state: Path) -> None:
    agent = Agent(state)
    flows = iperf(5201, 2, 6, RCV_IP, "-b", "150M")  # app-limited, so the lifted run stays small
    try:
        agent.client.set_rate(100e6)
        assert wait_for(lambda: ss_max_rates(RCV_IP, 5201) and None not in ss_max_rates(RCV_IP, 5201), 3.0)
        # no renewal: the lease (2 periods) runs out, and the next period lifts
        assert wait_for(lambda: all(r is None for r in ss_max_rates(RCV_IP, 5201)), 2 * PERIOD + 2 * PERIOD + 0.5)
        st = agent.client.status()
        assert st["state"] == "lease_expired" and st["rate"] is None and st["counts"]["lease_expiries"] == 1
        assert agent.client.renew() is False  # nothing to renew: the controller must set the rate again
        assert agent.log().count("lease expired") == 1
    finally:
        flows.kill()
        agent.stop()


@MECHANISMS
def test_nothing_outside_the_matching_sockets_is_touched(net: list, state: Path, mech: str) -> None:
    """A connection to a peer outside the prefix keeps its own pacing (30M set by iperf3) and an
    unpaced one stays unpaced, while the matching ones are paced."""
    own = iperf(5203, 1, 6, OTHER_IP, "--fq-rate", "30M")
    plain = iperf(5204, 1, 6, OTHER_IP, "-b", "20M")
    agent = Agent(state, "--mechanism", mech)
    ours = iperf(5201, 2, 6)
    try:
        assert wait_for(lambda: len(ss_max_rates(OTHER_IP, 5203)) == 1 and len(ss_max_rates(OTHER_IP, 5204)) == 1, 3)
        before = (ss_max_rates(OTHER_IP, 5203), ss_max_rates(OTHER_IP, 5204))
        assert before[0][0] is not None and before[1] == [None]
        agent.client.set_rate(80e6)
        assert wait_for(lambda: len(ss_max_rates(RCV_IP, 5201)) == 2 and None not in ss_max_rates(RCV_IP, 5201), 3)
        with Renewer(agent.client):
            time.sleep(3 * PERIOD)
        after = (ss_max_rates(OTHER_IP, 5203), ss_max_rates(OTHER_IP, 5204))
        assert after == before
        assert {c["peer"] for c in agent.client.status()["connections"]} == {RCV_IP}
    finally:
        for p in (own, plain, ours):
            p.kill()
        agent.stop()


@MECHANISMS
def test_a_killed_agent_is_reclaimed_by_the_next_start(net: list, state: Path, mech: str) -> None:
    first = Agent(state, "--mechanism", mech)
    flows = iperf(5201, 4, 8, RCV_IP, "-b", "100M")
    try:
        first.client.set_rate(120e6)
        assert wait_for(lambda: len(ss_max_rates(RCV_IP, 5201)) == 4 and None not in ss_max_rates(RCV_IP, 5201), 3)
        first.stop(signal.SIGKILL)  # no chance to lift: the sockets stay paced
        time.sleep(0.3)
        assert None not in ss_max_rates(RCV_IP, 5201)
        second = Agent(state, "--mechanism", mech)  # same state directory: it finds the dead agent's record
        try:
            assert wait_for(lambda: all(r is None for r in ss_max_rates(RCV_IP, 5201)), 2.0)
            # the 4 streams and iperf3's control connection (also to the prefix)
            assert "reclaimed: lifted pacing from 5 connections" in second.log()
        finally:
            second.stop()
    finally:
        flows.kill()
        first.stop(signal.SIGKILL)


def test_shadow_mode_computes_shares_and_paces_nothing(net: list, state: Path) -> None:
    agent = Agent(state, "--shadow")
    flows = iperf(5201, 2, 4, RCV_IP, "-b", "50M")
    try:
        agent.client.set_rate(60e6)
        with Renewer(agent.client):
            # the two streams and iperf3's control connection
            assert wait_for(lambda: len(agent.client.status()["connections"]) == 3, 3)
            time.sleep(2 * PERIOD)
            st = agent.client.status()
        assert st["mode"] == "shadow" and st["paced"] == 0 and st["rate"] == 60e6
        assert agent.client.check()["mode"] == "shadow"  # the controller's start-up check passes
        assert abs(sum(c["share"] for c in st["connections"]) - 60e6) < 1e3
        assert ss_max_rates(RCV_IP, 5201) == [None, None]
    finally:
        flows.kill()
        agent.stop()


def test_ipv6_peers_host_tbf_cap_metrics_and_a_wrong_token(net: list, state: Path) -> None:
    """An IPv6 prefix is paced like an IPv4 one; a TBF the admin put on the DTN's interface is reported
    as binding when it caps below R (and is left as it was); /metrics needs the token."""
    dev = f"{TAG}a"
    _ip("-n", DTN, "addr", "add", "fd00:251::1/64", "dev", dev, "nodad")
    _ip("-n", RCV, "addr", "add", "fd00:251::2/64", "dev", f"{TAG}b", "nodad")
    subprocess.run(["ip", "netns", "exec", DTN, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", "50mbit",
                    "burst", "64kb", "latency", "50ms"], check=True)
    qdisc_before = subprocess.run(["ip", "netns", "exec", DTN, "tc", "qdisc", "show", "dev", dev],
                                  capture_output=True, text=True).stdout
    agent = Agent(state, "--prefix", "fd00:251::2/128")
    flows = iperf(5201, 2, 6, "fd00:251::2", "-b", "40M")
    try:
        agent.client.set_rate(100e6)
        with Renewer(agent.client):
            assert wait_for(lambda: len(ss_max_rates("[fd00:251::2]", 5201)) == 2
                            and None not in ss_max_rates("[fd00:251::2]", 5201), 3), ss_max_rates("[fd00:251::2]", 5201)
            st = agent.client.status()
            assert {c["peer"] for c in st["connections"]} == {"fd00:251::2"}
            caps = st["host_caps"]["caps"]
            assert caps == [{"dev": dev, "qdisc": "tbf", "scope": "aggregate", "rate": 50e6}], st["host_caps"]
            assert st["binding"] and "tbf" in st["binding"][0]
            metrics = subprocess.run(["curl", "-s", "-H", f"Authorization: Bearer {agent.client.token}",
                                      f"http://{MGMT_DTN}:8643/metrics"], capture_output=True, text=True).stdout
            assert "scidmz_agent_paced_connections 3.0" in metrics and "scidmz_agent_host_cap_binding 1.0" in metrics
        bad = AgentClient(f"http://{MGMT_DTN}:8643", agent.token)
        bad.token = "not-the-token-" + "x" * 20
        with pytest.raises(PermissionError, match="refused the token"):
            bad.status()
    finally:
        flows.kill()
        agent.stop()
        after = subprocess.run(["ip", "netns", "exec", DTN, "tc", "qdisc", "show", "dev", dev],
                               capture_output=True, text=True).stdout
        subprocess.run(["ip", "netns", "exec", DTN, "tc", "qdisc", "del", "dev", dev, "root"], capture_output=True)
    assert after == qdisc_before  # the agent never touches a qdisc
