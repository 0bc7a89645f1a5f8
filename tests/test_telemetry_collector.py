"""Collector + data plane end to end on synthetic tap captures: queuing delay,
per-class rates, active flows (open / C_TH / idle timeout / FIN), long flows,
TelemetrySource replay and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scidmz.cli import main
from scidmz.telemetry import constants as C
from scidmz.telemetry.sources.synth import Taps, frame
from scidmz.telemetry.twin.source import TelemetrySource

MS = 1_000_000
S = 1_000_000_000
T0 = 1_700_000_000 * S
SND, SND2, DTN, RMT = "10.0.0.10", "10.0.0.11", "10.0.3.2", "10.1.0.20"


def replay(taps: Taps, tmp_path, period: float = 1.0):
    eg, ing = taps.write(tmp_path)
    src = TelemetrySource.from_pcaps(str(eg), None if ing is None else str(ing), period=period)
    ys = list(src)
    return ys, src


@pytest.mark.parametrize("q_dtn_ms,q_campus_ms", [(0.5, 3.0), (5.0, 40.0), (120.0, 12.5)])
def test_queuing_delay_within_one_percent(tmp_path, q_dtn_ms, q_campus_ms):
    taps = Taps()
    seq = {DTN: 1, RMT: 1}
    for k in range(3000):  # 3 s, 1 packet/ms per class
        t = T0 + k * MS
        for dst, q in ((DTN, q_dtn_ms), (RMT, q_campus_ms)):
            fr = frame(SND, dst, 40000, 5201, seq=seq[dst], ack=1, flags="A", payload=1000, ip_id=k)
            seq[dst] += 1000
            taps.add(C.TAP_INGRESS, t, fr)
            taps.add(C.TAP_EGRESS, t + int(q * MS), fr)
    ys, src = replay(taps, tmp_path)
    assert len(ys) == 4
    for y in ys[1:3]:  # full periods in steady state
        assert y.qdelay_dtn == pytest.approx(q_dtn_ms * 1e-3, rel=0.01)
        assert y.qdelay_campus == pytest.approx(q_campus_ms * 1e-3, rel=0.01)
    st = src.stats()
    # Every egress packet either finds its ingress entry or was overwritten by
    # a colliding packet while queued (a hash table, as in the switch).
    assert st["qd_samples"] + st["qd_unmatched"] == 6000
    assert st["qd_unmatched"] == st["qd_overwritten"]
    assert st["qd_unmatched"] <= 6000 * 0.005


def test_rates_within_half_percent_of_bytes_written(tmp_path):
    rng = np.random.default_rng(7)
    taps = Taps()
    n = 20000
    ts = T0 + np.sort(rng.integers(0, 5 * S, n))
    cls = rng.integers(0, 3, n)  # 0 dtn, 1 campus, 2 unclassified (must not count)
    size = rng.integers(0, 1400, n)
    written = np.zeros((5, 3))
    for i in range(n):
        dst = (DTN, RMT, "192.168.9.9")[cls[i]]
        fr = frame(SND, dst, 40000 + cls[i], 80, seq=i * 2000, flags="PA", payload=int(size[i]))
        taps.add(C.TAP_EGRESS, int(ts[i]), fr)
        written[(ts[i] - ts[0]) // S, cls[i]] += len(fr)
    ys, src = replay(taps, tmp_path)
    assert len(ys) == 5
    for k, y in enumerate(ys):
        assert y.t == pytest.approx(k + 1.0)
        assert y.rate_dtn * 1.0 / 8 == pytest.approx(written[k, 0], rel=0.005)
        assert y.rate_campus * 1.0 / 8 == pytest.approx(written[k, 1], rel=0.005)
    assert src.stats()["unclassified"] == int((cls == 2).sum())


def test_rates_with_other_period_and_snaplen_cut_frames(tmp_path):
    from scidmz.telemetry.sources.pcap import write_pcap

    frames, ts, orig = [], [], []
    for k in range(4000):
        fr = frame(SND, RMT, 40000, 80, seq=k * 9000, flags="PA", payload=8948)  # jumbo, cut to 96 B
        frames.append(fr[:96])
        orig.append(len(fr))
        ts.append(T0 + k * MS // 2)  # 2000 packets per second
    eg = write_pcap(tmp_path / "eg.pcap", frames, ts, orig_len=orig)
    src = TelemetrySource.from_pcaps(str(eg), period=0.5)
    ys = list(src)
    assert len(ys) == 4
    for y in ys:
        assert y.rate_campus == pytest.approx(1000 * orig[0] * 8 / 0.5, rel=0.005)


def test_active_flows_counted_exactly(tmp_path):
    taps = Taps()

    def burst(sport, t_start_ms, n, gap_ms=10, dst=RMT, fin_at_end=False):
        for k in range(n):
            fl = "FA" if fin_at_end and k == n - 1 else "PA"
            taps.add(C.TAP_EGRESS, T0 + int((t_start_ms + k * gap_ms) * MS),
                     frame(SND, dst, sport, 80, seq=1 + k * 100, flags=fl, payload=100))

    burst(1, 0, C.C_TH - 1)  # A: never reaches C_TH
    burst(2, 0, 290)  # B: steady for 2.9 s
    burst(3, 0, 15, gap_ms=20)  # C: active, then closes with FIN at 1.5 s
    taps.add(C.TAP_EGRESS, T0 + 1500 * MS, frame(SND, RMT, 3, 80, seq=99_999, flags="FA"))
    burst(4, 100, 12, dst=DTN)  # D: active, then idle past T_TH
    burst(5, 2200, C.C_TH)  # E: opens late, reaches C_TH exactly
    burst(6, 2300, 30, gap_ms=1100)  # F: packets farther apart than T_TH never count
    ys, src = replay(taps, tmp_path)
    counts = [int(y.active_flows) for y in ys]
    assert counts[:3] == [3, 1, 2]
    st = src.stats()
    assert st["af_fin_removed"] == 1


def test_remote_fin_removes_flow(tmp_path):
    taps = Taps()
    for k in range(20):
        taps.add(C.TAP_EGRESS, T0 + k * 10 * MS, frame(SND, RMT, 7, 80, seq=1 + k * 100, flags="PA", payload=100))
    taps.add(C.TAP_EGRESS, T0 + 300 * MS, frame(RMT, SND, 80, 7, seq=5, ack=2001, flags="FA"))
    taps.add(C.TAP_EGRESS, T0 + 1500 * MS, frame(SND2, RMT, 8, 80, seq=1, flags="A"))  # keep time moving
    ys, src = replay(taps, tmp_path)
    # the flow became active and ended (the remote side's FIN) within period 0: it counts there
    # (a transfer inside one period is not "no flow"), and is gone by period 1
    assert [int(y.active_flows) for y in ys] == [1, 0]
    assert src.stats()["af_fin_removed"] == 1 and src.collector.flow_vector.size == 0


def test_long_flow_flag_from_count_min(tmp_path):
    from scidmz.telemetry.sources.pcap import write_pcap

    frames, ts, orig = [], [], []
    big = 1500 - 14 - 40
    for k in range(7500):  # 11.25 MB in 1.5 s
        fr = frame(SND, DTN, 50000, 5201, seq=1 + k * big, flags="PA", payload=big)
        frames.append(fr[:54])
        orig.append(len(fr))
        ts.append(T0 + k * 200_000)
        if k % 10 == 0:
            small = frame(SND2, RMT, 50001, 80, seq=1 + k * 100, flags="PA", payload=100)
            frames.append(small)
            orig.append(len(small))
            ts.append(T0 + k * 200_000 + 1000)
    eg = write_pcap(tmp_path / "eg.pcap", frames, ts, orig_len=orig)
    src = TelemetrySource.from_pcaps(str(eg))
    ys = list(src)
    df = src.flows
    assert len(ys) == 2
    assert bool(df.loc[df["sport"] == 50000, "long_flow"].iloc[0])
    assert not bool(df.loc[df["sport"] == 50001, "long_flow"].iloc[0])
    assert src.stats()["long_flows"] == 1
    big_row = df[df["sport"] == 50000].iloc[0]
    assert big_row["rate"] == pytest.approx(2500 * 1500 * 8 / 1.0, rel=0.01)  # [1 s, 1.5 s) at 5000 pkt/s


def test_cli_replay_json(tmp_path, capsys):
    taps = Taps()
    seq = 1
    for k in range(400):
        t = T0 + k * 5 * MS
        fr = frame(SND, DTN, 40000, 5201, seq=seq, ack=1, flags="PA", payload=1000, ip_id=k)
        taps.add(C.TAP_INGRESS, t, fr)
        taps.add(C.TAP_EGRESS, t + 2 * MS, fr)
        seq += 1000
        taps.add(C.TAP_EGRESS, t + 32 * MS, frame(DTN, SND, 5201, 40000, seq=1, ack=seq, flags="A"))
    taps.add(C.TAP_EGRESS, T0, b"\x00" * 10)  # a truncated frame: counted, not fatal
    eg, ing = taps.write(tmp_path)
    rc = main(["telemetry", "replay", str(eg), "--ingress-pcap", str(ing), "--period", "500ms", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["drops"] == {"truncated": 1}
    assert len(out["series"]) == 5
    mid = out["series"][2]
    assert mid["rtt_dtn"] == pytest.approx(0.030, rel=0.01)
    assert mid["qdelay_dtn"] == pytest.approx(0.002, rel=0.01)
    assert mid["active_flows"] == 1
    assert out["flows"][0]["cls"] == "dtn"
    # stale flags: no campus traffic at all, so its RTT and queue delay are held in every period
    assert len(out["stale"]) == 5
    assert all({"rtt_campus", "qdelay_campus"} <= set(st) for st in out["stale"])
    assert "rtt_dtn" not in out["stale"][2] and "rate_dtn" not in out["stale"][2]
    # the egress tap given twice in different ways is an error, as is a missing one
    assert main(["telemetry", "replay", str(eg), "--egress-pcap", str(ing)]) == 2
    assert main(["telemetry", "replay", "--ingress-pcap", str(ing)]) == 2
    assert main(["telemetry", "replay", str(eg), "--dtn-prefix", "10.0.3/99"]) == 2
    assert out["warnings"] == [] and out["packets"] == 1201
    # --plot draws y(t), stale periods hollow; an unwritable destination is one line before any work
    png = tmp_path / "y.png"
    assert main(["telemetry", "replay", str(eg), "--ingress-pcap", str(ing), "--period", "500ms",
                 "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    capsys.readouterr()
    assert main(["telemetry", "replay", str(eg), "--plot", str(tmp_path / "no" / "such" / "dir.png")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--plot" in err[0]
    capsys.readouterr()
    # wrong prefixes: the data plane classifies nothing -- one error line and exit 1, not a silent zero
    wrong = ["--dtn-prefix", "192.0.2.1/32", "--remote-prefix", "198.51.100.0/24"]
    assert main(["telemetry", "replay", str(eg), *wrong, "--json"]) == 1
    cap = capsys.readouterr()
    assert cap.out == "" and len(cap.err.strip().splitlines()) == 1
    assert cap.err.startswith("scidmz: error: none of 801 packets matched --dtn-prefix or --remote-prefix")
    # --allow-drops: the all-zero result, with that line as a warning
    assert main(["telemetry", "replay", str(eg), *wrong, "--json", "--allow-drops"]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out.strip().splitlines()[-1])
    assert all(r["rate_dtn"] == 0 for r in out["series"]) and out["classified"] == 0
    assert sum("warning:" in ln for ln in cap.err.splitlines()) == 1 and "none of 801 packets" in cap.err


def test_campus_rtt_smoothing_and_dtn_rtt_mean(tmp_path):
    """Algorithm 4: RTT_campus <- alpha RTT_campus + (1 - alpha) mean(flow RTTs); RTT_DTN = digest mean."""
    from scidmz.telemetry.collector import DEFAULT_ALPHA
    from scidmz.telemetry.twin.dataplane import SoftwareDataPlane
    from scidmz.telemetry.view import DataPlaneView

    assert isinstance(SoftwareDataPlane(), DataPlaneView)
    taps = Taps()
    seq = {1: 1, 2: 1, 3: 1}

    def seg(sport, dst, t, d_ms):
        taps.add(C.TAP_EGRESS, t, frame(SND, dst, sport, 80, seq=seq[sport], flags="PA", payload=500))
        seq[sport] += 500
        taps.add(C.TAP_EGRESS, t + int(d_ms * MS), frame(dst, SND, 80, sport, seq=1, ack=seq[sport], flags="A"))

    for k in range(80):  # period 1: campus flows at 10 and 20 ms, DTN alternating 40/60 ms
        t = T0 + k * 10 * MS
        seg(1, RMT, t, 10)
        seg(2, RMT, t, 20)
        seg(3, DTN, t, 40 if k % 2 else 60)
    for k in range(80):  # period 2: campus flows at 30 and 50 ms
        t = T0 + S + k * 10 * MS
        seg(1, RMT, t, 30)
        seg(2, RMT, t, 50)
        seg(3, DTN, t, 100)
    ys, _ = replay(taps, tmp_path)
    assert ys[0].rtt_campus == pytest.approx(0.015, rel=1e-3)
    assert ys[0].rtt_dtn == pytest.approx(0.050, rel=1e-3)
    a = DEFAULT_ALPHA
    assert ys[1].rtt_campus == pytest.approx(a * 0.015 + (1 - a) * 0.040, rel=1e-3)
    assert ys[1].rtt_dtn == pytest.approx(0.100, rel=1e-3)
    assert ys[1].active_flows == 3
