"""Cost per packet of the eBPF telemetry programs (root); prints one JSON object.

The programs run in the kernel, JIT-compiled, through BPF_PROG_TEST_RUN (no
interface; each frame's time in ``skb->tstamp``), with 10,000 concurrent
flows in the maps (each sent C_TH = 10 data segments and their ACKs first, so
every one is an active flow with RTT cells and queuing-delay stamps in flight).

* ``repeat``: one data frame through ``scidmz_lan_in`` and ``scidmz_wan_out``
  and one ACK through ``scidmz_wan_in``, each ``--repeat`` times in the kernel
  (the kernel's mean ns per run; the same frame again and again, so the cells
  it touches stay in cache);
* ``single_shot``: ``--sweep`` (data, ACK) pairs of random flows among the
  10,000, in time order, one BPF_PROG_TEST_RUN each: the real paths (a new
  RTT cell stored, an ACK matched and cleared, a queuing-delay sample), but
  every run starts cold (the program's code, the fresh skb and the cells it
  touches were evicted by the Python between two system calls): an upper
  bound no router sees. The kernel's per-run time includes its timer read
  (``timer_ns``, measured on an empty program the same way, subtracted).

* ``live`` (``--live``): the programs attached to veths in three namespaces
  (host -- router -- host); 10 segments of each of the 10,000 flows, then the
  measured pairs, sent back to back by a small C sender (AF_PACKET) into
  LAN_IF's ingress, out of WAN_IF and into WAN_IF's ingress, in bursts of
  4,000 packets per hook (so each ACK follows its data well within the 1 s
  RTT timeout); the kernel's own
  per-program statistics (BPF_ENABLE_STATS) give ns per packet, for both
  egress hooks. The programs run amid the rest of the stack here, as on a
  router, with the maps' cells of random flows cold in cache.
  ``xmit_other_interface``: what the transmit tracepoint costs a packet of
  another interface (it is called for all and returns at once).

``ns_per_packet``: the programs' time per packet through the router, data
and ACK packets in equal numbers, from ``repeat``; a data packet crosses two
hooks (LAN ingress, WAN egress), an ACK one (WAN ingress), so it is
``(lan_in + wan_out + wan_in) / 2``. Goal: <= 250 ns.
``single_shot`` and ``live`` give the same figure for their method.

``memory``: every map's memory as the kernel charges it (``memlock`` in the
map fd's fdinfo). The maps are fixed-size arrays, so the figure is the same
for 100,000 flows; ``flows_100k`` says what share of 100,000 concurrent flows
the 65,536-slot active-flow table tracks (the rest collide with a live flow:
their bytes still count in the class rates).

Run: python benchmarks/ebpf_telemetry.py [--repeat 1000000] [--sweep 40000] [--live] (as root, on a quiet machine)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

FLOWS = 10_000
CHUNK = 4000  # live: packets per hook per burst


def _frames(n: int, seed: int):
    from scidmz.telemetry.sources.synth import frame

    rng = np.random.default_rng(seed)
    flows = []
    for f in range(n):
        dtn = f < 8
        # (address, port) pairs unique for up to 250,000 flows
        src = f"10.0.{1 + (f // 250) % 250}.{1 + f % 250}"
        dst = "10.0.3.2" if dtn else f"10.1.{(f // 250) % 250}.{1 + f % 250}"
        flows.append((src, dst, 10000 + f % 50000, 5001, int(rng.integers(0, 2**32))))

    def data(i: int, seq: int, ipid: int) -> bytes:
        s, d, sp, dp, _ = flows[i]
        return frame(s, d, sp, dp, seq=seq, flags="PA", payload=1448, ip_id=ipid)

    def ack(i: int, a: int) -> bytes:
        s, d, sp, dp, _ = flows[i]
        return frame(d, s, dp, sp, ack=a, flags="A")

    return flows, data, ack


def _populate(rp, flows, data, ack, t0: int) -> tuple[list[int], int]:
    """C_TH data segments and their ACKs per flow, interleaved over ~0.5 s; returns next seqs, time."""
    from scidmz.telemetry import constants as C

    seqs = [f[4] for f in flows]
    t = t0
    for k in range(C.C_TH):
        for i in range(len(flows)):
            fr = data(i, seqs[i], k)
            rp.run("lan_in", fr, t)
            rp.run("wan_out", fr, t + 2_000_000)
            rp.run("wan_in", ack(i, (seqs[i] + 1448) & 0xFFFFFFFF), t + 50_000_000)
            seqs[i] = (seqs[i] + 1448) & 0xFFFFFFFF
            t += 5_000
    return seqs, t + 50_000_000


def _timer_ns(sweep: int) -> float:
    """ns per BPF_PROG_TEST_RUN of an empty tc program, repeat=1 (the kernel's timer and loop)."""
    from scidmz.telemetry.ebpf.libbpf import TestRunOpts, get_libbpf
    from scidmz.telemetry.sources.synth import frame

    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "empty.bpf.c"
        src.write_text('#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\nchar LICENSE[] SEC("license") = "GPL";\n'
                       'SEC("tc") int empty(struct __sk_buff *skb) { return -1; }\n')
        obj = Path(d) / "empty.o"
        subprocess.run(["clang", "-O2", "-g", "-target", "bpf", "-I/usr/include/x86_64-linux-gnu", "-c", str(src),
                        "-o", str(obj)], check=True, capture_output=True)
        lib = get_libbpf()
        import ctypes

        o = lib.ptr(lib.bpf_object__open_file(str(obj).encode(), None), "open")
        try:
            lib.check(lib.bpf_object__load(o), "load")
            fd = lib.bpf_program__fd(lib.bpf_object__find_program_by_name(o, b"empty"))
            fr = frame("10.0.1.1", "10.1.0.1", 1, 2, seq=1, flags="PA", payload=1448)
            buf = ctypes.create_string_buffer(fr, len(fr))
            total = 0
            for _ in range(sweep):
                opts = TestRunOpts(sz=ctypes.sizeof(TestRunOpts), data_in=ctypes.addressof(buf),
                                   data_size_in=len(fr), repeat=1)
                lib.check(lib.bpf_prog_test_run_opts(fd, ctypes.byref(opts)), "test run")
                total += opts.duration
            return total / sweep
        finally:
            lib.bpf_object__close(o)


def _memory(obj) -> dict[str, int]:
    out = {}
    for name in ("rtt_table", "af_table", "qd_table", "cms", "qd_last", "counters", "flow_events"):
        fd = obj.map_fd(name)
        info = Path(f"/proc/self/fdinfo/{fd}").read_text()
        out[name] = int(next(ln.split()[1] for ln in info.splitlines() if ln.startswith("memlock:")))
    return out


def _tracked_share(n: int, seed: int) -> dict[str, float]:
    from scidmz.telemetry.ebpf.layout import COUNTER_INDEX
    from scidmz.telemetry.ebpf.replay import EbpfReplay

    flows, data, _ = _frames(n, seed)
    with EbpfReplay() as rp:
        t = 10**9
        for i in range(n):
            rp.run("wan_out", data(i, flows[i][4], 0), t)
            t += 1000
        occupied = int(np.count_nonzero(rp.obj.table("af_table")["af_sig"]))
        coll = int(rp.view.snapshot()[COUNTER_INDEX["stat_af_collisions"]])
    return {"flows": n, "slots_used": occupied, "tracked_share": occupied / n, "collisions": coll}


def _sh(*argv: str, check: bool = True) -> None:
    subprocess.run(argv, check=check, capture_output=True, timeout=60)


BLAST_C = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
/* blast NETNS IFNAME FILE: send the length-prefixed frames of FILE on IFNAME, back to back */
int main(int argc, char **argv) {
    int ns = open(argv[1], O_RDONLY);
    if (ns < 0 || setns(ns, CLONE_NEWNET)) { perror("setns"); return 1; }
    int s = socket(AF_PACKET, SOCK_RAW, 0);
    struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_ifindex = if_nametoindex(argv[2]) };
    if (s < 0 || bind(s, (struct sockaddr *)&sll, sizeof(sll))) { perror("socket"); return 1; }
    FILE *f = fopen(argv[3], "rb");
    fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n);
    if (fread(buf, 1, n, f) != (size_t)n) return 1;
    long sent = 0;
    for (long o = 0; o + 2 <= n; ) {
        unsigned len = buf[o] | (buf[o + 1] << 8);
        if (send(s, buf + o + 2, len, 0) == (ssize_t)len) sent++;
        o += 2 + len;
    }
    printf("%ld\n", sent);
    return 0;
}
"""


def _blast(bin_: Path, ns: str, dev: str, frames: list[bytes], tmp: Path) -> int:
    f = tmp / f"{dev}.frames"
    f.write_bytes(b"".join(len(x).to_bytes(2, "little") + x for x in frames))
    r = subprocess.run([str(bin_), f"/run/netns/{ns}", dev, str(f)], capture_output=True, text=True, timeout=300,
                       check=True)
    return int(r.stdout.strip())


def _live(flows, data, ack, pairs: int, egress_hook: str) -> dict[str, float]:
    """Per-program ns per run on real skbs (veths, frames sent back to back by a small C sender), from
    the kernel's run-time statistics."""
    from scidmz.telemetry.ebpf.source import EbpfTelemetry

    p = f"eb{os.getpid() % 100000}"
    ns = {k: f"{p}{k}" for k in "arb"}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "blast.c").write_text(BLAST_C)
        subprocess.run(["clang", "-O2", "-o", str(tmp / "blast"), str(tmp / "blast.c")], check=True,
                       capture_output=True)
        try:
            for n in ns.values():
                _sh("ip", "netns", "add", n)
                _sh("ip", "netns", "exec", n, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1")
            _sh("ip", "-n", ns["r"], "link", "add", "lan0", "type", "veth", "peer", "name", "a0", "netns", ns["a"])
            _sh("ip", "-n", ns["r"], "link", "add", "wan0", "type", "veth", "peer", "name", "b0", "netns", ns["b"])
            for n, dev in ((ns["r"], "lan0"), (ns["r"], "wan0"), (ns["a"], "a0"), (ns["b"], "b0")):
                _sh("ip", "netns", "exec", n, "sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1")
                _sh("ip", "-n", n, "link", "set", dev, "up")
            where = {"lan_in": (ns["a"], "a0"), "wan_out": (ns["r"], "wan0"), "wan_in": (ns["b"], "b0")}
            progs = {"lan_in": "scidmz_lan_in", "wan_in": "scidmz_wan_in",
                     "wan_out": "scidmz_wan_xmit" if egress_hook == "xmit" else "scidmz_wan_out"}
            seqs = [f[4] for f in flows]

            def phase(idx: list[int]) -> tuple[list[bytes], list[bytes]]:
                ds, acks = [], []
                for k, i in enumerate(idx):
                    ds.append(data(i, seqs[i], k & 0xFFFF))
                    seqs[i] = (seqs[i] + 1448) & 0xFFFFFFFF
                    acks.append(ack(i, seqs[i]))
                return ds, acks

            fill = phase([i for i in range(len(flows)) for _ in range(10)])  # every flow active
            pick = [int(x) for x in np.random.default_rng(7).integers(0, len(flows), pairs)]
            meas = phase(pick)
            with EbpfTelemetry("lan0", "wan0", netns=ns["r"], egress_hook=egress_hook) as tel:
                stats_fd = tel.obj.enable_stats()
                try:
                    runs = {h: 0.0 for h in progs}
                    other = sent_total = 0.0
                    for label, (ds, acks) in (("fill", fill), ("measure", meas)):
                        # chunks of CHUNK packets per hook, so an ACK follows its data within ~0.3 s
                        for lo in range(0, len(ds), CHUNK):
                            for hook, frames in (("lan_in", ds), ("wan_out", ds), ("wan_in", acks)):
                                before = {h: tel.obj.prog_stats(pn) for h, pn in progs.items()}
                                sent = _blast(tmp / "blast", *where[hook], frames[lo:lo + CHUNK], tmp)
                                after = {h: tel.obj.prog_stats(pn) for h, pn in progs.items()}
                                if label != "measure":
                                    continue
                                runs[hook] += after[hook][0] - before[hook][0]
                                if hook == "lan_in":
                                    sent_total += sent
                                    # the tracepoint also runs (and returns) for a0's packets
                                    other += after["wan_out"][0] - before["wan_out"][0]
                    out = {h: runs[h] / sent_total for h in progs}
                    if egress_hook == "xmit":
                        out["xmit_other_interface"] = other / sent_total
                    c = tel.counters()
                finally:
                    os.close(stats_fd)
            out["ns_per_packet"] = (out["lan_in"] + out["wan_out"] + out["wan_in"]) / 2
            out["flows_made_active"] = int(c["stat_af_new"])
            out["rtt_samples"] = int(c["stat_rtt_samples"])
            out["qd_samples"] = int(c["stat_qd_samples"])
            out["pairs"] = pairs
            return out
        finally:
            for n in ns.values():
                _sh("ip", "netns", "del", n, check=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1_000_000)
    ap.add_argument("--sweep", type=int, default=40_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--live", action="store_true", help="also measure on veths with the kernel's run-time stats")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("benchmarks/ebpf_telemetry.py needs root (BPF_PROG_TEST_RUN)", file=sys.stderr)
        return 2
    from scidmz.telemetry.ebpf.build import build
    from scidmz.telemetry.ebpf.replay import EbpfReplay

    t = time.perf_counter()
    build()
    build_s = time.perf_counter() - t
    flows, data, ack = _frames(FLOWS, a.seed)
    res: dict[str, object] = {"flows": FLOWS, "build_s": round(build_s, 2), "kernel": platform.release(),
                              "loadavg": os.getloadavg()[0]}
    with EbpfReplay() as rp:
        t = time.perf_counter()
        seqs, now = _populate(rp, flows, data, ack, 10**9)
        res["populate_s"] = round(time.perf_counter() - t, 1)
        rp.view.snapshot()
        res["active_flows_in_table"] = int(np.count_nonzero(rp.obj.table("af_table")["af_active"]))
        # repeat: the kernel's own loop over one frame
        i = FLOWS // 2
        fr = data(i, seqs[i], 99)
        rep = {"lan_in": rp.run("lan_in", fr, now, repeat=a.repeat),
               "wan_out": rp.run("wan_out", fr, now + 10**6, repeat=a.repeat),
               "wan_in": rp.run("wan_in", ack(i, (seqs[i] + 1448) & 0xFFFFFFFF), now + 5 * 10**7, repeat=a.repeat)}
        seqs[i] = (seqs[i] + 1448) & 0xFFFFFFFF
        res["repeat"] = {**rep, "ns_per_packet": (rep["lan_in"] + rep["wan_out"] + rep["wan_in"]) / 2}
        # sweep: random flows, the real paths, one run each
        rng = np.random.default_rng(a.seed + 1)
        sums = {"lan_in": 0, "wan_out": 0, "wan_in": 0}
        pick = rng.integers(0, FLOWS, a.sweep)
        t = now + 10**8
        pend: list[tuple[int, int, int]] = []
        for k, f in enumerate(pick):
            fr = data(int(f), seqs[f], 100 + k)
            sums["lan_in"] += rp.run("lan_in", fr, t)
            sums["wan_out"] += rp.run("wan_out", fr, t + 10**6)
            pend.append((int(f), (seqs[f] + 1448) & 0xFFFFFFFF, t + 3 * 10**7))
            seqs[f] = (seqs[f] + 1448) & 0xFFFFFFFF
            while pend and pend[0][2] <= t:
                g, a_no, ta = pend.pop(0)
                sums["wan_in"] += rp.run("wan_in", ack(g, a_no), ta)
            t += 20_000
        n_ack = a.sweep - len(pend)
        timer = _timer_ns(min(a.sweep, 20_000))
        sw = {"lan_in": sums["lan_in"] / a.sweep - timer, "wan_out": sums["wan_out"] / a.sweep - timer,
              "wan_in": sums["wan_in"] / max(n_ack, 1) - timer, "timer_ns": timer, "pairs": a.sweep}
        sw["ns_per_packet"] = (sw["lan_in"] + sw["wan_out"] + sw["wan_in"]) / 2
        res["single_shot"] = sw
        c = rp.view.snapshot()
        from scidmz.telemetry.ebpf.layout import COUNTER_INDEX

        res["sweep_events"] = {k: int(c[COUNTER_INDEX["stat_" + k]]) for k in
                               ("rtt_stored", "rtt_samples", "qd_samples", "rtt_table_full", "af_collisions")}
        mem = _memory(rp.obj)
    res["ns_per_packet"] = round(float(res["repeat"]["ns_per_packet"]), 1)  # type: ignore[index]
    if a.live:
        res["live"] = {h: _live(flows, data, ack, a.sweep, h) for h in ("xmit", "tc")}
    res["goal_ns_per_packet"] = 250
    res["memory_bytes"] = mem
    res["memory_total_mib"] = round(sum(mem.values()) / 2**20, 2)
    res["flows_100k"] = _tracked_share(100_000, a.seed)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
