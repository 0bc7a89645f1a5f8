"""The emulated Science DMZ of the MLC paper (Vega et al., section 3.1, Fig. 2) in namespaces.

::

  s1..sN --+                                                         +-- r1..rN
           S1 (bridge|OVS) --up--[TBF u: the actuator]--+            |
                                                        BR1 --wan--> BR2 --lan-- DLY -- S2
  DTN-s ---- S3 --------------------------------------- +  [TBF B_max,     (delay   +-- DTN-r
                                                            bfifo buffer]   stage)

Every box is a network namespace named ``<prefix>-<role>`` (``sdz-s1``,
``sdz-br1``...), so two testbeds with different prefixes coexist and all
interfaces live inside namespaces the testbed made (the OVS daemons of
``switch="ovs"`` run inside S1's namespace too). The WAN bottleneck is
BR1's ``wan`` egress: a TBF at B_max whose inner drop-tail FIFO holds ``scenario.buffer_bytes``. Per-path base RTTs come
from the user-space delay stage (``delaystage.py``) on the return path
between BR2 and S2; nothing uses netem (this kernel has none).

Offloads: receivers' frames pass through user space, so their TX checksum
offload is off (a CHECKSUM_PARTIAL frame re-injected by AF_PACKET would
carry a wrong checksum); senders have TSO/GSO off so the bottleneck queue
holds and drops real MTU-sized packets as the paper's router does.
"""

from __future__ import annotations

import atexit
import ipaddress
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...scenario import FlowGroup, Scenario
from ...units import FRAME_BYTES
from .procs import require_tools, run_in, set_sysctls, spawn
from .registry import RUN_DIR, Record, check_prefix, teardown_record

__all__ = ["Host", "Testbed", "testbed_ccas", "resolve_cca"]

log = logging.getLogger("scidmz.testbed")

_AUTO = itertools.count()
_SWITCHES = ("bridge", "ovs")


@dataclass(frozen=True)
class Host:
    """One sender or receiver: where it lives and what it talks to."""

    name: str  # s1, dtns, r1, dtnr
    ns: str
    ip: str
    kind: str  # campus | short | dtn | flow | receiver
    peer: str = ""  # receiver name for senders
    rtt: float = 0.0  # configured base RTT of the path to ``peer``
    cca: str = "cubic"  # a kernel CCA, or "udp" for a [[flows]] UDP sender
    flow: FlowGroup | None = None  # the [[flows]] entry of a kind="flow" sender

    @property
    def role(self) -> str:
        """The class a flow table gives this sender: dtn | campus | short ([[flows]] are campus, as on
        the fluid plant)."""
        return "campus" if self.kind == "flow" else self.kind

    @property
    def shaped(self) -> bool:
        """Whether the host's traffic crosses the campus shaper (S1's uplink)."""
        return self.kind in ("campus", "short") or (self.flow is not None and self.flow.shaped)


def testbed_ccas() -> list[str]:
    """Congestion controls this kernel offers (the testbed can use only these)."""
    try:
        return Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    except OSError:
        return ["reno", "cubic"]


def resolve_cca(cca: str, what: str) -> str:
    """Map a scenario CCA to one this kernel has.

    ``bbr2`` does not exist in this kernel (BBR v1 only, MACHINE.md). The
    testbed maps it to ``bbr`` and logs a warning saying so, because the
    paper's bbr2 scenarios are otherwise unusable here; the substitution is
    also recorded in the plant's ``info`` so results are never silently
    mislabelled. Any other unknown CCA is a one-line error.
    """
    avail = testbed_ccas()
    if cca in avail:
        return cca
    if cca == "bbr2" and "bbr" in avail:
        log.warning("%s: bbr2 is not available in this kernel; using bbr (BBR v1) instead", what)
        return "bbr"
    raise ValueError(f"{what}: congestion control '{cca}' is not available in this kernel (has: {', '.join(avail)})")


