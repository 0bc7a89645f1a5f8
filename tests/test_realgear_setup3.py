"""Set-up 3 of docs/deployment.md rehearsed from the CLI alone: a P4 switch on taps, a TBF on the router.

Machines as namespaces (names hold ``rg``): senders S (the DTN 10.77.0.10 and a
campus host 10.77.0.11), the border router R (its WAN interface's TBF is the
shaper), a WAN hop W and the receivers D (DTN-r 10.78.3.2, a remote network
10.78.1.0/24; a 20-ms round trip past W). The telemetry switch is a real
``simple_switch_grpc`` started with no program: tc ``mirred`` copies what
enters R from the campus to its port 1 (the ingress tap) and what crosses W
(the data after R's TBF, the ACKs coming back) to its port 2 (the egress tap).

The controller is started as an admin would: ``python3 -m scidmz.cli control
run --plant hardware --telemetry p4:... --p4-pipeline DIR --p4-thrift ... --dev
... --netns R`` with a token file, the HTTP API and a log file; it loads the
pipeline, installs the entries (IPv4 and IPv6 prefixes), reads BMv2's registers
over Thrift, and closes the loop through the TBF; ``control set-target`` moves
the target through the API. Real iperf3 TCP, at ~150-250 frames/s per tap, a
rate BMv2 sustains on this shared machine (telemetry_p4/README.md).

Checked: the daemon's y period by period against the software twin
(``TelemetrySource.from_pcaps``) on a capture of the frames the switch received;
the TBF and u following the target; a second controller refused while one runs;
after SIGKILL the TBF, the owner records and the switch entries stay, and a
fresh start on the same device and switch reclaims them and runs; a clean stop
leaves nothing.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from scidmz.telemetry.p4 import toolchain as p4tc

pytestmark = pytest.mark.root

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "telemetry_p4" / "v1model" / "scidmz_telemetry.p4"
TAG = f"rg{os.getpid() % 10000}"
NS = {r: f"{TAG}{r}" for r in ("s", "r", "w", "d")}
DTN_PREFIXES = "10.78.3.2/32,fd78:3::2/128"
REMOTE_PREFIXES = "10.78.1.0/24,fd78:1::/64"
CAPACITY, TARGET0, TARGET1 = 2e6, 0.8e6, 1.4e6  # trivial: u = B_max - target = 1.2M, then 0.6M
FIELDS = ("rate_dtn", "rate_campus", "rtt_dtn", "rtt_campus", "qdelay_dtn", "qdelay_campus", "active_flows")


def sh(*cmd: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    full = ["ip", "netns", "exec", ns, *cmd] if ns else list(cmd)
    r = subprocess.run(full, capture_output=True, text=True, check=False)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(full)}: {r.stderr.strip()}")
    return r


def wait_until(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _both_started(records: list[dict[str, Any]], k0: int) -> int | None:
    """The first record from ``k0`` by which both the DTN's and the campus's frames have been counted."""
    seen: set[str] = set()
    for k in range(k0, len(records)):
        seen |= {c for c in ("rate_dtn", "rate_campus") if records[k]["y"][c] > 0}
        if len(seen) == 2:
            return k
    return None


def _link(a: str, ns_a: str, b: str, ns_b: str) -> None:
    sh("ip", "link", "add", a, "netns", ns_a, "type", "veth", "peer", "name", b, "netns", ns_b)
    for dev, ns in ((a, ns_a), (b, ns_b)):
        sh("ip", "link", "set", dev, "up", ns=ns)
        # one frame per segment on the wire and at the taps (GRO/TSO would merge them); full
        # checksums, as the delay stage forwards the ACKs from user space
        sh("ethtool", "-K", dev, "gro", "off", "gso", "off", "tso", "off", "tx", "off", ns=ns, check=False)


def _u32_all(ns: str, dev: str, hook: str, *actions: str) -> None:
    """A filter matching every frame (this kernel has u32 and bpf classifiers, no matchall)."""
    sh("tc", "filter", "add", "dev", dev, hook, "protocol", "all", "prio", "1", "u32", "match", "u32", "0", "0",
       *actions, ns=ns)


def _build_network(sw: p4tc.Bmv2Switch, rig: dict[str, Any]) -> None:
    """S -- R ==TBF==> W (the WAN bump: data on in the kernel, ACKs held 10 ms in user space, the
    project's delay stage, as there is no netem here) -- D; R and D share one subnet."""
    for ns in NS.values():
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "set", "lo", "up", ns=ns)
        sh("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", ns=ns)
        sh("sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1", ns=ns)
    s, r, w, d = NS["s"], NS["r"], NS["w"], NS["d"]
    _link("sl", s, "rl", r)
    _link("rw", r, "wr", w)
    _link("wd", w, "dw", d)
    for ns, dev, addrs in ((s, "sl", ("10.77.0.10/24", "10.77.0.11/24")), (r, "rl", ("10.77.0.1/24",)),
                           (r, "rw", ("10.79.0.1/24",)), (d, "dw", ("10.79.0.2/24", "10.78.3.2/32", "10.78.1.20/32"))):
        for a in addrs:
            sh("ip", "addr", "add", a, "dev", dev, ns=ns)
    sh("ip", "route", "add", "default", "via", "10.77.0.1", ns=s)
    sh("ip", "route", "add", "default", "via", "10.79.0.2", ns=r)
    sh("ip", "route", "add", "default", "via", "10.79.0.1", ns=d)
    sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=r)
    # the switch's port 1 into R (what enters from the campus), port 2 into W (past the bottleneck)
    for port, ns in ((1, r), (2, w)):
        tap = sw.host_ifaces[port]
        sh("ip", "link", "set", tap, "netns", ns)
        sh("ip", "link", "set", tap, "up", ns=ns)
    tap1, tap2 = sw.host_ifaces[1], sw.host_ifaces[2]
    for ns, dev in ((r, "rl"), (w, "wr"), (w, "wd")):
        sh("tc", "qdisc", "add", "dev", dev, "clsact", ns=ns)
    _u32_all(r, "rl", "ingress", "action", "mirred", "egress", "mirror", "dev", tap1)
    _u32_all(w, "wr", "ingress", "action", "mirred", "egress", "mirror", "dev", tap2,
             "action", "mirred", "egress", "redirect", "dev", "wd")
    _u32_all(w, "wr", "egress", "action", "mirred", "egress", "mirror", "dev", tap2)
    table = json.dumps({"10.78.3.2": 0.020, "10.78.1.20": 0.020})
    _start(rig, sys.executable, "-m", "scidmz.plant.netns.stages.delay", "--rx", "wd", "--tx", "wr",
           "--table", table, ns=w)


