"""The emulated Science DMZ as data: hosts, switches, links, addresses, routes, qdiscs, taps.

The MLC paper's testbed (Vega et al., section 3.1, Fig. 2)::

  s1..sN --+                                                         +-- r1..rN
           S1 (bridge|OVS) --up--[TBF u: the actuator]--+            |
                                                        BR1 --wan--> BR2 --lan-- DLY -- S2
  DTN-s ---- S3 --------------------------------------- +  [TBF B_max,     (delay   +-- DTN-r
                                                            bfifo buffer]   stage)

``describe(scenario, prefix)`` derives a ``TestbedSpec`` from a ``Scenario``:
what exists and how it is wired, with no side effect (it needs neither root
nor pyroute2; only the kernel's list of congestion controls is read, unless
given), as Mininet's ``Topo`` is apart from the code that builds it.
``build.py`` turns a spec into namespaces, veths and qdiscs; ``testbed.py``
runs that build and tears it down.

Every box is a network namespace ``<prefix>-<role>`` (``sdz-s1``,
``sdz-br1``...). Addresses: campus ``10.1.0.0/16`` (BR1 ``10.1.0.1``), DTN
side ``10.3.0.0/16`` (BR1 ``10.3.0.1``, DTN-s ``10.3.0.2``, unshaped
``[[flows]]`` senders from ``10.3.0.11``), WAN ``10.255.0.0/30``, remote
``10.2.0.0/16`` (BR2 ``10.2.0.1``, DTN-r ``10.2.0.2``).

A scenario with no campus host (a leaderboard floor run, ``campus.hosts=0``) gets one more pair,
the *probe host* ``sp`` (``10.1.0.250``, on S1 behind the shaper, the campus RTT and CCA) and its
receiver ``rp`` (``10.2.0.250``): the validity probe's sender (``NetnsPlant.calibration_probe``),
idle during episodes and in no flow table. Ours: the probe must measure the machine, not a
100 ms path's TCP ramp, so it needs a short-RTT sender that carries no episode traffic; other
scenarios probe from their first campus host, as before, and their testbed is unchanged.

The WAN bottleneck is BR1's ``wan`` egress: a TBF at B_max whose inner
drop-tail FIFO holds ``scenario.buffer_bytes``. Per-path base RTTs come from
the user-space delay stage in DLY (``stages/delay.py``) on the return path;
nothing uses netem (this kernel has none). Receivers' frames pass through
user space, so their TX checksum offload is off (a CHECKSUM_PARTIAL frame
re-injected by AF_PACKET would carry a wrong checksum); senders have TSO/GSO
off so the bottleneck queue holds and drops real MTU-sized packets as the
paper's router does.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...scenario import FlowGroup, Scenario
from ...units import FRAME_BYTES

__all__ = [
    "Host", "Link", "Switch", "Address", "Route", "TokenBucket", "DelayPath", "Taps", "TestbedSpec",
    "describe", "testbed_ccas", "resolve_cca", "NO_IPV6", "CAMPUS_NET", "DTN_NET", "REMOTE_NET", "WAN_NET", "SWITCHES",
]

log = logging.getLogger("scidmz.testbed")

CAMPUS_NET = "10.1.0.0/16"  # S1's hosts, behind the campus shaper
REMOTE_NET = "10.2.0.0/16"  # receivers beyond the WAN
DTN_NET = "10.3.0.0/16"  # S3's hosts: the DTN and unshaped [[flows]] senders
WAN_NET = "10.255.0.0/30"
SWITCHES = ("bridge", "ovs")
# The probe host's last octet in 10.1.0.x and 10.2.0.x: above any numbered host's (``_ip`` gives .10-.209).
PROBE_OCTET = 250
# Every namespace: no IPv6 (router solicitations and MLD would only add noise to the taps).
NO_IPV6 = {"net.ipv6.conf.all.disable_ipv6": 1, "net.ipv6.conf.default.disable_ipv6": 1}
# Namespaces that are not hosts: the three switches, the two border routers, the delay stage's box.
INFRA_ROLES = ("sw1", "sw3", "br1", "br2", "dly", "sw2")


@dataclass(frozen=True)
class Host:
    """One sender or receiver: where it lives, what it talks to, where it is plugged in."""

    name: str  # s1, dtns, r1, dtnr
    ns: str
    ip: str
    kind: str  # campus | short | dtn | flow | probe | receiver
    peer: str = ""  # receiver name for senders
    rtt: float = 0.0  # configured base RTT of the path to ``peer``
    cca: str = "cubic"  # a kernel CCA, or "udp" for a [[flows]] UDP sender
    flow: FlowGroup | None = None  # the [[flows]] entry of a kind="flow" sender
    switch: str = ""  # role of the switch its eth0 is plugged into: sw1 | sw3 | sw2
    port: str = ""  # that switch's port towards it (S2's port counts exactly this receiver's bytes)

    @property
    def role(self) -> str:
        """The class a flow table gives this sender: dtn | campus | short ([[flows]] are campus, as on
        the fluid plant)."""
        return "campus" if self.kind == "flow" else self.kind

    @property
    def shaped(self) -> bool:
        """Whether the host's traffic crosses the campus shaper (S1's uplink)."""
        return self.kind in ("campus", "short", "probe") or (self.flow is not None and self.flow.shaped)

    @property
    def gateway(self) -> str:
        """Its default route: BR2 for receivers, else BR1's side of its switch."""
        if self.kind == "receiver":
            return _first(REMOTE_NET)
        return _first(CAMPUS_NET) if self.shaped else _first(DTN_NET)


