"""The bottleneck's packet-level noise in the fluid plant (the kernel's shallow-buffer idle time).

The formulas are checked against the stationary reflected Brownian motion they come from
(numerical integration of its density), and the plant against its own invariants: the noise
moves bytes from "served" to "dropped" and nothing else, it costs fill most where the buffer is
smallest, a token bucket at the bottleneck softens it, and ``packet_noise=False`` is the plain
fluid queue.
"""

from __future__ import annotations

import numpy as np
import pytest

from scidmz.plant.fluid import kernel
from scidmz.plant.fluid.plant import FluidPlant
from scidmz.scenario import load_scenario

VAR = 0.5 * 12.5e6 * 1514.0  # IDC 0.5 at 100 Mbit/s, bytes^2/s


def _rbm(drift: float, var: float, buffer: float, tokens: float) -> tuple[float, float]:
    """(lost service per s, E[max(X, 0)]) of the RBM on [-tokens, buffer], by integration."""
    x = np.linspace(-tokens, buffer, 400_001)
    dens = np.exp(2.0 * drift / var * (x + tokens) - max(0.0, 2.0 * drift / var * (buffer + tokens)))
    dens /= np.trapezoid(dens, x)
    return 0.5 * var * dens[0], float(np.trapezoid(np.maximum(x, 0.0) * dens, x))


@pytest.mark.parametrize("drift", [-2e6, -2e5, -1e4, 0.0, 1e4, 2e5, 2e6])
@pytest.mark.parametrize(("buffer", "tokens"), [(12.5e3, 12.5e3), (62.5e3, 0.0), (62.5e3, 12.5e3)])
def test_formulas_match_the_reflected_brownian_queue(drift, buffer, tokens):
    idle, mean = _rbm(drift, VAR, buffer, tokens)
    # the noise's extra idle is the RBM's idle minus the deterministic fluid's max(-drift, 0)
    excess = kernel._packet_noise_excess(drift, VAR, buffer + tokens)
    assert excess == pytest.approx(idle - max(-drift, 0.0), rel=1e-3, abs=1.0)
    assert kernel._packet_noise_queue(drift, VAR, buffer, tokens) == pytest.approx(mean, rel=1e-3, abs=1.0)


def test_excess_limits():
    # zero drift: var / (2 length); strong drift either way: the reflections vanish
    assert kernel._packet_noise_excess(0.0, VAR, 25e3) == pytest.approx(VAR / 50e3)
    assert kernel._packet_noise_excess(-5e6, VAR, 25e3) < 1e-6 * VAR / 50e3
    assert kernel._packet_noise_excess(5e6, VAR, 25e3) < 1e-6 * VAR / 50e3
    assert kernel._packet_noise_excess(1e5, 0.0, 25e3) == 0.0


def _fills(noise: bool, buffers: tuple[float, ...], burst: float | None = None) -> tuple[np.ndarray, dict]:
    sc0 = load_scenario("testbed").replace(duration=40.0)
    if burst is not None:
        sc0 = sc0.replace(link={"burst": burst})
    scs = [sc0.replace(link={"buffer_bdp": b}, seed=s) for b in buffers for s in (0, 1)]
    target = 0.5 * sc0.capacity
    plant = FluidPlant(sc0, scenarios=scs, packet_noise=noise)
    plant.reset(0)
    u = np.full(len(scs), sc0.trivial_rate(target))
    ys, infos = [], []
    for _ in range(40):
        ys.append(plant.step(u).y.copy())
        infos.append(plant.info)
    y = np.array(ys)[10:]
    fill = y[:, :, 0].mean(axis=0).reshape(len(buffers), 2).mean(axis=1) / target
    info = {k: np.array([i[k] for i in infos]) for k in ("dtn_bytes", "campus_bytes", "dtn_lost_bytes",
                                                        "campus_lost_bytes", "shaper_lost_bytes",
                                                        "dtn_sent_bytes", "campus_sent_bytes")}
    return fill, info | {"buffer_bytes": np.array([s.buffer_bytes for s in scs])}


def test_noise_costs_fill_most_in_the_smallest_buffer():
    buffers = (0.01, 0.05, 1.0)
    plain, _ = _fills(False, buffers)
    noisy, info = _fills(True, buffers)
    loss = plain - noisy
    assert loss[0] > 0.03  # 8 frames: the kernel's idle link (reports/mlc/regime)
    assert loss[0] > loss[1] > -0.005
    assert abs(loss[2]) < 0.01  # a deep buffer barely notices
    # bytes are conserved: what was sent is delivered, dropped or still queued
    for cls in ("dtn", "campus"):
        sent = info[f"{cls}_sent_bytes"].sum(axis=0)
        out = info[f"{cls}_bytes"].sum(axis=0) + info[f"{cls}_lost_bytes"].sum(axis=0)
        if cls == "campus":
            out = out + info["shaper_lost_bytes"].sum(axis=0)
        assert np.all(out <= sent * (1 + 1e-9))
        assert np.all(sent - out <= info["buffer_bytes"] + 100e6 * 0.05 / 8 + 1e6)


def test_bottleneck_tokens_soften_the_noise():
    # tokens saved while the queue is empty act as buffer (the kernel's fill at 0.01 BDP rose with
    # 4 ms of tokens instead of 1 ms, reports/mlc/regime)
    one_ms, _ = _fills(True, (0.01,))
    four_ms, _ = _fills(True, (0.01,), burst=50e3)
    assert four_ms[0] > one_ms[0] + 0.02


def test_packet_noise_off_is_the_plain_fluid_queue():
    sc = load_scenario("testbed").replace(link={"buffer_bdp": 0.01})
    y = {}
    for noise in (False, True):
        plant = FluidPlant(sc, packet_noise=noise)
        plant.reset(3)
        y[noise] = np.array([plant.step(50e6).y.copy() for _ in range(5)])
    plant = FluidPlant(sc.replace(link={"burst": 0.0}), packet_noise=False)
    plant.reset(3)
    y_tok = np.array([plant.step(50e6).y.copy() for _ in range(5)])
    assert np.array_equal(y[False], y_tok)  # without noise the bottleneck's tokens change nothing
    assert not np.array_equal(y[False], y[True])
    # the scenario's own switch: link.arrival_idc = 0 is the deterministic queue too
    plant = FluidPlant(sc.with_overrides(["link.arrival_idc=0"]))
    plant.reset(3)
    assert np.array_equal(y[False], np.array([plant.step(50e6).y.copy() for _ in range(5)]))
