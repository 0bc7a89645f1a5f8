"""The fluid BBR v1 and v2 read against their sources (tcp_bbr.c, v2alpha tcp_bbr2.c), one flow at a time.

Each test drives one flow's controller (``bbr1_update`` / ``bbr2_update``) through a
one-flow bottleneck written here (capacity, buffer, base RTT; the flow's bytes queue and
are dropped when the buffer is full) and checks a behaviour its source states.
"""

from __future__ import annotations

import numpy as np
import pytest

from scidmz.plant.fluid import bbr1, bbr2
from scidmz.plant.fluid import layout as L
from scidmz.plant.fluid.common import CRUISE, DOWN, PROBE_BW, PROBE_RTT, REFILL, STARTUP, UP
from scidmz.plant.fluid.constants import BBR_MIN_CWND, INIT_CWND, MSS

DT = 0.001


class OneFlow:
    """One BBR flow through a drop-tail bottleneck of ``cap`` bytes/s and ``buf`` bytes; ``creep`` (s/s)
    adds a queuing delay other traffic builds there, slowly, so no later RTT sample matches an earlier."""

    def __init__(self, version: int, cap: float = 12.5e6, base: float = 0.05, buf: float = 1e9,
                 creep: float = 0.0) -> None:
        self.update = bbr1.bbr1_update if version == 1 else bbr2.bbr2_update
        self.cap, self.base, self.buf, self.creep = cap, base, buf, creep
        self.s = np.zeros((L.NS, 1))
        self.rng = np.array([12345], dtype=np.uint64)
        s = self.s
        gain = 2.885
        s[L.S_MODE, 0] = STARTUP
        s[L.S_CWND, 0] = INIT_CWND
        s[L.S_MINRTT, 0] = np.inf
        s[L.S_PACE, 0] = gain * INIT_CWND / base
        s[L.S_BW, 0] = INIT_CWND / base
        s[L.S_GAIN, 0] = gain
        for k in (L.S_PRTT_DONE, L.S_IHI, L.S_ILO, L.S_BWLO, L.S_PWAIT):
            s[k, 0] = np.inf
        s[L.S_UPCNT, 0] = 1.0
        self.q = 0.0
        self.t = 0.0
        self.lost = 0.0

    def run(self, seconds: float, watch=None) -> None:
        s = self.s
        for _ in range(int(round(seconds / DT))):
            rtt = self.base + self.creep * self.t + self.q / self.cap
            x = min(s[L.S_PACE, 0], s[L.S_CWND, 0] / rtt)
            self.q += x * DT
            acked = min(self.q, self.cap * DT)
            self.q -= acked
            lost = max(self.q - self.buf, 0.0)
            self.q -= lost
            self.lost += lost
            inflight = x * self.base + self.q
            self.t += DT
            self.update(s, 0, self.t, acked, lost, rtt, inflight, self.rng, 0)
            if watch is not None:
                watch(self)

    def get(self, k: int) -> float:
        return float(self.s[k, 0])


def test_bbr1_finds_the_bandwidth_and_caps_inflight_at_two_bdp():
    # tcp_bbr.c: bw = windowed max of delivery rates; cwnd = bbr_cwnd_gain (2) x BDP + budget; a lone
    # flow paces at its estimate, so the queue its probes build drains again (well below one BDP)
    f = OneFlow(1, buf=10e6)
    qmax = []
    f.run(20.0, watch=lambda o: qmax.append(o.q))
    assert f.get(L.S_BW) == pytest.approx(f.cap, rel=0.02)
    bdp = f.cap * f.base
    assert f.get(L.S_CWND) == pytest.approx(2 * bdp, rel=0.05)
    assert max(qmax[5000:]) < 0.5 * bdp


def test_bbr1_gain_cycle_spends_one_phase_in_eight_probing():
    f = OneFlow(1, buf=10e6)
    f.run(3.0)
    phases = []
    f.run(8.0, watch=lambda o: phases.append((o.get(L.S_MODE), o.get(L.S_CIDX))))
    idx = np.array([c for m, c in phases if m == PROBE_BW])
    assert np.mean(idx == 0) == pytest.approx(1 / 8, abs=0.03)  # the 1.25 phase
    assert np.mean(idx == 1) < 1 / 8 + 0.01  # the 0.75 phase, left early once inflight <= BDP


def test_bbr1_probe_rtt_every_10s_at_4_packets_keeps_the_estimate():
    # bbr_update_min_rtt: no RTT at or below the min for 10 s -> ProbeRTT, cwnd 4 packets, >= 200 ms;
    # its samples are app-limited, so the bandwidth estimate holds through it
    f = OneFlow(1, buf=10e6, creep=1e-4)
    f.run(2.0)
    seen = []
    f.run(20.0, watch=lambda o: seen.append((o.t, o.get(L.S_MODE), o.get(L.S_CWND), o.get(L.S_BW))))
    a = np.array(seen)
    in_prtt = a[:, 1] == PROBE_RTT
    starts = a[1:, 0][np.diff(in_prtt.astype(int)) == 1]
    assert len(starts) >= 1
    assert np.all(np.diff(starts) > 9.5) and starts[0] < 12.0
    assert a[in_prtt, 2].min() == pytest.approx(BBR_MIN_CWND)
    assert in_prtt.sum() * DT >= 0.2
    assert a[in_prtt, 3].min() > 0.95 * f.cap