def _teardown_network() -> None:
    for ns in NS.values():
        sh("ip", "netns", "del", ns, check=False)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "scidmz.cli", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "SCIDMZ_RUN_DIR": os.environ["SCIDMZ_RUN_DIR"]}


class Daemon:
    """``control run`` as a child process, the way an admin starts it."""

    def __init__(self, tmp: Path, name: str, sw: p4tc.Bmv2Switch, pipeline: Path | None, target: str,
                 procs: list[subprocess.Popen[Any]]) -> None:
        self.token = tmp / f"{name}.token"
        self.log = tmp / f"{name}.jsonl"
        self.err = tmp / f"{name}.err"
        args = ["control", "run", "testbed", "--set", f"link.capacity={CAPACITY:.0f}", "--set", "link.buffer_bdp=1", "--plant", "hardware",
                "--telemetry", f"p4:{sw.grpc_address}", "--p4-thrift", sw.thrift_address, "--p4-taps", "1,2",
                "--dev", "rw", "--netns", NS["r"], "--plant-opt", f"dtn_prefixes={DTN_PREFIXES}",
                "--plant-opt", f"remote_prefixes={REMOTE_PREFIXES}", "--policy", "trivial", "--target", target,
                "--api", "127.0.0.1:0", "--token-file", str(self.token), "--log", str(self.log)]
        if pipeline is not None:
            args += ["--p4-pipeline", str(pipeline)]
        self.proc = subprocess.Popen(_cli(*args), env=_env(), stdout=subprocess.DEVNULL,
                                     stderr=open(self.err, "w"))  # noqa: SIM115 (the child owns it)
        procs.append(self.proc)  # killed by the fixture whatever the test's outcome

    def records(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [r for r in map(json.loads, self.log.read_text().splitlines()) if "k" in r]

    def wait_periods(self, n: int, timeout: float) -> list[dict[str, Any]]:
        def enough() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"control run exited {self.proc.returncode}: {self.err.read_text()[-2000:]}")
            return len(self.records()) >= n

        wait_until(enough, timeout, f"{n} periods of the daemon")
        return self.records()

    def client(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(_cli("control", *args, "--token-file", str(self.token)), env=_env(),
                              capture_output=True, text=True, timeout=30)

    def stop(self, sig: int) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)