@dataclass(frozen=True)
class Link:
    """One veth pair: ``a_if`` in namespace role ``a``, ``b_if`` in role ``b``."""

    a: str
    a_if: str
    b: str
    b_if: str


@dataclass(frozen=True)
class Switch:
    """A switch namespace: a Linux bridge ``br0``, or userspace Open vSwitch bridge ``s1``."""

    role: str
    kind: str  # bridge | ovs
    ports: tuple[str, ...]  # its interfaces that join the bridge

    @property
    def name(self) -> str:
        return "s1" if self.kind == "ovs" else "br0"


@dataclass(frozen=True)
class Address:
    role: str
    ifname: str
    ip: str
    prefixlen: int


@dataclass(frozen=True)
class Route:
    role: str
    dst: str
    gateway: str


@dataclass(frozen=True)
class TokenBucket:
    """A TBF root qdisc (rate bit/s, burst and limit bytes) on ``dev`` in role ``role``."""

    role: str
    dev: str
    rate: float
    burst: int
    limit: int


@dataclass(frozen=True)
class DelayPath:
    """DLY: frames arriving on ``inward`` (from BR2) leave on ``outward`` (to S2) in the kernel; the
    stage reads the reverse direction on ``outward`` and writes it, held, to ``inward``."""

    role: str = "dly"
    inward: str = "a"
    outward: str = "b"


@dataclass(frozen=True)
class Taps:
    """The passive taps of the paper's Fig. 2, as ``tc`` mirrors into namespace role ``role``.

    ``ingress`` receives copies of every frame entering BR1 (from the campus, the DTN side and,
    for the ACKs, the WAN): before the bottleneck queue. ``egress`` receives copies of every
    frame leaving the bottleneck (BR2's WAN ingress) and of the ACKs going back (BR2's WAN egress).
    ``mirrors``: (router role, device, hook "ingress"|"egress", tap veth) per mirror.
    """

    role: str = "tap"
    ingress: str = "ti"
    egress: str = "te"
    mirrors: tuple[tuple[str, str, str, str], ...] = (
        ("br1", "campus", "ingress", "ti"),
        ("br1", "dtn", "ingress", "ti"),
        ("br1", "wan", "ingress", "ti"),  # ACKs re-entering the border router: the far end of RTT samples
        ("br2", "wan", "ingress", "te"),
        ("br2", "wan", "egress", "te"),
    )

    @property
    def links(self) -> tuple[Link, ...]:
        """The two veths carrying the copies: BR1 -> tap (``ingress``), BR2 -> tap (``egress``)."""
        return Link("br1", self.ingress, self.role, self.ingress), Link("br2", self.egress, self.role, self.egress)


