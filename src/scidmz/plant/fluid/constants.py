"""Every constant of the fluid model, in one place (a later issue validates them against kernel TCP).

Units are SI (bytes, seconds, bit/s) unless a name says otherwise. The
kernel (``kernel.py``) reads these as compile-time constants; its numba
cache is keyed on this file's content too (and on ``units.py`` and
``state.py``, where the wire facts and y's constants come from), so
changing one recompiles the kernel on its next use (about a minute).

Sources:
- CUBIC: RFC 8312 / RFC 9438 and Linux ``tcp_cubic.c`` (C = 0.4, beta = 0.7,
  fast convergence, TCP-friendly region, HyStart delay exit).
- Reno/AIMD: RFC 5681 (slow start, +1 MSS per RTT, halve on loss).
- BBRv1: Linux ``tcp_bbr.c`` (Cardwell et al., "BBR: Congestion-Based
  Congestion Control", ACM Queue 2016), each constant with the kernel name it
  comes from; the round-based fluid abstraction follows Scherrer et al.,
  "Model-Based Insights on the Performance, Fairness, and Stability of BBR",
  IMC 2022, section 3.
- BBRv2: Google's v2alpha Linux code ``tcp_bbr2.c`` and the IETF draft that
  continues it (draft-ietf-ccwg-bbr), each constant with its name/section.
- TBF: Linux ``sch_tbf`` (limit = rate x latency + burst).
"""

from __future__ import annotations

# Wire facts and y's own constants are defined below every plant (scidmz.units, scidmz.state)
# and re-exported here under the kernel's names.
from ...state import ACTIVE_BYTES as ACTIVE_BYTES
from ...state import RTT_CAMPUS_ALPHA as RTT_CAMPUS_ALPHA
from ...units import FRAME_BYTES as FRAME_BYTES
from ...units import MSS as MSS
from ...units import MSS_PAYLOAD as MSS_PAYLOAD
from ...units import WIRE_PER_PAYLOAD as WIRE_PER_PAYLOAD

# -- packets -------------------------------------------------------------------
# The model's byte unit is the Ethernet frame byte (ARCHITECTURE.md: rates are
# frame bytes, 14-byte header + IP packet; B_max is a frame rate as tc's TBF
# and the P4 counters count it). A full segment carries MSS_PAYLOAD bytes of
# data in a FRAME_BYTES frame; windows grow and shrink in whole segments, so
# the kernel's "MSS" is the segment's frame size, and transfer sizes (payload,
# what an application moves) are converted with WIRE_PER_PAYLOAD when a
# scenario is loaded into the arrays (plant.py). Counting payload against a
# frame-rate link, as this model once did, made every transfer
# 4.6 % faster than on a real link (10 GB at 500 Mbit/s: 160.0 s instead of 167.3 s).
# MSS_PAYLOAD = 1448, FRAME_BYTES = MSS = 1514, WIRE_PER_PAYLOAD: scidmz.units.

INIT_CWND = 10.0 * MSS  # RFC 6928 initial window
MIN_CWND = 2.0 * MSS  # floor after repeated losses (Linux never goes below 2 packets except RTO)
MAX_CWND = 256e6  # bytes; effectively unlimited (socket buffers are not modelled)
# Slow start: cwnd += SS_ACK_GAIN x acked. A fluid ACK clock without the
# one-RTT feedback delay grows cwnd by e per RTT; ln 2 restores the
# doubling per RTT of packet-level slow start.
SS_ACK_GAIN = 0.6931471805599453

# -- time discretisation ---------------------------------------------------------
# Adaptive sub-step: dt = (smallest RTT any active flow currently sees) / DT_RTT_DIVISOR,
# clipped to [DT_MIN, DT_MAX]. The RTT includes queueing, and a queue's delay can
# shrink by at most dt per sub-step, so the next step always re-adapts in time.
# With empty queues and the paper's 10 ms campus RTT this is 2 ms; with the
# standing queues of a loaded bottleneck it grows to DT_MAX (checked against a
# fixed 1 ms step in tests/test_fidelity.py).
DT_RTT_DIVISOR = 5.0
DT_MIN = 1e-4
DT_MAX = 10e-3

