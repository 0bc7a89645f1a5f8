"""Every constant of the fluid model, in one place (a later issue validates them against kernel TCP).

Units are SI (bytes, seconds, bit/s) unless a name says otherwise. The
kernel (``kernel.py``) reads these as compile-time constants; its numba
cache is keyed on this file's content too, so changing one recompiles the
kernel on its next use (about a minute).

Sources:
- CUBIC: RFC 8312 / RFC 9438 and Linux ``tcp_cubic.c`` (C = 0.4, beta = 0.7,
  fast convergence, TCP-friendly region, HyStart delay exit).
- Reno/AIMD: RFC 5681 (slow start, +1 MSS per RTT, halve on loss).
- BBRv1: Cardwell et al., "BBR: Congestion-Based Congestion Control" (ACM
  Queue 2016) and Linux ``tcp_bbr.c``; the fluid abstraction (round-based
  max-filter, cwnd cap 2 x BDP, 8-phase gain cycle, ProbeRTT) follows the
  BBR fluid model of Scherrer et al., "Model-Based Insights on the
  Performance, Fairness, and Stability of BBR", IMC 2022.
- BBRv2: IETF ICCRG draft-cardwell-iccrg-bbr-congestion-control-02 and the
  v2alpha Linux code (loss threshold 2 %, beta 0.7, headroom 15 %,
  DOWN/CRUISE/REFILL/UP cycle of 2-3 s, ProbeRTT every 5 s); again the
  abstraction of Scherrer et al. section 3.
- TBF: Linux ``sch_tbf`` (limit = rate x latency + burst).
"""

from __future__ import annotations

# -- packets -------------------------------------------------------------------
# The model's byte unit is the Ethernet frame byte (ARCHITECTURE.md: rates are
# frame bytes, 14-byte header + IP packet; B_max is a frame rate as tc's TBF
# and the P4 counters count it). A full segment carries MSS_PAYLOAD bytes of
# data in a FRAME_BYTES frame; windows grow and shrink in whole segments, so
# the kernel's "MSS" is the segment's frame size, and transfer sizes (payload,
# what an application moves) are converted with WIRE_PER_PAYLOAD when a
# scenario is loaded into the arrays (plant.py). Counting payload against a
# frame-rate link, as this model did before issue 9, made every transfer
# 4.6 % faster than on a real link (10 GB at 500 Mbit/s: 160.0 s instead of 167.3 s).
MSS_PAYLOAD = 1448.0  # 1500 MTU - 52 B of TCP/IP headers with timestamps
FRAME_BYTES = 1514.0  # MSS_PAYLOAD + 52 B TCP/IP headers + 14 B Ethernet header
MSS = FRAME_BYTES  # one segment, in the model's (frame) bytes
WIRE_PER_PAYLOAD = FRAME_BYTES / MSS_PAYLOAD
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
# and treats every further drop until one RTT after its reaction as the same
# congestion event (fast recovery).
LOSS_FEEDBACK_RTTS = 1.0
# Drops hit flows as packets: a flow that lost d bytes in a sub-step sees a
# loss event with probability 1 - exp(-d / MSS) (Poisson thinning keeps the
# expected number of lost packets right and de-synchronises the flows).

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

# -- BBRv1 ---------------------------------------------------------------------
BBR_HIGH_GAIN = 2.885  # 2 / ln 2, startup pacing and cwnd gain
BBR_DRAIN_GAIN = 1.0 / 2.885
BBR_CWND_GAIN = 2.0
BBR_PROBE_GAINS = (1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)  # one phase per min RTT
BBR_PROBE_UP_MAX_RTTS = 2.0  # the 1.25 phase waits for 1.25 BDP inflight or a loss, at most this many min RTTs
BBR_BW_WINDOW_ROUNDS = 10  # max-filter window of the bottleneck bandwidth estimate
BBR_FULL_BW_THRESH = 1.25  # startup ends after 3 rounds growing < 25 %
BBR_FULL_BW_ROUNDS = 3
BBR_MIN_RTT_WINDOW = 10.0  # s; min RTT expiry -> ProbeRTT
BBR_PROBE_RTT_TIME = 0.200  # s at the ProbeRTT cwnd
BBR_PROBE_RTT_CWND = 4.0 * MSS
BBR_MIN_CWND = 4.0 * MSS

# -- BBRv2 ---------------------------------------------------------------------
BBR2_STARTUP_GAIN = 2.77  # v2 startup pacing gain (cwnd gain 2)
BBR2_DRAIN_GAIN = 0.35
BBR2_CWND_GAIN = 2.0
BBR2_UP_GAIN = 1.25
BBR2_UP_CNT_MAX = 1024.0  # packets: cap of the doubling inflight_hi growth per round in UP
BBR2_DOWN_GAIN = 0.75
BBR2_LOSS_THRESH = 0.02  # loss rate per round that marks inflight as too high
BBR2_BETA = 0.7  # multiplicative cut of inflight_hi / bw_lo / inflight_lo on loss
BBR2_HEADROOM = 0.15  # cruise below (1 - headroom) x inflight_hi to leave room for others
BBR2_PROBE_WAIT_BASE = 2.0  # s; bandwidth probes every 2 + U(0, 1) s ...
BBR2_PROBE_WAIT_RAND = 1.0
BBR2_PROBE_MAX_ROUNDS = 63.0  # ... or after min(BDP in packets, 63) rounds (Reno coexistence)
BBR2_STARTUP_FULL_LOSS_MIN = 8.0 * MSS  # startup exits on loss only after >= 8 packets lost in a round
BBR2_MIN_RTT_WINDOW = 5.0  # s between ProbeRTTs
BBR2_PROBE_RTT_TIME = 0.200
BBR2_PROBE_RTT_CWND_GAIN = 0.5  # ProbeRTT cwnd = 0.5 x BDP
BBR2_PACING_MARGIN = 0.01  # pace at 99 % of the estimate

# -- token-bucket shaper (campus egress, S1-eth1) --------------------------------
# When the scenario gives no burst, tc's minimum is used: one kernel timer tick
# at HZ = 250 worth of tokens, never less than TBF_MIN_BURST_PKTS packets.
TBF_BURST_TIME = 0.004
TBF_MIN_BURST_PKTS = 10.0

# -- packet-level noise at the bottleneck (issue 9) ----------------------------------
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
# FluidPlant(packet_noise=False), is the deterministic fluid queue.
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
# A flow is "active" in a period if it delivered at least this many bytes
# (Algorithm 7's packet-count threshold C.TH of 10 packets).
ACTIVE_BYTES = 10.0 * MSS
# Algorithm 4 smooths the campus RTT across periods: RTT <- a RTT + (1 - a) mean.
RTT_CAMPUS_ALPHA = 0.5

# -- codes shared by the builder and the kernel -------------------------------------
# minloss: FFS's rate-feedback sender (Wyss et al. section IX): paces at the rate indicator the
# FFS node wrote into its packets, learned one RTT later; fluid plant only (FluidPlant.set_ccas).
CCA_CODES = {"reno": 0, "cubic": 1, "bbr": 2, "bbr2": 3, "udp": 4, "minloss": 5}
CLASS_DTN, CLASS_CAMPUS, CLASS_SHORT = 0, 1, 2
CLASS_NAMES = ("dtn", "campus", "short")
