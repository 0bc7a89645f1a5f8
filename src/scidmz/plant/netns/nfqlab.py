"""A three-namespace lab for the NFQUEUE stage: sender -> router (stage) -> receiver.

Used by ``tests/test_nfq_stage.py`` and ``benchmarks/discipline_speed.py
--stage``. Every namespace, veth and process carries the caller's prefix and is
removed on every exit path of the context manager (normal, exception,
KeyboardInterrupt). The iptables rule lives in the router namespace only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

# A ping without ping (this machine has no iputils): a UDP echo in the receiver and a
# prober in client 0 sending one datagram a second; the prober prints one RTT (s) per line.
_ECHO = ("import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind(('10.77.2.2',7777))\n"
         "while True:\n d,a=s.recvfrom(64)\n s.sendto(d,a)\n")
_PROBE = ("import socket,sys,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind(('10.77.1.2',0))\n"
          "s.settimeout(1.0)\nfor k in range(int(sys.argv[1])):\n t=time.monotonic()\n"
          " s.sendto(b'%d'%k,('10.77.2.2',7777))\n try:\n  d=s.recv(64)\n  r=time.monotonic()-t\n"
          "  print(r if d==b'%d'%k else 'lost',flush=True)\n except OSError:\n  print('lost',flush=True)\n"
          " time.sleep(max(0.0,1.0-(time.monotonic()-t)))\n")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _nsx(ns: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", ns, *cmd], check=check, capture_output=True, text=True)


@dataclass
class NfqLab:
    prefix: str
    stats_path: str
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def snd(self) -> str:
        return f"{self.prefix}-s"

    @property
    def rtr(self) -> str:
        return f"{self.prefix}-r"

    @property
    def rcv(self) -> str:
        return f"{self.prefix}-d"

    @property
    def wire(self) -> str:
        return f"{self.prefix}-w"

    def stats(self) -> dict:
        with open(self.stats_path) as fh:
            return json.load(fh)

    def udp(self, rate_bps: float, seconds: float, length: int = 1472) -> dict:
        """iperf3 UDP from sender to receiver (1472 B payload = 1500 B IP packets); its JSON."""
        out = _nsx(self.snd, "iperf3", "-c", "10.77.2.2", "-u", "-b", str(int(rate_bps)), "-l", str(length),
                   "-t", str(seconds), "-w", "4M", "-J", "--connect-timeout", "3000", check=False)
        doc = json.loads(out.stdout) if out.stdout.strip() else {}
        if out.returncode != 0 and "end" not in doc:
            raise RuntimeError(f"iperf3 failed: {doc.get('error', out.stderr.strip())}")
        return doc

    def udp_pair(self, r0: float, r1: float, seconds: float, length: int = 1448) -> tuple[dict, dict]:
        """Two concurrent CBR senders, from 10.77.1.2 (client 0) and 10.77.1.3 (client 1); both iperf3 JSONs.

        1448 B payload: the ABC paper's UDP packets (section 6.2.1).
        """
        procs = []
        for src, port, rate in (("10.77.1.2", 5201, r0), ("10.77.1.3", 5202, r1)):
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", self.snd, "iperf3", "-c", "10.77.2.2", "-p", str(port), "-B", src, "-u",
                 "-b", str(int(rate)), "-l", str(length), "-t", str(seconds), "-w", "4M", "-J"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        docs = []
        for p in procs:
            out, err = p.communicate(timeout=seconds + 60)
            doc = json.loads(out) if out.strip() else {}
            if "sum_received" not in doc.get("end", {}):
                raise RuntimeError(f"iperf3 failed: {doc.get('error', err.strip()) or 'no end-of-test summary'}")
            docs.append(doc)
        return docs[0], docs[1]

    def tcp_pair(self, n0: int, n1: int, seconds: float, cca0: str = "cubic", cca1: str = "cubic",
                 ping: bool = False) -> tuple[dict, dict, list[float]]:
        """Client 0 (10.77.1.2, ``n0`` connections of ``cca0``) and client 1 (10.77.1.3, ``n1`` of ``cca1``)
        at once, saturated; both iperf3 JSONs and, with ``ping``, RTT samples (s) once a second from client 0."""
        procs = []
        for src, port, n, cca in (("10.77.1.2", 5201, n0, cca0), ("10.77.1.3", 5202, n1, cca1)):
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", self.snd, "iperf3", "-c", "10.77.2.2", "-p", str(port), "-B", src,
                 "-P", str(n), "-C", cca, "-t", str(seconds), "-J"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        pinger = echo = None
        if ping:
            echo = subprocess.Popen(["ip", "netns", "exec", self.rcv, sys.executable, "-c", _ECHO],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs.append(echo)
            time.sleep(0.2)
            pinger = subprocess.Popen(["ip", "netns", "exec", self.snd, sys.executable, "-c", _PROBE, str(int(seconds))],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.procs.append(pinger)  # torn down with the lab if iperf3 fails first
        docs = []
        for p in procs:
            out, err = p.communicate(timeout=seconds + 60)
            doc = json.loads(out) if out.strip() else {}
            if "sum_received" not in doc.get("end", {}):
                raise RuntimeError(f"iperf3 failed: {doc.get('error', err.strip()) or 'no end-of-test summary'}")
            docs.append(doc)
        rtts: list[float] = []
        if pinger is not None:
            out, _ = pinger.communicate(timeout=seconds + 30)
            rtts = [float(x) for x in out.split() if x != "lost"]
        return docs[0], docs[1], rtts

    def tcp(self, seconds: float, streams: int = 1) -> dict:
        out = _nsx(self.snd, "iperf3", "-c", "10.77.2.2", "-P", str(streams), "-t", str(seconds), "-J", check=False)
        doc = json.loads(out.stdout) if out.stdout.strip() else {}
        if out.returncode != 0 and "end" not in doc:
            raise RuntimeError(f"iperf3 failed: {doc.get('error', out.stderr.strip())}")
        return doc


def _teardown(lab: NfqLab) -> None:
    for p in reversed(lab.procs):
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
    for ns in (lab.snd, lab.rtr, lab.rcv, lab.wire):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@contextlib.contextmanager
def nfq_lab(prefix: str, stage_args: list[str], stats_path: str, bottleneck_bps: float | None = None,
            proto: str | None = None, rtt_s: float = 0.0, buffer_bytes: int = 24 * 1500) -> Iterator[NfqLab]:
    """Build the lab, start the stage with ``stage_args`` (after ``--queue 0 --stats``), yield, tear down.

    ``bottleneck_bps``: a tbf on the router's egress to the receiver (the queue
    the discipline sits in front of) holding ``buffer_bytes`` (default 24 x
    1500 B, the ABC paper's buffer); None = no shaping (stage throughput tests).
    ``proto``: queue only this protocol (e.g. "udp", so iperf3's TCP control
    channel is not subject to the discipline in CBR experiments).
    ``rtt_s`` > 0: a fourth namespace between router and receiver holds the
    return path for that long (the testbed's user-space delay stage: this
    kernel has no netem); the data path through it stays in the kernel.
    """
    lab = NfqLab(prefix, stats_path)
    try:
        for ns in (lab.snd, lab.rtr, lab.rcv):
            _ip("netns", "add", ns)
            _nsx(ns, "ip", "link", "set", "lo", "up")
        _ip("link", "add", f"{prefix}a", "netns", lab.snd, "type", "veth", "peer", "name", f"{prefix}b", "netns", lab.rtr)
        if rtt_s > 0.0:
            _ip("netns", "add", lab.wire)
            _ip("link", "add", f"{prefix}c", "netns", lab.rtr, "type", "veth", "peer", "name", f"{prefix}x",
                "netns", lab.wire)
            _ip("link", "add", f"{prefix}y", "netns", lab.wire, "type", "veth", "peer", "name", f"{prefix}d",
                "netns", lab.rcv)
            for dev in ("x", "y"):
                _nsx(lab.wire, "ip", "link", "set", f"{prefix}{dev}", "up")
            # TCP experiments: the bottleneck counts wire packets, not GSO super-packets (as the testbed: spec.py)
            _nsx(lab.snd, "ethtool", "-K", f"{prefix}a", "tso", "off", "gso", "off")
            # the receiver's frames pass through user space: a CHECKSUM_PARTIAL frame re-injected by
            # AF_PACKET would carry a wrong checksum, so its TX checksum offload is off (as in the testbed: spec.py)
            _nsx(lab.rcv, "ethtool", "-K", f"{prefix}d", "tx", "off")
            # forward: every frame from the router leaves towards the receiver, in the kernel
            _nsx(lab.wire, "tc", "qdisc", "add", "dev", f"{prefix}x", "ingress")
            _nsx(lab.wire, "tc", "filter", "add", "dev", f"{prefix}x", "parent", "ffff:", "protocol", "all", "u32",
                 "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", f"{prefix}y")
        else:
            _ip("link", "add", f"{prefix}c", "netns", lab.rtr, "type", "veth", "peer", "name", f"{prefix}d",
                "netns", lab.rcv)
        for ns, dev, addr in ((lab.snd, "a", "10.77.1.2/24"), (lab.rtr, "b", "10.77.1.1/24"),
                              (lab.rtr, "c", "10.77.2.1/24"), (lab.rcv, "d", "10.77.2.2/24")):
            _nsx(ns, "ip", "addr", "add", addr, "dev", f"{prefix}{dev}")
            _nsx(ns, "ip", "link", "set", f"{prefix}{dev}", "up")
        _nsx(lab.snd, "ip", "addr", "add", "10.77.1.3/24", "dev", f"{prefix}a")  # client 1 of udp_pair
        _nsx(lab.snd, "ip", "route", "add", "default", "via", "10.77.1.1")
        _nsx(lab.rcv, "ip", "route", "add", "default", "via", "10.77.2.1")
        _nsx(lab.rtr, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        if bottleneck_bps is not None:
            # 24 x 1500 B buffer: the paper's bottleneck buffer.
            _nsx(lab.rtr, "tc", "qdisc", "add", "dev", f"{prefix}c", "root", "tbf", "rate", f"{int(bottleneck_bps)}bit",
                 "burst", "15000", "limit", str(int(buffer_bytes)))
        if rtt_s > 0.0:
            dstats = f"{stats_path}.delay.json"
            dly = subprocess.Popen(
                ["ip", "netns", "exec", lab.wire, sys.executable, "-m", "scidmz.plant.netns.stages.delay",
                 "--rx", f"{prefix}y", "--tx", f"{prefix}x", "--table", json.dumps({"10.77.2.2": rtt_s}),
                 "--default", "0", "--stats", dstats],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            lab.procs.append(dly)
            deadline = time.monotonic() + 30
            while not os.path.exists(dstats):
                if dly.poll() is not None:
                    raise RuntimeError(f"delay stage exited {dly.returncode}: {dly.stderr.read().strip()}")
                if time.monotonic() > deadline:
                    raise RuntimeError("delay stage did not start within 30 s")
                time.sleep(0.05)
        env = dict(os.environ)
        stage = subprocess.Popen(
            ["ip", "netns", "exec", lab.rtr, sys.executable, "-m", "scidmz.plant.netns.stages.nfq", "--queue", "0",
             "--stats", stats_path, *stage_args],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lab.procs.append(stage)
        deadline = time.monotonic() + 60
        while not os.path.exists(stats_path):
            if stage.poll() is not None:
                raise RuntimeError(f"nfqstage exited {stage.returncode}: {stage.stderr.read().strip()}")
            if time.monotonic() > deadline:
                raise RuntimeError("nfqstage did not start within 60 s")
            time.sleep(0.1)
        # Queue only the forward direction towards the receiver; replies return untouched.
        match = ["-p", proto] if proto else []
        _nsx(lab.rtr, "iptables", "-A", "FORWARD", "-o", f"{prefix}c", *match, "-j", "NFQUEUE", "--queue-num", "0")
        for port in ("5201", "5202"):
            srv = subprocess.Popen(["ip", "netns", "exec", lab.rcv, "iperf3", "-s", "-p", port],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            lab.procs.append(srv)
        time.sleep(0.5)
        yield lab
    finally:
        _teardown(lab)
