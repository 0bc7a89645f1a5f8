"""BBR v1 in the fluid kernel, read against Linux's ``net/ipv4/tcp_bbr.c``.

Source: torvalds/linux ``net/ipv4/tcp_bbr.c`` (commit 02dc96ef), cited by
function name below; the kernel of the netns testbed runs the same code and
is the arbiter (reports/fidelity). ``bbr1_update`` is ``bbr_main`` per fluid
sub-step, in its order: the bandwidth model (``bbr_update_bw``), the ProbeBW
gain cycle (``bbr_update_cycle_phase``), the full-pipe check and Drain
(``bbr_check_full_bw_reached``, ``bbr_check_drain``), the min RTT and
ProbeRTT (``bbr_update_min_rtt``), the gains (``bbr_update_gains``), then the
pacing rate and cwnd (``bbr_set_pacing_rate``, ``bbr_set_cwnd``).

The fluid counterparts of the kernel's per-ACK inputs (ours): a round is one
current RTT of the flow; ``inflight`` is the flow's bytes in the network now
(sending rate x base RTT + its queued bytes); ``lost`` its bytes dropped in
the sub-step, reported when dropped. Not modelled: ACK aggregation
(``bbr_update_ack_aggregation``: the fluid has no ACK trains), idle restarts
(the flows here never idle) and the long-term "policer" bandwidth
(``bbr_lt_bw_sampling``), which needs two 4-16 round intervals with a loss
rate of 20 % or more and the same delivery rate.
"""

from __future__ import annotations

import math

from numba import njit

from .common import _FM, _NSLOTS, _PROBE_GAINS, DRAIN, INF, PROBE_BW, PROBE_RTT, STARTUP, _rand
from .constants import (
    BBR_CWND_GAIN,
    BBR_CYCLE_RAND,
    BBR_DRAIN_GAIN,
    BBR_FULL_BW_ROUNDS,
    BBR_FULL_BW_THRESH,
    BBR_HIGH_GAIN,
    BBR_MIN_CWND,
    BBR_MIN_RTT_WINDOW,
    BBR_MIN_TSO_SEGS,
    BBR_PACING_MARGIN,
    BBR_PACING_SHIFT_TIME,
    BBR_PROBE_RTT_CWND,
    BBR_PROBE_RTT_TIME,
    BBR_TSO_BUDGET_SKBS,
    MSS,
)
from .layout import (
    S_BW,
    S_BWHI_CUR,
    S_BWHI_PREV,
    S_BWLO,
    S_CIDX,
    S_CSTART,
    S_CWND,
    S_FULLBW,
    S_FULLCNT,
    S_FULLPIPE,
    S_GAIN,
    S_MINRTT,
    S_MINRTT_STAMP,
    S_MODE,
    S_PACE,
    S_PRIOR_MODE,
    S_PRTT_DONE,
    S_RDELIV,
    S_RLOST,
    S_ROUNDS,
    S_RSTART,
    S_SLOT0,
)