def test_bbr1_ignores_loss_in_a_shallow_buffer():
    # BBR v1 has no loss response beyond the cwnd arithmetic: it keeps pacing at its estimate
    f = OneFlow(1, buf=0.02 * 12.5e6 * 0.05)
    f.run(10.0)
    lost0 = f.lost
    f.run(10.0)
    assert f.get(L.S_BW) > 0.95 * f.cap
    assert (f.lost - lost0) / (10.0 * f.cap) > 0.01


def _phase_trace(f: OneFlow, seconds: float) -> np.ndarray:
    out = []
    f.run(seconds, watch=lambda o: out.append((o.t, o.get(L.S_MODE), o.get(L.S_CIDX), o.get(L.S_IHI),
                                                o.get(L.S_CWND), o.get(L.S_BWLO))))
    return np.array(out)


def test_bbr2_probes_every_2_to_3_s_and_cruises_below_inflight_hi():
    # v2alpha: DOWN -> CRUISE -> REFILL -> UP; bbr2_pick_probe_wait 2 + U(0, 1) s (a 50 ms RTT and a BDP of
    # 413 packets: the 63-round Reno bound, 3.2 s, comes later); a lossy UP sets inflight_hi
    f = OneFlow(2, buf=0.1 * 12.5e6 * 0.05)
    f.run(3.0)
    a = _phase_trace(f, 20.0)
    probe = a[:, 1] == PROBE_BW
    refill = probe & (a[:, 2] == REFILL)
    starts = a[1:, 0][np.diff(refill.astype(int)) == 1]
    gaps = np.diff(starts)
    # a probe that stopped at inflight_hi without loss probes again a round later (the "reprobe" of
    # bbr2_adapt_upper_bounds); every other one waits 2-3 s (+ a ProbeRTT that may fall in between)
    timed = gaps[gaps > 0.2]
    assert len(timed) >= 3
    assert np.all(timed >= 2.0 - 0.01) and np.all(timed <= 3.0 + 0.3)
    assert np.all(gaps[gaps <= 0.2] <= 2.5 * f.base)
    assert np.isfinite(a[-1, 3])  # inflight_hi was set by a probe's loss
    cruise = probe & (a[:, 2] == CRUISE)
    assert np.all(a[cruise, 4] <= 0.85 * a[cruise, 3] + 2 * MSS)  # bbr2_inflight_with_headroom


def test_bbr2_loss_in_up_sets_inflight_hi_at_the_lossy_inflight_and_drains():
    # bbr2_handle_inflight_too_high: inflight_hi = max(inflight, beta x target); then DOWN
    f = OneFlow(2, buf=0.05 * 12.5e6 * 0.05)
    seen = []
    f.run(12.0, watch=lambda o: seen.append((o.get(L.S_CIDX), o.get(L.S_MODE), o.get(L.S_IHI), o.q)))
    a = np.array(seen)
    up_to_down = np.where((a[:-1, 0] == UP) & (a[1:, 0] == DOWN) & (a[1:, 1] == PROBE_BW))[0]
    assert len(up_to_down) >= 1
    bdp = f.cap * f.base
    ihi = a[up_to_down + 1, 2]
    # the fluid's inflight counts the sending rate over the base RTT: at the 1.25 gain, 1.25 BDP + queue
    assert np.all(ihi >= 0.7 * bdp) and np.all(ihi <= 1.25 * bdp + f.buf + 8 * MSS)


def test_bbr2_loss_rate_stays_near_its_threshold():
    # the 2 % loss threshold bounds what a lone flow loses, where v1 loses far more
    lost = {}
    for v in (1, 2):
        f = OneFlow(v, buf=0.05 * 12.5e6 * 0.05)
        f.run(5.0)
        l0 = f.lost
        f.run(20.0)
        lost[v] = (f.lost - l0) / (20.0 * f.cap)
    assert lost[2] < 0.02
    assert lost[2] < lost[1]


def test_bbr2_probe_rtt_every_5s_at_half_the_bdp():
    # bbr_update_min_rtt (v2): bbr_probe_rtt_win_ms = 5 s, bbr_probe_rtt_cwnd_gain = 0.5
    f = OneFlow(2, buf=10e6, creep=1e-4)
    f.run(2.0)
    seen = []
    f.run(16.0, watch=lambda o: seen.append((o.t, o.get(L.S_MODE), o.get(L.S_CWND))))
    a = np.array(seen)
    in_prtt = a[:, 1] == PROBE_RTT
    starts = a[1:, 0][np.diff(in_prtt.astype(int)) == 1]
    assert len(starts) >= 2 and np.all(np.diff(starts) < 6.0)
    assert a[in_prtt, 2].min() == pytest.approx(0.5 * f.cap * f.base, rel=0.1)
