"""A three-namespace lab with a BMv2 at the bottleneck: sender -> switch (BMv2, then a TBF) -> receiver.

The rehearsal of the discipline place on real gear (docs/deployment.md, ABC
and FFS on a P4 switch): ``simple_switch_grpc`` runs in the switch namespace
and forwards every frame between its port 0 (``{prefix}b``, from the sender)
and port 1 (``{prefix}c``, to the receiver) -- it is the path, not a tap. A
TBF on ``{prefix}c`` is the bottleneck the discipline sits in front of, as the
NFQUEUE lab's (``nfqlab``). The sender holds the DTN (10.78.1.2) and a campus
host (10.78.1.3), the receiver 10.78.1.254: one subnet, the switch a wire.
Its P4Runtime (127.0.0.1:9559) and Thrift (9090) servers are inside the
switch namespace, so run the controller there (``ip netns exec``).

Every namespace and process carries the caller's prefix and is removed on
every exit path of the context manager.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["P4Lab", "p4_lab", "DTN", "CAMPUS", "RECEIVER", "GRPC"]

DTN, CAMPUS, RECEIVER = "10.78.1.2", "10.78.1.3", "10.78.1.254"
GRPC = "127.0.0.1:9559"


def _nsx(ns: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", ns, *cmd], check=check, capture_output=True, text=True)


@dataclass
class P4Lab:
    prefix: str
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def snd(self) -> str:
        return f"{self.prefix}-s"

    @property
    def sw(self) -> str:
        return f"{self.prefix}-r"

    @property
    def rcv(self) -> str:
        return f"{self.prefix}-d"

    @property
    def wan(self) -> str:
        """The switch's port 1, towards the receiver (the TBF's interface)."""
        return f"{self.prefix}c"

    @property
    def lan(self) -> str:
        """The switch's port 0, from the sender."""
        return f"{self.prefix}b"

    def shape(self, rate_bps: float, buffer_bytes: int) -> None:
        """A TBF of ``rate_bps`` holding ``buffer_bytes`` on the switch's port towards the receiver."""
        _nsx(self.sw, "tc", "qdisc", "replace", "dev", self.wan, "root", "tbf", "rate", f"{int(rate_bps)}bit",
             "burst", "15000", "limit", str(int(buffer_bytes)))

    def flows(self, n_dtn: int, n_campus: int, seconds: float, udp_bps: float | None = None) -> tuple[dict, dict]:
        """The DTN's ``n_dtn`` and the campus host's ``n_campus`` CUBIC connections (or, with ``udp_bps``,
        one UDP sender each at that rate) to the receiver at once; both iperf3 JSONs."""
        procs = []
        for src, port, n in ((DTN, 5201, n_dtn), (CAMPUS, 5202, n_campus)):
            extra = ["-u", "-b", str(int(udp_bps)), "-l", "1448"] if udp_bps else ["-P", str(n), "-C", "cubic"]
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", self.snd, "iperf3", "-c", RECEIVER, "-p", str(port), "-B", src,
                 "-t", str(seconds), "-J", "--connect-timeout", "3000", *extra],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        docs = []
        for p in procs:
            out, err = p.communicate(timeout=seconds + 60)
            doc = json.loads(out) if out.strip() else {}
            if "sum_received" not in doc.get("end", {}):
                raise RuntimeError(f"iperf3 failed: {doc.get('error', err.strip()) or 'no end-of-test summary'}")
            docs.append(doc)
        return docs[0], docs[1]


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            p.send_signal(signal.SIGTERM)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def _wait_port(ns: str, port: int, timeout: float) -> None:
    probe = f"import socket;socket.create_connection(('127.0.0.1',{port}),0.5).close()"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _nsx(ns, "python3", "-c", probe, check=False).returncode == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"simple_switch_grpc did not open port {port} within {timeout:g} s")


@contextlib.contextmanager
def p4_lab(prefix: str, switch: str = "simple_switch_grpc") -> Iterator[P4Lab]:
    """Build the lab, start BMv2 with no program (``--no-p4``), yield, tear everything down."""
    lab = P4Lab(prefix)
    try:
        for ns in (lab.snd, lab.sw, lab.rcv):
            subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
            _nsx(ns, "ip", "link", "set", "lo", "up")
        subprocess.run(["ip", "link", "add", f"{prefix}a", "netns", lab.snd, "type", "veth", "peer", "name", lab.lan,
                        "netns", lab.sw], check=True, capture_output=True)
        subprocess.run(["ip", "link", "add", lab.wan, "netns", lab.sw, "type", "veth", "peer", "name", f"{prefix}d",
                        "netns", lab.rcv], check=True, capture_output=True)
        for ns, dev in ((lab.snd, f"{prefix}a"), (lab.sw, lab.lan), (lab.sw, lab.wan), (lab.rcv, f"{prefix}d")):
            # frames pass through BMv2 in user space: no offloads (a CHECKSUM_PARTIAL frame would leave
            # with a wrong checksum, a GSO one would be a 64 kB "packet")
            _nsx(ns, "ethtool", "-K", dev, "tx", "off", "tso", "off", "gso", "off", "gro", "off", check=False)
            _nsx(ns, "ip", "link", "set", dev, "up")
        _nsx(lab.snd, "ip", "addr", "add", f"{DTN}/24", "dev", f"{prefix}a")
        _nsx(lab.snd, "ip", "addr", "add", f"{CAMPUS}/24", "dev", f"{prefix}a")
        _nsx(lab.rcv, "ip", "addr", "add", f"{RECEIVER}/24", "dev", f"{prefix}d")
        for port in (5201, 5202):
            lab.procs.append(subprocess.Popen(["ip", "netns", "exec", lab.rcv, "iperf3", "-s", "-p", str(port)],
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        lab.procs.append(subprocess.Popen(
            ["ip", "netns", "exec", lab.sw, switch, "--device-id", "0", "-i", f"0@{lab.lan}", "-i", f"1@{lab.wan}",
             "--thrift-port", "9090", "--no-p4", "--", "--grpc-server-addr", GRPC],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_port(lab.sw, 9559, 20.0)
        yield lab
    finally:
        for p in reversed(lab.procs):
            _stop(p)
        for ns in (lab.snd, lab.sw, lab.rcv):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
