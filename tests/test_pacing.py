"""``pacing``, the DTN paced at its target by its own senders, on both plants.

- the units: ``SO_MAX_PACING_RATE`` is TCP payload bytes/s, our rates frame bit/s;
- the actuator on real sockets (loopback, no root): a sender's streams follow the rate
  set live through ``pidfd_getfd``, only the streams to the named peer, and ``lift``
  removes the cap;
- the fluid plant: per-DTN-flow caps, lifted at reset; a pacing episode follows the target;
- the hardware plant (no DTN-host control) refuses it with one line;
- the netns plant (root, under the lock): the kernel DTN's measured rate follows the
  pacing when it moves mid-episode, and the next reset lifts it; ``pi`` runs there too.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from scidmz.actuators.pacing import UNLIMITED, SocketPacer, payload_bytes_per_s
from scidmz.plant.base import make_plant
from scidmz.policies.host.pacing import PacingPolicy
from scidmz.runner import Episode, run_episode
from scidmz.scenario import load_scenario
from scidmz.units import WIRE_PER_PAYLOAD

SC = load_scenario("small-cubic")


def test_pacing_option_is_payload_bytes_of_the_frame_rate() -> None:
    # 1448 payload bytes ride in a 1514-byte frame: a 100 Mbit/s frame rate is 11.96 MB/s of payload.
    assert payload_bytes_per_s(100e6) == int(100e6 / 8 / (1514 / 1448))
    assert WIRE_PER_PAYLOAD == pytest.approx(1514 / 1448)
    # 0 would mean "unpaced" to the kernel: the slowest pacing instead.
    assert payload_bytes_per_s(0.0) == payload_bytes_per_s(8000.0) > 0


def test_policy_paces_at_the_target_and_shapes_the_campus_at_the_rest() -> None:
    from scidmz.state import History

    pol = PacingPolicy()
    pol.reset(SC, 2)
    tg = np.array([30e6, 80e6])
    np.testing.assert_array_equal(pol.decide(History(np.zeros((2, 7))), tg), tg)
    np.testing.assert_allclose(pol.campus_rate(SC, tg), np.clip(SC.capacity - tg, SC.u_min, SC.u_max))


# -- the actuator on real sockets (loopback) ----------------------------------------------------------------

_SENDER = """
import socket, sys, time
socks = [socket.create_connection((h, int(p))) for h, p in (a.split(':') for a in sys.argv[1:])]
for s in socks:
    s.setblocking(False)
buf = bytes(65536)
end = time.monotonic() + 60
while time.monotonic() < end:
    for s in socks:
        try:
            s.send(buf)
        except BlockingIOError:
            pass
    time.sleep(0.0005)