def _ip(base: str, i: int) -> str:
    """i-th host address in a /16: 10.x.(i // 200).(i % 200 + 10), i >= 1."""
    net = ipaddress.ip_network(base)
    return str(net.network_address + (i // 200) * 256 + (i % 200) + 10)


class Testbed:
    """Build, run and tear down one emulated Science DMZ.

    Use as a context manager (or call ``up()``/``down()``). Teardown runs on
    normal exit, on exceptions, at interpreter exit and on SIGINT/SIGTERM
    (handlers are installed when built from the main thread and restored
    afterwards); ``scidmz testbed down --all`` covers a SIGKILLed owner.
    """

    def __init__(
        self,
        scenario: Scenario,
        prefix: str | None = None,
        switch: str = "bridge",
        rtts: dict[str, float] | None = None,
        sender_offloads: bool = False,
        calibrate: bool = True,
        progress: bool = False,
    ) -> None:
        if switch not in _SWITCHES:
            raise ValueError(f"unknown switch '{switch}' (choose bridge or ovs)")
        self.scenario = scenario
        self.progress = bool(progress)  # a build progress bar on stderr (testbed up/check)
        # Default: unique per process and instance, so plants built one after
        # another (or side by side) in one process never collide.
        self.prefix = check_prefix(prefix or f"n{os.getpid() % 100000:05d}{next(_AUTO) % 100:02d}")
        self.switch = switch
        self.sender_offloads = sender_offloads
        self.calibrate = calibrate
        # Intrinsic round-trip time of the emulated wires, switches and the stage
        # itself, per sender class; subtracted from the hold times (see calibrate_delay).
        self.path_offset: dict[str, float] = {"campus": 0.0, "dtn": 0.0}
        self._stage: subprocess.Popen | None = None
        self.tools = require_tools("nsenter", "ethtool", "iperf3")
        self.dtn_cca = resolve_cca(scenario.dtn.cca, "dtn.cca")
        self.campus_cca = resolve_cca(scenario.campus.cca, "campus.cca")
        self.cca_mapped = {
            k: (orig, new)
            for k, orig, new in (("dtn", scenario.dtn.cca, self.dtn_cca), ("campus", scenario.campus.cca, self.campus_cca))
            if orig != new
        }
        self.hosts: dict[str, Host] = {}
        self._build_hosts(rtts or {})
        self.record: Record | None = None
        self.procs: list[subprocess.Popen] = []
        self.logdir = RUN_DIR / self.prefix
        self._old_handlers: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._is_up = False
        self.delay_stats_path = self.logdir / "delaystage.json"
        self.ovs: Any = None

    # -- names -------------------------------------------------------------------
    def ns(self, role: str) -> str:
        return f"{self.prefix}-{role}"

    @property
    def senders(self) -> list[Host]:
        return [h for h in self.hosts.values() if h.kind in ("campus", "short", "dtn", "flow")]

    @property
    def campus(self) -> list[Host]:
        return [h for h in self.hosts.values() if h.kind == "campus"]

    @property
    def short(self) -> list[Host]:
        return [h for h in self.hosts.values() if h.kind == "short"]

    @property
    def flow_hosts(self) -> list[Host]:
        """The ``[[flows]]`` senders, one host per flow, in the scenario's order."""
        return [h for h in self.hosts.values() if h.kind == "flow"]

    @property
    def dtn(self) -> Host:
        return self.hosts["dtns"]

    @property
    def uplink(self) -> tuple[str, str]:
        """(device, namespace) of S1's uplink, the paper's S1-eth1 where the actuator sits."""
        return "up", self.ns("sw1")

    @property
    def bottleneck(self) -> tuple[str, str]:
        return "wan", self.ns("br1")

    def _build_hosts(self, rtts: dict[str, float]) -> None:
        sc = self.scenario
        n_campus = sc.campus.hosts
        n_short = sc.campus.short_flow_senders
        for i in range(1, n_campus + n_short + 1):
            kind = "campus" if i <= n_campus else "short"
            s, r = f"s{i}", f"r{i}"
            rtt = float(rtts.get(s, sc.campus.rtt))
            if not rtt > 0:
                raise ValueError(f"RTT for host {s} must be > 0, got {rtt!r}")
            self.hosts[s] = Host(s, self.ns(s), _ip("10.1.0.0/16", i), kind, r, rtt, self.campus_cca)
            self.hosts[r] = Host(r, self.ns(r), _ip("10.2.0.0/16", i), "receiver")
        rtt = float(rtts.get("dtns", sc.dtn.rtt))
        self.hosts["dtns"] = Host("dtns", self.ns("dtns"), "10.3.0.2", "dtn", "dtnr", rtt, self.dtn_cca)
        self.hosts["dtnr"] = Host("dtnr", self.ns("dtnr"), "10.2.0.2", "receiver")
        self._build_flow_hosts(n_campus + n_short)
        unknown = set(rtts) - {h.name for h in self.senders}
        if unknown:
            raise ValueError(f"per-host RTT given for unknown sender(s): {', '.join(sorted(unknown))}")

    def _build_flow_hosts(self, n_before: int) -> None:
        """One sender/receiver pair per ``[[flows]]`` flow, numbered after the campus hosts.

        Shaped flows sit on S1 beside the campus hosts (10.1/16); unshaped ones on S3 beside
        the DTN (10.3/16), the Science DMZ's path around the campus shaper -- ours: the papers'
        flows meet only at the bottleneck, and S3 is the testbed's one switch without a shaper.
        Each flow has its own receiver, so S2's port towards it counts exactly its bytes.
        """
        i, j = n_before, 0
        for g in self.scenario.flows:
            cca = g.cca if g.cca == "udp" else resolve_cca(g.cca, f"flows '{g.name}' cca")
            if g.cca not in ("udp", cca):
                self.cca_mapped[f"flows.{g.name}"] = (g.cca, cca)
            for _ in range(g.count):
                i += 1
                if g.shaped:
                    ip = _ip("10.1.0.0/16", i)
                else:
                    j += 1
                    ip = _ip("10.3.0.0/16", j)  # 10.3.0.11 on; .2 is the DTN
                s, r = f"s{i}", f"r{i}"
                self.hosts[s] = Host(s, self.ns(s), ip, "flow", r, float(g.rtt), cca, g)
                self.hosts[r] = Host(r, self.ns(r), _ip("10.2.0.0/16", i), "receiver")

    @staticmethod
    def s2_port(receiver: str) -> str:
        """S2's switch port towards a receiver (its TX counter is that receiver's delivered bytes)."""
        return "qd" if receiver == "dtnr" else "q" + receiver[1:]

    def delay_table(self) -> dict[str, float]:
        """Reverse-path hold time per receiver address: the configured RTT minus the path's own."""
        def cls(h: Host) -> str:
            return "campus" if h.shaped else "dtn"  # S3's path (DTN, unshaped flows) or S1's

        return {self.hosts[h.peer].ip: max(h.rtt - self.path_offset[cls(h)], 0.0) for h in self.senders}

    # -- lifecycle ------------------------------------------------------------------
    def __enter__(self) -> Testbed:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    def up(self) -> Testbed:
        if self._is_up:
            return self
        self.record = Record.create(self.prefix)
        self._install_handlers()
        atexit.register(self.down)
        try:
            self.logdir.mkdir(parents=True, exist_ok=True)
            self._build()
            self._is_up = True
        except BaseException:
            self.down()
            raise
        return self

    def down(self) -> None:
        if self.record is not None and self.record.data.get("owner_pid") != os.getpid():
            return  # a forked child never tears down its parent's testbed
        with self._lock:
            rec, self.record = self.record, None
            if rec is None:
                return
            if self.ovs is not None:
                try:
                    self.ovs.stop()
                except Exception as exc:  # noqa: BLE001 - teardown must go on
                    log.warning("OVS stop failed: %s", exc)
                self.ovs = None
            for p in self.procs:
                if p.poll() is None:
                    p.terminate()
            for p in self.procs:
                try:
                    p.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            self.procs.clear()
            try:
                teardown_record(rec)
            finally:
                import shutil

                shutil.rmtree(self.logdir, ignore_errors=True)
                self._is_up = False
                self._restore_handlers()
                try:
                    atexit.unregister(self.down)
                except Exception:  # noqa: BLE001
                    pass

    def _install_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        owner = os.getpid()

        def handler(signum: int, frame: Any) -> None:
            if os.getpid() != owner:
                # A forked helper (pyroute2 forks to open sockets in namespaces)
                # inherits this handler; it must just die, not tear anything down.
                os._exit(128 + signum)
            self.down()
            old = self._old_handlers.get(signum)
            if callable(old):
                old(signum, frame)
            raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)

        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old_handlers[sig] = signal.getsignal(sig)
            signal.signal(sig, handler)

    def _restore_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        self._old_handlers.clear()

    # -- processes ---------------------------------------------------------------------
    def spawn(self, ns: str, argv: list[str], log_name: str | None = None) -> subprocess.Popen:
        """Start a process in one of this testbed's namespaces; recorded and reaped by ``down``."""
        if self.record is None:
            raise RuntimeError(f"testbed '{self.prefix}' is not up")
        out: Any = subprocess.DEVNULL
        if log_name:
            out = open(self.logdir / log_name, "wb")  # noqa: SIM115 - handed to the child
        try:
            p = spawn(ns, argv, stdout=out, stderr=subprocess.STDOUT if log_name else subprocess.DEVNULL)
        finally:
            if log_name:
                out.close()
        self.procs.append(p)
        self.record.add_process(p.pid, argv)
        return p

    # -- build ------------------------------------------------------------------------
    def _build(self) -> None:
        from pyroute2 import IPRoute, netns

        t0 = time.monotonic()
        roles = ["sw1", "sw3", "br1", "br2", "dly", "sw2"] + [h.name for h in self.hosts.values()]
        existing = set(netns.listnetns())
        clash = [self.ns(r) for r in roles if self.ns(r) in existing]
        if clash:
            raise RuntimeError(
                f"namespace(s) {', '.join(clash[:3])} already exist; another testbed uses prefix "
                f"'{self.prefix}' (run `scidmz testbed down --prefix {self.prefix}` if it is a leftover)"
            )
        assert self.record is not None
        bar = None
        if self.progress:
            from tqdm import tqdm

            bar = tqdm(total=len(roles) + 7 + int(self.calibrate), desc=f"testbed {self.prefix}", unit="step",
                       leave=False)

        def done(what: str) -> None:
            if bar is not None:
                bar.set_postfix_str(what)
                bar.update(1)

        ipr: dict[str, Any] = {}
        try:
            for r in roles:
                done(f"namespace {r}")
                self.record.add("namespaces", self.ns(r))
                netns.create(self.ns(r))
                # No IPv6: router solicitations and MLD would only add noise to the taps.
                set_sysctls(self.ns(r), {
                    "net.ipv6.conf.all.disable_ipv6": 1,
                    "net.ipv6.conf.default.disable_ipv6": 1,
                })
                ipr[r] = IPRoute(netns=self.ns(r))
            self._links(ipr)
            done("links")
            self._addresses_routes(ipr)
            done("addresses and routes")
            self._bottleneck(ipr["br1"])
            done("bottleneck")
            self._delay_path(ipr["dly"])
            done("delay path")
        finally:
            for sock in ipr.values():
                sock.close()
            if bar is not None and bar.n < len(roles) + 4:
                bar.close()  # a failed build: the error line, not a half bar, is what stays
        self._sysctls()
        done("sysctls")
        self._offloads()
        done("offloads")
        self._start_delay_stage()
        done("delay stage")
        if self.calibrate:
            self.calibrate_delay()
            done("delay calibration")
        if bar is not None:
            bar.close()
        self.record.data["info"] = {
            "scenario": self.scenario.name, "switch": self.switch,
            "hosts": {h.name: {"ip": h.ip, "ns": h.ns, "rtt": h.rtt, "kind": h.kind} for h in self.hosts.values()},
            "build_s": time.monotonic() - t0,
            "path_offset": dict(self.path_offset),
        }
        self.record.save()
        log.info("testbed %s up in %.1f s", self.prefix, time.monotonic() - t0)

    def _veth(self, ipr: dict[str, Any], a: str, a_if: str, b: str, b_if: str) -> None:
        ipr[a].link("add", ifname=a_if, kind="veth", peer={"ifname": b_if, "net_ns_fd": self.ns(b)})

    def _links(self, ipr: dict[str, Any]) -> None:
        def up(r: str, name: str, master: int | None = None) -> int:
            idx = ipr[r].link_lookup(ifname=name)[0]
            kw: dict[str, Any] = {"state": "up"}
            if master is not None:
                kw["master"] = master
            ipr[r].link("set", index=idx, **kw)
            return idx

        for r in ("sw1", "sw3", "sw2"):
            if r != "sw1" or self.switch == "bridge":
                ipr[r].link("add", ifname="br0", kind="bridge")
        # Campus: s_i -- S1
        campus_hosts = [h for h in self.senders if h.shaped]
        if self.switch == "ovs":
            self._ovs_s1(ipr, campus_hosts)
        else:
            br = ipr["sw1"].link_lookup(ifname="br0")[0]
            for i, h in enumerate(campus_hosts, 1):
                self._veth(ipr, h.name, "eth0", "sw1", f"p{i}")
                up("sw1", f"p{i}", br)
            self._veth(ipr, "sw1", "up", "br1", "campus")
            up("sw1", "up", br)
            up("sw1", "br0")
        # DTN-s (and unshaped [[flows]] senders) -- S3 -- BR1
        br = ipr["sw3"].link_lookup(ifname="br0")[0]
        for i, h in enumerate([self.dtn] + [h for h in self.flow_hosts if not h.shaped], 1):
            self._veth(ipr, h.name, "eth0", "sw3", f"p{i}")
            up("sw3", f"p{i}", br)
        self._veth(ipr, "sw3", "up", "br1", "dtn")
        up("sw3", "up", br)
        up("sw3", "br0")
        # BR1 -- BR2 (the WAN) -- DLY -- S2 -- receivers
        self._veth(ipr, "br1", "wan", "br2", "wan")
        self._veth(ipr, "br2", "lan", "dly", "a")
        self._veth(ipr, "dly", "b", "sw2", "up")
        br = ipr["sw2"].link_lookup(ifname="br0")[0]
        up("sw2", "up", br)
        for h in [h for h in self.hosts.values() if h.kind == "receiver"]:
            port = self.s2_port(h.name)
            self._veth(ipr, h.name, "eth0", "sw2", port)
            up("sw2", port, br)
        up("sw2", "br0")
        for r, names in (("br1", ("campus", "dtn", "wan")), ("br2", ("wan", "lan")), ("dly", ("a", "b"))):
            for n in names:
                up(r, n)
        for h in self.hosts.values():
            up(h.name, "eth0")
            up(h.name, "lo")

    def _ovs_s1(self, ipr: dict[str, Any], campus_hosts: list[Host]) -> None:
        """S1 as Open vSwitch in userspace (datapath_type=netdev) inside S1's namespace.

        Uses ``ovsd.OvsUserspace`` (private ovsdb-server/ovs-vswitchd,
        TX checksum offload off on both ends of every attached veth, MACHINE.md).
        """
        from .ovsd import OvsUserspace

        for i, h in enumerate(campus_hosts, 1):
            self._veth(ipr, h.name, "eth0", "sw1", f"p{i}")
        self._veth(ipr, "sw1", "up", "br1", "campus")
        for name in [f"p{i}" for i in range(1, len(campus_hosts) + 1)] + ["up"]:
            ipr["sw1"].link("set", index=ipr["sw1"].link_lookup(ifname=name)[0], state="up")
        self.ovs = OvsUserspace(netns=self.ns("sw1"), workdir=self.logdir / "ovs").start()
        self.ovs.add_bridge("s1")
        for i, h in enumerate(campus_hosts, 1):
            self.ovs.add_port("s1", f"p{i}", peer="eth0", peer_netns=h.ns)
        self.ovs.add_port("s1", "up", peer="campus", peer_netns=self.ns("br1"))

    def _addresses_routes(self, ipr: dict[str, Any]) -> None:
        def addr(r: str, ifname: str, ip: str, plen: int) -> None:
            idx = ipr[r].link_lookup(ifname=ifname)[0]
            ipr[r].addr("add", index=idx, address=ip, prefixlen=plen)

        addr("br1", "campus", "10.1.0.1", 16)
        addr("br1", "dtn", "10.3.0.1", 16)
        addr("br1", "wan", "10.255.0.1", 30)
        addr("br2", "wan", "10.255.0.2", 30)
        addr("br2", "lan", "10.2.0.1", 16)
        ipr["br1"].route("add", dst="10.2.0.0/16", gateway="10.255.0.2")
        ipr["br2"].route("add", dst="10.1.0.0/16", gateway="10.255.0.1")
        ipr["br2"].route("add", dst="10.3.0.0/16", gateway="10.255.0.1")
        for h in self.hosts.values():
            addr(h.name, "eth0", h.ip, 16)
            if h.kind == "receiver":
                gw = "10.2.0.1"
            else:
                gw = "10.1.0.1" if h.shaped else "10.3.0.1"
            ipr[h.name].route("add", dst="0.0.0.0/0", gateway=gw)

    def _bottleneck(self, br1: Any) -> None:
        """BR1's WAN egress: TBF at B_max over a drop-tail byte FIFO of the scenario's buffer."""
        sc = self.scenario
        idx = br1.link_lookup(ifname="wan")[0]
        rate = sc.capacity
        # Default: one 1 ms timer tick's worth of tokens (>= 2 frames) keeps the line
        # rate exact without letting bursts skip the queue; tc needs more than one frame.
        burst = int(max(2 * FRAME_BYTES, sc.link_burst_bytes))
        limit = int(max(sc.buffer_bytes, 2 * FRAME_BYTES))
        br1.tc("add", "tbf", idx, 0x10000, rate=f"{int(rate)}bit", burst=burst, limit=limit)

    def _delay_path(self, dly: Any) -> None:
        """Forward direction in the kernel: every frame arriving on ``a`` leaves on ``b``."""
        a = dly.link_lookup(ifname="a")[0]
        b = dly.link_lookup(ifname="b")[0]
        dly.tc("add", "ingress", a, 0xFFFF0000)
        dly.tc(
            "add-filter", "u32", a, parent=0xFFFF0000, protocol=0x0003, target=0x10001,
            keys=["0x0/0x0+0"],
            action=[{"kind": "mirred", "direction": "egress", "action": "redirect", "ifindex": b}],
        )

    def tcp_buffer_max(self) -> int:
        """Socket buffer ceiling: room for the DTN path's BDP plus a full bottleneck queue, x2."""
        sc = self.scenario
        bdp = sc.capacity * max(h.rtt for h in self.senders) / 8
        return int(max(4 << 20, 2 * (bdp + sc.buffer_bytes)))

    def _sysctls(self) -> None:
        for r in ("br1", "br2"):
            set_sysctls(self.ns(r), {"net.ipv4.ip_forward": 1, "net.ipv4.conf.all.rp_filter": 0,
                                     "net.ipv4.conf.default.rp_filter": 0})
        bufmax = self.tcp_buffer_max()
        for h in self.hosts.values():
            vals: dict[str, Any] = {
                "net.ipv4.tcp_rmem": f"4096 131072 {bufmax}",
                "net.ipv4.tcp_wmem": f"4096 65536 {bufmax}",
                # Cached ssthresh/RTT from a previous run would make runs depend on history.
                "net.ipv4.tcp_no_metrics_save": 1,
            }
            set_sysctls(h.ns, vals)
            # The per-namespace default CCA is best effort (only "allowed" CCAs can be
            # a namespace default); every sender sets its CCA per socket anyway.
            if h.kind != "receiver" and h.cca != "udp":
                try:
                    set_sysctls(h.ns, {"net.ipv4.tcp_congestion_control": h.cca})
                except OSError:
                    pass

    def _offloads(self) -> None:
        for h in self.hosts.values():
            if h.kind == "receiver":
                run_in(h.ns, ["ethtool", "-K", "eth0", "tx", "off"])
            elif not self.sender_offloads:
                run_in(h.ns, ["ethtool", "-K", "eth0", "tso", "off", "gso", "off"])

    def calibrate_delay(self, probes: int = 7) -> dict[str, float]:
        """Measure each class's intrinsic RTT and take it off the stage's hold times.

        The veth hops, the switch (OVS userspace adds ~0.3 ms) and the stage's
        own wake-up add a few hundred microseconds to every round trip. The
        minimum over a few idle SYN/RST probes (robust to a busy machine) minus
        the configured RTT is that offset; the stage is restarted with holds
        reduced by it, so measured idle RTTs match the configuration.
        """
        from .probe import measure_rtt

        reps = {"campus": next((h for h in self.senders if h.shaped), None), "dtn": self.dtn}
        for c, h in reps.items():
            if h is None:
                continue
            r = measure_rtt(self, h.name, probes=probes, gap=0.005)
            self.path_offset[c] = min(max(r["min"] - h.rtt + self.path_offset[c], 0.0), 0.5 * h.rtt)
        self._restart_delay_stage()
        return dict(self.path_offset)

    def _restart_delay_stage(self) -> None:
        p = self._stage
        if p is not None and p.poll() is None:
            p.terminate()
            p.wait(timeout=5)
        self.delay_stats_path.unlink(missing_ok=True)
        self._start_delay_stage()

    def _start_delay_stage(self) -> None:
        argv = [
            sys.executable, "-m", "scidmz.plant.netns.delaystage",
            "--rx", "b", "--tx", "a",
            "--table", json.dumps(self.delay_table()),
            "--stats", str(self.delay_stats_path),
        ]
        p = self._stage = self.spawn(self.ns("dly"), argv, log_name="delaystage.log")
        deadline = time.monotonic() + 10
        while not self.delay_stats_path.exists():
            if p.poll() is not None:
                raise RuntimeError(
                    f"delay stage exited at start: {(self.logdir / 'delaystage.log').read_text()[-500:]}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError("delay stage did not start within 10 s")
            time.sleep(0.05)

    # -- observation -------------------------------------------------------------------
    def delay_stats(self) -> dict[str, Any]:
        try:
            return json.loads(self.delay_stats_path.read_text())
        except (OSError, ValueError):
            return {}

    def summary(self) -> dict[str, Any]:
        sc = self.scenario
        return {
            "prefix": self.prefix,
            "switch": self.switch,
            "scenario": sc.name,
            "capacity": sc.capacity,
            "buffer_bytes": sc.buffer_bytes,
            "campus_hosts": len(self.campus),
            "short_flow_senders": len(self.short),
            "flow_hosts": len(self.flow_hosts),
            "rtt_campus": sc.campus.rtt,
            "rtt_dtn": self.dtn.rtt,
            "path_offset": dict(self.path_offset),
            "cca": {"dtn": self.dtn_cca, "campus": self.campus_cca},
            "cca_mapped": {k: f"{a}->{b}" for k, (a, b) in self.cca_mapped.items()},
            "namespaces": list(self.record.data["namespaces"]) if self.record else [],
            "uplink": {"dev": self.uplink[0], "netns": self.uplink[1]},
            "bottleneck": {"dev": self.bottleneck[0], "netns": self.bottleneck[1]},
        }

