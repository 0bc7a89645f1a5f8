"""The builder: turn a ``TestbedSpec`` into namespaces, veths, bridges, addresses, routes and qdiscs.

Each step reads the description (``spec.py``) and makes what it lists
through pyroute2 (imported here only, so describing a testbed needs none).
Every namespace is written to the testbed's ``Record`` *before* it is
created, so a crash leaves a record of something that may not exist (which
teardown skips), never the reverse; interfaces, bridges and qdiscs live
inside those namespaces and go with them. ``testbed.Testbed`` runs the steps
in order and owns teardown.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .manage.registry import Record
from .procs import run_in, set_sysctls
from .spec import NO_IPV6, Switch, TestbedSpec

__all__ = ["Links", "check_free", "create_namespaces", "create_links", "join_switches", "start_ovs",
           "address_and_route", "bottleneck_qdisc", "delay_forwarding", "host_settings", "add_taps"]

# clsact hooks (tc's "parent ffff:fff2 / fff3") and the 'all protocols' ethertype of a u32 match-all
_CLSACT_INGRESS = 0xFFFFFFF2
_CLSACT_EGRESS = 0xFFFFFFF3
_ETH_P_ALL = 0x0003


class Links:
    """One pyroute2 ``IPRoute`` per namespace role, opened on first use and closed together."""

    def __init__(self, spec: TestbedSpec) -> None:
        self.spec = spec
        self._ipr: dict[str, Any] = {}

    def __getitem__(self, role: str) -> Any:
        if role not in self._ipr:
            from pyroute2 import IPRoute

            self._ipr[role] = IPRoute(netns=self.spec.ns(role))
        return self._ipr[role]

    def index(self, role: str, ifname: str) -> int:
        return self[role].link_lookup(ifname=ifname)[0]

    def up(self, role: str, ifname: str, master: int | None = None) -> None:
        kw: dict[str, Any] = {"state": "up"}
        if master is not None:
            kw["master"] = master
        self[role].link("set", index=self.index(role, ifname), **kw)

    def close(self) -> None:
        for ipr in self._ipr.values():
            ipr.close()
        self._ipr.clear()

    def __enter__(self) -> Links:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_free(spec: TestbedSpec) -> None:
    """Refuse to build over namespaces that already exist (another testbed with this prefix)."""
    from pyroute2 import netns

    existing = set(netns.listnetns())
    clash = [spec.ns(r) for r in spec.roles if spec.ns(r) in existing]
    if clash:
        raise RuntimeError(
            f"namespace(s) {', '.join(clash[:3])} already exist; another testbed uses prefix "
            f"'{spec.prefix}' (run `scidmz testbed down --prefix {spec.prefix}` if it is a leftover)"
        )


def _create_namespace(spec: TestbedSpec, record: Record, role: str) -> None:
    from pyroute2 import netns

    record.add("namespaces", spec.ns(role))
    netns.create(spec.ns(role))
    set_sysctls(spec.ns(role), NO_IPV6)


def create_namespaces(spec: TestbedSpec, record: Record, done: Callable[[str], None] = lambda _: None) -> None:
    """One namespace per role, IPv6 off in each (``done`` is told each one, for a progress bar)."""
    for role in spec.roles:
        done(f"namespace {role}")
        _create_namespace(spec, record, role)


def create_links(spec: TestbedSpec, links: Links) -> None:
    """Every veth of the description, then the Linux bridges that join switch ports."""
    for ln in spec.links:
        links[ln.a].link("add", ifname=ln.a_if, kind="veth", peer={"ifname": ln.b_if, "net_ns_fd": spec.ns(ln.b)})
    for sw in spec.switches:
        if sw.kind == "bridge":
            links[sw.role].link("add", ifname=sw.name, kind="bridge")


def join_switches(spec: TestbedSpec, links: Links) -> None:
    """Enslave each Linux bridge's ports and bring every interface up (OVS ports come up unbridged)."""
    for sw in spec.switches:
        master = links.index(sw.role, sw.name) if sw.kind == "bridge" else None
        for port in sw.ports:
            links.up(sw.role, port, master)
        if master is not None:
            links.up(sw.role, sw.name)
    bridged = {(sw.role, p) for sw in spec.switches for p in sw.ports}
    for ln in spec.links:
        for role, ifname in ((ln.a, ln.a_if), (ln.b, ln.b_if)):
            if (role, ifname) not in bridged:
                links.up(role, ifname)
    for h in spec.hosts.values():
        links.up(h.name, "lo")


