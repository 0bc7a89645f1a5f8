"""RTT of the software data plane (SEQ/eACK, JENKS 3.1): accuracy, delayed ACKs,
retransmissions (no false samples), SEQ wrap-around, handshake."""

from __future__ import annotations

import numpy as np
import pytest

from scidmz.telemetry import constants as C
from scidmz.telemetry.collector import Collector
from scidmz.telemetry.sources.pcap import read_capture
from scidmz.telemetry.sources.synth import Taps, frame
from scidmz.telemetry.twin.dataplane import SoftwareDataPlane, merge_taps

MS = 1_000_000
T0 = 1_700_000_000 * 1_000_000_000
MSS = 1448
SND, DTN, RMT = "10.0.0.10", "10.0.3.2", "10.1.0.20"


def run(taps: Taps, tmp_path, name: str = "t") -> tuple[SoftwareDataPlane, np.ndarray, Collector]:
    eg, _ = taps.write(tmp_path, name)
    cap = read_capture(eg, tap=C.TAP_EGRESS)
    assert cap.drops == {}
    dp = SoftwareDataPlane()
    col = Collector(dp)
    dp.process(cap.packets)
    col.sample()
    rtt = col.last_rtt_digests
    return dp, rtt, col


def data(taps, t, src, dst, sport, seq, n=MSS, flags="PA", dport=5201):
    taps.add(C.TAP_EGRESS, t, frame(src, dst, sport, dport, seq=seq, ack=1, flags=flags, payload=n))


def ack(taps, t, src, dst, sport, a, dport=5201, flags="A"):
    taps.add(C.TAP_EGRESS, t, frame(dst, src, dport, sport, seq=1, ack=a, flags=flags))


@pytest.mark.parametrize("dst", [DTN, RMT])
def test_rtt_within_one_percent_for_several_delays(tmp_path, dst):
    delays = [1, 10, 50, 100, 200]
    taps = Taps()
    for j, d in enumerate(delays):
        sport = 40000 + j
        seq = 1000 * (j + 1)
        taps.add(C.TAP_EGRESS, T0, frame(SND, dst, sport, 5201, seq=seq - 1, flags="S"))
        taps.add(C.TAP_EGRESS, T0 + d * MS, frame(dst, SND, 5201, sport, seq=7, ack=seq, flags="SA"))
        for k in range(40):
            t = T0 + d * MS + (k + 1) * 3 * MS
            data(taps, t, SND, dst, sport, seq)
            seq += MSS
            ack(taps, t + d * MS, SND, dst, sport, seq)
    dp, rtt, col = run(taps, tmp_path)
    st = dp.stats_dict()
    assert st["rtt_samples"] == len(delays) * 41  # 40 segments + the SYN
    for j, d in enumerate(delays):
        r = rtt["rtt"][rtt["src_port"] == 40000 + j] * 1e-6
        assert r.size == 41
        np.testing.assert_allclose(r, d * 1e-3, rtol=0.01)
    df = col.flows()
    assert len(df) == len(delays)
    for j, d in enumerate(delays):
        row = df[df["sport"] == 40000 + j].iloc[0]
        assert row["rtt"] == pytest.approx(d * 1e-3, rel=0.01)
        assert row["cls"] == ("dtn" if dst == DTN else "campus")


def test_delayed_acks_covering_two_segments(tmp_path):
    d = 25
    taps = Taps()
    seq = 5000
    for k in range(30):
        t = T0 + k * 2 * MS
        data(taps, t, SND, RMT, 41000, seq)
        seq += MSS
        if k % 2 == 1:  # one ACK for two segments, D after the second
            ack(taps, t + d * MS, SND, RMT, 41000, seq)
    dp, rtt, _ = run(taps, tmp_path)
    assert rtt.size == 15
    np.testing.assert_allclose(rtt["rtt"] * 1e-6, d * 1e-3, rtol=0.01)
    assert dp.stats_dict()["rtt_rejected_expired"] == 0


def test_retransmission_and_loss_recovery_give_no_false_sample(tmp_path):
    d = 20
    taps = Taps()
    seq0 = 10_000
    eacks = [seq0 + (k + 1) * MSS for k in range(10)]
    # Segments 0..9 leave 1 ms apart; segment 5 is lost after the tap.
    for k in range(10):
        data(taps, T0 + k * MS, SND, RMT, 42000, seq0 + k * MSS)
    for k in range(5):
        ack(taps, T0 + k * MS + d * MS, SND, RMT, 42000, eacks[k])
    for k in range(6, 10):  # duplicate ACKs for the hole
        ack(taps, T0 + k * MS + d * MS, SND, RMT, 42000, eacks[4])
    tr = T0 + 40 * MS  # fast retransmit of segment 5
    data(taps, tr, SND, RMT, 42000, seq0 + 5 * MSS)
    ack(taps, tr + d * MS, SND, RMT, 42000, eacks[9])  # cumulative: ambiguous, must not sample
    # A timeout-style retransmission of a segment whose ACK is still pending.
    seq = seq0 + 10 * MSS
    t = tr + 30 * MS
    data(taps, t, SND, RMT, 42000, seq)
    data(taps, t + 5 * MS, SND, RMT, 42000, seq)  # same eACK again
    ack(taps, t + 5 * MS + d * MS, SND, RMT, 42000, seq + MSS)
    seq += MSS
    # Fresh data after recovery is measured again.
    t += 100 * MS
    for k in range(5):
        data(taps, t + k * MS, SND, RMT, 42000, seq)
        seq += MSS
        ack(taps, t + k * MS + d * MS, SND, RMT, 42000, seq)
    dp, rtt, _ = run(taps, tmp_path)
    st = dp.stats_dict()
    np.testing.assert_allclose(rtt["rtt"] * 1e-6, d * 1e-3, rtol=0.01)  # no inflated sample
    assert rtt.size == 10  # 5 before the loss + 5 after recovery
    assert st["rtt_rejected_retx"] == 2
    assert st["rtt_retx_flow"] == 2


