#!/usr/bin/env python3
"""Record the corpus's own captures: real kernel TCP, IPv4 and IPv6, through a bottleneck.

Three namespaces ``<tag>c`` (client: the DTN sender and a campus host), ``<tag>r``
(router BR1) and ``<tag>s`` (server: DTN-r and a remote host), veth pairs
c0-r0 and r1-s0, both families on each. r1 is the bottleneck: HTB at
``--rate`` with a bfifo of ``--buffer`` bytes, so the queue builds and the
RTT grows to tens of milliseconds. Two iperf3 transfers run at once: the DTN
flow over IPv6 to fd00:2::2 and a campus flow over IPv4 to 10.9.2.3, both
from the client. tcpdump records (snap length ``--snap``):

* ``netns-egress.pcap``: r1, BR1's bottleneck interface (packets after the
  queue, and the ACKs coming back): the egress tap;
* ``netns-ingress.pcap``: r0, BR1's campus side (packets before the queue):
  the ingress tap;
* ``netns-sender-any.pcapng``: ``tcpdump -i any`` on the client (Linux cooked
  v2, as ``-i any`` writes today), converted to pcapng by editcap.

Segmentation offloads are off on every interface, so both taps see frames as
a wire carries them (tcpdump's own test captures bring TSO and BIG TCP).

Prefixes for a replay: ``--dtn-prefix fd00:2::2/128,10.9.2.2/32
--remote-prefix 10.9.2.0/24,fd00:2::/64``. Needs root, iperf3, tcpdump, editcap;
everything it creates is removed on every exit path.

    sudo python3 tests/data/captures/make_netns_captures.py --out tests/data/captures
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ADDR = {  # (namespace, interface) -> addresses
    ("c", "c0"): ["10.9.1.2/24", "fd00:1::2/64"],
    ("r", "r0"): ["10.9.1.1/24", "fd00:1::1/64"],
    ("r", "r1"): ["10.9.2.1/24", "fd00:2::1/64"],
    ("s", "s0"): ["10.9.2.2/24", "10.9.2.3/24", "fd00:2::2/64", "fd00:2::3/64"],
}


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def ns(tag: str, n: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return sh("ip", "netns", "exec", tag + n, *cmd, check=check)


def build(tag: str, rate: str, buffer: int) -> None:
    for n in "crs":
        sh("ip", "netns", "add", tag + n)
        ns(tag, n, "ip", "link", "set", "lo", "up")
    sh("ip", "link", "add", "c0", "netns", tag + "c", "type", "veth", "peer", "name", "r0", "netns", tag + "r")
    sh("ip", "link", "add", "r1", "netns", tag + "r", "type", "veth", "peer", "name", "s0", "netns", tag + "s")
    for (n, dev), addrs in ADDR.items():
        for a in addrs:
            ns(tag, n, "ip", "addr", "add", a, "dev", dev, "nodad")
        ns(tag, n, "ip", "link", "set", dev, "up")
    ns(tag, "r", "sysctl", "-qw", "net.ipv4.ip_forward=1")
    ns(tag, "r", "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
    ns(tag, "c", "ip", "route", "add", "default", "via", "10.9.1.1")
    ns(tag, "c", "ip", "-6", "route", "add", "default", "via", "fd00:1::1")
    ns(tag, "s", "ip", "route", "add", "default", "via", "10.9.2.1")
    ns(tag, "s", "ip", "-6", "route", "add", "default", "via", "fd00:2::1")
    # the bottleneck: HTB (explicit quantum) with a bfifo under it, on BR1's WAN side
    ns(tag, "r", "tc", "qdisc", "add", "dev", "r1", "root", "handle", "1:", "htb", "default", "1")
    ns(tag, "r", "tc", "class", "add", "dev", "r1", "parent", "1:", "classid", "1:1", "htb", "rate", rate,
       "ceil", rate, "quantum", "1514")
    ns(tag, "r", "tc", "qdisc", "add", "dev", "r1", "parent", "1:1", "bfifo", "limit", str(buffer))
    # the wire as a tap would see it: no segmentation offloads (veth would carry the client's
    # TSO super-packets to the router unsegmented, and the ingress tap would see those)
    for n, dev in (("c", "c0"), ("r", "r0"), ("r", "r1")):
        ns(tag, n, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", check=False)


def teardown(tag: str) -> None:
    for n in "crs":
        pids = sh("ip", "netns", "pids", tag + n, check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass
        sh("ip", "netns", "del", tag + n, check=False)


def record(tag: str, out: Path, seconds: float, snap: int) -> None:
    procs: list[subprocess.Popen] = []
    tmp = {"egress": out / "netns-egress.pcap", "ingress": out / "netns-ingress.pcap",
           "any": out / "netns-sender-any.pcap"}
    try:
        for port in (5201, 5202):
            procs.append(subprocess.Popen(["ip", "netns", "exec", tag + "s", "iperf3", "-s", "-1", "-p", str(port)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for name, (n, dev) in {"egress": ("r", "r1"), "ingress": ("r", "r0"), "any": ("c", "any")}.items():
            procs.append(subprocess.Popen(["ip", "netns", "exec", tag + n, "tcpdump", "-i", dev, "-s", str(snap),
                                           "-w", str(tmp[name]), "-U", "tcp"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.5)
        clients = [
            subprocess.Popen(["ip", "netns", "exec", tag + "c", "iperf3", "-6", "-c", "fd00:2::2", "-p", "5201",
                              "-t", f"{seconds:g}", "-C", "cubic"], stdout=subprocess.DEVNULL),
            subprocess.Popen(["ip", "netns", "exec", tag + "c", "iperf3", "-c", "10.9.2.3", "-p", "5202",
                              "-t", f"{seconds:g}", "-C", "cubic"], stdout=subprocess.DEVNULL),
        ]
        for c in clients:
            c.wait(timeout=seconds + 30)
        time.sleep(1.0)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
    sh("editcap", "-F", "pcapng", str(tmp["any"]), str(out / "netns-sender-any.pcapng"))
    tmp["any"].unlink()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent))
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rate", default="8mbit")
    ap.add_argument("--buffer", type=int, default=60_000)
    ap.add_argument("--snap", type=int, default=96)
    a = ap.parse_args()
    for tool in ("iperf3", "tcpdump", "editcap", "ethtool"):
        if shutil.which(tool) is None:
            print(f"make_netns_captures: {tool} is not installed", file=sys.stderr)
            return 1
    tag = f"cap{os.getpid() % 10000}"
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        build(tag, a.rate, a.buffer)
        record(tag, out, a.seconds, a.snap)
    finally:
        teardown(tag)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