# -- loss detection ------------------------------------------------------------
# A flow notices a drop one (current) RTT after it happens (dup-ACKs / SACK)
# and treats every further drop until its reaction as the same congestion event
# (fast recovery covers what was outstanding when the loss was detected, RFC 6675:
# in the fluid a drop happens when its packet is sent, so a drop after the reaction
# is of a packet sent after it, a new event; when the event once
# lasted one RTT more, which halved the reductions a flow makes at high loss).
LOSS_FEEDBACK_RTTS = 1.0
# Drops hit flows as packets: a flow that lost d bytes in a sub-step sees a
# loss event with probability 1 - exp(-d / MSS) (Poisson thinning keeps the
# expected number of lost packets right and de-synchronises the flows).

# Small windows: Linux repairs a loss without a timer only if a packet sent after it is (S)ACKed
# (RACK). A flight lost whole (probability p^w per RTT at w packets and loss fraction p) gets no ACK:
# the flow waits for the tail-loss probe, 2 SRTT + TCP_TIMEOUT_MIN, or 2 SRTT + TCP_RTO_MIN with a
# single packet out (net/ipv4/tcp_output.c, tcp_schedule_loss_probe; in Open only), or in Recovery
# and after a timeout for the retransmission timeout, SRTT + TCP_RTO_MIN at least (tcp_input.c,
# tcp_set_rto: rttvar is floored at tcp_rto_min), doubled per lost retransmission. This is what holds
# CUBIC campus flows far below their shaper's rate next to BBR v1 DTNs, whose 15 % loss leaves them
# 1-5 packet windows and 0.5-1.4 RTOs per flow and second (reports/fidelity, kernel TCPTimeouts,
# and benchmarks/small_window_tcp.py, the packet-level check); cca._flight_lost.
TCP_RTO_MIN = 0.200  # s; include/net/tcp.h TCP_RTO_MIN = HZ / 5
TCP_TIMEOUT_MIN = 0.002  # s; include/net/tcp.h TCP_TIMEOUT_MIN_US

# -- Reno ----------------------------------------------------------------------
RENO_BETA = 0.5

# -- CUBIC ---------------------------------------------------------------------
CUBIC_C = 0.4  # packets / s^3
CUBIC_BETA = 0.7
CUBIC_FAST_CONVERGENCE = True
CUBIC_MAX_INCREASE_PER_ACK = 0.5  # Linux caps cnt >= 2: at most +0.5 packet per acked packet
CUBIC_TARGET_FLOOR_INCREASE = 0.01  # below target: +1 packet per 100 cwnd of ACKs
# HyStart (delay increase) slow-start exit, Linux defaults
HYSTART_LOW_WINDOW = 16.0 * MSS
HYSTART_DELAY_MIN = 0.004
HYSTART_DELAY_MAX = 0.016
HYSTART_DELAY_DIVISOR = 8.0

# -- BBR v1 (bbr1.py) ---------------------------------------------------------------
# Linux net/ipv4/tcp_bbr.c (torvalds/linux 02dc96ef; the testbed's kernel runs it), cited by the
# kernel's own names: line numbers move between kernel versions, the names have not since 4.9.
BBR_HIGH_GAIN = 2.885  # bbr_high_gain = 2885/1000: Startup pacing and cwnd gain (2/ln 2)
BBR_DRAIN_GAIN = 1.0 / 2.885  # bbr_drain_gain = 1000/2885
BBR_CWND_GAIN = 2.0  # bbr_cwnd_gain: ProbeBW's cwnd = 2 x BDP (+ bbr_quantization_budget)
BBR_PROBE_GAINS = (1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)  # bbr_pacing_gain[], CYCLE_LEN = 8 phases
BBR_CYCLE_RAND = 7  # bbr_cycle_rand: ProbeBW starts in a random phase, never the 0.75 one
BBR_BW_WINDOW_ROUNDS = 10  # bbr_bw_rtts = CYCLE_LEN + 2: max-filter window of the bandwidth, rounds
BBR_FULL_BW_THRESH = 1.25  # bbr_full_bw_thresh: Startup ends after 3 rounds growing < 25 % ...
BBR_FULL_BW_ROUNDS = 3  # ... bbr_full_bw_cnt
BBR_MIN_RTT_WINDOW = 10.0  # s; bbr_min_rtt_win_sec: min RTT expiry -> ProbeRTT
BBR_PROBE_RTT_TIME = 0.200  # s; bbr_probe_rtt_mode_ms, held at the ProbeRTT cwnd (and one round)
BBR_MIN_CWND = 4.0 * MSS  # bbr_cwnd_min_target = 4 packets
BBR_PROBE_RTT_CWND = BBR_MIN_CWND  # ProbeRTT's cwnd (bbr_set_cwnd: min(cwnd, bbr_cwnd_min_target))
BBR_PACING_MARGIN = 0.01  # bbr_pacing_margin_percent: pace 1 % below gain x bw
# bbr_quantization_budget: cwnd and the phase targets add 3 TSO bursts (bbr_tso_segs_goal: the pacing
# rate >> sk_pacing_shift = 10, i.e. 1/1024 s of it, at least bbr_min_tso_segs = 2 segments above
# 1.2 Mbit/s) and round up to an even packet count; +2 packets in the 1.25 phase.
BBR_TSO_BUDGET_SKBS = 3.0
BBR_PACING_SHIFT_TIME = 1.0 / 1024.0  # s
BBR_MIN_TSO_SEGS = 2.0