@dataclass(frozen=True)
class TestbedSpec:
    """Everything the builder makes for one testbed, and the facts the plant and telemetry read."""

    __test__ = False  # a "Test..." class that pytest must not collect

    scenario: Scenario
    prefix: str
    switch: str
    hosts: dict[str, Host]
    switches: tuple[Switch, ...]
    links: tuple[Link, ...]
    addresses: tuple[Address, ...]
    routes: tuple[Route, ...]
    bottleneck_tbf: TokenBucket
    dtn_cca: str
    campus_cca: str
    cca_mapped: dict[str, tuple[str, str]] = field(default_factory=dict)
    sender_offloads: bool = False
    delay: DelayPath = DelayPath()
    taps: Taps = Taps()

    # -- names ---------------------------------------------------------------------
    def ns(self, role: str) -> str:
        return f"{self.prefix}-{role}"

    @property
    def roles(self) -> list[str]:
        """Every namespace role the build creates (the taps' only when telemetry asks for them)."""
        return [*INFRA_ROLES, *self.hosts]

    @property
    def senders(self) -> list[Host]:
        """The hosts that send episode traffic (the probe host is not one)."""
        return [h for h in self.hosts.values() if h.kind not in ("receiver", "probe")]

    @property
    def probe(self) -> Host:
        """The validity probe's sender: the first campus host, else the probe host (module docstring)."""
        return (self.campus or [h for h in self.hosts.values() if h.kind == "probe"])[0]

    @property
    def paths(self) -> list[Host]:
        """Every sender whose path the delay stage serves: the traffic senders and the probe host."""
        return [h for h in self.hosts.values() if h.kind != "receiver"]

    @property
    def receivers(self) -> list[Host]:
        return [h for h in self.hosts.values() if h.kind == "receiver"]

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
        """(device, namespace) of the WAN bottleneck: BR1's ``wan`` egress."""
        return self.bottleneck_tbf.dev, self.ns(self.bottleneck_tbf.role)

    def s2_port(self, receiver: str) -> str:
        """S2's switch port towards a receiver (its TX counter is that receiver's delivered bytes)."""
        return self.hosts[receiver].port

    def delivery_port(self, sender: Host) -> str:
        """S2's port that counts what ``sender`` delivered (its receiver's port)."""
        return self.s2_port(sender.peer)

    # -- derived settings --------------------------------------------------------------
    def delay_table(self, path_offset: dict[str, float] | None = None) -> dict[str, float]:
        """Reverse-path hold time per receiver address: the configured RTT minus the path's own
        (``path_offset`` per class, "campus" for S1's path, "dtn" for S3's: measured by calibration)."""
        off = path_offset or {}

        def cls(h: Host) -> str:
            return "campus" if h.shaped else "dtn"

        return {self.hosts[h.peer].ip: max(h.rtt - off.get(cls(h), 0.0), 0.0) for h in self.paths}

    def tcp_buffer_max(self) -> int:
        """Socket buffer ceiling: room for the DTN path's BDP plus a full bottleneck queue, x2."""
        sc = self.scenario
        bdp = sc.capacity * max(h.rtt for h in self.senders) / 8
        return int(max(4 << 20, 2 * (bdp + sc.buffer_bytes)))

    def sysctls(self, role: str) -> dict[str, Any]:
        """The ``net.*`` sysctls of one namespace besides ``NO_IPV6`` (which every namespace gets)."""
        out: dict[str, Any] = {}
        if role in ("br1", "br2"):
            out |= {"net.ipv4.ip_forward": 1, "net.ipv4.conf.all.rp_filter": 0,
                    "net.ipv4.conf.default.rp_filter": 0}
        if role in self.hosts:
            bufmax = self.tcp_buffer_max()
            out |= {
                "net.ipv4.tcp_rmem": f"4096 131072 {bufmax}",
                "net.ipv4.tcp_wmem": f"4096 65536 {bufmax}",
                # Cached ssthresh/RTT from a previous run would make runs depend on history.
                "net.ipv4.tcp_no_metrics_save": 1,
            }
        return out

    def default_cca(self, role: str) -> str | None:
        """A sender namespace's default CCA (best effort: every sender sets its CCA per socket anyway)."""
        h = self.hosts.get(role)
        return h.cca if h is not None and h.kind != "receiver" and h.cca != "udp" else None

    def offloads(self, host: Host) -> list[str]:
        """``ethtool -K eth0`` arguments for a host (see the module docstring)."""
        if host.kind == "receiver":
            return ["tx", "off"]
        return [] if self.sender_offloads else ["tso", "off", "gso", "off"]

    def info(self) -> dict[str, Any]:
        """What the testbed's record keeps about it (``scidmz testbed status``)."""
        return {"scenario": self.scenario.name, "switch": self.switch,
                "hosts": {h.name: {"ip": h.ip, "ns": h.ns, "rtt": h.rtt, "kind": h.kind}
                          for h in self.hosts.values()}}


# -- congestion controls ----------------------------------------------------------------
def testbed_ccas() -> list[str]:
    """Congestion controls this kernel offers (the testbed can use only these)."""
    try:
        return Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    except OSError:
        return ["reno", "cubic"]


def resolve_cca(cca: str, what: str, available: list[str] | None = None) -> str:
    """Map a scenario CCA to one this kernel (or ``available``) has.

    ``bbr2`` does not exist in this kernel (BBR v1 only, MACHINE.md). The
    testbed maps it to ``bbr`` and logs a warning saying so, because the
    paper's bbr2 scenarios are otherwise unusable here; the substitution is
    also recorded in the plant's ``info`` so results are never silently
    mislabelled. Any other unknown CCA is a one-line error.
    """
    avail = testbed_ccas() if available is None else available
    if cca in avail:
        return cca
    if cca == "bbr2" and "bbr" in avail:
        log.warning("%s: bbr2 is not available in this kernel; using bbr (BBR v1) instead", what)
        return "bbr"
    raise ValueError(f"{what}: congestion control '{cca}' is not available in this kernel (has: {', '.join(avail)})")


