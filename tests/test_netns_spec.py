"""The testbed's description (``plant.netns.spec``): derived from a Scenario, no root, no side effects."""

from __future__ import annotations

import ipaddress

import pytest

from scidmz.plant.netns.spec import (
    CAMPUS_NET,
    DTN_NET,
    REMOTE_NET,
    TestbedSpec,
    describe,
)
from scidmz.scenario import load_scenario

CCAS = ["reno", "cubic", "bbr"]


def _spec(prefix: str = "tsp", switch: str = "bridge", **over) -> TestbedSpec:
    sc = load_scenario("testbed")
    if over:
        sc = sc.replace(**over)
    return describe(sc, prefix, switch, available_ccas=CCAS)


def _interfaces(spec: TestbedSpec) -> set[tuple[str, str]]:
    ends = {(ln.a, ln.a_if) for ln in spec.links} | {(ln.b, ln.b_if) for ln in spec.links}
    return ends | {(sw.role, sw.name) for sw in spec.switches if sw.kind == "bridge"}


def _l2_domains(spec: TestbedSpec) -> dict[tuple[str, str], tuple[str, str]]:
    """Union-find over interfaces: a veth joins its ends, a switch its ports, DLY its two sides."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x: tuple[str, str]) -> tuple[str, str]:
        parent.setdefault(x, x)
        while parent[x] != x:
            x = parent[x]
        return x

    def union(a: tuple[str, str], b: tuple[str, str]) -> None:
        parent[find(a)] = find(b)

    for ln in spec.links:
        union((ln.a, ln.a_if), (ln.b, ln.b_if))
    for sw in spec.switches:
        for p in sw.ports:
            union((sw.role, p), (sw.role, sw.ports[0]))
    union((spec.delay.role, spec.delay.inward), (spec.delay.role, spec.delay.outward))
    return {x: find(x) for x in list(parent)}


def test_every_name_is_prefixed_unique_and_wired_to_something_that_exists():
    spec = _spec()
    assert len(spec.roles) == len(set(spec.roles))
    assert all(spec.ns(r).startswith("tsp-") for r in spec.roles)
    assert [h.ns for h in spec.hosts.values()] == [spec.ns(h.name) for h in spec.hosts.values()]
    roles = set(spec.roles)
    ends = [(ln.a, ln.a_if) for ln in spec.links] + [(ln.b, ln.b_if) for ln in spec.links]
    assert {r for r, _ in ends} <= roles
    assert len(ends) == len(set(ends)), "an interface name is used twice in one namespace"
    for sw in spec.switches:
        assert set(sw.ports) <= {i for r, i in ends if r == sw.role}, sw
    assert {a.role for a in spec.addresses} | {r.role for r in spec.routes} <= roles
    assert {(a.role, a.ifname) for a in spec.addresses} <= _interfaces(spec)
    # The scenario's 10 campus hosts and the DTN, each with its own receiver.
    assert len(spec.campus) == 10 and spec.dtn.peer == "dtnr" and len(spec.receivers) == len(spec.senders) == 11


def test_addresses_are_unique_and_every_host_reaches_its_gateway_on_its_own_segment():
    spec = _spec()
    ips = [a.ip for a in spec.addresses]
    assert len(ips) == len(set(ips))
    owner = {a.ip: (a.role, a.ifname) for a in spec.addresses}
    dom = _l2_domains(spec)
    for h in spec.hosts.values():
        assert ipaddress.ip_address(h.ip) in ipaddress.ip_network(
            REMOTE_NET if h.kind == "receiver" else CAMPUS_NET if h.shaped else DTN_NET)
        gw = owner[h.gateway]
        assert dom[(h.name, "eth0")] == dom[gw], f"{h.name} cannot reach its gateway {h.gateway} on layer 2"
        routes = [r for r in spec.routes if r.role == h.name]
        assert [(r.dst, r.gateway) for r in routes] == [("0.0.0.0/0", h.gateway)]


def _next_role(spec: TestbedSpec, role: str, dst: str) -> str | None:
    """The router a packet from ``role`` to ``dst`` is handed to (None: ``dst`` is on a connected network)."""
    d = ipaddress.ip_address(dst)
    for a in spec.addresses:
        if a.role == role and d in ipaddress.ip_interface(f"{a.ip}/{a.prefixlen}").network:
            return None
    routes = sorted((r for r in spec.routes if r.role == role and d in ipaddress.ip_network(r.dst)),
                    key=lambda r: ipaddress.ip_network(r.dst).prefixlen, reverse=True)
    assert routes, f"{role} has no route to {dst}"
    return next(a.role for a in spec.addresses if a.ip == routes[0].gateway)


@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_routes_carry_every_sender_to_its_receiver_and_back_across_the_wan(direction):
    spec = _spec(flows=[{"name": "a", "rtt": "20ms"}, {"name": "b", "rtt": "30ms", "shaped": False}])
    for h in spec.senders:
        src, dst = (h, spec.hosts[h.peer]) if direction == "forward" else (spec.hosts[h.peer], h)
        path, role = [src.name], src.name
        while (nxt := _next_role(spec, role, dst.ip)) is not None:
            path.append(nxt)
            role = nxt
            assert len(path) < 6, path
        # One border router each way round, the WAN between them.
        want = ["br1", "br2"] if direction == "forward" else ["br2", "br1"]
        assert path[1:] == want, (h.name, path)


def test_a_scenario_without_campus_hosts_gets_an_idle_probe_host_on_the_campus_path():
    spec = _spec(campus={"hosts": 0}, flows=[{"name": "a", "rtt": "20ms"}])
    sp, rp = spec.hosts["sp"], spec.hosts["rp"]
    assert (sp.kind, sp.ip, sp.peer, sp.switch, sp.rtt, sp.cca) == ("probe", "10.1.0.250", "rp", "sw1",
                                                                    spec.scenario.campus.rtt, spec.campus_cca)
    assert (rp.kind, rp.ip, rp.switch, rp.port) == ("receiver", "10.2.0.250", "sw2", "qp")
    # the validity probe's sender, never an episode's: not a sender, in no flow table, but its path is served
    assert spec.probe is sp and sp not in spec.senders and [h.name for h in spec.senders] == ["dtns", "s1"]
    assert spec.delay_table()[rp.ip] == sp.rtt and sp in spec.paths
    assert len({a.ip for a in spec.addresses}) == len(spec.addresses)
    dom = _l2_domains(spec)
    assert dom[("sp", "eth0")] == dom[("br1", "campus")] and dom[("rp", "eth0")] == dom[("sw2", "up")]
    for src, dst in ((sp, rp), (rp, sp)):  # across the WAN both ways, through the campus shaper's side
        path, role = [src.name], src.name
        while (nxt := _next_role(spec, role, dst.ip)) is not None:
            path.append(nxt)
            role = nxt
        assert path[1:] == (["br1", "br2"] if src is sp else ["br2", "br1"])
    # a scenario with campus hosts probes from its first one and has no probe host, as before
    spec = _spec(campus={"hosts": 2})
    assert spec.probe.name == "s1" and "sp" not in spec.hosts and "rp" not in spec.hosts


def test_the_bottleneck_shaper_uplink_and_delay_path_follow_the_scenario():
    spec = _spec(link={"capacity": 20e6, "buffer_bdp": 1.0})
    sc = spec.scenario
    tbf = spec.bottleneck_tbf
    assert (tbf.role, tbf.dev, tbf.rate) == ("br1", "wan", 20e6)
    assert tbf.limit == int(sc.buffer_bytes) and tbf.burst == int(max(2 * 1514, sc.link_burst_bytes))
    assert spec.bottleneck == ("wan", "tsp-br1") and spec.uplink == ("up", "tsp-sw1")
    assert ("sw1", "up") in {(ln.a, ln.a_if) for ln in spec.links}  # the paper's S1-eth1
    # The delay stage's table: every receiver address, held for its sender's configured RTT ...
    assert spec.delay_table() == {spec.hosts[h.peer].ip: h.rtt for h in spec.senders}
    # ... less the path's own RTT measured at build time, never below zero.
    held = spec.delay_table({"campus": 0.004, "dtn": 0.5})
    assert held[spec.hosts["r1"].ip] == pytest.approx(0.006) and held[spec.hosts["dtnr"].ip] == 0.0
    # Every receiver is counted by its own S2 port, as the kernel telemetry reads them.
    ports = [spec.delivery_port(h) for h in spec.senders]
    assert len(ports) == len(set(ports)) and spec.delivery_port(spec.dtn) == "qd"


def test_per_host_rtts_and_bad_input_are_one_line_errors():
    sc = load_scenario("testbed").replace(campus={"hosts": 2})
    spec = describe(sc, "tsp", rtts={"s2": 0.037, "dtns": 0.05}, available_ccas=CCAS)
    assert [spec.hosts[n].rtt for n in ("s1", "s2", "dtns")] == [0.010, 0.037, 0.05]
    with pytest.raises(ValueError, match="unknown sender"):
        describe(sc, "tsp", rtts={"s9": 0.01}, available_ccas=CCAS)
    with pytest.raises(ValueError, match="RTT for host s1 must be > 0"):
        describe(sc, "tsp", rtts={"s1": 0.0}, available_ccas=CCAS)
    with pytest.raises(ValueError, match="unknown switch 'hub'"):
        describe(sc, "tsp", switch="hub", available_ccas=CCAS)
    with pytest.raises(ValueError, match="'bbr' is not available"):
        describe(sc.replace(dtn={"cca": "bbr"}), "tsp", available_ccas=["reno", "cubic"])
    mapped = describe(sc.replace(dtn={"cca": "bbr2"}), "tsp", available_ccas=CCAS)
    assert mapped.dtn.cca == "bbr" and mapped.cca_mapped == {"dtn": ("bbr2", "bbr")}


def test_ovs_s1_replaces_only_the_campus_bridge():
    spec = _spec(switch="ovs", campus={"hosts": 2})
    kinds = {sw.role: (sw.kind, sw.name) for sw in spec.switches}
    assert kinds == {"sw1": ("ovs", "s1"), "sw3": ("bridge", "br0"), "sw2": ("bridge", "br0")}
    assert spec.switches[0].ports == ("p1", "p2", "up")


def test_host_settings_sysctls_offloads_and_taps():
    spec = _spec(campus={"hosts": 1})
    assert spec.sysctls("br1")["net.ipv4.ip_forward"] == 1 and spec.sysctls("sw2") == {}
    tcp = spec.sysctls("dtns")
    bufmax = spec.tcp_buffer_max()
    assert tcp["net.ipv4.tcp_rmem"].endswith(str(bufmax)) and tcp["net.ipv4.tcp_no_metrics_save"] == 1
    # Room for the DTN path's BDP plus a full buffer, twice, and at least 4 MiB.
    sc = spec.scenario
    assert bufmax == int(max(4 << 20, 2 * (sc.capacity * sc.dtn.rtt / 8 + sc.buffer_bytes)))
    assert spec.default_cca("s1") == "cubic" and spec.default_cca("r1") is None
    assert spec.offloads(spec.hosts["r1"]) == ["tx", "off"]
    assert spec.offloads(spec.hosts["s1"]) == ["tso", "off", "gso", "off"]
    assert describe(sc, "tsp", sender_offloads=True, available_ccas=CCAS).offloads(spec.hosts["s1"]) == []
    # Every mirror hooks an interface the testbed has and copies into one of the two tap veths.
    have = _interfaces(spec)
    for role, dev, hook, to in spec.taps.mirrors:
        assert (role, dev) in have and hook in ("ingress", "egress")
        assert (role, to) in {(ln.a, ln.a_if) for ln in spec.taps.links}


def test_describing_is_pure_and_repeatable():
    assert _spec() == _spec()
    assert _spec().info()["hosts"]["dtns"] == {"ip": "10.3.0.2", "ns": "tsp-dtns", "rtt": 0.1, "kind": "dtn"}
