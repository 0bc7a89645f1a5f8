"""The emulated testbed on real kernel TCP: build, traffic, actuation, delay accuracy, teardown.

These need root and network namespaces (CI is root, so they run there).
Small on purpose: 4 campus hosts + the DTN at 20 Mbit/s.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from scidmz.scenario import load_scenario

pytestmark = pytest.mark.root


def _small(**over):
    # A 1-BDP buffer: these tests check the testbed's parts (shaping, telemetry, OVS, FCT) after a
    # few periods. In the shallow default (0.05 BDP = 8 packets at 20 Mbit/s) a slow start that
    # overflows the buffer early leaves 2-stream CUBIC at 100 ms ramping for tens of seconds (seen:
    # 0.8 -> 6.6 Mbit/s over 5 periods in 1 of 4 runs); tests/test_netns_regime.py covers that regime.
    base = {"campus": {"hosts": 4}, "link": {"capacity": 20e6, "buffer_bdp": 1.0}, "duration": 20.0}
    base.update(over)
    return load_scenario("testbed").replace(**base)


def _namespaces() -> set[str]:
    from pyroute2 import netns

    return set(netns.listnetns())


def _root_links() -> set[str]:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return {ln.get_attr("IFLA_IFNAME") for ln in ipr.get_links()}


def _root_qdiscs() -> set[tuple[int, int]]:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return {(q["index"], q["handle"]) for q in ipr.get_qdiscs()}


def _our_processes(prefix: str) -> list[int]:
    """Processes started for a testbed: they run inside its namespaces or name it on their command line."""
    from scidmz.plant.netns.manage.registry import pids_in_netns

    out = []
    for ns in _namespaces():
        if ns.startswith(prefix + "-"):
            out += pids_in_netns(ns)
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if f"/run/netns/{prefix}-" in cmd:
                out.append(int(d))
    return out


_OUR_LINK_NAMES = {"eth0", "up", "br0", "campus", "dtn", "wan", "lan", "a", "b", "ti", "te", "qd", "s1"}


def _snapshot():
    return _namespaces(), _root_links(), _root_qdiscs()


def _assert_clean(before, prefix: str) -> None:
    """Nothing of testbed ``prefix`` is left: namespaces, root links/qdiscs, processes.

    Other people may create namespaces or links on a shared machine meanwhile,
    so only what could be ours is compared (in CI nothing else runs).
    """
    ns0, links0, qd0 = before
    ns1, links1, qd1 = _snapshot()
    assert not {n for n in ns1 - ns0 if n.startswith(prefix + "-")}
    new_links = links1 - links0
    assert not {n for n in new_links if n in _OUR_LINK_NAMES or n.startswith(prefix)}
    with_idx = {i for i, _ in qd0}
    assert {q for q in qd1 if q[0] in with_idx} == qd0, "root-namespace qdiscs changed"
    assert _our_processes(prefix) == []


def test_plant_carries_traffic_and_tbf_moves_dtn_rate_then_tears_down_cleanly():
    from scidmz.plant.base import make_plant
    from scidmz.plant.netns.manage.registry import RUN_DIR

    prefix = "tpl"
    before = _snapshot()
    sc = _small(dtn={"streams": 8, "rtt": 0.05})
    plant = make_plant("netns", sc, prefix=prefix, telemetry="kernel")
    try:
        y0 = plant.reset(seed=1)
        assert y0.y.shape == (1, 7)
        assert (RUN_DIR / f"{prefix}.json").exists()
        assert any(ns.startswith(prefix + "-") for ns in _namespaces())
        ys, infos = [], []
        u_seq = [18e6] * 7 + [2e6] * 7
        for u in u_seq:
            st = plant.step(u)
            ys.append(st.y[0])
            infos.append(plant.info)
        y = np.array(ys)
        assert np.all(np.isfinite(y))
        rate_dtn, rate_campus = y[:, 0], y[:, 1]
        # Traffic flows: the bottleneck is nearly full once TCP has ramped up.
        assert np.mean(rate_dtn[3:7] + rate_campus[3:7]) > 0.7 * sc.capacity
        # u = 2 Mbit/s holds the campus to about 2 Mbit/s ...
        assert np.mean(rate_campus[10:]) < 2.6e6
        assert np.mean(rate_campus[3:7]) > 5e6
        # ... and the DTN takes the freed capacity.
        assert np.mean(rate_dtn[10:]) > np.mean(rate_dtn[3:7]) + 3e6
        assert np.mean(rate_dtn[10:]) > 12e6
        # The actuator really holds the commanded rate (kernel read-back).
        assert abs(float(infos[-1]["u_applied"][0]) - 2e6) / 2e6 < 0.01
        # Per-class bytes delivered are reported as ground truth.
        assert sum(float(i["dtn_bytes"][0]) for i in infos) > 1e6
        assert infos[-1]["delay_stage_lost"][0] == 0
        assert infos[-1]["delay_stage_reordered"][0] == 0
        # Active flows: 8 DTN streams + 4 campus flows, within what the activity threshold allows.
        assert 8 <= y[5:7, 6].mean() <= 12.5
        # RTTs are at least the configured base RTTs.
        assert y[5:, 2].min() >= 0.05 - 1e-3 and y[5:, 3].min() >= 0.010 - 1e-3
        pids = _our_processes(prefix)
        assert pids, "testbed processes should be running"
    finally:
        plant.close()
    time.sleep(0.2)
    _assert_clean(before, prefix)
    assert not (RUN_DIR / f"{prefix}.json").exists()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def test_delay_stage_rtt_accuracy_rate_and_no_loss_per_host_rtts():
    from scidmz.plant.netns.manage.check import check_testbed, measure_rtt
    from scidmz.plant.netns.testbed import Testbed

    sc = _small(campus={"hosts": 2})
    rtts = {"s1": 0.010, "s2": 0.037, "dtns": 0.100}
    with Testbed(sc, prefix="tdl", rtts=rtts) as tb:
        for name, want in rtts.items():
            r = measure_rtt(tb, name)
            assert r["configured"] == want
            assert abs(r["median"] - want) <= 1e-3, (name, r)
        res = check_testbed(tb, rate_seconds=3.0)
        assert res["ok"]["delay_stage_clean"], res["bottleneck"]["delay_stage"]
        assert res["ok"]["rate_within_5pct"], res["bottleneck"]
        assert res["bottleneck"]["delay_stage"]["frames"] > 1000


def test_two_testbeds_with_different_prefixes_coexist():
    from scidmz.plant.netns.manage.check import measure_rtt
    from scidmz.plant.netns.testbed import Testbed

    sc = _small(campus={"hosts": 1})
    with Testbed(sc, prefix="tca", rtts={"s1": 0.012}) as a:
        with Testbed(sc, prefix="tcb", rtts={"s1": 0.024}) as b:
            # Each testbed keeps its own delay table (accuracy itself is tested above;
            # the fastest probe is the one least disturbed by a busy machine).
            ra, rb = measure_rtt(a, "s1", probes=7), measure_rtt(b, "s1", probes=7)
            assert abs(ra["min"] - 0.012) < 1e-3, ra
            assert abs(rb["min"] - 0.024) < 1e-3, rb
            with pytest.raises(RuntimeError, match="in use"):
                Testbed(sc, prefix="tca").up()
            assert a.record is not None and b.record is not None
        assert not any(ns.startswith("tcb-") for ns in _namespaces())
        # Tearing down b left a intact.
        ra = measure_rtt(a, "s1", probes=7)
        assert abs(ra["min"] - 0.012) < 1e-3, ra
    assert not any(ns.startswith(("tca-", "tcb-")) for ns in _namespaces())


def test_down_all_removes_leftovers_of_a_killed_owner(tmp_path):
    env = {**os.environ, "SCIDMZ_RUN_DIR": str(tmp_path)}
    before = _snapshot()
    p = subprocess.Popen(
        [sys.executable, "-m", "scidmz.cli", "testbed", "up", "--prefix", "tkx", "--json",
         "--set", "campus.hosts=2", "--set", "link.capacity=20M"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )
    try:
        line = p.stdout.readline()
        summary = json.loads(line)
        assert summary["prefix"] == "tkx"
        assert summary["namespaces"] and all(n.startswith("tkx-") for n in summary["namespaces"])
        assert _our_processes("tkx")  # delay stage and iperf3 servers run inside
        os.kill(p.pid, signal.SIGKILL)  # a crash: no teardown runs
        p.wait(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
    assert any(ns.startswith("tkx-") for ns in _namespaces())
    st = subprocess.run([sys.executable, "-m", "scidmz.cli", "testbed", "status", "--json"],
                        capture_output=True, text=True, env=env, check=True)
    rows = json.loads(st.stdout.strip().splitlines()[-1])["testbeds"]
    assert [(r["prefix"], r["owner_alive"]) for r in rows] == [("tkx", False)]
    r = subprocess.run([sys.executable, "-m", "scidmz.cli", "testbed", "down", "--all", "--json"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    removed = json.loads(r.stdout.strip().splitlines()[-1])["removed"]
    assert removed["tkx"]["namespaces"] == len(summary["namespaces"])
    time.sleep(0.2)
    assert not any(ns.startswith("tkx-") for ns in _namespaces())
    _assert_clean(before, "tkx")
    assert list(tmp_path.glob("*.json")) == []


def test_sigterm_tears_down_a_running_testbed(tmp_path):
    env = {**os.environ, "SCIDMZ_RUN_DIR": str(tmp_path)}
    p = subprocess.Popen(
        [sys.executable, "-m", "scidmz.cli", "testbed", "up", "--prefix", "tst", "--json",
         "--set", "campus.hosts=1", "--set", "link.capacity=20M"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )
    try:
        json.loads(p.stdout.readline())
        assert any(ns.startswith("tst-") for ns in _namespaces())
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert not any(ns.startswith("tst-") for ns in _namespaces())
    assert _our_processes("tst") == []
    assert list(tmp_path.glob("*.json")) == []


def test_dataplane_telemetry_on_mirrored_packets_matches_kernel_ground_truth():
    from scidmz.plant.netns.plant import NetnsPlant

    sc = _small(campus={"hosts": 3})
    with NetnsPlant(sc, prefix="tdp", telemetry="dataplane") as plant:
        plant.reset(seed=2)
        ys, infos = [], []
        for _ in range(8):
            ys.append(plant.step(10e6).y[0])
            infos.append(plant.info)
        assert [i["telemetry"] for i in infos] == ["dataplane"] * 8
        y = np.array(ys)[3:]
        truth_dtn = np.array([float(i["dtn_bytes"][0]) for i in infos[3:]]) * 8 / sc.period
        truth_campus = np.array([float(i["campus_bytes"][0]) for i in infos[3:]]) * 8 / sc.period
        # Same packets, two counters (mirrored frames vs S2 port bytes): totals agree.
        assert y[:, 0].sum() == pytest.approx(truth_dtn.sum(), rel=0.1)
        assert y[:, 1].sum() == pytest.approx(truth_campus.sum(), rel=0.1)
        assert y[:, 1].mean() < 10.8e6  # the campus shaper holds
        # RTT samples from SEQ/ACK matching at the tap see at least the base RTTs.
        assert y[:, 2].min() >= 0.1 - 1e-3 and y[:, 3].min() >= 0.01 - 1e-3
        assert np.all(y[:, 4] >= 0) and y[:, 4].max() > 1e-3  # a queue builds at B_max
        assert np.all(y[:, 6] == 11)  # 8 DTN streams + 3 campus flows
        assert all(i["tap_drops"][0] == 0 for i in infos)


def test_ovs_userspace_s1_carries_shaped_traffic():
    from scidmz.plant.netns.manage.check import measure_rtt
    from scidmz.plant.netns.ovsd import ovs_available
    from scidmz.plant.netns.plant import NetnsPlant

    if not ovs_available():
        pytest.skip("Open vSwitch userspace tools are not installed")
    before = _snapshot()
    sc = _small(campus={"hosts": 2}, dtn={"streams": 2})
    with NetnsPlant(sc, prefix="tov", switch="ovs", telemetry="kernel") as plant:
        plant.testbed.up()
        assert plant.testbed.ovs is not None and plant.testbed.ovs.running
        # Idle path through OVS userspace (before any traffic queues up).
        assert abs(measure_rtt(plant.testbed, "s1", probes=5)["median"] - 0.010) <= 1e-3
        plant.reset(seed=3)
        ys = np.array([plant.step(4e6).y[0] for _ in range(5)])
        assert 2.5e6 < ys[2:, 1].mean() < 4.4e6  # campus through OVS, held by the TBF
        assert ys[2:, 0].mean() > 8e6  # the DTN takes the rest
    time.sleep(0.2)
    _assert_clean(before, "tov")


def _short_records(plant) -> list[tuple[float, float, bool]]:
    df = plant.flow_records()
    df = df[df["class"] == "short"]
    return list(zip(df["bytes"], df["fct"], df["ok"], strict=True))


def test_udp_cbr_weibull_short_flows_and_fixed_size_dtn_fct():
    from scidmz.plant.netns.plant import NetnsPlant

    sc = _small(
        campus={"hosts": 2, "traffic": "udp", "udp_rate": 3e6, "short_flow_senders": 1},
        dtn={"transfer": 4e6, "rtt": 0.05},
    )
    with NetnsPlant(sc, prefix="tmx", telemetry="kernel") as plant:
        plant.reset(seed=4)
        ys, infos = [], []
        for _ in range(8):
            ys.append(plant.step(12e6).y[0])
            infos.append(plant.info)
        shorts = plant._traffic.short_flows()
        first = _short_records(plant)
        plant.reset(seed=5)  # the next episode (the next unit of a leaderboard trial) counts only its own flows
        for _ in range(3):
            plant.step(12e6)
        second = _short_records(plant)
        assert float(plant.info["short_flows_done"][0]) <= sum(1 for _, _, ok in second if ok)
    assert len(first) >= 10 and not set(first) & set(second), (len(first), len(second))
    y = np.array(ys)
    fct = [float(i["dtn_fct"][0]) for i in infos if np.isfinite(i["dtn_fct"][0])]
    assert len(fct) == 1 and 1.0 < fct[0] < 8.0  # 4 MB over 8 streams at <= 20 Mbit/s
    assert sum(float(i["dtn_bytes"][0]) for i in infos) >= 4e6  # every byte delivered
    # UDP CBR (2 x 3 Mbit/s) plus short flows fill the campus shaper at u = 12 Mbit/s.
    assert 10e6 < y[3:, 1].mean() < 13e6
    ok = [f for f in shorts if f["ok"]]
    assert len(ok) >= 10 and all(1e4 <= f["size"] <= 1e7 for f in ok)
    assert 0 < float(infos[-1]["short_flows_done"][0]) <= len(ok)


def test_a_failure_mid_build_leaves_nothing(monkeypatch):
    from scidmz.plant.netns import build
    from scidmz.plant.netns.manage.registry import RUN_DIR
    from scidmz.plant.netns.testbed import Testbed

    def boom(spec, links):
        raise RuntimeError("injected failure while configuring the bottleneck")

    monkeypatch.setattr(build, "bottleneck_qdisc", boom)
    before = _snapshot()
    tb = Testbed(_small(campus={"hosts": 1}), prefix="tfl")
    with pytest.raises(RuntimeError, match="injected failure"):
        tb.up()
    _assert_clean(before, "tfl")
    assert not (RUN_DIR / "tfl.json").exists()


def test_testbed_check_reports_progress_on_stderr_and_json_on_stdout():
    p = subprocess.run(
        [sys.executable, "-m", "scidmz.cli", "testbed", "check", "--prefix", "tck", "--json",
         "--set", "campus.hosts=2", "--set", "link.capacity=20M"],
        capture_output=True, text=True, timeout=300,
    )
    doc = json.loads(p.stdout.strip().splitlines()[-1])  # stdout stays machine-readable
    assert set(doc["ok"]) >= {"rtt_within_1ms", "rate_within_5pct"}
    assert "testbed tck" in p.stderr and "testbed check" in p.stderr  # the build's and the checks' bars
    assert not any(n.startswith("tck-") for n in _namespaces())
