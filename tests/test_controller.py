"""The live controller daemon on the fluid plant paced in real time (T = 0.2 s), no root needed.

Faults are injected with ``FaultyPlant``, a wrapper around the real
``FluidPlant`` whose telemetry can be silenced (``step`` blocks), whose
actuator can fail (``step`` raises ``ActuatorError``), and which exposes a
recording ``actuator`` so the immediate fallback on telemetry loss is seen.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scidmz.actuators.base import ActuatorError
from scidmz.controller.client import ControlClient
from scidmz.controller.serve import ControlDaemon
from scidmz.controller.tokenfile import parse_api_address
from scidmz.plant import make_plant
from scidmz.policies import NoShapingPolicy, TrivialPolicy
from scidmz.scenario import load_scenario
from scidmz.state import History

T = 0.2
SC = load_scenario("testbed").replace(period=T)  # B_max = 100 Mbit/s


def wait_until(cond: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class RecordingActuator:
    def __init__(self) -> None:
        self.rates: list[float] = []

    def set_rate(self, bps: float) -> None:
        self.rates.append(float(bps))

    def current_rate(self) -> float:
        return self.rates[-1]

    def close(self) -> None:
        pass


class FaultyPlant:
    """The real fluid plant with injectable telemetry silence and actuator failures."""

    def __init__(self) -> None:
        self.inner = make_plant("fluid", SC)
        self.scenario = SC
        self.batch = 1
        self.actuator = RecordingActuator()
        self.telemetry = threading.Event()
        self.telemetry.set()
        self.closed = threading.Event()
        self.fail_next = 0
        self.steps = 0

    @property
    def period(self) -> float:
        return self.inner.period

    def reset(self, seed: int | None = None) -> Any:
        return self.inner.reset(seed)

    def step(self, u: Any) -> Any:
        if self.fail_next:
            self.fail_next -= 1
            raise ActuatorError("injected: kernel refused the TBF")
        st = self.inner.step(u)
        self.steps += 1
        while not self.telemetry.is_set() and not self.closed.is_set():
            self.telemetry.wait(0.05)  # the sample is not delivered while telemetry is down
        if self.closed.is_set():
            raise RuntimeError("plant closed")
        return st

    @property
    def info(self) -> dict[str, Any]:
        return self.inner.info

    def close(self) -> None:
        self.closed.set()
        self.inner.close()

    def __enter__(self) -> FaultyPlant:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FlakyPolicy(TrivialPolicy):
    """u = 70 Mbit/s, or NaN while ``nan`` is set (a diverging controller)."""

    name = "flaky"

    def __init__(self) -> None:
        super().__init__()
        self.nan = False

    def decide(self, history: History, target: np.ndarray) -> np.ndarray:
        return np.array([np.nan if self.nan else 70e6])


class Running:
    def __init__(self, daemon: ControlDaemon, log: Path) -> None:
        self.d, self.log = daemon, log
        self.summary: dict[str, Any] | None = None
        self.thread = threading.Thread(target=self._run, name="test-daemon")

    def _run(self) -> None:
        self.summary = self.d.run()

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def periods(self) -> list[dict[str, Any]]:
        return [r for r in self.records() if "k" in r]


@pytest.fixture(scope="module", autouse=True)
def _compiled_fluid_kernel() -> None:
    # The first fluid step JIT-compiles the kernel (seconds on a loaded machine); the daemon
    # would rightly count that as a late sample, so compile once before the real-time tests.
    with make_plant("fluid", SC) as p:
        p.reset(0)
        p.step(50e6)


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Running]]:
    runs: list[Running] = []

    def _start(plant: Any = None, policy: Any = None, target: float = 60e6, **kw: Any) -> Running:
        plant = plant if plant is not None else make_plant("fluid", SC)
        log = tmp_path / f"daemon{len(runs)}.jsonl"
        d = ControlDaemon(plant, policy or TrivialPolicy(), target, api="127.0.0.1:0",
                          token_file=tmp_path / f"token{len(runs)}", log=log, **kw)
        r = Running(d, log)
        runs.append(r)
        r.thread.start()
        wait_until(lambda: d.k >= 3, 30, "three periods")
        return r

    yield _start
    for r in runs:
        r.d.stop("test over")
        r.thread.join(15)
        assert not r.thread.is_alive()
    # Nothing of the daemon's survives: no API, step or server threads.
    left = [t.name for t in threading.enumerate() if t.name.startswith("scidmz-")]
    assert not left, left


def _http(r: Running, method: str, path: str, body: bytes | None = None,
          token: str | None = "auto") -> tuple[int, dict[str, Any] | str]:
    host, port = r.d.api_address  # type: ignore[misc]
    headers = {"Content-Type": "application/json"}
    if token == "auto":
        token = r.d.token
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(f"http://{host}:{port}{path}", data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            raw = resp.read().decode()
            code = resp.status
    except urllib.error.HTTPError as exc:
        raw, code = exc.read().decode(), exc.code
    try:
        return code, json.loads(raw)
    except ValueError:
        return code, raw


# -- API ----------------------------------------------------------------------------------------


def test_set_target_over_the_api_changes_the_target(start: Callable[..., Running]) -> None:
    r = start(target=60e6)
    client = ControlClient(token_file=r.d.token_file)
    assert client.status()["target"] == 60e6
    assert client.set_target("40M") == 40e6
    k0 = r.d.k
    wait_until(lambda: r.d.k >= k0 + 3, what="periods after the change")
    st = client.status()
    assert st["target"] == 40e6 and st["u"] == pytest.approx(60e6) and not st["fallback"]
    assert st["y"]["rate_dtn"] > 0
    after = [p for p in r.periods() if p["k"] > k0 + 1]
    assert after and all(p["target"] == 40e6 and p["u"] == pytest.approx(60e6) for p in after)
    assert any(e.get("event") == "target" and e["new"] == 40e6 for e in r.records())
    # The token file is private and names the bound address.
    info = json.loads(Path(r.d.token_file).read_text())
    assert stat.S_IMODE(os.stat(r.d.token_file).st_mode) == 0o600
    assert info["api"] == "{}:{}".format(*r.d.api_address) and info["pid"] == os.getpid()


def test_bad_targets_are_rejected_and_the_loop_survives(start: Callable[..., Running]) -> None:
    r = start(target=60e6)
    bodies = {
        b'{"target": "fast"}': "cannot parse",
        b'{"target": "-5M"}': "negative",
        b'{"target": "200M"}': "above the bottleneck capacity",
        b'{"target": 1e400}': "finite",
        b'{"target": [1]}': "rate like",
        b'{"rate": "40M"}': "body must be JSON",
        b"400M": "body must be JSON",
    }
    for body, msg in bodies.items():
        code, answer = _http(r, "POST", "/target", body)
        assert code == 400, (body, answer)
        assert isinstance(answer, dict) and msg in answer["error"], (body, answer)
    with pytest.raises(ValueError, match="above the bottleneck"):
        ControlClient(token_file=r.d.token_file).set_target("150M")
    k0 = r.d.k
    wait_until(lambda: r.d.k >= k0 + 2, what="the loop to keep running")
    assert r.d.target == 60e6 and not r.d.fallback
    assert _http(r, "GET", "/nope")[0] == 404


def test_token_is_required(start: Callable[..., Running], tmp_path: Path) -> None:
    r = start()
    assert _http(r, "GET", "/status", token=None)[0] == 401
    assert _http(r, "GET", "/status", token="wrong")[0] == 401
    assert _http(r, "POST", "/target", b'{"target": "10M"}', token="wrong")[0] == 401
    assert r.d.target == 60e6
    forged = tmp_path / "forged"
    forged.write_text(json.dumps({"token": "guess", "api": "{}:{}".format(*r.d.api_address)}))
    with pytest.raises(PermissionError, match="rejected the token"):
        ControlClient(token_file=forged).status()
    with pytest.raises(FileNotFoundError, match="is `scidmz control run` running"):
        ControlClient(token_file=tmp_path / "missing")
    code, st = _http(r, "GET", "/status")
    assert code == 200 and st["k"] >= 3  # type: ignore[index]


def test_metrics_endpoint(start: Callable[..., Running]) -> None:
    pytest.importorskip("prometheus_client")
    r = start(target=30e6)
    code, text = _http(r, "GET", "/metrics")
    assert code == 200 and isinstance(text, str)
    assert "scidmz_target_bits_per_second 3e+07" in text
    assert "scidmz_dtn_rate_bits_per_second " in text and "scidmz_fallback_active 0.0" in text
    assert _http(r, "GET", "/metrics", token="wrong")[0] == 401  # on the API it stays behind the token


def test_api_listens_on_loopback_only_and_one_daemon_per_token_file(tmp_path: Path) -> None:
    for bad in ("0.0.0.0:8642", "10.0.0.1:1", "localhost", "127.0.0.1:99999", "127.0.0.1:http"):
        with pytest.raises(ValueError):
            parse_api_address(bad)
    assert parse_api_address("[::1]:8642") == ("::1", 8642)
    tok = tmp_path / "tok"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        tok.write_text(json.dumps({"token": "x", "api": "127.0.0.1:1", "pid": holder.pid}))
        with make_plant("fluid", SC) as plant:
            d = ControlDaemon(plant, TrivialPolicy(), 10e6, api="127.0.0.1:0", token_file=tok)
            with pytest.raises(RuntimeError, match="another control daemon"):
                d.start_api()
    finally:
        holder.kill()
        holder.wait()
    with pytest.raises(ValueError, match="above the bottleneck"):
        ControlDaemon(make_plant("fluid", SC), TrivialPolicy(), 2e9, api=None)


# -- safety -----------------------------------------------------------------------------------------


def test_killed_telemetry_falls_back_to_trivial_and_recovers(start: Callable[..., Running]) -> None:
    plant = FaultyPlant()
    r = start(plant=plant, policy=NoShapingPolicy(), target=25e6)  # policy u = 100M, trivial 75M
    assert r.d.u == 100e6 and not r.d.fallback
    plant.telemetry.clear()  # telemetry dies
    wait_until(lambda: r.d.fallback, 5, "the fallback")
    st = ControlClient(token_file=r.d.token_file).status()
    assert st["fallback"] and "no telemetry sample" in st["fallback_reason"]
    assert st["u"] == 75e6
    assert plant.actuator.rates and plant.actuator.rates[-1] == 75e6  # applied at once, not next step
    k0 = r.d.k
    wait_until(lambda: r.d.k >= k0 + 3, 5, "periods logged while telemetry is down")
    assert r.d.fallback  # still down, still on the fallback, still logging
    lost = [p for p in r.periods() if p["y"] is None]
    assert len(lost) >= 3 and all(p["fallback"] and p["u"] == 75e6 for p in lost)
    plant.telemetry.set()  # telemetry comes back
    wait_until(lambda: not r.d.fallback and r.d.u == 100e6, 5, "recovery")
    recs = r.records()
    events = [e["event"] for e in recs if "event" in e]
    assert "fallback" in events and "recovered" in events
    assert r.d.errors.get("telemetry_timeout", 0) >= 1


def test_actuator_exception_falls_back(start: Callable[..., Running]) -> None:
    plant = FaultyPlant()
    r = start(plant=plant, policy=NoShapingPolicy(), target=25e6)
    k0 = r.d.k
    plant.fail_next = 1
    wait_until(lambda: r.d.k >= k0 + 4, 5, "periods after the failure")
    per = [p for p in r.periods() if p["k"] > k0]
    failed = [p for p in per if p["reason"] and "actuator call failed" in p["reason"]]
    assert len(failed) >= 1 and "injected" in failed[0]["reason"]
    i = per.index(failed[0])
    nxt = per[i + 1]
    assert nxt["fallback"] and nxt["u"] == 75e6 and "actuator" in nxt["reason"]  # trivial rate next
    assert any(not p["fallback"] and p["u"] == 100e6 for p in per[i + 2:])  # and back to the policy
    assert r.d.errors["actuator"] == 1
    assert r.thread.is_alive()


def test_nonfinite_policy_output_falls_back(start: Callable[..., Running]) -> None:
    pol = FlakyPolicy()
    r = start(policy=pol, target=60e6)
    assert r.d.u == 70e6
    pol.nan = True
    wait_until(lambda: r.d.fallback, 5, "the fallback")
    k0 = r.d.k
    wait_until(lambda: r.d.k >= k0 + 2, 5, "periods on the fallback")
    assert r.d.u == 40e6 and "non-finite" in (r.d.fallback_reason or "")
    nan_periods = [p for p in r.periods() if p["reason"] and "non-finite" in p["reason"]]
    assert nan_periods and all(p["u"] == 40e6 and p["y"] is not None for p in nan_periods)
    pol.nan = False
    wait_until(lambda: not r.d.fallback and r.d.u == 70e6, 5, "recovery")


def test_daemon_runs_the_mlc_policy(start: Callable[..., Running]) -> None:
    """The real MLC control law + anti-windup PI (make_policy("mlc", ...)) in the live loop.

    The inverse model is a one-layer NumPy network computing u_hat = B_max - y_d,DTN (the
    trivial map), so the PI stage's corrections are what moves u away from it."""
    from scidmz.models.predictor import NumpyPredictor
    from scidmz.policies import make_policy
    from scidmz.policies.rate.mlc import Gains

    w = np.zeros((22, 1))
    w[0, 0] = -1.0  # feature 0 is y_d's DTN rate
    arrays = {"x_mean": np.zeros(22), "x_scale": np.ones(22), "y_mean": np.array([SC.capacity]),
              "y_scale": np.array([1.0]), "w0": w, "b0": np.zeros(1)}
    pol = make_policy("mlc", model=NumpyPredictor(arrays, per_unit=False), gains=Gains(0.3, 0.3, 1.0))
    r = start(policy=pol, target=60e6)
    k0 = r.d.k
    wait_until(lambda: r.d.k >= k0 + 5, 10, "MLC periods")
    assert not r.d.fallback and r.d.errors == {}
    per = [p for p in r.periods() if p["y"] is not None]
    us = np.array([p["u"] for p in per])
    assert np.all(np.isfinite(us)) and np.all((us >= SC.u_min) & (us <= SC.u_max))
    assert np.any(np.abs(us - 40e6) > 1e3)  # the PI stage acts on the measured error
    ControlClient(token_file=r.d.token_file).set_target("30M")
    k1 = r.d.k
    wait_until(lambda: r.d.k >= k1 + 4, 10, "periods at the new target")
    later = [p["u"] for p in r.periods() if p["k"] > k1 + 1]
    assert np.mean(later) > np.mean(us)  # a lower DTN target gives the campus more


