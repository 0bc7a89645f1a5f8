"""``scidmz agent`` without root: the sharing rule, the match, the lease, host caps, the token, bad input,
and the systemd unit (``systemd-analyze verify``, as tests/test_deploy.py does for the controller's)."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scidmz.actuators.share import HEADROOM, demand, water_fill
from scidmz.agent.client import AgentClient
from scidmz.agent.hostcaps import binding_caps, caps_of_qdiscs
from scidmz.agent.lease import Lease
from scidmz.agent.match import SocketFilter
from scidmz.agent.token import load_or_create, read_token

UNIT_DIR = Path(__file__).resolve().parents[1] / "deploy" / "systemd"
UNIT = UNIT_DIR / "scidmz-agent.service"


# -- sharing ------------------------------------------------------------------------------
def test_water_filling_gives_what_a_slow_connection_leaves_to_the_others() -> None:
    caps = water_fill(100e6, [math.inf, math.inf, 10e6, math.inf])
    assert caps[2] == pytest.approx(10e6) and caps[0] == caps[1] == caps[3] == pytest.approx(30e6)
    assert sum(caps) == pytest.approx(100e6)


def test_water_filling_spreads_what_nobody_wants_and_always_sums_to_the_rate() -> None:
    caps = water_fill(100e6, [10e6, 20e6])
    assert caps == pytest.approx([45e6, 55e6])
    assert water_fill(1e6, []) == []
    for demands in ([0.0, 0.0], [math.inf] * 5, [1e6, 5e7, math.inf, 3e5]):
        assert sum(water_fill(80e6, demands)) == pytest.approx(80e6)


def test_demand_new_saturated_held_back_and_idle() -> None:
    assert demand(None, None) == math.inf  # new: a full share at once
    assert demand(48e6, 50e6) == math.inf  # uses its cap: would take more
    assert demand(20e6, 50e6) == pytest.approx(HEADROOM * 20e6)  # held back elsewhere
    assert demand(0.0, 0.0) == 0.0  # idle and granted nothing: not "saturated"


# -- which sockets ------------------------------------------------------------------------
def test_the_match_takes_prefixes_of_both_families_ports_either_end_and_process_names() -> None:
    f = SocketFilter.build(["203.0.113.0/24", "2001:db8::/32"], ["50000-50010"], ["iperf3"])
    assert f.peer_ok("203.0.113.9") and f.peer_ok("::ffff:203.0.113.9") and f.peer_ok("2001:db8::1")
    assert not f.peer_ok("203.0.114.1") and not f.peer_ok("2001:db9::1")
    assert f.ports_ok(50005, 443) and f.ports_ok(40000, 50010) and not f.ports_ok(40000, 443)
    assert f.process_ok("iperf3") and not f.process_ok("sshd")
    assert SocketFilter.build(["10.0.0.0/8"]).ports_ok(1, 2)


@pytest.mark.parametrize("bad,msg", [
    (["10.0.0.0/33"], "is not a prefix"), (["10.0.0.1/8"], "is not a prefix"), (["dtn.example"], "is not a prefix"),
    ([], "at least one peer prefix")])
def test_a_prefix_that_is_not_one_is_one_line(bad: list[str], msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        SocketFilter.build(bad)


def test_bad_port_ranges_and_process_names_are_refused() -> None:
    for bad in (["0-10"], ["10-5"], ["x"], ["70000"]):
        with pytest.raises(ValueError, match="port range"):
            SocketFilter.build(["10.0.0.0/8"], bad)
    with pytest.raises(ValueError, match="15-character"):
        SocketFilter.build(["10.0.0.0/8"], [], ["globus-gridftp-server"])


def test_the_cli_refuses_a_bad_prefix_in_one_line_with_exit_2(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "scidmz.cli", "agent", "--prefix", "10.1.2.0/33", "--state-dir",
                        str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "10.1.2.0/33" in r.stderr, r.stderr


def test_a_config_file_key_the_agent_lacks_is_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "agent.toml"
    cfg.write_text('prefix = ["10.0.0.0/8"]\nrate = "1G"\n')
    r = subprocess.run([sys.executable, "-m", "scidmz.cli", "agent", "--config", str(cfg)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "unknown key 'rate'" in r.stderr, r.stderr


# -- lease --------------------------------------------------------------------------------
def test_the_lease_runs_out_after_its_periods_unless_renewed() -> None:
    now = [0.0]
    lease = Lease(3, 1.0, clock=lambda: now[0])
    assert not lease.renew()  # nothing granted yet
    lease.grant()
    now[0] = 2.5
    assert not lease.expired() and lease.renew()
    now[0] = 5.4
    assert not lease.expired()
    now[0] = 5.5
    assert lease.expired() and not lease.expired()  # reported once
    assert not lease.held and not lease.renew()
    with pytest.raises(ValueError):
        Lease(0, 1.0)


# -- host caps ----------------------------------------------------------------------------
def test_host_caps_are_read_from_fq_maxrate_and_tbf_and_said_when_they_bind() -> None:
    # iproute2's JSON (rates in bytes/s): ESnet's fq maxrate 1 Gbit/s per flow, and a TBF of 2 Gbit/s
    fq = caps_of_qdiscs("eth0", [{"kind": "fq", "handle": "8001:", "root": True,
                                  "options": {"limit": 10000, "maxrate": 125000000}}])
    tbf = caps_of_qdiscs("eth1", [{"kind": "tbf", "root": True, "options": {"rate": 250000000}}])
    assert fq == [{"dev": "eth0", "qdisc": "fq", "scope": "per_flow", "rate": 1e9}]
    assert tbf[0]["rate"] == 2e9 and tbf[0]["scope"] == "aggregate"
    assert binding_caps(fq, 8e9, [2e9, 2e9]) and not binding_caps(fq, 3e9, [0.5e9] * 6)
    assert binding_caps(tbf, 4e9, [1e9]) and not binding_caps(tbf, 1e9, [1e9])
    assert binding_caps(fq + tbf, None, []) == []  # no rate held: nothing of ours to bind against
    assert caps_of_qdiscs("eth2", [{"kind": "pfifo_fast", "root": True}]) == []


# -- token and client ---------------------------------------------------------------------
def test_the_token_is_created_0600_kept_across_starts_and_refused_when_readable(tmp_path: Path) -> None:
    p = tmp_path / "s" / "agent.token"
    tok = load_or_create(p)
    assert p.stat().st_mode & 0o777 == 0o600 and load_or_create(p) == tok == read_token(p)
    p.chmod(0o644)
    with pytest.raises(ValueError, match="readable by others"):
        load_or_create(p)
    (tmp_path / "bad").write_text(json.dumps({"token": "short"}))
    with pytest.raises(ValueError, match="not an agent token file"):
        read_token(tmp_path / "bad")


def test_the_client_wants_a_url_with_a_port_and_says_when_no_agent_answers(tmp_path: Path) -> None:
    p = tmp_path / "agent.token"
    load_or_create(p)
    for bad in ("10.0.0.7:8643", "http://10.0.0.7", "ftp://10.0.0.7:21", "http://10.0.0.7:99999"):
        with pytest.raises(ValueError, match="expected http://HOST:PORT"):
            AgentClient(bad, p)
    # a port nothing listens on: one line, a ConnectionError
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(ConnectionError, match="does not answer"):
        AgentClient(f"http://127.0.0.1:{port}", p, timeout=1).status()
    # the controller's start-up check makes it bad input (exit 2 before anything is shaped)
    with pytest.raises(ValueError, match="does not answer"):
        AgentClient(f"http://127.0.0.1:{port}", p, timeout=1).check()


# -- the unit -----------------------------------------------------------------------------
def _verify(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("scidmz")
    assert exe, "the scidmz console script is not installed"
    copy = tmp_path / UNIT.name
    copy.write_text(text.replace("/usr/local/bin/scidmz", exe))
    return subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze missing (scripts/test.sh installs Debian's systemd)")
def test_the_agent_unit_verifies(tmp_path: Path) -> None:
    r = _verify(tmp_path, UNIT.read_text())
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), r.stdout + r.stderr
    bad = _verify(tmp_path, UNIT.read_text().replace("NoNewPrivileges=yes", "NoNewPrivilege=yes"))
    assert "Unknown key" in bad.stderr, bad.stderr


def test_the_agent_unit_grants_only_what_the_mechanism_needs() -> None:
    text = UNIT.read_text()
    kv = dict(re.findall(r"^(\w+)=(.*)$", text, re.M))
    caps = {"CAP_SYS_PTRACE", "CAP_DAC_READ_SEARCH"}  # tests/test_agent_rights.py measures both
    assert set(kv["CapabilityBoundingSet"].split()) == caps == set(kv["AmbientCapabilities"].split())
    # the agent must see other users' /proc/PID/fd, and pidfd_getfd is in systemd's @debug set
    assert "ProtectProc" not in kv and "ProcSubset" not in kv and "@debug" not in kv["SystemCallFilter"]
    assert kv["NoNewPrivileges"] == "yes" and kv["StateDirectory"] == "scidmz"
    start = kv["ExecStart"].split()
    assert start[1:4] == ["agent", "--config", "/etc/scidmz/agent.toml"]


def test_the_example_config_is_the_agents() -> None:
    from scidmz.cli import build_parser
    from scidmz.commands import agent
    from scidmz.commands.runconfig import read_config

    build_parser()
    opts = read_config(str(UNIT_DIR / "agent.toml"), agent._OPTIONS)
    assert opts["shadow"] is True and opts["lease_periods"] == 3
    SocketFilter.build(opts["prefix"])


def test_an_api_address_it_cannot_listen_on_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "scidmz.cli", "agent", "--prefix", "10.0.0.0/8", "--shadow",
                        "--api", "192.0.2.1:8643", "--state-dir", str(tmp_path)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "cannot listen" in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []  # no token, no record


def test_the_one_walk_dump_lists_what_the_per_family_dumps_list() -> None:
    # IPv4, IPv6 and a dual-stack socket talking to an IPv4 peer (an IPv4-mapped address in an AF_INET6
    # socket): the TCPDIAG_GETSOCK answer must hold every one with the same fields as SOCK_DIAG_BY_FAMILY's.
    import ipaddress
    import socket

    from scidmz.agent.diag import DiagSocket

    held = []
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        srv = socket.create_server((host, 0), family=family)
        held += [srv, socket.create_connection(srv.getsockname()[:2]), srv.accept()[0]]
    dual = socket.create_server(("::", 0), family=socket.AF_INET6, dualstack_ipv6=True)
    mapped = socket.socket(socket.AF_INET6)
    mapped.connect(("::ffff:127.0.0.1", dual.getsockname()[1]))
    held += [dual, mapped, dual.accept()[0]]
    one, two = DiagSocket(), DiagSocket(one_walk=False)
    try:
        def key(s: object) -> tuple:
            return (s.inode, s.family, s.local, s.lport, s.peer, s.rport, s.max_pacing_rate)

        a, b = sorted(map(key, one.dump())), sorted(map(key, two.dump()))
        assert one.one_walk, "this kernel refused TCPDIAG_GETSOCK: the agent would walk the hash table twice"
        mine = {s.getsockname()[1] for s in held if s.type == socket.SOCK_STREAM}
        assert {k[3] for k in a} & mine == {k[3] for k in b} & mine
        assert [k for k in a if k[3] in mine] == [k for k in b if k[3] in mine]
        assert any(ipaddress.ip_address(k[4]) == ipaddress.ip_address("::ffff:127.0.0.1") for k in a)
        assert {socket.AF_INET, socket.AF_INET6} <= {k[1] for k in a if k[3] in mine}
    finally:
        one.close()
        two.close()
        for s in held:
            s.close()