def start_ovs(spec: TestbedSpec, sw: Switch, workdir: Path) -> Any:
    """S1 as Open vSwitch in userspace (datapath_type=netdev) inside S1's namespace.

    Uses ``ovsd.OvsUserspace`` (private ovsdb-server/ovs-vswitchd, TX checksum offload off on both
    ends of every attached veth, MACHINE.md). Returns it running; the caller stops it.
    """
    from .ovsd import OvsUserspace

    ovs = OvsUserspace(netns=spec.ns(sw.role), workdir=workdir).start()
    try:
        ovs.add_bridge(sw.name)
        for port in sw.ports:
            ln = next(x for x in spec.links if (x.b, x.b_if) == (sw.role, port) or (x.a, x.a_if) == (sw.role, port))
            peer_role, peer_if = (ln.a, ln.a_if) if ln.b == sw.role else (ln.b, ln.b_if)
            ovs.add_port(sw.name, port, peer=peer_if, peer_netns=spec.ns(peer_role))
    except BaseException:
        ovs.stop()
        raise
    return ovs


def address_and_route(spec: TestbedSpec, links: Links) -> None:
    for a in spec.addresses:
        links[a.role].addr("add", index=links.index(a.role, a.ifname), address=a.ip, prefixlen=a.prefixlen)
    for r in spec.routes:
        links[r.role].route("add", dst=r.dst, gateway=r.gateway)


def bottleneck_qdisc(spec: TestbedSpec, links: Links) -> None:
    """BR1's WAN egress: TBF at B_max over a drop-tail byte FIFO of the scenario's buffer."""
    tbf = spec.bottleneck_tbf
    links[tbf.role].tc("add", "tbf", links.index(tbf.role, tbf.dev), 0x10000, rate=f"{int(tbf.rate)}bit",
                       burst=tbf.burst, limit=tbf.limit)


def _redirect(ipr: Any, dev: int, hook: int, to: int, action: str) -> None:
    """A u32 match-all on ``hook`` of ``dev`` whose mirred action redirects or mirrors to ``to``."""
    ipr.tc("add-filter", "u32", dev, parent=hook, protocol=_ETH_P_ALL, target=0x10001, keys=["0x0/0x0+0"],
           action=[{"kind": "mirred", "direction": "egress", "action": action, "ifindex": to}])


def delay_forwarding(spec: TestbedSpec, links: Links) -> None:
    """Forward direction through DLY in the kernel: every frame arriving on ``inward`` leaves on ``outward``."""
    d = spec.delay
    a, b = links.index(d.role, d.inward), links.index(d.role, d.outward)
    links[d.role].tc("add", "ingress", a, 0xFFFF0000)
    _redirect(links[d.role], a, 0xFFFF0000, b, "redirect")


def host_settings(spec: TestbedSpec) -> None:
    """Forwarding and TCP sysctls, default CCAs and NIC offloads (see ``spec.py``)."""
    for role in spec.roles:
        vals = spec.sysctls(role)
        if vals:
            set_sysctls(spec.ns(role), vals)
        cca = spec.default_cca(role)
        if cca is not None:
            # Only "allowed" CCAs can be a namespace default: best effort.
            try:
                set_sysctls(spec.ns(role), {"net.ipv4.tcp_congestion_control": cca})
            except OSError:
                pass
    for h in spec.hosts.values():
        args = spec.offloads(h)
        if args:
            run_in(h.ns, ["ethtool", "-K", "eth0", *args])


def add_taps(spec: TestbedSpec, record: Record) -> tuple[str, str, str]:
    """The passive taps (``spec.Taps``): the tap namespace, its two veths and the mirrors, once per
    testbed. Returns (tap namespace, egress veth, ingress veth) for a telemetry source to read.

    Mirror hooks are ``clsact`` filters, so BR1's bottleneck qdisc is untouched.
    """
    taps = spec.taps
    out = (spec.ns(taps.role), taps.egress, taps.ingress)
    if spec.ns(taps.role) in record.data["namespaces"]:
        return out
    _create_namespace(spec, record, taps.role)
    with Links(spec) as links:
        for ln in taps.links:
            links[ln.a].link("add", ifname=ln.a_if, kind="veth", peer={"ifname": ln.b_if, "net_ns_fd": spec.ns(ln.b)})
            links.up(ln.a, ln.a_if)
            links.up(ln.b, ln.b_if)
        for role, dev in dict.fromkeys((r, d) for r, d, _, _ in taps.mirrors):
            links[role].tc("add", "clsact", links.index(role, dev))
        for role, dev, hook, to in taps.mirrors:
            _redirect(links[role], links.index(role, dev), _CLSACT_INGRESS if hook == "ingress" else _CLSACT_EGRESS,
                      links.index(role, to), "mirror")
    return out
