"""``control run`` as a service (a systemd unit), no root needed: the plant flags every command shares,
``--config FILE`` (TOML), shadow mode's loop, metrics and refusals, the recording actuator.

The shadow mode on real plants (no qdisc, class or OVS QoS made) is in
``test_ebpf_plants.py`` (root).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from scidmz.actuators.recording import RecordingActuator
from scidmz.commands.build import build_run, plant_choice
from scidmz.controller.serve import ControlDaemon
from scidmz.plant.base import PlantSpec, make_plant
from scidmz.policies import TrivialPolicy
from scidmz.scenario import load_scenario

CLI = [sys.executable, "-m", "scidmz.cli"]


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


# -- the plant flags ---------------------------------------------------------------------------------

def test_plant_choice_is_a_checked_spec_with_its_options() -> None:
    c = plant_choice("netns", telemetry="ebpf", extra=["prefix=abc", "drain=0.5"])
    assert isinstance(c, PlantSpec) and c.name == "netns" and str(c) == "netns" and c.realtime
    assert c.options == {"telemetry": "ebpf", "prefix": "abc", "drain": 0.5}
    h = plant_choice("hardware", telemetry="ebpf:eth1,eth0", dev="eth1", netns=None, ovs_port=None)
    assert h.options == {"telemetry": "ebpf:eth1,eth0", "dev": "eth1"}  # flags not given stay out
    import pickle

    assert pickle.loads(pickle.dumps(c)) == c
    # the spec is checked when made: an unknown option is one line naming it
    with pytest.raises(ValueError, match="has no option 'bogus'"):
        PlantSpec("fluid", {"bogus": 1})
    run = build_run("small-cubic", plant=plant_choice("fluid", extra=["dt=0.01"]))
    assert run.plant == PlantSpec("fluid", {"dt": 0.01}) and not run.plant.realtime
    with run.make_plant(batch=2) as p:  # the Run builds its plant from the one spec
        assert p.batch == 2 and p.scenario is run.scenario


@pytest.mark.parametrize("kw,msg", [
    ({"plant": "fluid", "telemetry": "ebpf"}, "--telemetry: for --plant netns or hardware only"),
    ({"plant": "netns", "dev": "eth0"}, "--dev: for --plant hardware only"),
    ({"plant": "fluid", "ovs_port": "p", "ovs_mode": "htb"}, "--ovs-port, --ovs-mode: for --plant hardware only"),
    ({"plant": "netns", "extra": ["novalue"]}, "expected KEY=VALUE"),
])
def test_plant_flags_refused_in_one_line(kw: dict, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        plant_choice(**kw)


@pytest.mark.parametrize("cmd", [["simulate", "small-cubic"],
                                 ["evaluate", "small-cubic", "--policies", "none", "--quick", "--trials", "2",
                                  "--experiments", "mrae"],
                                 ["identify", "small-cubic", "--duration", "5", "--out", "x.parquet"],
                                 ["control", "run", "--target", "5M"]])
def test_every_command_that_takes_a_plant_takes_its_flags(cmd: list[str], tmp_path: Path) -> None:
    r = subprocess.run([*CLI, *cmd, "--telemetry", "kernel"], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == "scidmz: error: --telemetry: for --plant netns or hardware only"
    r = subprocess.run([*CLI, *cmd, "--plant", "hardware", "--telemetry", "ebpf:eth0", "--dev", "eth0"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and "ebpf:LAN_IF[,LAN_IF...],WAN_IF" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_hardware_ebpf_telemetry_errors_are_one_line() -> None:
    sc = load_scenario("testbed")
    with pytest.raises(ValueError, match="exactly one actuator target"):
        make_plant("hardware", sc, telemetry="ebpf:a,b")
    with pytest.raises(ValueError, match="each interface may appear once"):
        make_plant("hardware", sc, telemetry="ebpf:a,a", dev="a")
    with pytest.raises(ValueError, match="egress_hook must be one of xmit, tc"):
        make_plant("hardware", sc, telemetry="ebpf:a,b", dev="a", egress_hook="nic")
    with pytest.raises(ValueError, match="expected HOST:PORT, e.g. 10.0.0.5:9559, or ebpf:LAN_IF,WAN_IF"):
        make_plant("hardware", sc, telemetry="ebpfa,b", dev="a")


# -- --config FILE ------------------------------------------------------------------------------------

def _config(tmp_path: Path, text: str) -> str:
    p = tmp_path / "control.toml"
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("text,msg", [
    ('bogus = 1\n', "unknown key 'bogus' (keys: api, "),
    ('target = ["5M"]\n', "'target' must be a string or a number"),
    ('shadow = "yes"\n', "'shadow' must be true or false"),
    ('seed = 1.5\n', "'seed' must be an integer"),
    ('set = "link.capacity=1G"\n', "'set' must be a list of strings"),
    ('json = true\n', "unknown key 'json'"),
    ('target = \n', "invalid TOML"),
])
def test_config_bad_keys_and_values_are_one_line(tmp_path: Path, text: str, msg: str) -> None:
    path = _config(tmp_path, text)
    r = run_cli("control", "run", "small-cubic", "--target", "5M", "--config", path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"scidmz: error: config {path}: ") and msg in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_config_missing_file_and_missing_target(tmp_path: Path) -> None:
    r = run_cli("control", "run", "--config", str(tmp_path / "none.toml"))
    assert r.returncode == 2 and "none.toml" in r.stderr
    r = run_cli("control", "run", "--config", _config(tmp_path, 'plant = "fluid"\n'))
    assert r.returncode == 2 and "needs a target" in r.stderr, r.stderr


def test_config_options_and_flags_override_them(tmp_path: Path) -> None:
    log = tmp_path / "control.jsonl"
    path = _config(tmp_path, f'''
scenario = "small-cubic"
target = "5M"
duration = 2
no-api = true
log = "{log}"
set = ["link.capacity=20M", "dtn.streams=2"]
seed = 3
''')
    # flags win: --target, and --set adds to the file's list (the command line's setting of a key last)
    r = run_cli("control", "run", "--config", path, "--target", "4M", "--set", "link.capacity=30M", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["target"] == 4e6
    start = json.loads(log.read_text().splitlines()[0])
    assert start["event"] == "start" and start["scenario"] == "small-cubic" and start["mode"] == "live"
    periods = [json.loads(x) for x in log.read_text().splitlines() if '"k"' in x]
    assert periods and all(p["u"] == pytest.approx(26e6) for p in periods)  # 30M - 4M: the flag's capacity


def test_config_default_plant_options_from_the_file(tmp_path: Path) -> None:
    # plant keys reach the plant: fluid + telemetry is refused exactly as the flag is
    r = run_cli("control", "run", "small-cubic", "--config", _config(tmp_path, 'target = "5M"\ntelemetry = "ebpf"\n'))
    assert r.returncode == 2 and "--telemetry: for --plant netns or hardware only" in r.stderr, r.stderr


# -- shadow mode ---------------------------------------------------------------------------------------

def test_shadow_refused_on_the_fluid_plant(tmp_path: Path) -> None:
    r = run_cli("control", "run", "small-cubic", "--target", "5M", "--shadow", "--no-api")
    assert r.returncode == 2
    assert r.stderr.strip() == ("scidmz: error: --shadow: the fluid plant has no shaper to leave alone "
                                "(shadow mode watches a real network: --plant netns or hardware)")


def test_recording_actuator_records_validates_and_applies_nothing() -> None:
    a = RecordingActuator("eth1", netns="r", burst=None, latency=0.05)  # TbfActuator's factory signature
    a.set_rate(0)
    assert a.last == 8000.0  # lifted to MIN_RATE as a real shaper would be
    a.set_rate(5e7)
    assert a.last == 5e7 and a.commands == 2 and math.isnan(a.current_rate())
    for bad in (float("nan"), -1.0, "fast"):
        with pytest.raises(ValueError):
            a.set_rate(bad)
    assert a.last == 5e7
    a.close()
    assert "nothing applied" in repr(a)


class _ShadowFluid:
    """The fluid plant standing in for a real one whose actuator records (the loop's view of shadow mode)."""

    def __init__(self, sc) -> None:
        self.inner = make_plant("fluid", sc)
        self.scenario, self.batch, self.actuator = sc, 1, RecordingActuator("up")
        self.applied: list[float] = []

    period = property(lambda self: self.inner.period)
    info = property(lambda self: self.inner.info)

    def reset(self, seed=None):
        return self.inner.reset(seed)

    def step(self, u):
        self.actuator.set_rate(float(np.asarray(u).reshape(-1)[0]))
        return self.inner.step(self.scenario.u_max)  # the network runs unshaped, as in shadow mode

    def flows(self):
        return self.inner.flows()

    def close(self):
        self.inner.close()


def _compile_fluid(sc) -> None:
    """Compile the fluid kernel before a real-time loop, so its first period is not late."""
    with make_plant("fluid", sc) as p:
        p.reset(0)
        p.step(50e6)


def test_shadow_loop_status_log_and_metrics(tmp_path: Path) -> None:
    pytest.importorskip("prometheus_client")
    sc = load_scenario("testbed").replace(period=0.2)
    _compile_fluid(sc)
    plant = _ShadowFluid(sc)
    log = tmp_path / "shadow.jsonl"
    d = ControlDaemon(plant, TrivialPolicy(), 30e6, api=None, log=log, shadow=True, duration=1.2)
    th = threading.Thread(target=d.run)
    th.start()
    deadline = time.monotonic() + 30
    while d.k < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    st = d.status()
    metrics = d.metrics_text().decode()
    th.join(30)
    assert st["mode"] == "shadow" and st["u"] == pytest.approx(70e6)
    assert plant.actuator.last == pytest.approx(70e6) and plant.actuator.commands >= 3
    assert "scidmz_shadow_rate_bits_per_second 7e+07" in metrics
    assert "scidmz_shadow_mode 1.0" in metrics
    assert "scidmz_campus_rate_limit_bits_per_second NaN" in metrics  # nothing applied
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert lines[0]["event"] == "start" and lines[0]["mode"] == "shadow"
    periods = [x for x in lines if "k" in x]
    assert periods and all(x["mode"] == "shadow" and x["trivial_rate"] == 70e6 and x["u"] == 70e6 for x in periods)


def test_live_loop_metrics_say_live() -> None:
    pytest.importorskip("prometheus_client")
    from scidmz.controller.prometheus import METRIC_NAMES, DaemonMetrics

    m = DaemonMetrics()
    m.static(period=1.0, capacity=1e8)
    m.period(4e7, 4e7, None)
    text = m.exposition().decode()
    assert "scidmz_shadow_mode 0.0" in text and "scidmz_shadow_rate_bits_per_second NaN" in text
    assert "scidmz_campus_rate_limit_bits_per_second 4e+07" in text
    assert {"scidmz_shadow_rate_bits_per_second", "scidmz_shadow_mode"} <= METRIC_NAMES


def test_status_text_says_shadow_mode_and_what_it_would_apply() -> None:
    from scidmz.commands.control import status_text

    st = {"policy": "mlc", "plant": "HardwarePlant", "scenario": "testbed", "period": 1.0, "k": 12,
          "target": 40e6, "u": 55e6, "trivial_rate": 60e6, "fallback": False, "fallback_reason": None,
          "mode": "shadow", "y": {"rate_dtn": 39e6, "rtt_dtn": 0.1, "rate_campus": 50e6, "rtt_campus": 0.01,
                                  "active_flows": 3.0}}
    text = status_text(st).splitlines()
    assert text[0].endswith("12 periods, SHADOW mode: nothing is applied")
    assert "would be applied" in text[2] and "trivial rate set by hand" in text[2] and len(text) == 5
    live = status_text({**st, "mode": "live", "fallback": True, "fallback_reason": "telemetry gap"}).splitlines()
    assert "SHADOW" not in live[0] and "would be applied" not in live[2] and live[2].endswith(
        "FALLBACK: telemetry gap")


class _TunnelledFluid(_ShadowFluid):
    """A plant whose telemetry counts unmeasured packets (as the eBPF plants' ``unmeasured()``):
    100 tunnelled packets more every period, and one read that fails."""

    def __init__(self, sc) -> None:
        super().__init__(sc)
        self.reads = 0

    def unmeasured(self) -> dict[str, int]:
        self.reads += 1
        if self.reads == 2:
            raise RuntimeError("map read failed")
        return {"tunnel": 100 * self.reads, "too_deep": 3}


def test_unmeasured_packets_reach_status_and_metrics() -> None:
    pytest.importorskip("prometheus_client")
    from scidmz.controller.prometheus import METRIC_NAMES, DaemonMetrics
    from scidmz.plant.base import UnmeasuredPlant, capability_methods
    from scidmz.plant.hardware import HardwarePlant

    sc = load_scenario("testbed").replace(period=0.2)
    _compile_fluid(sc)
    plant = _TunnelledFluid(sc)
    assert capability_methods(UnmeasuredPlant) == ("unmeasured",) and callable(HardwarePlant.unmeasured)
    assert not hasattr(plant.inner, "unmeasured")  # the fluid plant measures every packet
    d = ControlDaemon(plant, TrivialPolicy(), 30e6, api=None, log=None, duration=1.5)
    th = threading.Thread(target=d.run)
    th.start()
    th.join(60)
    st = d.status()
    n = plant.reads
    assert n >= 4 and st["telemetry_unmeasured"] == {"tunnel": 100 * n, "too_deep": 3}
    text = d.metrics_text().decode()
    # The counter holds the source's total: the failed read skipped a period, lost nothing.
    assert f'scidmz_telemetry_unmeasured_packets_total{{reason="tunnel"}} {100.0 * n}' in text
    assert 'scidmz_telemetry_unmeasured_packets_total{reason="too_deep"} 3.0' in text
    assert "scidmz_telemetry_unmeasured_packets_total" in METRIC_NAMES
    m = DaemonMetrics()
    m.unmeasured({"tunnel": 50})
    m.unmeasured({"tunnel": 20})  # the programs were re-attached: the count starts over
    assert 'scidmz_telemetry_unmeasured_packets_total{reason="tunnel"} 70.0' in m.exposition().decode()
