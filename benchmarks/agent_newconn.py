"""How soon the DTN host agent paces a new connection (goal: <= 1 period after its SYN/ACK), and its
idle RSS (goal: <= 60 MB).

``scidmz agent`` runs as an admin runs it (the CLI, period ``--period``, its API on
loopback) with an aggregate rate set. This process then opens ``--connections``
connections to the agent's prefix one after another, each at a random phase of the
agent's period, and polls each socket's own ``SO_MAX_PACING_RATE`` (getsockopt on
the sender's descriptor, every 1 ms) from the moment ``connect()`` returns (the
SYN/ACK has arrived) until the agent's cap appears. Reported: that delay, in
seconds and in periods (max, median). The agent's RSS (``VmRSS``) is read from
``/proc`` while it holds the rate and paces nothing (``idle``) and after the run.

Needs root (the agent's rights). Prints one JSON object.

    sudo python benchmarks/agent_newconn.py [--connections 20] [--period 1] [--mechanism pidfd|bpf]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SO_MAX_PACING_RATE = 47
UNLIMITED = 2**64 - 1
PEER = "127.0.0.43"


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=20)
    ap.add_argument("--period", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mechanism", choices=("pidfd", "bpf"), default="pidfd")
    a = ap.parse_args()
    src = Path(__file__).resolve().parents[1] / "src"
    sys.path.insert(0, str(src))
    from scidmz.agent.client import AgentClient

    rng = random.Random(a.seed)
    ls = socket.create_server((PEER, 0), backlog=256)
    port = ls.getsockname()[1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        api = s.getsockname()[1]
    state = Path(tempfile.mkdtemp(prefix="agt-bench-"))
    agent = subprocess.Popen([sys.executable, "-m", "scidmz.cli", "agent", "--prefix", f"{PEER}/32", "--ports",
                              str(port), "--api", f"127.0.0.1:{api}", "--state-dir", str(state), "--period",
                              f"{a.period}s", "--lease-periods", "1000", "--mechanism", a.mechanism],
                             env={**os.environ, "PYTHONPATH": str(src)}, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        client = None
        while client is None:
            try:
                client = AgentClient(f"http://127.0.0.1:{api}", state / "agent.token", timeout=1)
                client.status()
            except (ValueError, FileNotFoundError, ConnectionError):
                client = None
                if time.monotonic() > deadline or agent.poll() is not None:
                    raise RuntimeError("the agent did not start") from None
                time.sleep(0.1)
        client.set_rate(100e6)
        time.sleep(3 * a.period)
        idle_rss = _rss_mb(agent.pid)
        delays = []
        held = []
        for _ in range(a.connections):
            time.sleep(rng.uniform(0, a.period))
            c = socket.create_connection((PEER, port), source_address=("127.0.0.1", 0))
            t0 = time.monotonic()
            held.append(c)
            peer, _ = ls.accept()
            held.append(peer)
            while struct.unpack("Q", c.getsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, 8))[0] == UNLIMITED:
                if time.monotonic() - t0 > 10 * a.period:
                    raise RuntimeError("a new connection was not paced within 10 periods")
                time.sleep(0.001)
            delays.append(time.monotonic() - t0)
        run_rss = _rss_mb(agent.pid)
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(15)
    print(json.dumps({
        "benchmark": "agent_newconn", "mechanism": a.mechanism, "period_s": a.period, "connections": a.connections,
        "delay_s": {"max": round(max(delays), 4), "median": round(statistics.median(delays), 4)},
        "delay_periods": {"max": round(max(delays) / a.period, 3), "median": round(statistics.median(delays) / a.period, 3)},
        "goal_periods": 1.0, "idle_rss_mb": round(idle_rss, 1), "rss_after_mb": round(run_rss, 1), "goal_rss_mb": 60.0,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