def _tbf(dev: str = "rw") -> str:
    return sh("tc", "qdisc", "show", "dev", dev, ns=NS["r"]).stdout


def _installed(sw: p4tc.Bmv2Switch, p4info: Path) -> list[Any]:
    """The telemetry entries on the switch, read by a second client without arbitration (a Read
    needs none; a higher election id would take the daemon's primary role away)."""
    from scidmz.telemetry.p4.p4info import P4InfoIndex
    from scidmz.telemetry.p4.p4runtime import P4RuntimeClient, P4RuntimeView

    info = P4InfoIndex.from_file(p4info)
    client = P4RuntimeClient(sw.grpc_address)
    try:
        out = []
        for name in P4RuntimeView.INSTALLED_TABLES:
            e = client.p.Entity()
            e.table_entry.table_id = info.table(name).id
            out += client.read([e])
        return out
    finally:
        client.close()


def _twin(pcaps: dict[int, Path], instants_ns: list[int]) -> list[dict[str, float]]:
    """The software twin (MLC Algorithms 2-8 on the captured tap frames) sampled at the daemon's
    own instants: the collector starts at the first, one y per later one. The daemon's periods
    are T long on its clock, but a busy machine delays single samples by tens of ms; sampling
    the twin on a fixed grid (``telemetry replay``) would compare different windows."""
    import numpy as np

    from scidmz.telemetry import constants as C
    from scidmz.telemetry.collector import Collector
    from scidmz.telemetry.sources.pcap import read_capture
    from scidmz.telemetry.twin.dataplane import SoftwareDataPlane, merge_taps

    pk = merge_taps(read_capture(pcaps[1], tap=C.TAP_INGRESS).packets,
                    read_capture(pcaps[2], tap=C.TAP_EGRESS).packets)
    twin = SoftwareDataPlane(DTN_PREFIXES.split(","), REMOTE_PREFIXES.split(","))
    col, out, lo = None, [], 0
    for b in instants_ns:
        hi = int(np.searchsorted(pk["ts_ns"], b, side="left"))
        twin.process(pk[lo:hi])
        twin.advance_clock(b / 1e9)
        lo = hi
        if col is None:
            col = Collector(twin)
        else:
            out.append(dict(zip(FIELDS, map(float, col.sample().as_vector()), strict=True)))
    return out


def _close(a: float, b: float, rel: float, abs_: float) -> bool:
    return abs(a - b) <= max(rel * abs(b), abs_)