# -- the CLI, as an admin runs it ------------------------------------------------------------------------


def test_cli_run_set_target_status_and_sigterm(tmp_path: Path) -> None:
    tok, log = tmp_path / "tok", tmp_path / "log.jsonl"
    cli = [sys.executable, "-m", "scidmz.cli", "control"]
    env = {**os.environ, "SCIDMZ_CONTROL_TOKEN": str(tok)}
    proc = subprocess.Popen([*cli, "run", "--set", f"period={T}", "--target", "30M", "--api", "127.0.0.1:0",
                             "--log", str(log), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_until(lambda: tok.exists() or proc.poll() is not None, 60, "the token file")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        wait_until(lambda: log.exists() and '"k": 3' in log.read_text(), 30, "three periods")
        out = subprocess.run([*cli, "set-target", "45M", "--json"], capture_output=True, text=True, env=env)
        assert out.returncode == 0 and json.loads(out.stdout.splitlines()[-1]) == {"target": 45e6}
        bad = subprocess.run([*cli, "set-target", "450M"], capture_output=True, text=True, env=env)
        assert bad.returncode == 2 and bad.stderr.startswith("scidmz: error: target rate 450.0 Mbit/s")
        st = subprocess.run([*cli, "status", "--json"], capture_output=True, text=True, env=env)
        status = json.loads(st.stdout.splitlines()[-1])
        assert status["target"] == 45e6 and status["pid"] == proc.pid and status["running"]
        human = subprocess.run([*cli, "status"], capture_output=True, text=True, env=env).stdout
        assert "target   45.0 Mbit/s" in human
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    summary = json.loads(stdout.splitlines()[-1])
    assert summary["reason"] == "signal SIGTERM" and summary["problems"] == []
    assert not tok.exists()  # the token goes with the daemon
    assert not os.path.exists(f"/proc/{proc.pid}")
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    assert recs[0]["event"] == "start" and recs[-1]["event"] == "stop"
    assert any(r.get("target") == 45e6 for r in recs if "k" in r)
    # The client without a daemon: a clear one-line error.
    gone = subprocess.run([*cli, "status"], capture_output=True, text=True, env=env)
    assert gone.returncode == 2 and "no control token file" in gone.stderr


def test_cli_rejects_bad_arguments_before_starting(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "scidmz.cli", "control", "run", "--token-file", str(tmp_path / "t")]
    for args, msg in (
        (["--target", "2G"], "above the bottleneck"),
        (["--target", "fast"], "cannot parse"),
        (["small-cubic", "--policy", "mlc"], "needs --model"),  # no model ships for small-cubic
        (["--policy", "mlc", "--model", "m"], "needs both"),
        (["--api", "0.0.0.0:1"], "loopback"),
        (["--plant", "hardware"], "telemetry"),
        (["--plant", "hardware", "--telemetry", "127.0.0.1:1"], "exactly one actuator"),
        (["--plant", "hardware", "--telemetry", "127.0.0.1:1", "--dev", "a", "--ovs-port", "b"],
         "exactly one actuator"),
        (["--plant", "warp"], "unknown plant"),
        (["--dev", "eth0"], "for --plant hardware"),
    ):
        if "--target" not in args:
            args = [*args, "--target", "50M"]
        r = subprocess.run([*cli, *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and r.stderr.startswith("scidmz: error:") and msg in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1


# -- the hardware plant end to end (root) ------------------------------------------------------------
#
# Everything real except the switch: the TBF on a veth, iperf3 through it, the packets
# captured on the receiving side by AF_PACKET into the software twin of the P4 program,
# and the twin served over the real P4Runtime wire protocol by the in-process server of
# the telemetry tests (what BMv2's simple_switch_grpc would be; no BMv2 exists here).


@pytest.fixture
def wire(tmp_path: Path) -> Iterator[dict[str, Any]]:
    from pyroute2 import IPRoute, netns

    from scidmz.telemetry import constants as C
    from scidmz.telemetry.p4.p4info import P4InfoIndex
    from scidmz.telemetry.p4.p4runtime import DEFAULT_P4INFO
    from scidmz.telemetry.sources.capture import RingCapture
    from scidmz.telemetry.twin.dataplane import SoftwareDataPlane

    adapters = pytest.importorskip("test_telemetry_adapters")
    a, b = f"sdzhw{os.getpid() % 100000}a", f"sdzhw{os.getpid() % 100000}b"
    made: list[str] = []
    stop = threading.Event()
    feeder: threading.Thread | None = None
    srv = None
    try:
        for n in (a, b):
            netns.create(n)
            made.append(n)
        with IPRoute(netns=a) as ip:
            ip.link("add", ifname="a0", kind="veth", peer={"ifname": "b0", "net_ns_fd": b})
        # A campus sender and a host of the remote network (the twin's default class prefixes).
        for ns, dev, addr in ((a, "a0", "10.0.0.11"), (b, "b0", "10.1.0.20")):
            with IPRoute(netns=ns) as ip:
                ip.link("set", index=ip.link_lookup(ifname="lo")[0], state="up")
                i = ip.link_lookup(ifname=dev)[0]
                ip.addr("add", index=i, address=addr, prefixlen=8)
                ip.link("set", index=i, state="up")
        from scidmz.telemetry.twin.source import _warm_kernels

        _warm_kernels()  # compile the twin's numba kernels before packets queue up in the ring
        twin = SoftwareDataPlane()
        twin.advance_clock(time.time())
        srv = adapters.TwinP4RuntimeServer(twin, P4InfoIndex.from_file(DEFAULT_P4INFO))
        netns.pushns(b)  # the AF_PACKET socket belongs to the namespace it is created in
        try:
            ring = RingCapture("b0", tap=C.TAP_EGRESS)
        finally:
            netns.popns()

        errors: list[BaseException] = []

        def feed() -> None:
            last_push = time.monotonic()
            try:
                while not stop.is_set():
                    pk = ring.poll(timeout=0.05)
                    if pk.size:
                        twin.process(pk)
                    twin.advance_clock(time.time())
                    if time.monotonic() - last_push > 0.2 and srv.digest_cfg:
                        try:
                            # Sent at once; only the wait for acknowledgements times out, and a
                            # feeder that blocked here would skew the twin's per-period counters.
                            srv.push_digests(timeout=0.01)
                        except AssertionError:
                            pass
                        last_push = time.monotonic()
            except BaseException as exc:
                errors.append(exc)
                raise
            finally:
                ring.close()

        feeder = threading.Thread(target=feed, name="test-twin-feeder", daemon=True)
        feeder.start()
        yield {"a": a, "b": b, "srv": srv, "twin": twin, "errors": errors}
        assert not errors, f"the twin feeder died: {errors[0]!r}"
    finally:
        stop.set()
        if feeder is not None:
            feeder.join(5)
        if srv is not None:
            srv.stop()
        for n in made:
            netns.remove(n)


def _iperf3(a: str, b: str, seconds: int) -> subprocess.Popen[str]:
    srv = subprocess.Popen(["ip", "netns", "exec", b, "iperf3", "-s", "-1", "-B", "10.1.0.20", "-p", "5301"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)

    def listening() -> bool:
        ss = subprocess.run(["ip", "netns", "exec", b, "ss", "-ltnH", "sport = :5301"],
                            capture_output=True, text=True)
        return bool(ss.stdout.strip())

    wait_until(listening, 10, "the iperf3 server")
    cli = subprocess.Popen(["ip", "netns", "exec", a, "iperf3", "-c", "10.1.0.20", "-p", "5301", "-t", str(seconds)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    cli.server = srv  # type: ignore[attr-defined]
    return cli


def _reap(cli: subprocess.Popen[str]) -> None:
    for p in (cli, cli.server):  # type: ignore[attr-defined]
        if p.poll() is None:
            p.kill()
        p.wait()


@pytest.mark.root
def test_hardware_plant_real_tbf_and_p4runtime_telemetry(wire: dict[str, Any]) -> None:
    from scidmz.plant.hardware import HardwarePlant

    sc = load_scenario("testbed").replace(period=1.0)
    plant = make_plant("hardware", sc, dev="a0", netns=wire["a"], telemetry=wire["srv"].address,
                       view_options={"clock": wire["twin"].clock})
    assert isinstance(plant, HardwarePlant)
    cli = None
    try:
        with plant:
            plant.reset(0)  # the TBF is in place before any traffic
            cli = _iperf3(wire["a"], wire["b"], 12)
            plant.step(20e6)  # the period in which the flow starts
            seen = {}
            for u in (20e6, 20e6, 20e6, 50e6, 50e6, 50e6):
                st = plant.step(u)
                assert plant.info["u_applied"][0] == pytest.approx(u, abs=8)  # read back from the kernel
                seen[u] = st[0]
            print({u / 1e6: y.rate_campus / 1e6 for u, y in seen.items()}, "client rc", cli.poll(),
                  "twin", wire["twin"].cls_ctr.tolist(), wire["errors"])
            for u, y in seen.items():
                # The twin counts what crossed the shaper (IP bytes of frames the TBF sized at L2).
                assert y.rate_campus == pytest.approx(u, rel=0.10), (u, y)
                assert y.rate_dtn == 0
        from pyroute2 import IPRoute

        with IPRoute(netns=wire["a"]) as ip:  # close() removed the TBF
            kinds = [q.get_attr("TCA_KIND") for q in ip.get_qdiscs(index=ip.link_lookup(ifname="a0")[0])]
        assert "tbf" not in kinds
    finally:
        if cli is not None:
            _reap(cli)


@pytest.mark.root
def test_daemon_on_hardware_plant_survives_a_vanished_interface(wire: dict[str, Any], tmp_path: Path) -> None:
    """A real actuator failure: the shaped interface disappears; the daemon keeps running on the fallback."""
    sc = load_scenario("testbed").replace(period=0.5)
    plant = make_plant("hardware", sc, dev="a0", netns=wire["a"], telemetry=wire["srv"].address,
                       view_options={"clock": wire["twin"].clock})
    log = tmp_path / "hw.jsonl"
    d = ControlDaemon(plant, NoShapingPolicy(), 30e6, api="127.0.0.1:0", token_file=tmp_path / "tok", log=log)
    r = Running(d, log)
    r.thread.start()
    try:
        wait_until(lambda: d.k >= 3, 30, "three periods on the hardware plant")
        assert d.u == 100e6 and not d.fallback
        from pyroute2 import IPRoute

        with IPRoute(netns=wire["a"]) as ip:
            ip.link("del", index=ip.link_lookup(ifname="a0")[0])
        wait_until(lambda: d.fallback, 10, "the fallback")
        k0 = d.k
        wait_until(lambda: d.k >= k0 + 3, 10, "periods after the failure")
        assert d.fallback and "actuator call failed" in (d.fallback_reason or "")
        assert d.errors["actuator"] >= 3 and r.thread.is_alive()
        code, st = _http(r, "GET", "/status")
        assert code == 200 and st["u"] == 70e6  # type: ignore[index]
    finally:
        d.stop("test over")
        r.thread.join(20)
    assert not r.thread.is_alive() and r.summary is not None


# -- the daemon on the emulated testbed (root) ----------------------------------------------------------


class SilenceableTelemetry:
    """Wraps a real plant; while ``telemetry`` is cleared, its samples are held back (lost telemetry)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.scenario = inner.scenario
        self.batch = 1
        self.telemetry = threading.Event()
        self.telemetry.set()
        self.closed = threading.Event()

    @property
    def period(self) -> float:
        return self.inner.period

    @property
    def info(self) -> dict[str, Any]:
        return self.inner.info

    def reset(self, seed: int | None = None) -> Any:
        return self.inner.reset(seed)

    def step(self, u: Any) -> Any:
        st = self.inner.step(u)
        while not self.telemetry.is_set() and not self.closed.is_set():
            self.telemetry.wait(0.05)
        return st

    def close(self) -> None:
        self.closed.set()
        self.inner.close()


@pytest.mark.root
def test_daemon_on_the_netns_testbed(tmp_path: Path) -> None:
    """Real namespaces, TBF and kernel TCP: target change over the API, a bad target, silenced
    telemetry -> trivial rate -> recovery, then a clean stop that leaves no namespace behind.

    The loop runs on the main thread, as under ``scidmz control run``; the admin's actions
    come from a second thread.
    """
    from pyroute2 import netns

    prefix = f"dmn{os.getpid() % 10000}"
    sc = load_scenario("testbed").with_overrides(
        ["campus.hosts=2", "link.capacity=20M", "period=0.5", "dtn.streams=2"])
    inner = make_plant("netns", sc, prefix=prefix, telemetry="kernel")
    plant = SilenceableTelemetry(inner)
    log = tmp_path / "netns.jsonl"
    d = ControlDaemon(plant, TrivialPolicy(), 10e6, api="127.0.0.1:0", token_file=tmp_path / "tok", log=log)
    failures: list[BaseException] = []

    def admin() -> None:
        try:
            wait_until(lambda: d.k >= 3, 120, "three periods on the testbed")
            client = ControlClient(token_file=d.token_file)
            assert client.set_target("5M") == 5e6
            with pytest.raises(ValueError, match="above the bottleneck"):
                client.set_target("50M")
            k0 = d.k
            wait_until(lambda: d.k >= k0 + 3, 20, "periods at the new target")
            st = client.status()
            assert st["u"] == 15e6 and not st["fallback"] and st["y"]["rate_campus"] > 0
            assert inner.info["u_applied"][0] == pytest.approx(15e6, abs=8)  # the testbed's TBF holds u
            plant.telemetry.clear()
            wait_until(lambda: d.fallback, 10, "the fallback")
            assert "no telemetry sample" in (d.fallback_reason or "") and d.u == 15e6
            client.set_target("8M")  # the admin can still steer while telemetry is down
            wait_until(lambda: d.u == 12e6, 10, "the fallback to follow the target")
            plant.telemetry.set()
            wait_until(lambda: not d.fallback, 20, "recovery")
            k1 = d.k
            wait_until(lambda: d.k >= k1 + 2, 20, "periods after recovery")
            assert inner.info["u_applied"][0] == pytest.approx(12e6, abs=8)
        except BaseException as exc:
            failures.append(exc)
        finally:
            d.stop("test over")

    th = threading.Thread(target=admin, name="test-admin")
    th.start()
    try:
        summary = d.run()
    finally:
        d.stop()
        th.join(60)
    if failures:
        raise failures[0]
    assert summary["problems"] == [] and summary["reason"] == "test over"
    left = [n for n in netns.listnetns() if n.startswith(prefix + "-")]
    assert not left, f"namespaces left behind: {left}"
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    events = [e["event"] for e in recs if "event" in e]
    assert events[0] == "start" and "fallback" in events and "recovered" in events and events[-1] == "stop"
