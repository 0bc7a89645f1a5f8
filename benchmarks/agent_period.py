"""The DTN host agent's per-period work for 64 connections (goal: <= 2 ms of CPU per period).

A child process holds 64 TCP connections on loopback, each sending (so every
period has new delivered bytes to measure); the agent (``agent.core.DtnAgent``,
pidfd mechanism) runs in this process with those connections' peer as its
prefix and steps ``--steps`` periods back to back, with the ``--mechanism`` given
(``pidfd``, the default, or ``bpf``). Reported, as CPU time
(user + system, ``time.process_time``) per period:

* ``step``: the whole period's work in the steady state (rates within the
  dead band: measured and shared, nothing re-set);
* ``step_resetting_all``: the same when every one of the 64 caps changes each
  period (the rate alternates between two values), the worst case;
* ``dump``: the mechanism's listing alone (the sock_diag dump for ``pidfd``, one
  iterator walk for ``bpf``), and ``dump_empty``: the sock_diag dump before
  the connections exist: the kernel walks its whole TCP established hash table
  (``net.ipv4.tcp_ehash_entries`` buckets, once per address family) on every
  dump, whatever the number of connections;
* ``dump_two_walks``: the sock_diag listing as one request per family (two
  walks of that table) against ``dump``'s one ``TCPDIAG_GETSOCK`` walk
  (``agent/diag.py``), measured in the same run;
* ``pyroute2_dump``: the same dump through pyroute2's DiagSocket (why diag.py is
  hand-written), when pyroute2 is installed.

Needs root (the agent's rights). Prints one JSON object.

    sudo python benchmarks/agent_period.py [--connections 64] [--steps 200] [--mechanism pidfd|bpf]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SENDER = r'''
import socket, sys, threading, time
ls = socket.create_server(("127.0.0.41", 0), backlog=256); port = ls.getsockname()[1]
def sink(c):
    while c.recv(1 << 16): pass
def acc():
    while True:
        c, _ = ls.accept(); threading.Thread(target=sink, args=(c,), daemon=True).start()
threading.Thread(target=acc, daemon=True).start()
buf = b"x" * 16384
def send():
    s = socket.create_connection(("127.0.0.41", port), source_address=("127.0.0.1", 0))
    while True:
        s.sendall(buf); time.sleep(0.001)
for _ in range(int(sys.argv[1])): threading.Thread(target=send, daemon=True).start()
print(port, flush=True)
time.sleep(3600)
'''


def _cpu_per_call(fn: Any, n: int) -> list[float]:
    out = []
    for _ in range(n):
        c0 = time.process_time()
        fn()
        out.append((time.process_time() - c0) * 1e3)
    return out


def _summary(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {"median_ms": round(statistics.median(ms), 3), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 3),
            "mean_ms": round(statistics.fmean(ms), 3)}


def _pyroute2_dump() -> Any:
    try:
        from pyroute2 import DiagSocket
    except ImportError:
        return None
    ds = DiagSocket()
    ds.bind()

    def dump() -> None:
        for fam in (socket.AF_INET, socket.AF_INET6):
            ds.get_sock_stats(family=fam, states=1 << 1, extensions=2)

    return dump


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--mechanism", choices=("pidfd", "bpf"), default="pidfd")
    a = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from scidmz.agent.core import DtnAgent
    from scidmz.agent.diag import DiagSocket
    from scidmz.agent.match import SocketFilter

    empty = DiagSocket()
    dump_empty = _summary(_cpu_per_call(empty.dump, a.steps))
    child = subprocess.Popen([sys.executable, "-c", SENDER, str(a.connections)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline())
        time.sleep(1.0)
        mechanism = None
        if a.mechanism == "bpf":
            import tempfile

            from scidmz.agent.bpfiter import BpfIterMechanism

            mechanism = BpfIterMechanism(tempfile.mkdtemp(prefix="agt-bpf-"))
        agent = DtnAgent(SocketFilter.build(["127.0.0.41/32"], [str(port)]), period=1.0, lease_periods=1000,
                         mechanism=mechanism)
        agent.set_rate(800e6)
        agent.step()
        assert len(agent.conns) == a.connections, f"saw {len(agent.conns)} of {a.connections} connections"
        for _ in range(5):  # settle: shares follow the measured demands
            time.sleep(0.05)
            agent.step()
        steady = _summary(_cpu_per_call(agent.step, a.steps))
        sets_before = agent.counts["sets"]
        flip = [800e6, 400e6]

        def resetting() -> None:
            agent.set_rate(flip[agent.k % 2])
            agent.step()

        resetting_all = _summary(_cpu_per_call(resetting, a.steps))
        sets = (agent.counts["sets"] - sets_before) / a.steps
        dump = _summary(_cpu_per_call(agent._source.dump, a.steps))
        two = DiagSocket(one_walk=False)  # the per-family requests: one walk of the hash table each
        dump_two_walks = _summary(_cpu_per_call(two.dump, a.steps))
        two.close()
        p2 = _pyroute2_dump()
        pyroute2 = _summary(_cpu_per_call(p2, max(20, a.steps // 10))) if p2 else None
        paced = agent.status()["paced"]
        agent.close()
    finally:
        child.kill()
        child.wait()
    ehash = int(Path("/proc/sys/net/ipv4/tcp_ehash_entries").read_text())
    print(json.dumps({
        "benchmark": "agent_period", "mechanism": a.mechanism, "connections": a.connections, "paced": paced, "steps": a.steps,
        "goal_ms": 2.0, "step": steady, "step_resetting_all": {**resetting_all, "sets_per_period": sets},
        "dump": dump, "dump_two_walks": dump_two_walks, "one_walk": getattr(agent._source, "one_walk", None),
        "dump_empty": dump_empty, "pyroute2_dump": pyroute2,
        "step_without_dump_median_ms": round(steady["median_ms"] - dump["median_ms"], 3),
        "tcp_ehash_entries": ehash,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
