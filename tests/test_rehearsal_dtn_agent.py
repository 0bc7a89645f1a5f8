"""Deployment rehearsal of the host place: ``control run --plant hardware --dtn-agent`` as an admin runs it.

Five machines as namespaces, driven only through the CLI, config files and
token files:

    DTN (10.0.5.2, iperf3 -P 8 + scidmz agent) --lan0-+
                                                      [border router: eBPF telemetry, TBF on wan1, control run]
    campus host (10.9.0.2, iperf3) ------------lan1-+   wan0 (DTN) / wan1 (campus, shaped) ---> WAN bottleneck
                                                                                                 (TBF 200M) ---> remote site:
                                                                          its DTN 10.0.3.2, its hosts 10.1.0.2
    management veth: controller (169.254.M.1) <-> agent (169.254.M.2)

The DTN and the campus leave the router through their own ports (a Science
DMZ's DTN port and the campus firewall's), so the campus TBF (``--dev wan1``)
does not shape the DTN; the telemetry's WAN side is the DTN's port. The
controller runs as root on the router's host with ``--netns`` (as set-up 1).

Measured (printed): the DTN's MRAE against the target from the controller's own
log, the periods a re-target takes, how long a new connection waits for its
pacing, how long after the controller's SIGKILL the agent lifts, and that the
controller falls back (cause ``host_agent``) when the agent is SIGKILLed and
recovers when systemd would have restarted it. After each death and at the end:
no TBF, no eBPF filter, no pacing left.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 missing (apt-get install iperf3)")]

P = f"hg{os.getpid() % 10000}"
DTN, CAMPUS, ROUTER, WAN, REMOTE = (f"{P}{x}" for x in ("dtn", "cmp", "rtr", "wan", "rem"))
# The remote site: its DTN (10.0.3.2, the telemetry's default DTN-class prefix) and its other hosts (10.1/16).
DTN_IP, CAMPUS_IP, REMOTE_DTN, REMOTE_IP = "10.0.5.2", "10.9.0.2", "10.0.3.2", "10.1.0.2"
_M = os.getpid() % 250 + 1
MGMT_CTL, MGMT_DTN = f"169.254.{_M}.5", f"169.254.{_M}.6"
PERIOD = 0.5
LEASE_PERIODS = 3
BOTTLENECK = "200M"
CLI = [sys.executable, "-m", "scidmz.cli"]
SRC = str(Path(__file__).resolve().parents[1] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC}
HOST_AGENT_PERIODS = re.compile(r'scidmz_fallback_periods_total\{cause="host_agent"\} [1-9]')


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=60)


def wait_until(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (v := cond()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return v


def _links() -> None:
    for ns, a, peer_ns, b in ((DTN, "d0", ROUTER, "lan0"), (CAMPUS, "c0", ROUTER, "lan1"),
                              (ROUTER, "wan0", WAN, "w0"), (ROUTER, "wan1", WAN, "w1"), (WAN, "w2", REMOTE, "x0")):
        sh("ip", "-n", ns, "link", "add", a, "type", "veth", "peer", "name", b, "netns", peer_ns)
    sh("ip", "link", "add", f"{P}m", "type", "veth", "peer", "name", "mgmt0", "netns", DTN)
    for ns, dev, addr in ((DTN, "d0", f"{DTN_IP}/24"), (ROUTER, "lan0", "10.0.5.1/24"), (CAMPUS, "c0", "10.9.0.2/24"),
                          (ROUTER, "lan1", "10.9.0.1/24"), (ROUTER, "wan0", "10.200.0.1/30"),
                          (WAN, "w0", "10.200.0.2/30"), (ROUTER, "wan1", "10.200.1.1/30"), (WAN, "w1", "10.200.1.2/30"),
                          (WAN, "w2", "10.1.0.1/16"), (REMOTE, "x0", "10.1.0.2/16"), (REMOTE, "x0", f"{REMOTE_DTN}/32"), (DTN, "mgmt0", f"{MGMT_DTN}/30")):
        sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
        sh("ip", "-n", ns, "link", "set", dev, "up")
    sh("ip", "addr", "add", f"{MGMT_CTL}/30", "dev", f"{P}m")
    sh("ip", "link", "set", f"{P}m", "up")
    for ns in (DTN, CAMPUS, ROUTER, WAN, REMOTE):
        sh("ip", "-n", ns, "link", "set", "lo", "up")


def _routes() -> None:
    sh("ip", "-n", DTN, "route", "add", "default", "via", "10.0.5.1")
    sh("ip", "-n", CAMPUS, "route", "add", "default", "via", "10.9.0.1")
    sh("ip", "-n", REMOTE, "route", "add", "default", "via", "10.1.0.1")
    sh("ip", "-n", WAN, "route", "add", "10.0.5.0/24", "via", "10.200.0.1")
    sh("ip", "-n", WAN, "route", "add", f"{REMOTE_DTN}/32", "dev", "w2")
    sh("ip", "-n", WAN, "route", "add", "10.9.0.0/24", "via", "10.200.1.1")
    # The DTN leaves by its own port (wan0), the campus by the shaped one (wan1): source routing.
    sh("ip", "-n", ROUTER, "route", "add", "default", "via", "10.200.0.2")
    sh("ip", "-n", ROUTER, "route", "add", "default", "via", "10.200.1.2", "table", "100")
    sh("ip", "-n", ROUTER, "rule", "add", "from", "10.9.0.0/24", "table", "100")
    for ns in (ROUTER, WAN):
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    for ns, dev in ((DTN, "d0"), (CAMPUS, "c0"), (ROUTER, "lan0"), (ROUTER, "lan1"), (ROUTER, "wan0"),
                    (ROUTER, "wan1")):
        sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")
    # The WAN bottleneck the DTN and the campus share.
    sh("tc", "-n", WAN, "qdisc", "add", "dev", "w2", "root", "tbf", "rate", "200mbit", "burst", "64k",
       "latency", "50ms")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv("SCIDMZ_RUN_DIR", str(tmp_path / "run"))
    procs: list[subprocess.Popen] = []
    try:
        for ns in (DTN, CAMPUS, ROUTER, WAN, REMOTE):
            sh("ip", "netns", "add", ns)
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
               "net.ipv6.conf.default.disable_ipv6=1")
        _links()
        _routes()
        for port in (5201, 5202, 5203):
            procs.append(subprocess.Popen(["ip", "netns", "exec", REMOTE, "iperf3", "-s", "-p", str(port)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        yield {"procs": procs, "tmp": tmp_path}
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        sh("ip", "link", "del", f"{P}m", check=False)
        for ns in (DTN, CAMPUS, ROUTER, WAN, REMOTE):
            sh("ip", "netns", "del", ns, check=False)


def start_agent(tmp: Path) -> subprocess.Popen:
    """``scidmz agent --config agent.toml`` on the DTN host, as its systemd unit runs it."""
    conf = tmp / "agent.toml"
    conf.write_text(f'prefix = ["{REMOTE_DTN}/32"]\napi = "{MGMT_DTN}:8643"\nperiod = "{PERIOD}s"\n'
                    f"lease-periods = {LEASE_PERIODS}\nshadow = false\n")
    err = tmp / "agent.err"
    (tmp / "agent").mkdir(mode=0o700, exist_ok=True)  # the unit's StateDirectory=
    p = subprocess.Popen(["ip", "netns", "exec", DTN, *CLI, "agent", "--config", str(conf), "--state-dir",
                          str(tmp / "agent"), "--token-file", str(tmp / "agent" / "agent.token")],
                         env=ENV, stdout=subprocess.DEVNULL, stderr=err.open("a"))
    wait_until(lambda: p.poll() is not None or "API at" in err.read_text(), 30, "the agent's API")
    assert p.poll() is None, err.read_text()[-2000:]
    return p


def ss_pacing(dport: int) -> list[int | None]:
    """The DTN's data sockets to ``dport``: each one's SO_MAX_PACING_RATE in bit/s (None: none)."""
    out = sh("ip", "netns", "exec", DTN, "ss", "-tin", "dst", f"{REMOTE_DTN}:{dport}").stdout
    rates: list[int | None] = []
    for block in out.split("\nESTAB")[1:]:
        m = re.search(r"bytes_acked:(\d+)", block)
        if m is None or int(m.group(1)) < 20000:
            continue  # iperf3's control connection
        m = re.search(r"pacing_rate \d+bps/(\d+)bps", block)
        rates.append(int(m.group(1)) if m else None)
    return rates


def control_cmd(tmp: Path, *extra: str, policy: str = "pacing") -> list[str]:
    return [*CLI, "control", "run", "testbed", "--set", f"link.capacity={BOTTLENECK}", "--set", f"period={PERIOD}s",
            "--plant", "hardware", "--telemetry", "ebpf:lan0,lan1,wan0", "--dev", "wan1", "--netns", ROUTER,
            "--dtn-agent", f"http://{MGMT_DTN}:8643", "--dtn-agent-token", str(tmp / "ctl-agent.token"),
            "--policy", policy, "--target", "100M", "--api", "127.0.0.1:0", "--token-file", str(tmp / "ctl.token"),
            "--log", str(tmp / "control.jsonl"), *extra]


def api(tmp: Path, path: str) -> Any:
    info = json.loads((tmp / "ctl.token").read_text())
    req = urllib.request.Request(f"http://{info['api']}{path}", headers={"Authorization": f"Bearer {info['token']}"})
    with urllib.request.urlopen(req, timeout=5) as r:
        body = r.read().decode()
    return json.loads(body) if path == "/status" else body


def periods(tmp: Path) -> list[dict[str, Any]]:
    log = tmp / "control.jsonl"
    return [json.loads(x) for x in log.read_text().splitlines() if '"k"' in x] if log.exists() else []


def leftovers() -> str:
    """What a controller leaves on the router: a TBF, the telemetry's clsact and filters."""
    out = sh("tc", "-n", ROUTER, "qdisc", "show").stdout
    for dev in ("lan0", "lan1", "wan0"):
        out += sh("tc", "-n", ROUTER, "filter", "show", "dev", dev, "ingress").stdout
    return "\n".join(ln for ln in out.splitlines() if "tbf" in ln or "clsact" in ln or "scidmz" in ln)


