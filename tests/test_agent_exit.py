"""Every exit path of the agent lifts what it set, and a start never takes over a live agent's record.

The senders are a child process's TCP connections on loopback (their peer is the
agent's prefix); what the kernel holds is read back with sock_diag.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from scidmz.agent.core import DtnAgent
from scidmz.agent.diag import UNLIMITED, DiagSocket
from scidmz.agent.match import SocketFilter
from scidmz.agent.serve import serve

pytestmark = pytest.mark.root

PEER = "127.0.0.47"
SRC = str(Path(__file__).resolve().parents[1] / "src")
SENDER = r'''
import socket, sys, time
ls = socket.create_server(("127.0.0.47", 0)); port = ls.getsockname()[1]
held = []
for _ in range(3):
    c = socket.create_connection(("127.0.0.47", port), source_address=("127.0.0.1", 0))
    held += [c, ls.accept()[0]]
print(port, flush=True)
time.sleep(60)
'''


@pytest.fixture
def sender() -> tuple[int, subprocess.Popen]:
    p = subprocess.Popen([sys.executable, "-c", SENDER], stdout=subprocess.PIPE, text=True)
    port = int(p.stdout.readline())
    yield port, p
    p.kill()
    p.wait()


def _options(port: int) -> list[int]:
    d = DiagSocket()
    try:
        return [s.max_pacing_rate for s in d.dump() if s.peer == PEER and s.rport == port]
    finally:
        d.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Failing(DtnAgent):
    """Fails in its fifth period, after pacing (an unexpected error in the loop)."""

    seen: list[int] = []

    def step(self) -> None:
        super().step()
        if self.k == 5:
            Failing.seen = list(_options(self._port))
            raise RuntimeError("injected failure in the period loop")


def test_an_error_in_the_loop_lifts_every_cap(sender: tuple[int, subprocess.Popen], tmp_path: Path) -> None:
    port, _ = sender
    agent = Failing(SocketFilter.build([f"{PEER}/32"], [str(port)]), period=0.1, lease_periods=50,
                    record_path=str(tmp_path / "agent.record.json"))
    agent._port = port
    with pytest.raises(RuntimeError, match="injected failure"):
        serve(agent, f"127.0.0.1:{_free_port()}", str(tmp_path / "agent.token"), threading.Event(),
              on_ready=lambda _addr: agent.set_rate(30e6))
    assert len(Failing.seen) == 3 and UNLIMITED not in Failing.seen  # paced when it failed
    assert _options(port) == [UNLIMITED] * 3  # and lifted on the way out
    assert not (tmp_path / "agent.record.json").exists()


def test_a_second_agent_refuses_a_live_ones_record_and_leaves_it(sender: tuple[int, subprocess.Popen],
                                                                 tmp_path: Path) -> None:
    port, _ = sender
    env = {**os.environ, "PYTHONPATH": SRC}
    argv = [sys.executable, "-m", "scidmz.cli", "agent", "--prefix", f"{PEER}/32", "--ports", str(port),
            "--state-dir", str(tmp_path), "--period", "0.2s"]
    first = subprocess.Popen([*argv, "--api", f"127.0.0.1:{_free_port()}"], env=env, stderr=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, text=True)
    try:
        record = tmp_path / "agent.record.json"
        deadline = time.monotonic() + 20
        while not record.exists():
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        before = json.loads(record.read_text())
        r = subprocess.run([*argv, "--api", f"127.0.0.1:{_free_port()}"], env=env, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 1 and f"another scidmz agent (pid {first.pid})" in r.stderr, r.stderr
        assert json.loads(record.read_text())["owner_pid"] == before["owner_pid"] == first.pid
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(15)


@pytest.mark.parametrize("first,second", [("bpf", "pidfd"), ("pidfd", "bpf")])
def test_a_killed_agent_is_reclaimed_by_the_other_mechanism(sender: tuple[int, subprocess.Popen], tmp_path: Path,
                                                            first: str, second: str) -> None:
    """An admin who switches mechanisms after a crash still gets the dead agent's caps lifted
    (a bpf record names no owners; the pidfd agent finds them)."""
    from scidmz.agent.client import AgentClient

    port, _ = sender
    env = {**os.environ, "PYTHONPATH": SRC}

    def start(mech: str, api: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "scidmz.cli", "agent", "--prefix", f"{PEER}/32", "--ports",
                                 str(port), "--api", f"127.0.0.1:{api}", "--state-dir", str(tmp_path), "--period",
                                 "0.2s", "--lease-periods", "100", "--mechanism", mech],
                                env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)

    def wait(cond, timeout: float) -> bool:  # noqa: ANN001 - a test helper
        deadline = time.monotonic() + timeout
        while not cond() and time.monotonic() < deadline:
            time.sleep(0.05)
        return cond()

    api = _free_port()
    a = start(first, api)
    try:
        assert wait(lambda: (tmp_path / "agent.token").exists() and not _port_closed(api), 20)
        AgentClient(f"http://127.0.0.1:{api}", tmp_path / "agent.token").set_rate(30e6)
        assert wait(lambda: UNLIMITED not in _options(port), 3), _options(port)
    finally:
        a.kill()
        a.wait()
    assert UNLIMITED not in _options(port)
    b = start(second, _free_port())
    try:
        assert wait(lambda: _options(port) == [UNLIMITED] * 3, 20), _options(port)
    finally:
        b.send_signal(signal.SIGTERM)
        err = b.communicate(timeout=15)[1]
    assert "reclaimed: lifted pacing from 3 connections" in err, err


def _port_closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0
