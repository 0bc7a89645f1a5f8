"""The window CCAs' loss recovery: timer stalls, event boundaries, CUBIC's W_est."""

from __future__ import annotations

import numpy as np
import pytest

from scidmz.plant.fluid import cca
from scidmz.plant.fluid import layout as L
from scidmz.plant.fluid.common import CUBIC, INF
from scidmz.plant.fluid.constants import CUBIC_BETA, MSS, TCP_RTO_MIN


def _flow(cwnd_pkts: float) -> np.ndarray:
    s = np.zeros((L.NS, 1))
    s[L.S_ON, 0] = 1.0
    s[L.S_CWND, 0] = cwnd_pkts * MSS
    s[L.S_SSTH, 0] = INF
    s[L.S_LOSS_AT, 0] = INF
    s[L.S_RECOV_END, 0] = -INF
    s[cca.S_STALL_END, 0] = -INF
    s[cca.S_STALL_KIND, 0] = -1.0
    return s


def _rng() -> np.ndarray:
    return np.array([0x9E3779B97F4A7C15], dtype=np.uint64)


def test_a_lost_flight_in_open_waits_for_the_probe_then_the_rto_and_restarts_from_one_packet():
    s, rtt, t = _flow(4.0), 0.010, 5.0
    # p = 1 and dt = RTT: the flight is surely lost, and so is the probe
    cca._flight_lost(s, 0, CUBIC, t, rtt, rtt, 1.0, _rng(), 0)
    assert s[L.S_CWND, 0] == 0.0 and cca._stalled(s, 0)
    assert s[cca.S_STALL_KIND, 0] == 0.0  # an RTO, no backoff yet
    assert s[L.S_LOSS_AT, 0] == pytest.approx(t + TCP_RTO_MIN + rtt / 4)  # from the head, sent 3/4 RTT ago
    assert s[L.S_SSTH, 0] == pytest.approx(CUBIC_BETA * 4 * MSS)  # reduced once, at the stall's start
    end = s[L.S_LOSS_AT, 0]
    cca._window_loss(s, 0, CUBIC, end, rtt)
    assert not cca._stalled(s, 0)
    assert s[L.S_CWND, 0] == MSS and s[L.S_SSTH, 0] == pytest.approx(CUBIC_BETA * 4 * MSS)
    # its retransmission lost too (the first round after the RTO): the timer doubles, no new reduction
    cca._flight_lost(s, 0, CUBIC, end + 0.5 * rtt, rtt, rtt, 1.0, _rng(), 0)
    assert s[cca.S_STALL_KIND, 0] == 1.0
    assert s[L.S_LOSS_AT, 0] == pytest.approx(end + 2.0 * (rtt + TCP_RTO_MIN))
    assert s[L.S_SSTH, 0] == pytest.approx(CUBIC_BETA * 4 * MSS)


def test_no_loss_no_stall_and_big_windows_almost_never_stall():
    s = _flow(4.0)
    cca._flight_lost(s, 0, CUBIC, 1.0, 0.002, 0.010, 0.0, _rng(), 0)
    assert not cca._stalled(s, 0)
    fired = 0
    for i in range(2000):  # 2000 RTTs of a 40-packet flow at 15 % loss: p^40 ~ 1e-33
        s = _flow(40.0)
        cca._flight_lost(s, 0, CUBIC, float(i), 0.010, 0.010, 0.15, _rng(), 0)
        fired += cca._stalled(s, 0)
    assert fired == 0


def test_the_stall_rate_is_p_to_the_flight_per_rtt():
    rng, p, rtt, dt, n = _rng(), 0.3, 0.010, 0.002, 20000
    fired = 0
    for i in range(n):
        s = _flow(2.5)  # two whole packets in flight
        cca._flight_lost(s, 0, CUBIC, 10.0 + i, dt, rtt, p, rng, 0)
        fired += cca._stalled(s, 0)
    expect = n * p**2 * dt / rtt
    assert fired == pytest.approx(expect, rel=0.15)


def test_a_congestion_event_ends_at_the_reaction():
    s = _flow(10.0)
    cca._window_loss(s, 0, CUBIC, 3.0, 0.010)
    assert s[L.S_CWND, 0] == pytest.approx(CUBIC_BETA * 10 * MSS)
    assert s[L.S_RECOV_END, 0] == 3.0  # a drop after now is of a packet sent after the detection
    assert s[cca.S_WEST, 0] == pytest.approx(CUBIC_BETA * 10)


def test_cubic_reno_friendly_window_grows_per_rtt_of_acks_not_per_min_rtt():
    s = _flow(10.0)
    cca._window_loss(s, 0, CUBIC, 0.0, 0.040)
    cwnd = s[L.S_CWND, 0]
    west0 = s[cca.S_WEST, 0]
    # one RTT of ACKs (a cwnd's worth) of a 10 ms path behind a 30 ms queue
    cca._window_grow(CUBIC, 0.040, cwnd, 0.040, cwnd, s[L.S_SSTH, 0], 0.010, s, 0)
    slope = 3 * (1 - CUBIC_BETA) / (1 + CUBIC_BETA)
    assert s[cca.S_WEST, 0] - west0 == pytest.approx(slope, rel=1e-6)