def _compiled() -> Path:
    """p4c's output for the telemetry program, compiled once per source (tests/test_p4_compile.py
    checks the compiler's output; here it is only the pipeline an admin would load): a busy CI
    machine took 45 s to compile, half this test's budget."""
    import hashlib

    parts = sorted((SRC.parent.parent / "include").rglob("*")) + sorted(SRC.parent.rglob("*.p4"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in parts if p.is_file())).hexdigest()[:16]
    out = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "scidmz" / "p4build" / digest
    if not (out / "scidmz_telemetry.json").is_file():
        p4tc.compile_bmv2(SRC, out.with_suffix(".tmp"))
        os.replace(out.with_suffix(".tmp"), out)
    return out


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    if p4tc.toolchain_bin() is None:
        reason = "no P4 toolchain (p4c not on PATH, P4TC, ~/.cache/scidmz/p4tc): scripts/install_p4tc.sh"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} -- and CI is set, where this test must run")
        pytest.skip(reason)
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, tc)")
    monkeypatch.setenv("SCIDMZ_RUN_DIR", str(tmp_path / "run"))
    pipeline = _compiled()
    procs: list[subprocess.Popen[Any]] = []
    sw = p4tc.Bmv2Switch(TAG, 2, log=tmp_path / "switch.log")
    rig_ = {"tmp": tmp_path, "sw": sw, "pipeline": pipeline, "p4info": next(pipeline.glob("*.p4info.txtpb")), "procs": procs}
    try:
        sw.start()
        # BMv2 stamps and counts a frame when its port thread runs: on a busy shared machine it ran
        # hundreds of ms late (a period's frames counted in the next one). A switch is a machine
        # of its own in a real set-up; here its threads get real-time priority, as the delay stage's.
        sh("chrt", "-a", "-f", "-p", "20", str(sw.proc.pid))
        _build_network(sw, rig_)
        yield rig_
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        _teardown_network()
        sw.stop()


def _start(rig: dict[str, Any], *cmd: str, ns: str, out: Any = subprocess.DEVNULL) -> subprocess.Popen[Any]:
    p = subprocess.Popen(["ip", "netns", "exec", ns, *cmd], stdout=out, stderr=subprocess.DEVNULL, env=_env())
    rig["procs"].append(p)
    return p


def _traffic(rig: dict[str, Any]) -> None:
    d, s = NS["d"], NS["s"]
    for port, addr in ((5201, "10.78.3.2"), (5202, "10.78.1.20")):
        _start(rig, "iperf3", "-s", "-B", addr, "-p", str(port), ns=d)
    wait_until(lambda: len(sh("ss", "-ltnH", ns=d).stdout.splitlines()) >= 2, 10, "the iperf3 servers")
    # the DTN at a fixed 400 kbit/s, the campus as fast as the TBF lets it
    _start(rig, "iperf3", "-c", "10.78.3.2", "-B", "10.77.0.10", "-p", "5201", "-b", "400K", "-t", "300", ns=s)
    _start(rig, "iperf3", "-c", "10.78.1.20", "-B", "10.77.0.11", "-p", "5202", "-t", "300", ns=s)


def _captures(rig: dict[str, Any]) -> tuple[dict[int, Path], list[subprocess.Popen[Any]]]:
    sw: p4tc.Bmv2Switch = rig["sw"]
    paths, procs = {}, []
    for port in (1, 2):
        paths[port] = rig["tmp"] / f"tap{port}.pcap"
        procs.append(_start(rig, "tcpdump", "-i", sw.sw_ifaces[port], "-Q", "in", "-U", "-s", "0",
                            "--time-stamp-precision=nano", "-w", str(paths[port]), ns=sw.ns))
    wait_until(lambda: all(p.exists() for p in paths.values()), 10, "the captures")
    time.sleep(0.5)
    return paths, procs


