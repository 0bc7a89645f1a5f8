"""The rights the agent's mechanism needs, measured: CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH, no more.

A sender runs as another user (``nobody``), as a transfer tool on a DTN does
beside a dedicated agent user. The agent runs with a capability bounding set of
those two alone and paces that sender's sockets; without either, the agent
refuses to start (exit 2, one line naming the right) and the kernel refuses
what it would do (``pidfd_getfd``: EPERM; listing ``/proc/PID/fd``: EACCES), so
the checks are not a formality.
(The agent runs as uid 0 here, with its capabilities cut down, only because
this machine's Python lives under /root, where another user cannot run it; a
different uid from the sender's is what makes ptrace access need the capability.)
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scidmz.agent.client import AgentClient

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(shutil.which("iperf3") is None or shutil.which("setpriv") is None,
                                 reason="iperf3 and setpriv (util-linux) needed")]

PEER = "127.0.0.29"
SRC = str(Path(__file__).resolve().parents[1] / "src")
NOBODY = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
_TWO = "+sys_ptrace,+dac_read_search"
ONLY_THE_TWO = ["setpriv", f"--bounding-set=-all,{_TWO}", f"--inh-caps=-all,{_TWO}", f"--ambient-caps=-all,{_TWO}"]
NO_PTRACE = ["setpriv", "--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace"]
ONLY_PTRACE = ["setpriv", "--bounding-set=-all,+sys_ptrace", "--inh-caps=-all,+sys_ptrace",
               "--ambient-caps=-all,+sys_ptrace"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _max_rates(port: int) -> list[int | None]:
    out = subprocess.run(["ss", "-tin", "dst", f"{PEER}:{port}"], capture_output=True, text=True).stdout
    rates = []
    for block in out.split("\nESTAB")[1:]:
        m = re.search(r"bytes_acked:(\d+)", block)
        if m is None or int(m.group(1)) < 20000:
            continue
        m = re.search(r"pacing_rate \d+bps/(\d+)bps", block)
        rates.append(int(m.group(1)) if m else None)
    return rates


@pytest.fixture
def sender() -> tuple[int, subprocess.Popen]:
    port = _free_port()
    server = subprocess.Popen([*NOBODY, "iperf3", "-s", "-p", str(port), "-B", PEER],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.4)
    client = subprocess.Popen([*NOBODY, "iperf3", "-c", PEER, "-p", str(port), "-P", "2", "-b", "30M", "-t", "8"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 5
    while len(_max_rates(port)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    yield port, client
    for p in (client, server):
        p.kill()
        p.wait()


_BPF = "+bpf,+perfmon"
ONLY_BPF = ["setpriv", f"--bounding-set=-all,{_BPF}", f"--inh-caps=-all,{_BPF}", f"--ambient-caps=-all,{_BPF}"]


@pytest.mark.parametrize("mech,caps", [("pidfd", ONLY_THE_TWO), ("bpf", ONLY_BPF)])
def test_the_mechanisms_rights_alone_pace_another_users_sender(sender: tuple[int, subprocess.Popen],
                                                              tmp_path: Path, mech: str, caps: list[str]) -> None:
    """pidfd: CAP_SYS_PTRACE + CAP_DAC_READ_SEARCH; bpf: CAP_BPF + CAP_PERFMON; nothing else."""
    port, _ = sender
    api = _free_port()
    agent = subprocess.Popen([*caps, sys.executable, "-m", "scidmz.cli", "agent", "--prefix", f"{PEER}/32",
                              "--ports", str(port), "--api", f"127.0.0.1:{api}", "--state-dir", str(tmp_path),
                              "--period", "0.5s", "--mechanism", mech],
                             env={**os.environ, "PYTHONPATH": SRC}, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        token = tmp_path / "agent.token"
        deadline = time.monotonic() + 20
        while not token.exists() or _port_closed(api):
            assert agent.poll() is None and time.monotonic() < deadline, agent.stderr.read()
            time.sleep(0.1)
        AgentClient(f"http://127.0.0.1:{api}", token).set_rate(40e6)
        deadline = time.monotonic() + 3
        while None in _max_rates(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _max_rates(port) and None not in _max_rates(port), _max_rates(port)
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(15)
    assert set(_max_rates(port)) == {None}  # and SIGTERM lifted it


def _port_closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_without_cap_sys_ptrace_the_agent_names_it_and_the_kernel_refuses(sender: tuple[int, subprocess.Popen],
                                                                         tmp_path: Path) -> None:
    port, client = sender
    r = subprocess.run([*NO_PTRACE, sys.executable, "-m", "scidmz.cli", "agent", "--prefix", f"{PEER}/32",
                        "--state-dir", str(tmp_path)], env={**os.environ, "PYTHONPATH": SRC},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "CAP_SYS_PTRACE" in r.stderr
    # the system call itself, without the capability, on the sender's first descriptor
    probe = ("import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
             f"pfd = os.pidfd_open({client.pid}); r = libc.syscall(438, pfd, 0, 0); "
             "print(r, ctypes.get_errno())")
    out = subprocess.run([*NO_PTRACE, sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert out.stdout.split() == ["-1", str(__import__("errno").EPERM)], out.stdout + out.stderr


def test_without_cap_dac_read_search_the_agent_names_it_and_the_kernel_refuses(
        sender: tuple[int, subprocess.Popen], tmp_path: Path) -> None:
    _, client = sender
    r = subprocess.run([*ONLY_PTRACE, sys.executable, "-m", "scidmz.cli", "agent", "--prefix", f"{PEER}/32",
                        "--state-dir", str(tmp_path)], env={**os.environ, "PYTHONPATH": SRC},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "CAP_DAC_READ_SEARCH" in r.stderr
    probe = f"import os; os.listdir('/proc/{client.pid}/fd')"
    out = subprocess.run([*ONLY_PTRACE, sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and "PermissionError" in out.stderr, out.stderr


def test_the_bpf_mechanism_without_cap_bpf_names_it(tmp_path: Path) -> None:
    r = subprocess.run([*ONLY_THE_TWO, sys.executable, "-m", "scidmz.cli", "agent", "--prefix", f"{PEER}/32",
                        "--mechanism", "bpf", "--state-dir", str(tmp_path)], env={**os.environ, "PYTHONPATH": SRC},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "CAP_BPF" in r.stderr, r.stderr