"""


class _Sink:
    """A loopback server counting bytes per accepted connection."""

    def __init__(self, host: str) -> None:
        self.srv = socket.create_server((host, 0))
        self.port = self.srv.getsockname()[1]
        self.counts: list[int] = []
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            i = len(self.counts)
            self.counts.append(0)
            threading.Thread(target=self._read, args=(c, i), daemon=True).start()

    def _read(self, c: socket.socket, i: int) -> None:
        while not self._stop:
            b = c.recv(1 << 20)
            if not b:
                return
            self.counts[i] += len(b)

    def rate(self, seconds: float) -> list[float]:
        """Bytes/s per connection over the next ``seconds``."""
        a = list(self.counts)
        time.sleep(seconds)
        return [(b - x) / seconds for x, b in zip(a, self.counts, strict=False)]

    def close(self) -> None:
        self._stop = True
        self.srv.close()


def test_actuator_paces_a_running_senders_streams_live_and_lifts() -> None:
    paced, other = _Sink("127.0.0.1"), _Sink("127.0.0.2")
    proc = subprocess.Popen([sys.executable, "-c", _SENDER, f"127.0.0.1:{paced.port}", f"127.0.0.1:{paced.port}",
                             f"127.0.0.2:{other.port}"])
    pacer = SocketPacer("127.0.0.1", streams=2)
    try:
        deadline = time.monotonic() + 10
        while (len(paced.counts) < 2 or not other.counts) and time.monotonic() < deadline:
            time.sleep(0.05)
        pacer.attach(proc.pid)
        assert pacer.set_rate(16e6) == 2 and pacer.paced_sockets == 2  # 8 Mbit/s of frames per stream
        want = payload_bytes_per_s(8e6)
        assert pacer.socket_rates() == [want, want]
        time.sleep(1.0)  # what was queued before the cap drains
        r = paced.rate(2.0)
        assert all(0.8 * want < x < 1.15 * want for x in r), (r, want)
        assert other.rate(1.0)[0] > 5 * want  # a stream to another peer is not ours to pace
        pacer.set_rate(4e6)  # live, lower
        time.sleep(1.0)
        r = paced.rate(2.0)
        want = payload_bytes_per_s(2e6)
        assert pacer.socket_rates() == [want, want] and all(0.8 * want < x < 1.15 * want for x in r), (r, want)
        pacer.lift()
        assert pacer.socket_rates() == [UNLIMITED, UNLIMITED] and pacer.paced_sockets == 0
        assert min(paced.rate(1.0)) > 5 * want
        with pytest.raises(ValueError, match="finite number >= 0"):
            pacer.set_rate(float("nan"))
    finally:
        proc.kill()
        proc.wait()
        pacer.close()
        paced.close()
        other.close()
    assert pacer.refresh() == 0 and pacer.socket_rates() == []  # detached: nothing to do


def test_actuator_attach_to_a_gone_process_is_one_line() -> None:
    from scidmz.actuators.base import ActuatorError

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    with pytest.raises(ActuatorError, match=r"^cannot open the DTN sender \(pid \d+\)"):
        SocketPacer("10.0.0.1", 1).attach(p.pid)


# -- fluid plant ----------------------------------------------------------------------------------------------


def test_fluid_plant_caps_the_dtn_streams_and_reset_lifts_it() -> None:
    from scidmz.plant.fluid import layout as L

    with make_plant("fluid", SC, batch=2) as pl:
        d = pl.shape.n_dtn
        pl.set_pacing(np.array([40e6, 8e6]))
        np.testing.assert_allclose(pl.P[:, L.P_RMAX, :d], np.broadcast_to(np.array([[40e6], [8e6]]) / 8 / d, (2, d)))
        assert np.all(np.isinf(pl.P[:, L.P_RMAX, d:]))  # the campus is not paced
        pl.set_pacing(None)
        assert np.all(np.isinf(pl.P[:, L.P_RMAX, :d]))
        pl.set_pacing(20e6)
        pl.reset(seed=1)
        assert np.all(np.isinf(pl.P[:, L.P_RMAX, :d]))
        for bad in (np.nan, -1.0, [1.0, 2.0, 3.0]):
            with pytest.raises(ValueError, match="fluid plant pacing"):
                pl.set_pacing(bad)


def test_fluid_pacing_episode_follows_the_target_and_is_recorded() -> None:
    steps = np.repeat([0.3, 0.6, 0.2], 20) * SC.capacity
    with make_plant("fluid", SC.replace(duration=60.0), batch=2) as pl:
        traces = run_episode(pl, PacingPolicy(), steps, seed=3)
    for tr in traces:
        np.testing.assert_array_equal(tr.column("pacing"), steps)
        np.testing.assert_allclose(tr.column("u"), SC.capacity - steps)
        rd = tr.column("rate_dtn")
        # The cap holds every period (frame bytes, as the target), but for what a step down leaves queued.
        assert np.all(rd <= steps * 1.01 + SC.buffer_bytes * 8 / SC.period)
        for k in range(3):  # settles near each new target (a paced CUBIC DTN still backs off on a loss)
            tail = rd[20 * k + 10: 20 * (k + 1)]
            assert abs(tail.mean() / steps[20 * k] - 1) < 0.1, (k, tail.mean(), steps[20 * k])


def test_hardware_plant_refuses_pacing_in_one_line() -> None:
    from scidmz.plant.hardware import HardwarePlant
    from scidmz.telemetry.twin.dataplane import SoftwareDataPlane

    class _Act:
        def set_rate(self, bps: float) -> None: ...

        def current_rate(self) -> float:
            return 0.0

        def close(self) -> None: ...

    plant = HardwarePlant(load_scenario("testbed"), _Act(), SoftwareDataPlane())
    with pytest.raises(ValueError, match=r"cannot pace the DTN's streams; host policy 'pacing' needs one") as e:
        Episode(plant, PacingPolicy())
    assert "\n" not in str(e.value)
    plant.close()


# -- netns plant (real kernel TCP) ----------------------------------------------------------------------------

root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


class _Schedule:
    """A host policy pacing the DTN at a given per-period schedule (the campus shaper at B_max - pacing)."""

    name = "pacing"
    kind = "host"

    def __init__(self, rates: np.ndarray) -> None:
        self.rates = rates

    def reset(self, scenario, batch=1):
        self.k = 0

    def decide(self, history, target):
        r = self.rates[min(self.k, len(self.rates) - 1)]
        self.k += 1
        return np.array([r])

    def campus_rate(self, scenario, target):
        return np.array([scenario.capacity - self.rates[max(self.k - 1, 0)]])


@pytest.mark.root
@root
def test_netns_dtn_follows_the_pacing_up_and_down_and_reset_lifts_it() -> None:
    sc = load_scenario("testbed").with_overrides(["campus.hosts=2", "link.capacity=40M", "dtn.streams=4"])
    hold = 8
    # Up, then down, mid-episode. The start-up loses DTN packets at the bottleneck (26 drops in the first
    # period, measured) and CUBIC's recovery at a 100 ms RTT took 3-4 s on a quiet machine but more than 12 s
    # in a CI run on two busy cores (4.1-7.5 Mbit/s in seconds 8-11 against 8). That recovery is not what this
    # test checks, so the first hold is held to the cap alone; the step up and the step down must track.
    starts = np.array([0, 12, 20, 28])
    rates = np.repeat([8e6, 24e6, 4e6], np.diff(starts))
    prefix = f"pc{os.getpid() % 10000}"
    with make_plant("netns", sc, prefix=prefix, telemetry="kernel") as pl:
        tr = run_episode(pl, _Schedule(rates), rates, seed=1)[0]
        rd = tr.column("rate_dtn")
        np.testing.assert_array_equal(tr.column("pacing"), rates)
        assert tr.column("dtn_paced_sockets")[-1] == 5  # 4 streams + iperf3's control connection
        first = rd[starts[1] - hold // 2: starts[1]]
        assert first.max() < 1.15 * rates[0], first
        for k in (1, 2):
            tail = rd[starts[k + 1] - hold // 2: starts[k + 1]]
            assert abs(tail.mean() / rates[starts[k]] - 1) < 0.15, (k, tail, rates[starts[k]])
        old = pl.pacing_readback()
        assert old and all(v == payload_bytes_per_s(4e6 / 4) for v in old)
        # The next episode starts unpaced: a fresh sender, no cap on its sockets.
        from scidmz.policies.registry import make_policy

        tr2 = run_episode(pl, make_policy("trivial"), np.full(8, 32e6), seed=2)[0]  # campus held at 8 Mbit/s
        assert "pacing" not in tr2.columns and "dtn_paced_sockets" not in tr2.columns
        assert pl.pacing_readback() and all(v == UNLIMITED for v in pl.pacing_readback())
        assert tr2.column("rate_dtn")[4:].mean() > 3 * 4e6  # far above the last episode's cap


@pytest.mark.root
@root
def test_netns_runs_pi_and_pacing_policies() -> None:
    from scidmz.datasets import shipped_pi_gains
    from scidmz.policies.registry import make_policy

    sc = load_scenario("testbed").with_overrides(["campus.hosts=2", "link.capacity=40M", "dtn.streams=2"])
    prefix = f"pq{os.getpid() % 10000}"
    pi = make_policy("pi", gains=str(shipped_pi_gains(load_scenario("testbed"))))
    tg = np.repeat([12e6, 20e6], 5)
    with make_plant("netns", sc, prefix=prefix, telemetry="kernel") as pl:
        for pol in (pi, make_policy("pacing"), pi):  # kinds alternate on one testbed
            tr = run_episode(pl, pol, tg, seed=4)[0]
            assert len(tr) == len(tg) and np.all(np.isfinite(tr.column("rate_dtn")))
            u = tr.column("u")
            assert np.all(np.abs(u - (sc.capacity - tg)) <= 0.05 * sc.capacity + 1)  # pi's band, pacing's trivial
            assert ("pacing" in tr.columns) == (pol.kind == "host")


def test_simulate_and_evaluate_run_pacing_on_the_fluid_plant(tmp_path) -> None:
    import json

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "scidmz.cli", *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=600)

    r = cli("simulate", "small-cubic", "--policy", "pacing", "--duration", "5", "--target", "40M",
            "--out", str(tmp_path / "t.parquet"), "--json")
    assert r.returncode == 0, r.stderr
    from scidmz.state import Trace

    tr = Trace.read_parquet(tmp_path / "t.parquet")
    np.testing.assert_allclose(tr.column("pacing"), 40e6)
    r = cli("evaluate", "small-cubic", "--policies", "pacing", "--quick", "--trials", "2", "--experiments",
            "mrae,fct", "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])["results"]
    assert {"pacing", "trivial"} <= set(res["mrae"]) and res["fct"]["pacing"]["mean"] > 0