S1_PRIOR_CWND = S_PRIOR_MODE  # cwnd before ProbeRTT, restored after it (bbr->prior_cwnd)
# The phase samples (_phase_sample) keep their state in columns only BBRv2 uses otherwise; they are
# set when ProbeBW is entered and read only in ProbeBW.
S1_PHASE_DELIV = S_BWHI_CUR  # bytes delivered in the current gain-cycle phase
S1_PHASE_RATE = S_BWHI_PREV  # the previous phase's delivery rate
S1_PHASE_SAMPLE = S_BWLO  # the best phase sample of the current round, folded into its filter slot


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _inflight(s, f, bw, gain):
    """bbr_inflight: gain x BDP plus bbr_quantization_budget -- three TSO bursts of ~1 ms of the
    pacing rate (at least 2 segments each), rounded up to an even packet count, +2 packets in the
    1.25 phase."""
    segs = max(math.floor(s[S_PACE, f] * BBR_PACING_SHIFT_TIME / MSS), BBR_MIN_TSO_SEGS)
    pkts = math.ceil(gain * bw * s[S_MINRTT, f] / MSS) + BBR_TSO_BUDGET_SKBS * segs
    pkts = 2.0 * math.ceil(0.5 * pkts)
    if int(s[S_MODE, f]) == PROBE_BW and int(s[S_CIDX, f]) == 0:
        pkts += 2.0
    return pkts * MSS


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _enter_probe_bw(s, f, t, rng, b):
    """bbr_reset_probe_bw_mode: a random phase of the gain cycle, never the draining 0.75 one."""
    s[S_MODE, f] = PROBE_BW
    s[S_CSTART, f] = t
    idx = 7 - int(_rand(rng, b) * BBR_CYCLE_RAND)  # CYCLE_LEN - 1 - prandom_u32_max(7), then advance
    s[S_CIDX, f] = (idx + 1) % 8
    s[S1_PHASE_DELIV, f] = 0.0
    s[S1_PHASE_RATE, f] = s[S_BW, f]
    s[S1_PHASE_SAMPLE, f] = 0.0


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _phase_sample(s, f, t, rtt):
    """A gain-cycle phase ended: the delivery rate an ACK at its end reports (ours, after tcp_rate.c).

    The kernel samples the delivery rate per ACK, over the packet's flight: what was delivered in
    the last RTT (tcp_rate_gen). The sample of the probe's last packet covers the probe (a min RTT
    of sending at 1.25) and the RTT - min RTT before it, and the max filter keeps it. A fluid round
    starting anywhere would mix the probe with the 0.75 phase after it, and a flow whose RTT is
    mostly queue (10 ms base, 5 ms queue) could then never see its probe. So: at each phase end,
    (delivered in the phase + the previous phase's rate x the rest of an RTT) / RTT.
    """
    el = t - s[S_CSTART, f]
    if el <= 0.0:
        return
    d = s[S1_PHASE_DELIV, f]
    box = (d + s[S1_PHASE_RATE, f] * max(rtt - el, 0.0)) / max(rtt, el)
    s[S1_PHASE_SAMPLE, f] = max(s[S1_PHASE_SAMPLE, f], box)
    s[S1_PHASE_RATE, f] = d / el
    s[S1_PHASE_DELIV, f] = 0.0


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _app_limited(s, f, t):
    """In ProbeRTT, or within one RTT after it (``S_PRTT_DONE`` then holds when that ends)."""
    return int(s[S_MODE, f]) == PROBE_RTT or (s[S_PRTT_DONE, f] < INF and t < s[S_PRTT_DONE, f])


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _update_bw(s, f, t, rtt):
    """bbr_update_bw: at the end of a round, its delivery rate into the 10-round max filter;
    bbr_check_full_bw_reached: three rounds without 25 % growth end Startup."""
    el = t - s[S_RSTART, f]
    if el < rtt or el <= 0.0:
        return
    sample = s[S_RDELIV, f] / el
    if int(s[S_MODE, f]) == PROBE_BW:
        sample = max(sample, s[S1_PHASE_SAMPLE, f])
        s[S1_PHASE_SAMPLE, f] = 0.0
    s[S_ROUNDS, f] += 1.0
    slot = S_SLOT0 + int(s[S_ROUNDS, f]) % _NSLOTS
    # ProbeRTT marks the flow app-limited until what it sent then is delivered (bbr_update_min_rtt:
    # tp->app_limited); such samples enter the filter only if they beat it, and the estimate holds
    if _app_limited(s, f, t) and sample < s[S_BW, f]:
        s[slot, f] = 0.0
    else:
        s[slot, f] = sample
        bw = 0.0
        for j in range(_NSLOTS):
            bw = max(bw, s[S_SLOT0 + j, f])
        s[S_BW, f] = max(bw, MSS / s[S_MINRTT, f])
    if s[S_FULLPIPE, f] == 0.0:
        if s[S_BW, f] >= s[S_FULLBW, f] * BBR_FULL_BW_THRESH:
            s[S_FULLBW, f] = s[S_BW, f]
            s[S_FULLCNT, f] = 0.0
        else:
            s[S_FULLCNT, f] += 1.0
            if s[S_FULLCNT, f] >= BBR_FULL_BW_ROUNDS:
                s[S_FULLPIPE, f] = 1.0
    s[S_RSTART, f] = t
    s[S_RDELIV, f] = 0.0
    s[S_RLOST, f] = 0.0


