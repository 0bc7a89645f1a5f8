"""The two ways of setting 64 caps, measured side by side (the setting path alone; the agent's whole
period with either mechanism is benchmarks/agent_period.py's).

* ``pidfd``: what ``scidmz agent`` uses (``agent.mechanism.PidfdMechanism``):
  per connection ``pidfd_getfd`` of the sender's descriptor, ``fstat``,
  ``setsockopt(SO_MAX_PACING_RATE)``, ``close``;
* ``bpf_iter``: a BPF TCP iterator (``benchmarks/agent_bpf_iter.bpf.c``, built
  here with clang, loaded with libbpf through ``telemetry.ebpf.libbpf``) that walks
  every TCP socket once and calls ``bpf_setsockopt(SO_MAX_PACING_RATE)`` on those
  listed in a hash map (4-tuple -> rate): a stand-alone iterator that only sets
  caps (``agent/pace_iter.bpf.c``, the agent's own, also lists the sockets).

Reported, as CPU time per round (user + system): setting all 64 caps to new
values; the iterator's walk with nothing to set; the sock_diag dump the agent
uses for discovery, for comparison (both walk the kernel's established hash
table: the iterator once for all families, sock_diag once per family). Every
round's values are read back with sock_diag, so a mechanism that sets nothing
fails the run. Needs root (CAP_BPF, CAP_PERFMON; CAP_SYS_PTRACE,
CAP_DAC_READ_SEARCH). Prints one JSON object.

    sudo python benchmarks/agent_bpf_iter.py [--connections 64] [--rounds 200]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PEER = "127.0.0.45"
SENDER = r'''
import socket, sys, threading, time
ls = socket.create_server(("127.0.0.45", 0), backlog=256); port = ls.getsockname()[1]
held = []
for _ in range(int(sys.argv[1])):
    c = socket.create_connection(("127.0.0.45", port), source_address=("127.0.0.1", 0))
    held.append(c); held.append(ls.accept()[0])
print(port, flush=True)
time.sleep(3600)
'''


def _summary(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {"median_ms": round(statistics.median(ms), 3), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 3)}


def _cpu(fn: Any, n: int) -> list[float]:
    out = []
    for i in range(n):
        c0 = time.process_time()
        fn(i)
        out.append((time.process_time() - c0) * 1e3)
    return out


class BpfIter:
    """The iterator program, loaded and attached; ``run()`` walks once."""

    def __init__(self) -> None:
        sys.path.insert(0, str(HERE.parent / "src"))
        from scidmz.telemetry.ebpf.libbpf import get_libbpf

        obj_path = Path(tempfile.mkdtemp(prefix="agt-bpf-")) / "agent_bpf_iter.o"
        subprocess.run(["clang", "-O2", "-g", "-target", "bpf", "-I/usr/include/x86_64-linux-gnu", "-c",
                        str(HERE / "agent_bpf_iter.bpf.c"), "-o", str(obj_path)], check=True)
        self.lib = get_libbpf()
        L = self.L = self.lib.lib
        L.bpf_link__fd.restype, L.bpf_link__fd.argtypes = ctypes.c_int, [ctypes.c_void_p]
        L.bpf_iter_create.restype, L.bpf_iter_create.argtypes = ctypes.c_int, [ctypes.c_int]
        self.obj = self.lib.ptr(L.bpf_object__open_file(str(obj_path).encode(), None), "open")
        self.lib.check(L.bpf_object__load(self.obj), "load: " + " | ".join(self.lib.messages[-3:]))
        prog = L.bpf_object__find_program_by_name(self.obj, b"pace")
        self.link = self.lib.ptr(L.bpf_program__attach(prog), "attach iter/tcp")
        self.link_fd = L.bpf_link__fd(self.link)
        self.rates = L.bpf_map__fd(L.bpf_object__find_map_by_name(self.obj, b"rates"))

    def set_rates(self, entries: list[tuple[bytes, int]]) -> None:
        for key, value in entries:
            v = ctypes.c_uint32(value)
            self.lib.check(self.L.bpf_map_update_elem(self.rates, key, ctypes.byref(v), 0), "map update")

    def clear(self, keys: list[bytes]) -> None:
        self.L.bpf_map_delete_elem.argtypes = [ctypes.c_int, ctypes.c_void_p]
        for key in keys:
            self.L.bpf_map_delete_elem(self.rates, key)

    def run(self) -> None:
        fd = self.lib.check(self.L.bpf_iter_create(self.link_fd), "iter create")
        try:
            while os.read(fd, 4096):
                pass
        finally:
            os.close(fd)

    def close(self) -> None:
        self.L.bpf_link__destroy(self.link)
        self.L.bpf_object__close(self.obj)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=200)
    a = ap.parse_args()
    sys.path.insert(0, str(HERE.parent / "src"))
    from scidmz.agent.diag import DiagSocket
    from scidmz.agent.mechanism import PidfdMechanism
    from scidmz.agent.owners import OwnerIndex

    child = subprocess.Popen([sys.executable, "-c", SENDER, str(a.connections)], stdout=subprocess.PIPE, text=True)
    it = None
    try:
        port = int(child.stdout.readline())
        diag = DiagSocket()
        mine = [s for s in diag.dump() if s.peer == PEER and s.rport == port]
        assert len(mine) == a.connections, f"{len(mine)} connections"
        owners = OwnerIndex().find(s.inode for s in mine)
        values = [1_000_000, 2_000_000]

        def check(value: int) -> None:
            got = {s.max_pacing_rate for s in diag.dump() if s.peer == PEER and s.rport == port}
            assert got == {value}, f"read back {got}, wanted {value}"

        pidfd = PidfdMechanism()

        def pidfd_round(i: int) -> None:
            for s in mine:
                pidfd.set(owners[s.inode], s.inode, values[i % 2])

        t_pidfd = _cpu(pidfd_round, a.rounds)
        check(values[(a.rounds - 1) % 2])
        it = BpfIter()
        keys = [socket.inet_aton(PEER) + struct.pack("!H", port) + struct.pack("=H", s.lport) for s in mine]

        def bpf_round(i: int) -> None:
            it.set_rates([(k, values[(i + 1) % 2]) for k in keys])
            it.run()

        t_bpf = _cpu(bpf_round, a.rounds)
        check(values[a.rounds % 2])
        it.clear(keys)
        t_walk = _cpu(lambda i: it.run(), a.rounds)
        t_dump = _cpu(lambda i: diag.dump(), a.rounds)
    finally:
        if it is not None:
            it.close()
        child.kill()
        child.wait()
    print(json.dumps({
        "benchmark": "agent_bpf_iter", "connections": a.connections, "rounds": a.rounds,
        "set_all_pidfd": _summary(t_pidfd), "set_all_bpf_iter": _summary(t_bpf),
        "bpf_iter_walk_nothing_to_set": _summary(t_walk), "sock_diag_dump": _summary(t_dump),
        "tcp_ehash_entries": int(Path("/proc/sys/net/ipv4/tcp_ehash_entries").read_text()),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