# -- BBRv2 (bbr2.py) ---------------------------------------------------------------------
# Google's v2alpha Linux code, net/ipv4/tcp_bbr2.c (github.com/google/bbr, branch v2alpha, 0487ade5),
# cited by its names; where the IETF draft that continues it (draft-ietf-ccwg-bbr, BBRv3) states the
# same value, its section is named too, and where v3 changed a value, the note says so. ECN off
# (bbr_ecn_enable = false), as v2alpha ships.
BBR2_STARTUP_GAIN = 2.885  # bbr_high_gain (as v1; the draft's v3 Startup paces at 4 ln 2 = 2.77)
BBR2_STARTUP_CWND_GAIN = 2.885  # bbr_startup_cwnd_gain (v3: 2)
BBR2_DRAIN_GAIN = 1.0 / 2.885  # bbr_drain_gain (v3: 0.5)
BBR2_CWND_GAIN = 2.0  # bbr_cwnd_gain (v3: 2.25 in ProbeBW_UP)
BBR2_UP_GAIN = 1.25  # bbr_pacing_gain[BBR_BW_PROBE_UP]; draft "ProbeBW_UP"
BBR2_DOWN_GAIN = 0.75  # bbr_pacing_gain[BBR_BW_PROBE_DOWN] (v3: 0.90, draft "ProbeBW_DOWN")
BBR2_PROBE_PIF_GAIN = 1.25  # bbr_bw_probe_pif_gain: UP ends once inflight >= 1.25 BDP (after a min RTT)
BBR2_LOSS_THRESH = 0.02  # bbr_loss_thresh; draft "Core Algorithm Design Parameters": LossThresh 2 %
BBR2_BETA = 0.7  # 1 - bbr_beta (0.3): cut of bw_lo/inflight_lo per lossy round; draft: Beta 0.7
BBR2_HEADROOM = 0.15  # bbr_inflight_headroom; draft: Headroom 0.15
BBR2_FULL_LOSS_CNT = 8  # bbr_full_loss_cnt: Startup exits on >= 8 losses in a round with > 2 % lost
# The time between bandwidth probes: 2 + U(0, 1) s (bbr_bw_probe_base_us, bbr_bw_probe_rand_us), or
# min(63, BDP in packets x bbr_bw_probe_reno_gain) rounds counted from U{0, 1}
# (bbr_bw_probe_max_rounds, bbr_bw_probe_rand_rounds), whichever comes first; draft "A
# Dual-Time-Scale Approach for Coexistence" (T_bbr, T_reno).
BBR2_PROBE_WAIT_BASE = 2.0
BBR2_PROBE_WAIT_RAND = 1.0
BBR2_PROBE_MAX_ROUNDS = 63.0
BBR2_PROBE_RAND_ROUNDS = 2.0
BBR2_PROBE_RENO_GAIN = 1.0
BBR2_PROBE_RTT_INTERVAL = 5.0  # s; bbr_probe_rtt_win_ms; draft "Parameters for Scheduling ProbeRTT"
BBR2_MIN_RTT_WINDOW = 10.0  # s; bbr_min_rtt_win_sec; draft: MinRTTFilterLen
BBR2_PROBE_RTT_TIME = 0.200  # s; bbr_probe_rtt_mode_ms; draft: ProbeRTTDuration
BBR2_PROBE_RTT_CWND_GAIN = 0.5  # bbr_probe_rtt_cwnd_gain: ProbeRTT cwnd = 0.5 BDP; draft: ProbeRTTCwndGain
BBR2_PACING_MARGIN = 0.01  # bbr_pacing_margin_percent