@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _update_cycle_phase(s, f, t, lost, rtt, inflight):
    """bbr_is_next_cycle_phase / bbr_advance_cycle_phase: each phase lasts a min RTT; the 1.25 phase
    also until inflight reaches 1.25 BDP or a loss, the 0.75 phase at most until inflight <= BDP."""
    if int(s[S_MODE, f]) != PROBE_BW:
        return
    idx = int(s[S_CIDX, f])
    full_length = t - s[S_CSTART, f] > s[S_MINRTT, f]
    gain = _PROBE_GAINS[idx]
    bw = s[S_BW, f]
    if gain > 1.0:
        adv = full_length and (lost > 0.0 or inflight >= _inflight(s, f, bw, gain))
    elif gain < 1.0:
        adv = full_length or inflight <= _inflight(s, f, bw, 1.0)
    else:
        adv = full_length
    if adv:
        _phase_sample(s, f, t, rtt)
        s[S_CIDX, f] = (idx + 1) % 8
        s[S_CSTART, f] = t


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _update_min_rtt(s, f, t, rtt, inflight, rng, b):
    """bbr_update_min_rtt: when no RTT sample matched the minimum for 10 s, ProbeRTT holds cwnd at
    4 packets for 200 ms and one round after inflight got there (bbr_check_probe_rtt_done)."""
    expired = t > s[S_MINRTT_STAMP, f] + BBR_MIN_RTT_WINDOW
    if rtt <= s[S_MINRTT, f] or expired:
        s[S_MINRTT, f] = rtt
        s[S_MINRTT_STAMP, f] = t
    mode = int(s[S_MODE, f])
    if expired and mode != PROBE_RTT:
        s[S_MODE, f] = PROBE_RTT
        s[S1_PRIOR_CWND, f] = s[S_CWND, f]  # bbr_save_cwnd
        s[S_PRTT_DONE, f] = INF
        return
    if mode != PROBE_RTT:
        return
    if s[S_PRTT_DONE, f] == INF:
        if inflight <= BBR_PROBE_RTT_CWND:
            s[S_PRTT_DONE, f] = t + max(BBR_PROBE_RTT_TIME, rtt)
    elif t >= s[S_PRTT_DONE, f]:
        s[S_MINRTT_STAMP, f] = t
        s[S_CWND, f] = max(s[S_CWND, f], s[S1_PRIOR_CWND, f])
        s[S_PRTT_DONE, f] = t + rtt  # its packets are delivered a round later: app-limited until then
        if s[S_FULLPIPE, f] > 0.0:
            _enter_probe_bw(s, f, t, rng, b)
        else:
            s[S_MODE, f] = STARTUP


@njit(cache=True, error_model="numpy", fastmath=_FM)
def _set_outputs(s, f, acked, lost):
    """bbr_update_gains, bbr_set_pacing_rate (1 % below gain x bw; Startup never lowers it) and
    bbr_set_cwnd (towards cwnd_gain x BDP + budget by the bytes acked, less those lost)."""
    mode = int(s[S_MODE, f])
    if mode == STARTUP:
        gain, cwnd_gain = BBR_HIGH_GAIN, BBR_HIGH_GAIN
    elif mode == DRAIN:
        gain, cwnd_gain = BBR_DRAIN_GAIN, BBR_HIGH_GAIN
    elif mode == PROBE_RTT:
        gain, cwnd_gain = 1.0, 1.0
    else:
        gain, cwnd_gain = _PROBE_GAINS[int(s[S_CIDX, f])], BBR_CWND_GAIN
    s[S_GAIN, f] = gain
    full = s[S_FULLPIPE, f] > 0.0
    rate = gain * s[S_BW, f] * (1.0 - BBR_PACING_MARGIN)
    if full or rate > s[S_PACE, f]:
        s[S_PACE, f] = rate
    target = _inflight(s, f, s[S_BW, f], cwnd_gain)
    cwnd = max(s[S_CWND, f] - lost, MSS)  # bbr_set_cwnd_to_recover_or_restore: rs->losses
    if full:
        cwnd = min(cwnd + acked, target)
    elif cwnd < target:
        cwnd += acked
    cwnd = max(cwnd, BBR_MIN_CWND)
    if mode == PROBE_RTT:
        cwnd = min(cwnd, BBR_PROBE_RTT_CWND)
    s[S_CWND, f] = cwnd


@njit(cache=True, error_model="numpy", fastmath=_FM)
def bbr1_update(s, f, t, acked, lost, rtt, inflight, rng, b):
    """One sub-step of BBR v1 for flow f (``bbr_main``): ``acked``/``lost`` bytes in it, ``rtt`` the
    flow's current RTT, ``inflight`` its bytes in the network."""
    s[S_RDELIV, f] += acked
    s[S_RLOST, f] += lost
    if s[S_MINRTT, f] == INF:
        s[S_MINRTT, f] = rtt
    if int(s[S_MODE, f]) == PROBE_BW:
        s[S1_PHASE_DELIV, f] += acked
    _update_bw(s, f, t, rtt)
    _update_cycle_phase(s, f, t, lost, rtt, inflight)
    mode = int(s[S_MODE, f])
    if mode == STARTUP and s[S_FULLPIPE, f] > 0.0:
        s[S_MODE, f] = DRAIN  # bbr_check_drain
        mode = DRAIN
    if mode == DRAIN and inflight <= _inflight(s, f, s[S_BW, f], 1.0):
        _enter_probe_bw(s, f, t, rng, b)
    _update_min_rtt(s, f, t, rtt, inflight, rng, b)
    _set_outputs(s, f, acked, lost)