# -- the description ---------------------------------------------------------------------
def _first(net: str) -> str:
    """The router's address in a network: its first host address."""
    return str(ipaddress.ip_network(net).network_address + 1)


def _ip(base: str, i: int) -> str:
    """i-th host address in a /16: 10.x.(i // 200).(i % 200 + 10), i >= 1."""
    net = ipaddress.ip_network(base)
    return str(net.network_address + (i // 200) * 256 + (i % 200) + 10)


def _probe_ip(net: str) -> str:
    return str(ipaddress.ip_network(net).network_address + PROBE_OCTET)


def _receiver(ns: Any, i: int | None) -> Host:
    """r<i> on S2's port q<i>, or DTN-r (``i`` None, 10.2.0.2) on port qd."""
    if i is None:
        dtnr = str(ipaddress.ip_network(REMOTE_NET).network_address + 2)
        return Host("dtnr", ns("dtnr"), dtnr, "receiver", switch="sw2", port="qd")
    return Host(f"r{i}", ns(f"r{i}"), _ip(REMOTE_NET, i), "receiver", switch="sw2", port=f"q{i}")


class _Hosts:
    """Collects sender/receiver pairs in the testbed's order and numbers S1's and S3's ports."""

    def __init__(self, ns: Any) -> None:
        self.ns = ns
        self.hosts: dict[str, Host] = {}
        self._ports = {"sw1": 0, "sw3": 0}

    def pair(self, name: str, ip: str, kind: str, peer: Host, rtt: float, cca: str,
             flow: FlowGroup | None = None) -> None:
        if not rtt > 0:
            raise ValueError(f"RTT for host {name} must be > 0, got {rtt!r}")
        h = Host(name, self.ns(name), ip, kind, peer.name, float(rtt), cca, flow)
        sw = "sw1" if h.shaped else "sw3"
        self._ports[sw] += 1
        self.hosts[name] = dataclasses.replace(h, switch=sw, port=f"p{self._ports[sw]}")
        self.hosts[peer.name] = peer


def _hosts(sc: Scenario, ns: Any, rtts: dict[str, float], dtn_cca: str, campus_cca: str,
           cca_mapped: dict[str, tuple[str, str]], available: list[str] | None) -> dict[str, Host]:
    """Campus and short-flow senders s1..sK, the DTN, then one pair per ``[[flows]]`` flow.

    ``[[flows]]`` senders are numbered after the campus hosts. Shaped ones sit on S1 beside the
    campus hosts (10.1/16); unshaped ones on S3 beside the DTN (10.3/16), the Science DMZ's path
    around the campus shaper -- ours: the papers' flows meet only at the bottleneck, and S3 is
    the testbed's one switch without a shaper. Each flow has its own receiver, so S2's port
    towards it counts exactly its bytes.
    """
    out = _Hosts(ns)
    n_campus = sc.campus.hosts
    for i in range(1, n_campus + sc.campus.short_flow_senders + 1):
        kind = "campus" if i <= n_campus else "short"
        out.pair(f"s{i}", _ip(CAMPUS_NET, i), kind, _receiver(ns, i), rtts.get(f"s{i}", sc.campus.rtt), campus_cca)
    dtns = str(ipaddress.ip_network(DTN_NET).network_address + 2)
    out.pair("dtns", dtns, "dtn", _receiver(ns, None), rtts.get("dtns", sc.dtn.rtt), dtn_cca)
    i, j = n_campus + sc.campus.short_flow_senders, 0
    for g in sc.flows:
        cca = g.cca if g.cca == "udp" else resolve_cca(g.cca, f"flows '{g.name}' cca", available)
        if g.cca not in ("udp", cca):
            cca_mapped[f"flows.{g.name}"] = (g.cca, cca)
        for _ in range(g.count):
            i += 1
            if not g.shaped:
                j += 1  # 10.3.0.11 on; .2 is the DTN
            ip = _ip(CAMPUS_NET, i) if g.shaped else _ip(DTN_NET, j)
            out.pair(f"s{i}", ip, "flow", _receiver(ns, i), g.rtt, cca, g)
    if n_campus == 0:
        rp = Host("rp", ns("rp"), _probe_ip(REMOTE_NET), "receiver", switch="sw2", port="qp")
        out.pair("sp", _probe_ip(CAMPUS_NET), "probe", rp, rtts.get("sp", sc.campus.rtt), campus_cca)
    return out.hosts


def _wiring(hosts: dict[str, Host], switch: str) -> tuple[tuple[Switch, ...], tuple[Link, ...]]:
    """Switches and veths: every host's eth0 to its switch's port, then the fixed backbone."""
    links = [Link(h.name, "eth0", h.switch, h.port) for h in hosts.values()]
    links += [Link("sw1", "up", "br1", "campus"), Link("sw3", "up", "br1", "dtn"), Link("br1", "wan", "br2", "wan"),
              Link("br2", "lan", "dly", DelayPath().inward), Link("dly", DelayPath().outward, "sw2", "up")]

    def ports(sw: str) -> tuple[str, ...]:
        return (*(h.port for h in hosts.values() if h.switch == sw), "up")

    switches = (Switch("sw1", switch, ports("sw1")), Switch("sw3", "bridge", ports("sw3")),
                Switch("sw2", "bridge", ports("sw2")))
    return switches, tuple(links)


def _addressing(hosts: dict[str, Host]) -> tuple[tuple[Address, ...], tuple[Route, ...]]:
    """BR1 owns the campus and DTN networks and the WAN's .1; BR2 the remote network and the WAN's .2."""
    wan = ipaddress.ip_network(WAN_NET)
    br1_wan, br2_wan = str(wan.network_address + 1), str(wan.network_address + 2)
    addrs = [Address("br1", "campus", _first(CAMPUS_NET), 16), Address("br1", "dtn", _first(DTN_NET), 16),
             Address("br1", "wan", br1_wan, wan.prefixlen), Address("br2", "wan", br2_wan, wan.prefixlen),
             Address("br2", "lan", _first(REMOTE_NET), 16)]
    routes = [Route("br1", REMOTE_NET, br2_wan), Route("br2", CAMPUS_NET, br1_wan), Route("br2", DTN_NET, br1_wan)]
    for h in hosts.values():
        addrs.append(Address(h.name, "eth0", h.ip, 16))
        routes.append(Route(h.name, "0.0.0.0/0", h.gateway))
    return tuple(addrs), tuple(routes)


def _bottleneck(sc: Scenario) -> TokenBucket:
    """BR1's WAN egress: TBF at B_max over a drop-tail byte FIFO of the scenario's buffer.

    Burst: the scenario's (default one 1 ms timer tick's worth of tokens, >= 2 frames), which keeps
    the line rate exact without letting bursts skip the queue; tc needs more than one frame.
    """
    return TokenBucket("br1", "wan", float(sc.capacity), int(max(2 * FRAME_BYTES, sc.link_burst_bytes)),
                       int(max(sc.buffer_bytes, 2 * FRAME_BYTES)))


def describe(
    scenario: Scenario,
    prefix: str,
    switch: str = "bridge",
    rtts: dict[str, float] | None = None,
    sender_offloads: bool = False,
    available_ccas: list[str] | None = None,
) -> TestbedSpec:
    """The testbed for ``scenario`` with namespace prefix ``prefix`` (no side effects).

    ``rtts``: per-sender base RTT overrides (s), e.g. ``{"s3": 0.025}``; ``available_ccas``: the
    kernel's congestion controls (default: read from /proc). One-line ``ValueError`` on bad input.
    """
    if switch not in SWITCHES:
        raise ValueError(f"unknown switch '{switch}' (choose bridge or ovs)")
    rtts = dict(rtts or {})
    dtn_cca = resolve_cca(scenario.dtn.cca, "dtn.cca", available_ccas)
    campus_cca = resolve_cca(scenario.campus.cca, "campus.cca", available_ccas)
    mapped = {k: (orig, new) for k, orig, new in (("dtn", scenario.dtn.cca, dtn_cca),
                                                  ("campus", scenario.campus.cca, campus_cca)) if orig != new}

    def ns(role: str) -> str:
        return f"{prefix}-{role}"

    hosts = _hosts(scenario, ns, rtts, dtn_cca, campus_cca, mapped, available_ccas)
    unknown = set(rtts) - {h.name for h in hosts.values() if h.kind != "receiver"}
    if unknown:
        raise ValueError(f"per-host RTT given for unknown sender(s): {', '.join(sorted(unknown))}")
    switches, links = _wiring(hosts, switch)
    addresses, routes = _addressing(hosts)
    return TestbedSpec(scenario, prefix, switch, hosts, switches, links, addresses, routes, _bottleneck(scenario),
                       dtn_cca, campus_cca, mapped, sender_offloads)