def test_retransmission_seen_twice_without_flow_state_is_poisoned(tmp_path):
    # The multi-stage table alone rejects it (the per-flow state is bypassed by
    # sending only the retransmitted pair of one eACK on a fresh flow).
    taps = Taps()
    data(taps, T0, SND, RMT, 43000, 1)
    data(taps, T0 + 3 * MS, SND, RMT, 43000, 1)
    ack(taps, T0 + 10 * MS, SND, RMT, 43000, 1 + MSS)
    dp, rtt, _ = run(taps, tmp_path)
    assert rtt.size == 0
    assert dp.stats_dict()["rtt_rejected_retx"] == 1


def test_sequence_wraparound(tmp_path):
    d = 7
    taps = Taps()
    seq = (1 << 32) - 6 * MSS + 17
    for k in range(20):
        t = T0 + k * MS
        data(taps, t, SND, DTN, 44000, seq & 0xFFFFFFFF)
        seq += MSS
        ack(taps, t + d * MS, SND, DTN, 44000, seq & 0xFFFFFFFF)
    dp, rtt, col = run(taps, tmp_path)
    assert rtt.size == 20
    np.testing.assert_allclose(rtt["rtt"] * 1e-6, d * 1e-3, rtol=0.01)
    assert dp.stats_dict()["rtt_retx_flow"] == 0


def test_pure_acks_and_unmatched_acks_make_no_samples(tmp_path):
    taps = Taps()
    for k in range(10):
        t = T0 + k * MS
        data(taps, t, SND, RMT, 45000, 100, n=0, flags="A")  # pure ACKs are not stored
        ack(taps, t + MS, SND, RMT, 45000, 100)
        ack(taps, t + MS, SND, RMT, 45000, 99_999)
    dp, rtt, _ = run(taps, tmp_path)
    assert rtt.size == 0
    assert dp.stats_dict()["rtt_stored"] == 0


def test_expired_entries_give_no_sample(tmp_path):
    taps = Taps()
    data(taps, T0, SND, RMT, 46000, 1)
    ack(taps, T0 + C.RTT_TIMEOUT_US * 1000 + 5 * MS, SND, RMT, 46000, 1 + MSS)
    dp, rtt, _ = run(taps, tmp_path)
    assert rtt.size == 0
    assert dp.stats_dict()["rtt_rejected_expired"] == 1


@pytest.mark.parametrize("isn", [1_000, 3_000_000_000])
def test_ingress_rtt_tap_samples_flows_whose_sequence_numbers_are_in_the_upper_half(tmp_path, isn):
    """The netns testbed's setup: RTT matched at the ingress tap, flow table kept at the egress tap.

    The egress tap creates the flow slot with no eACK seen yet. The eACK check used to compare
    against 0 there, so a flow whose ISN was >= 2^31 (half of all flows) looked like one long
    retransmission and never gave an RTT sample (3 campus flows all in the upper half: the
    intermittent all-zero campus RTT of tests/test_netns_testbed.py).
    """
    taps = Taps()
    seq = isn
    for k in range(30):
        t = T0 + k * 2 * MS
        seg = frame(SND, RMT, 40001, 5201, seq=seq, ack=1, flags="PA", payload=MSS)
        taps.add(C.TAP_INGRESS, t, seg)
        taps.add(C.TAP_EGRESS, t + 1 * MS, seg)  # after a 1 ms queue
        seq = (seq + MSS) & 0xFFFFFFFF
        taps.add(C.TAP_INGRESS, t + 10 * MS, frame(RMT, SND, 5201, 40001, seq=1, ack=seq, flags="A"))
    eg, ing = taps.write(tmp_path, "up")
    dp = SoftwareDataPlane(rtt_tap=C.TAP_INGRESS)
    col = Collector(dp)
    dp.process(merge_taps(read_capture(ing, tap=C.TAP_INGRESS).packets, read_capture(eg, tap=C.TAP_EGRESS).packets))
    col.sample()
    r = col.last_rtt_digests["rtt"] * 1e-6
    assert dp.stats_dict()["rtt_retx_flow"] == 0
    assert r.size == 30 and np.allclose(r, 0.010, rtol=0.01)