# -- token-bucket shaper (campus egress, S1-eth1) --------------------------------
# When the scenario gives no burst, tc's minimum is used: one kernel timer tick
# at HZ = 250 worth of tokens, never less than TBF_MIN_BURST_PKTS packets.
TBF_BURST_TIME = 0.004
TBF_MIN_BURST_PKTS = 10.0

# -- packet-level noise at the bottleneck ----------------------------------
# The fluid queue is a mean; a real K-frame FIFO random-walks around it, so the link idles
# although the mean demand is at capacity and drops although the mean queue is below the
# buffer (kernel.py, _packet_noise_excess: a reflected Brownian queue). Its variance per second
# is ARRIVAL_IDC x arrival rate x MSS: the index of dispersion of the frames arriving at the
# bottleneck, counted in windows of one fluid sub-step (2 ms with the 10 ms campus RTT), i.e.
# the variance the fluid's per-step mean averages away. Measured (ours) on the netns testbed
# (trivial TBF, 50 of 100 Mbit/s, tcpdump on BR1's two ingress ports, benchmarks/arrival_idc.py):
# CUBIC DTN 0.73 / 0.51 / 0.45 / 0.41 at 0.01 / 0.02 / 0.05 / 0.1 BDP (a first capture: 0.57 /
# 0.44 at 0.01 / 0.05), BBR DTN 0.47-0.55; their mean is 0.52. Poisson arrivals would give 1:
# ACK-clocked senders are smoother; at 20 ms and more TCP's own dynamics, which the fluid
# plant resolves, raise it again (reports/mlc/regime/README.md). The service of
# the bottleneck (a TBF at line rate) adds no variance. This is the default of a scenario's
# link.arrival_idc: the IDC is a property of the traffic mix (18 flows here, 10 of them through the
# campus shaper); the papers' few-flow experiments set 0 (docs/fluid_model.md). 0, or
# FluidPlant(packet_noise=False), is the deterministic fluid queue. It acts in every queue a policy
# makes (HTB leaves, the FIFO behind ABC or FFS; docs/fluid_model.md); paced flows add none.
ARRIVAL_IDC = 0.5
# The bottleneck's own token bucket (Scenario.link_burst_bytes) counts as buffer for the noise:
# tokens saved while the queue is empty let the next arrivals pass at once.

# -- flow completion ------------------------------------------------------------------
# A finite flow's last byte reaches the receiver this fraction of its base RTT
# after leaving the bottleneck (symmetric path: half the RTT is the way back).
FCT_ONE_WAY_FRACTION = 0.5

# -- traffic generation ----------------------------------------------------------
CAMPUS_START_JITTER = 1.0  # s; long campus flows start uniformly in [0, this)
DTN_START_JITTER = 0.010  # s; DTN streams start in [dtn.start, dtn.start + this)
SHORT_SLOTS_PER_SENDER = 64  # concurrent short flows per Weibull sender (more wait for a slot)

# -- passive measurements (the seven Table 3 variables) -----------------------------
# Part of y's definition, so defined in scidmz.state: a flow is "active" in a period if it
# delivered at least ACTIVE_BYTES (Algorithm 7's C_TH of 10 packets); Algorithm 4 smooths
# the campus RTT across periods: RTT <- a RTT + (1 - a) mean, a = RTT_CAMPUS_ALPHA (0.5).

# -- codes shared by the builder and the kernel -------------------------------------
# minloss: FFS's rate-feedback sender (Wyss et al. section IX): paces at the rate indicator the
# FFS node wrote into its packets, learned one RTT later; fluid plant only (FluidPlant.set_ccas).
CCA_CODES = {"reno": 0, "cubic": 1, "bbr": 2, "bbr2": 3, "udp": 4, "minloss": 5}
CLASS_DTN, CLASS_CAMPUS, CLASS_SHORT = 0, 1, 2
CLASS_NAMES = ("dtn", "campus", "short")