def mrae(rows: list[dict[str, Any]]) -> float:
    errs = [abs(r["y"]["rate_dtn"] - r["target"]) / r["target"] for r in rows]
    return sum(errs) / len(errs)


# pacing alone, and pacing on the host place with a PI on the campus's rate place (a configuration: the
# host member through the agents, the rate member through the TBF).
@pytest.mark.parametrize("policy", ["pacing", "pacing+pi"])
def test_rehearsal_pacing_on_real_equipment(site: dict[str, Any], policy: str) -> None:
    tmp: Path = site["tmp"]
    agent = start_agent(tmp)
    shutil.copy(tmp / "agent" / "agent.token", tmp / "ctl-agent.token")  # the admin's copy for the controller
    os.chmod(tmp / "ctl-agent.token", 0o600)

    # Bad input, before anything is shaped: an agent that does not answer, then a wrong token.
    cmd = control_cmd(tmp, "--duration", "2", policy=policy)
    dead = [x.replace(f"{MGMT_DTN}:8643", f"{MGMT_DTN}:8644") for x in cmd]
    r = subprocess.run(dead, env=ENV, capture_output=True, text=True, timeout=60)
    errors = [ln for ln in r.stderr.splitlines() if "error" in ln]  # (pi says which gains it uses first)
    assert r.returncode == 2 and len(errors) == 1 and "does not answer" in errors[0], r.stderr
    (tmp / "wrong.token").write_text(json.dumps({"token": "x" * 32}))
    os.chmod(tmp / "wrong.token", 0o600)
    wrong = [x.replace(str(tmp / "ctl-agent.token"), str(tmp / "wrong.token")) for x in cmd]
    r = subprocess.run(wrong, env=ENV, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "refused the token" in r.stderr, r.stderr
    assert leftovers() == ""

    senders = [subprocess.Popen(["ip", "netns", "exec", DTN, "iperf3", "-c", REMOTE_DTN, "-p", "5201", "-P", "8",
                                 "-t", "80", "-C", "cubic"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
               subprocess.Popen(["ip", "netns", "exec", CAMPUS, "iperf3", "-c", REMOTE_IP, "-p", "5202", "-t", "80",
                                 "-C", "cubic"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    site["procs"].extend(senders)
    ctl = subprocess.Popen(control_cmd(tmp, policy=policy), env=ENV, stdout=subprocess.DEVNULL, stderr=(tmp / "ctl.err").open("w"))
    site["procs"].append(ctl)
    try:
        wait_until(lambda: ctl.poll() is not None or len(periods(tmp)) >= 8, 60, "eight periods")
        assert ctl.poll() is None, (tmp / "ctl.err").read_text()[-2000:]
        assert "tbf" in sh("tc", "-n", ROUTER, "qdisc", "show", "dev", "wan1").stdout
        # The target moves through the API, as an admin moves it.
        k_set = periods(tmp)[-1]["k"]
        subprocess.run([*CLI, "control", "set-target", "50M", "--token-file", str(tmp / "ctl.token")], env=ENV,
                       check=True, capture_output=True, timeout=30)
        wait_until(lambda: len(periods(tmp)) >= k_set + 10, 30, "ten periods at the new target")

        # A new connection: paced within a period (measured from its first data on the wire).
        late = subprocess.Popen(["ip", "netns", "exec", DTN, "iperf3", "-c", REMOTE_DTN, "-p", "5203", "-P", "2",
                                 "-t", "60", "-C", "cubic"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        site["procs"].append(late)
        t_seen = wait_until(lambda: time.monotonic() if len(ss_pacing(5203)) == 2 else None, 10, "the new streams")
        wait_until(lambda: all(ss_pacing(5203)), 10, "the new streams paced")
        new_conn_wait = time.monotonic() - t_seen

        # The agent dies: the controller falls back on the host side and keeps running.
        agent.send_signal(signal.SIGKILL)
        agent.wait()
        st = wait_until(lambda: (s := api(tmp, "/status"))["fallback_cause"] == "host_agent" and s, 5 * PERIOD + 5,
                        "the host_agent fallback")
        metrics = wait_until(lambda: HOST_AGENT_PERIODS.search(m := api(tmp, "/metrics")) and m,
                             5 * PERIOD + 5, "a host_agent fallback period in the metrics")
        trivial_seen = st["u"]
        said = subprocess.run([*CLI, "control", "status", "--token-file", str(tmp / "ctl.token")], env=ENV,
                              capture_output=True, text=True, timeout=30).stdout
        assert ctl.poll() is None
        # systemd restarts the agent: it gives back what its dead self left, the controller paces again.
        agent = start_agent(tmp)
        site["procs"].append(agent)
        wait_until(lambda: not api(tmp, "/status")["fallback"], 10, "the controller's recovery")
        wait_until(lambda: all(ss_pacing(5201)), 5, "the DTN paced again")

        # The controller dies: the agent lifts within its lease.
        ctl.send_signal(signal.SIGKILL)
        ctl.wait()
        t_kill = time.monotonic()
        wait_until(lambda: not any(ss_pacing(5201)) and not any(ss_pacing(5203)), LEASE_PERIODS * PERIOD + 5,
                   "the agent lifting pacing")
        lift_after = time.monotonic() - t_kill
        rows = periods(tmp)
        # The admin's restart reclaims what the dead controller left on the router, and a clean stop removes it.
        r = subprocess.run(control_cmd(tmp, "--duration", "2", policy=policy), env=ENV, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr[-2000:]
        assert leftovers() == ""
        assert not any(ss_pacing(5201)) and not any(ss_pacing(5203))
    finally:
        if agent.poll() is None:
            agent.send_signal(signal.SIGTERM)
            agent.wait(timeout=15)
    assert not any(ss_pacing(5201))

    # The DTN followed the target: MRAE over the run, the first two periods after each change left out.
    live = [x for x in rows if x.get("y") and not x["fallback"]]
    first = {t: min(x["k"] for x in live if x["target"] == t) for t in {x["target"] for x in live}}
    settled = [x for x in live if x["k"] >= first[x["target"]] + 2]
    err = mrae(settled)
    at_50 = [x for x in live if x["target"] == 50e6]
    retarget = next(x["k"] - at_50[0]["k"] for x in at_50 if abs(x["y"]["rate_dtn"] / 50e6 - 1) < 0.15)
    print(json.dumps({"policy": policy, "mrae": round(err, 4), "settled_periods": len(settled), "retarget_periods": retarget,
                      "new_conn_wait_s": round(new_conn_wait, 3), "lift_after_kill_s": round(lift_after, 3),
                      "fallback_u": trivial_seen, "period_s": PERIOD}))
    assert err < 0.15, [(x["target"], x["y"]["rate_dtn"]) for x in settled]
    assert retarget <= 2
    assert new_conn_wait <= 2 * PERIOD  # within a period of the agent's, plus ss polling
    assert lift_after <= (LEASE_PERIODS + 2) * PERIOD
    assert st["fallback"] and "DTN agent unreachable" in st["fallback_reason"]
    assert any(a["error"] for a in st["host_agents"])
    assert "FALLBACK: DTN agent unreachable" in said and "UNREACHABLE" in said, said
    assert abs(trivial_seen - 200e6 + 50e6) < 1e3  # the trivial rate B_max - target
    assert re.search(r'scidmz_faults_total\{cause="host_agent"\} [1-9]', metrics), metrics[-800:]