def test_setup3_from_the_cli_matches_the_twin_follows_the_target_and_survives_sigkill(rig: dict[str, Any]) -> None:
    sw, tmp = rig["sw"], rig["tmp"]
    T0 = time.monotonic()
    pcaps, caps = _captures(rig)
    first = Daemon(tmp, "first", sw, rig["pipeline"], "800K", rig["procs"])
    first.wait_periods(1, 60)
    assert "tbf 5c1d:" in _tbf() and "rate 1200Kbit" in _tbf(), _tbf()
    # the prefixes arrived intact (IPv4 and IPv6): 2 + 2 prefixes x 2 taps + 4 source entries + 2 tap ports
    assert len(_installed(sw, rig["p4info"])) == 4 * 2 + 4 + 2

    # a second controller on the same device is refused while the first runs, before anything changes
    second = subprocess.run(_cli("control", "run", "--set", f"link.capacity={CAPACITY:.0f}", "--set", "link.buffer_bdp=1", "--plant", "hardware",
                                 "--telemetry", f"p4:{sw.grpc_address}", "--dev", "rw", "--netns", NS["r"],
                                 "--policy", "trivial", "--target", "1M", "--no-api"),
                            env=_env(), capture_output=True, text=True, timeout=60)
    assert second.returncode == 2 and "held by a running scidmz" in second.stderr, second.stderr
    assert len(second.stderr.strip().splitlines()) == 1, second.stderr

    k_traffic = len(first.records())
    t_traffic = time.monotonic()
    _traffic(rig)
    # the period both flows have started in and the next two (slow start) are not compared: on a busy
    # machine one sender's first frames can come periods after the other's (CI measured the DTN's at
    # 0 over four periods once, the campus's flow alone filling the TBF)
    wait_until(lambda: _both_started(first.records(), k_traffic) is not None, 30, "both classes' first frames")
    k_start = max(k_traffic + 3, _both_started(first.records(), k_traffic) + 2)
    first.wait_periods(k_start + 4, 30)
    move = first.client("set-target", "1.4M")
    assert move.returncode == 0, move.stderr
    wait_until(lambda: any(r["target"] == TARGET1 for r in first.records()), 10, "the new target")
    m = next(i for i, r in enumerate(first.records()) if r["target"] == TARGET1)  # moved during record m
    recs = first.wait_periods(m + 5, 30)
    for p in caps:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=10)
    print("phases (s):", {k: round(v - T0, 1) for k, v in {"traffic": t_traffic, "end": time.monotonic()}.items()})

    # the loop closed through the TBF: u and the kernel's TBF follow the target; record m, in whose
    # period the target moved, may carry either u and is left out (the TBF's queue drains there)
    assert "rate 600Kbit" in _tbf(), _tbf()
    before, after = recs[k_start:m], recs[m + 1:]
    assert all(r["u"] == pytest.approx(CAPACITY - r["target"]) for r in (*before, *after))
    print("y rates per period (kbit/s, DTN, campus)",
          [(round(r["y"]["rate_dtn"] / 1e3), round(r["y"]["rate_campus"] / 1e3)) for r in (*before, *after)])
    mean = [sum(r["y"]["rate_dtn"] + r["y"]["rate_campus"] for r in rs) / len(rs) for rs in (before, after)]
    # averaged over the phase: BMv2, descheduled on a busy machine, may count a frame a period late
    assert 0.9e6 < mean[0] < 1.3e6 and 0.4e6 < mean[1] < 0.7e6, mean
    # both classes carried traffic before the move (over the phase: one period of a flow recovering
    # from a loss in the 1.2 Mbit/s TBF's small queue was measured at 48 kbit/s under load)
    for cls in ("rate_dtn", "rate_campus"):
        assert sum(r["y"][cls] for r in before) / len(before) > 0.1e6, (cls, before)

    # the daemon's y against the twin on the capture of the same frames, period by period
    # A record's t is its sample instant on the plant's clock (0: the collector's start); its log
    # line follows within milliseconds (the policy, the TBF change): the least-delayed line maps
    # the plant's clock onto the capture's.
    shift = min(r["time"] - r["t"] for r in recs)
    compared = recs[k_start:-1]  # the capture stops during the last period
    twin = _twin(pcaps, [int((shift + t) * 1e9) for t in (0.0, *(r["t"] for r in recs[:-1]))])[k_start:]
    print("phases (s): twin done", round(time.monotonic() - T0, 1))
    rows = []
    for k, (r, tw) in enumerate(zip(compared, twin, strict=False)):
        rows.append((k, {f: (round(r["y"][f], 4), round(tw[f], 4)) for f in FIELDS}))
    print("daemon vs twin", json.dumps(rows))
    assert len(twin) == len(compared) >= 7
    flows_equal = 0
    for k, (r, tw) in enumerate(zip(compared, twin, strict=True)):
        y = r["y"]
        # same frames, same sampling instants: what differs is when BMv2 got round to a frame
        # (up to ~6 % of a period's bytes moved to the next one at load 11-13 on 2 cores)
        for f in ("rate_dtn", "rate_campus"):
            assert _close(y[f], tw[f], 0.10, 30e3), (k, f, y[f], tw[f])
        # a flow idling out (T_TH) near a period's end: the switch's timeout digest or its af_ts
        # register tells the daemon, the packet times tell the twin; they may differ there by one
        assert abs(y["active_flows"] - tw["active_flows"]) <= 1, (k, y, tw)
        flows_equal += y["active_flows"] == tw["active_flows"]
        # registers read at the sample instant: only BMv2's and the capture's stamps differ
        for f in ("qdelay_dtn", "qdelay_campus"):
            assert _close(y[f], tw[f], 0.10, 0.003), (k, f, y[f], tw[f])
        # the campus RTT is the smoothed mean of the flow_rtt registers of the flows the collector
        # knows from new-flow digests (arrival order again) and it carries its past: up to 22 %
        # (10 ms of 45) apart in one period of five runs at load 5-13, most within 7 %
        assert _close(y["rtt_campus"], tw["rtt_campus"], 0.25, 0.005), (k, y["rtt_campus"], tw["rtt_campus"])
    # RTT_DTN is the mean of the period's RTT digests: the daemon takes those that reached it by its
    # sample instant (late ones count in the next period), the twin those of the period's packets,
    # and BMv2 sends one digest per packet where the twin sends every event (telemetry_p4/README.md,
    # "Digests: one per packet"); single periods differed by up to 3x here, so the typical value
    # is compared: the median over the periods
    med = [statistics.median(x["rtt_dtn"] for x in side) for side in ([r["y"] for r in compared], twin)]
    assert _close(med[0], med[1], 0.15, 0.003), med  # seen: 25.2 vs 22.8 ms
    assert flows_equal >= len(compared) - 1, flows_equal
    for f in ("rate_dtn", "rate_campus"):  # frames only move between periods: the sums agree closely
        sums = [sum(x[f] for x in side) for side in ([r["y"] for r in compared], twin)]
        assert _close(sums[0], sums[1], 0.02, 10e3), (f, sums)

    # SIGKILL: the TBF, the owner records and the switch entries stay behind ...
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    assert "tbf 5c1d:" in _tbf()
    claims = sorted(p.name for p in (tmp / "run" / "claims").iterdir())
    assert len(claims) == 2 and any(c.startswith("tc-") for c in claims) and any(c.startswith("p4-") for c in claims)
    assert len(_installed(sw, rig["p4info"])) == 14
    # ... and a fresh start on the same device and switch reclaims them and runs at its own target
    # (the dead owner's entries are deleted before the pipeline is loaded again, which also resets
    # the program's registers: their flow state belongs to the dead controller's collector)
    again = Daemon(tmp, "again", sw, rig["pipeline"], "1M", rig["procs"])
    recs = again.wait_periods(3, 60)
    assert "rate 1Mbit" in _tbf(), _tbf()
    assert recs[-1]["y"]["rate_campus"] > 0.1e6 and not recs[-1]["fallback"], recs[-1]
    assert len(_installed(sw, rig["p4info"])) == 14
    assert again.stop(signal.SIGTERM) == 0, again.err.read_text()
    print("phases (s): restart done", round(time.monotonic() - T0, 1))
    # a clean stop leaves nothing: no TBF, no entries, no records
    assert "5c1d" not in _tbf()
    assert _installed(sw, rig["p4info"]) == []
    assert list((tmp / "run" / "claims").iterdir()) == []
