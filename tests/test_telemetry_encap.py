"""IPv6, the encapsulations mirror ports deliver, snap lengths, honest outcomes,
and the replay's period closing inside the packet loop against the control plane's own
per-period path."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from scidmz.cli import main
from scidmz.telemetry import constants as C
from scidmz.telemetry.sources.pcap import write_pcap
from scidmz.telemetry.sources.synth import (
    ENCAPSULATIONS,
    LINK_HEADERS,
    Taps,
    encapsulate,
    frame,
    relink,
)
from scidmz.telemetry.twin.parse import (
    KIND_DROP,
    KIND_TCP,
    KIND_UDP,
    LINKTYPE_ETHERNET,
    REASONS,
    addr_text,
    min_snaplen,
    parse_frames,
)

MS = 1_000_000
S = 1_000_000_000
T0 = 1_700_000_000 * S
V4 = ("10.0.0.1", "10.1.0.2")
V6 = ("2001:db8::1", "2001:db8:1::2")


def parse(frames: list[bytes], linktype: int = 1, orig: list[int] | None = None) -> np.ndarray:
    buf = np.frombuffer(b"".join(frames) or b"\0", dtype=np.uint8)
    lens = np.array([len(f) for f in frames], dtype=np.int64)
    off = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    wl = lens if orig is None else np.array(orig, dtype=np.int64)
    return parse_frames(buf, off, lens, wl, linktype, np.arange(len(frames), dtype=np.int64))


def _tcp(src_dst: tuple[str, str], **kw) -> bytes:
    return frame(*src_dst, 1234, 80, seq=7, ack=9, flags="PA", payload=300, **kw)


@pytest.mark.parametrize("inner", [V4, V6], ids=["inner4", "inner6"])
@pytest.mark.parametrize("outer", ["192.0.2.1", "2001:db8:ffff::1"], ids=["outer4", "outer6"])
@pytest.mark.parametrize("kind", ENCAPSULATIONS)
def test_one_tunnel_is_removed_and_the_inner_frame_measured(kind, outer, inner):
    plain = _tcp(inner, vlans=(7,))
    fr = encapsulate(plain, kind, outer, outer.replace("1", "2", 1) if ":" in outer else "192.0.2.2")
    p = parse([fr])[0]
    assert p["kind"] == KIND_TCP and (p["sport"], p["dport"], p["seq"], p["payload"]) == (1234, 80, 7, 300)
    assert addr_text(p["src_hi"], p["src_lo"]) == inner[0] and addr_text(p["dst_hi"], p["dst_lo"]) == inner[1]
    assert p["fam"] == (6 if ":" in inner[0] else 4)
    # the frame the mirrored link carried; IP in GRE has no Ethernet header: 14 + the IP packet
    want = len(plain) if kind != "gre-ip" else len(plain) - 4
    assert p["frame_len"] == want


@pytest.mark.parametrize("fam", [V4, V6], ids=["v4", "v6"])
@pytest.mark.parametrize("link", [k for k in LINK_HEADERS])
def test_capture_link_types(link, fam):
    if (link == "ipv4" and fam is V6) or (link == "ipv6" and fam is V4):
        pytest.skip("the link type names the other family")
    plain = _tcp(fam)
    p = parse([relink(plain, link)], linktype=LINK_HEADERS[link])[0]
    assert p["kind"] == KIND_TCP and p["payload"] == 300 and p["frame_len"] == len(plain)


def test_vlan_mpls_ipv6_extension_headers_and_the_ipv6_key():
    frames = [_tcp(V6, vlans=(1, 2, 3)), _tcp(V6, mpls=(16, 17, 18, 19, 20)),
              _tcp(V6, ipv6_ext=((0, 8), (43, 24), (60, 16))), _tcp(V4, vlans=(4,), mpls=(5,)),
              frame(*V6, 53, 5353, proto=17, payload=40), frame(*V6, proto=58, payload=8),
              frame(*V6, payload=40, frag=0x0001)]
    pk = parse(frames)
    assert list(pk["kind"]) == [KIND_TCP] * 4 + [KIND_UDP, 1, 1]
    assert [REASONS[r] for r in pk["reason"][5:]] == ["other_protocol", "fragment"]
    assert list(pk["frame_len"]) == [len(f) for f in frames]
    # the 32-bit hash-key address of IPv6 is zlib.crc32 of the 16 bytes (constants.py "addresses")
    import ipaddress
    import zlib

    assert pk["src"][0] == zlib.crc32(ipaddress.ip_address(V6[0]).packed)
    assert pk["src"][3] == int(ipaddress.ip_address(V4[0]))
    # IPv6 has no identification: the TCP/UDP checksum stands in (queuing-delay match)
    assert pk["ip_id"][0] != 0 and pk["ip_id"][4] != 0


def _cases() -> list[tuple[str, bytes, int]]:
    """(name, frame, shortest snap length) per link layer / encapsulation."""
    out = []
    for fam_name, fam in (("v4", V4), ("v6", V6)):
        six = fam is V6
        for vl in (0, 1, 2, 3):
            out.append((f"eth-{fam_name}-vlan{vl}", _tcp(fam, vlans=tuple(range(2, 2 + vl))),
                        min_snaplen(vlans=vl, ipv6=six)))
        out.append((f"eth-{fam_name}-mpls2", _tcp(fam, mpls=(5, 6)), min_snaplen(mpls=2, ipv6=six)))
        out.append((f"eth-{fam_name}-udp", frame(*fam, 1, 2, proto=17, payload=50), min_snaplen(ipv6=six, udp=True)))
        for link, lt in LINK_HEADERS.items():
            if (link == "ipv4" and six) or (link == "ipv6" and not six):
                continue
            out.append((f"{link}-{fam_name}", relink(_tcp(fam), link), min_snaplen(lt, ipv6=six)))
        # ERSPAN II over IPv4: outer Ethernet 14 + IPv4 20 + GRE with sequence 8 + ERSPAN 8
        out.append((f"erspan2-{fam_name}", encapsulate(_tcp(fam), "erspan2"), min_snaplen(ipv6=six, outer=50)))
    return out


@pytest.mark.parametrize("name,fr,snap", _cases(), ids=[c[0] for c in _cases()])
def test_shortest_snap_length_per_encapsulation(name, fr, snap):
    lt = LINK_HEADERS.get(name.split("-")[0], LINKTYPE_ETHERNET)
    at, below = parse([fr[:snap], fr[:snap - 1]], linktype=lt, orig=[len(fr)] * 2)
    assert at["kind"] in (KIND_TCP, KIND_UDP), name
    assert at["payload"] in (300, 50)  # from the IP header and the wire length, not the captured bytes
    assert below["kind"] == KIND_DROP and REASONS[below["reason"]] == "truncated", name


def test_tso_and_big_tcp_zero_lengths_come_from_the_wire():
    v4 = bytearray(_tcp(V4))
    v4[16:18] = b"\0\0"  # IPv4 total length 0 (TSO / BIG TCP captured on the sender)
    v6 = bytearray(_tcp(V6))
    v6[18:20] = b"\0\0"  # IPv6 payload length 0
    pk = parse([bytes(v4), bytes(v6)])
    assert list(pk["kind"]) == [KIND_TCP, KIND_TCP] and list(pk["payload"]) == [300, 300]


# -- the replay ----------------------------------------------------------------------------------

def _dual_stack(tmp_path, n_periods: int = 4):
    """Egress and ingress taps: an IPv6 DTN flow, an IPv4 DTN flow and an IPv6 campus flow."""
    taps = Taps()
    flows = [("2001:db8::10", "2001:db8:3::2", 50000, 80.0, 3.0), ("10.0.0.10", "10.0.3.2", 50001, 80.0, 3.0),
             ("2001:db8::11", "2001:db8:1::20", 40000, 20.0, 1.0)]
    for f_i, (src, dst, sport, rtt, q) in enumerate(flows):
        seq = 1000
        for k in range(0, n_periods * 1000 - 300, 5):
            t = T0 + k * MS + f_i * 1_000
            fr = frame(src, dst, sport, 5201, seq=seq, ack=1, flags="PA", payload=1000, ip_id=k & 0xFFFF)
            taps.add(C.TAP_INGRESS, t, fr)
            taps.add(C.TAP_EGRESS, t + int(q * MS), fr)
            seq += 1000
            taps.add(C.TAP_EGRESS, t + int((q + rtt) * MS), frame(dst, src, 5201, sport, seq=1, ack=seq, flags="A"))
    return taps.write(tmp_path)


PFX = ["--dtn-prefix", "10.0.3.2/32,2001:db8:3::2/128", "--remote-prefix", "10.1.0.0/16",
       "--remote-prefix", "2001:db8:1::/48"]


def test_ipv6_end_to_end_through_the_cli(tmp_path, capsys):
    import pandas as pd

    eg, ing = _dual_stack(tmp_path)
    samples = tmp_path / "rtt.parquet"
    assert main(["telemetry", "replay", str(eg), "--ingress-pcap", str(ing), *PFX, "--json",
                 "--samples", str(samples)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    s = out["series"][1]
    assert s["rtt_dtn"] == pytest.approx(0.080, abs=2e-6) and s["rtt_campus"] > 0
    assert s["qdelay_dtn"] == pytest.approx(0.003, abs=2e-6) and s["qdelay_campus"] == pytest.approx(0.001, abs=2e-6)
    assert s["active_flows"] == 3
    # per class both families: two DTN flows of 1054/1074-byte frames every 5 ms
    assert s["rate_dtn"] == pytest.approx(8 * 200 * (1054 + 1074), rel=1e-9)
    assert s["rtt_dtn_p50"] == pytest.approx(0.080, abs=2e-6) and s["rtt_campus_p99"] == pytest.approx(0.020, abs=2e-6)
    fam = {f["dst"]: f["family"] for f in out["flows"]}
    assert fam == {"2001:db8:3::2": 6, "10.0.3.2": 4, "2001:db8:1::20": 6}
    df = pd.read_parquet(samples)
    assert len(df) == out["stats"]["rtt_samples"] and set(df["family"]) == {4, 6}
    assert set(df["cls"].astype(str)) == {"dtn", "campus"}
    assert df.loc[df["dst"] == "2001:db8:1::20", "rtt"].round(6).eq(0.020).all()
    hist = out["rtt_histogram"]
    assert sum(hist["dtn"]) + sum(hist["campus"]) == len(df) and len(hist["edges_s"]) == len(hist["dtn"]) + 1


def test_percentiles_equal_numpy_per_period(tmp_path):
    from scidmz.telemetry.run import replay

    rng = np.random.default_rng(5)
    taps = Taps()
    seq = 1
    for _ in range(2000):
        t = T0 + int(rng.uniform(0, 3.0) * S)
        fr = frame("10.0.0.9", "10.0.3.2", 9, 5201, seq=seq, flags="PA", payload=100)
        taps.add(C.TAP_EGRESS, t, fr)
        seq += 100
        taps.add(C.TAP_EGRESS, t + int(rng.uniform(1, 200) * MS), frame("10.0.3.2", "10.0.0.9", 5201, 9, ack=seq))
    eg, _ = taps.write(tmp_path)
    res, _ = replay(str(eg), period=0.5, samples=str(tmp_path / "s.parquet"))
    import pandas as pd

    df = pd.read_parquet(tmp_path / "s.parquet")
    per = np.floor(df["t"] / 0.5).astype(int)
    for j, row in enumerate(res["series"]):
        v = df.loc[per == j, "rtt"].to_numpy()
        if v.size:
            assert row["rtt_dtn_p50"] == pytest.approx(np.percentile(v, 50), abs=1e-12)
            assert row["rtt_dtn_p99"] == pytest.approx(np.percentile(v, 99), abs=1e-12)
            assert row["rtt_dtn"] == pytest.approx(v.mean(), rel=1e-9)
        else:
            assert row["rtt_dtn_p50"] is None


def test_replay_equals_the_collector_sampling_the_twin_each_period(tmp_path):
    """The replay closes periods inside the packet loop; the generic path (Collector.sample()
    through the DataPlaneView, as on a switch) must give the same states, bit for bit."""
    from scidmz.telemetry.collector import Collector
    from scidmz.telemetry.sources.pcap import read_capture
    from scidmz.telemetry.twin.dataplane import SoftwareDataPlane, merge_taps
    from scidmz.telemetry.twin.source import TelemetrySource

    rng = np.random.default_rng(1)
    taps = Taps()
    for f in range(40):  # flows that start, stop, FIN, go idle, some IPv6
        v6 = f % 3 == 0
        src = f"2001:db8::{f + 1:x}" if v6 else f"10.0.0.{f + 1}"
        dst = ("2001:db8:3::2" if v6 else "10.0.3.2") if f % 4 == 0 else ("2001:db8:1::9" if v6 else "10.1.0.9")
        start, n = rng.uniform(0, 5), int(rng.integers(3, 400))
        gap, rtt, seq = rng.uniform(0.001, 0.3), rng.uniform(0.001, 0.2), int(rng.integers(0, 2**32))
        for j in range(n):
            t = T0 + int((start + j * gap) * S)
            fl = "FA" if (j == n - 1 and f % 5 == 0) else "PA"
            fr = frame(src, dst, 1000 + f, 80, seq=seq, flags=fl, payload=500, ip_id=j)
            taps.add(C.TAP_INGRESS, t, fr)
            taps.add(C.TAP_EGRESS, t + int(rng.uniform(0, 0.01) * S), fr)
            seq = (seq + 500 + (fl == "FA")) % 2**32
            taps.add(C.TAP_EGRESS, t + int(rtt * S), frame(dst, src, 80, 1000 + f, ack=seq))
    eg, ing = taps.write(tmp_path)
    pre = (["10.0.3.2/32", "2001:db8:3::2/128"], ["10.1.0.0/16", "2001:db8:1::/48"])
    for period in (0.1, 0.7):
        src = TelemetrySource.from_pcaps(str(eg), str(ing), period=period, dtn_prefix=pre[0], remote_prefix=pre[1],
                                         chunk=997)
        fast = list(src)
        pk = merge_taps(read_capture(eg, tap=C.TAP_EGRESS).packets, read_capture(ing, tap=C.TAP_INGRESS).packets)
        dp = SoftwareDataPlane(*pre)
        t0 = int(pk["ts_ns"][0])
        dp.advance_clock(t0 / 1e9)
        col = Collector(dp, t0=t0 / 1e9)
        slow, lo = [], 0
        for k in range(1, len(fast) + 1):
            b = t0 + int(round(period * 1e9)) * k
            hi = int(np.searchsorted(pk["ts_ns"], b, side="left"))
            dp.process(pk[lo:hi])
            lo = hi
            dp.advance_clock(b / 1e9)
            slow.append(col.sample())
        assert fast == slow
        assert src.collector.flow_records() == col.flow_records()
        assert max(y.active_flows for y in fast) > 3


def _pcap_records(tmp_path, frames, linktype=1, name="c.pcap"):
    return write_pcap(tmp_path / name, frames, [T0 + i * MS for i in range(len(frames))], linktype=linktype)


def test_unreadable_link_type_is_exit_1_not_zeros(tmp_path, capsys):
    p = _pcap_records(tmp_path, [_tcp(V4)] * 50, linktype=147)
    assert main(["telemetry", "replay", str(p), "--json"]) == 1
    cap = capsys.readouterr()
    assert cap.out == ""
    err = cap.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("scidmz: error: 50 of 50 packets have link type 147")
    assert main(["telemetry", "replay", str(p), "--json", "--allow-drops"]) == 0
    cap = capsys.readouterr()
    assert "warning: 50 of 50 packets have link type 147" in cap.err
    # a minority of bad packets is only counted
    frames = [_tcp(V4)] * 30 + [bytes(12) + b"\x08\x06" + bytes(28)] * 10
    assert main(["telemetry", "replay", str(_pcap_records(tmp_path, frames, name="m.pcap")), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["drops"] == {"non_ip": 10}


def test_most_bytes_dropped_is_exit_1(tmp_path, capsys):
    # few packets, but most of the bytes are in frames cut inside their headers
    frames = [_tcp(V4)] * 10 + [_tcp(V4)[:30]] * 4
    orig = [len(_tcp(V4))] * 10 + [60000] * 4
    p = write_pcap(tmp_path / "b.pcap", frames, [T0 + i * MS for i in range(14)], orig_len=orig)
    assert main(["telemetry", "replay", str(p)]) == 1
    assert "240000 of 243540 bytes (4 of 14 packets) were cut by the snap length" in capsys.readouterr().err


def test_empty_capture_and_window_removing_everything_are_exit_1(tmp_path, capsys):
    e = write_pcap(tmp_path / "e.pcap", [], [])
    assert main(["telemetry", "replay", str(e)]) == 1
    assert "holds no packet" in capsys.readouterr().err
    p = _pcap_records(tmp_path, [_tcp(("10.0.0.1", "10.0.3.2"))] * 20)
    assert main(["telemetry", "replay", str(p), "--start", "1h"]) == 1
    assert "--start/--end or --skip-outliers removed them all" in capsys.readouterr().err
    assert main(["telemetry", "replay", str(p), "--start", "yesterday-ish"]) == 2
    assert main(["telemetry", "replay", str(p), "--start", "5ms", "--end", "2ms"]) == 2


def test_window_and_outliers(tmp_path, capsys):
    good = [frame("10.0.0.1", "10.0.3.2", 1, 2, seq=i * 100, flags="PA", payload=100) for i in range(100)]
    ts = [T0 + i * 10 * MS for i in range(100)]
    ts[40] = T0 + 400 * 24 * 3600 * S  # a stray timestamp a year off (merged captures, a bad clock)
    p = write_pcap(tmp_path / "o.pcap", good, ts)
    assert main(["telemetry", "replay", str(p), "--json"]) == 1  # a capture's content: as its other refusals
    assert "--skip-outliers" in capsys.readouterr().err
    assert main(["telemetry", "replay", str(p), "--json", "--skip-outliers"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["drops"] == {"outlier": 1} and len(out["series"]) == 1
    assert main(["telemetry", "replay", str(p), "--json", "--skip-outliers", "--start", "200ms", "--end", "500ms",
                 "--period", "100ms"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["packets"] == 29 and out["drops"] == {"outlier": 1, "outside_window": 70}  # 400 ms is the outlier
    assert out["series"][0]["rate_dtn"] == pytest.approx(8 * 10 * len(good[0]) / 0.1)


def test_prefix_traps_warn(tmp_path, capsys):
    eg, _ = _dual_stack(tmp_path, 2)
    # the DTN sender given as the DTN prefix: the packets going to it are its ACKs
    assert main(["telemetry", "replay", str(eg), "--dtn-prefix", "10.0.0.10/32", "--json"]) == 0
    err = capsys.readouterr().err
    assert "--dtn-prefix" in err and "is it the DTN sender?" in err
    # the remote prefix covering everything, the campus included
    assert main(["telemetry", "replay", str(eg), "--remote-prefix", "0.0.0.0/0", "--json"]) == 0
    err = capsys.readouterr().err
    assert "--remote-prefix 0.0.0.0/0 covers every address" in err
    # the right prefixes: no warning
    assert main(["telemetry", "replay", str(eg), *PFX, "--json"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_rtt_timeout_is_an_option(tmp_path, capsys):
    taps = Taps()
    for j in range(20):  # ACKs 1.5 s after their data: above the default 1-s timeout
        t = T0 + j * 200 * MS
        taps.add(C.TAP_EGRESS, t, frame("10.0.0.1", "10.0.3.2", 1, 2, seq=j * 10, flags="PA", payload=10))
        taps.add(C.TAP_EGRESS, t + 1500 * MS, frame("10.0.3.2", "10.0.0.1", 2, 1, ack=j * 10 + 10))
    eg, _ = taps.write(tmp_path)
    assert main(["telemetry", "replay", str(eg), "--json"]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out.strip().splitlines()[-1])
    assert out["stats"]["rtt_samples"] == 0 and "--rtt-timeout" in cap.err
    assert main(["telemetry", "replay", str(eg), "--json", "--rtt-timeout", "2s"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["stats"]["rtt_samples"] == 20 and out["series"][2]["rtt_dtn"] == pytest.approx(1.5, abs=2e-6)
    assert main(["telemetry", "replay", str(eg), "--rtt-timeout", "2h"]) == 2


def test_activations_are_not_new_flows(tmp_path):
    from scidmz.telemetry.twin.source import TelemetrySource

    taps = Taps()
    for burst in range(3):  # one flow, three bursts of 20 packets 2 s apart: one flow, three activations
        for j in range(20):
            t = T0 + burst * 2 * S + j * MS
            taps.add(C.TAP_EGRESS, t, frame("10.0.0.1", "10.0.3.2", 1, 2, seq=burst * 100 + j, flags="PA", payload=1))
    eg, _ = taps.write(tmp_path)
    src = TelemetrySource.from_pcaps(str(eg))
    list(src)
    st = src.stats()
    assert (st["af_new"], st["af_activations"]) == (1, 3)


def test_corrupt_record_resynchronises_and_the_rest_is_measured(tmp_path, capsys):
    frames = [frame("10.0.0.1", "10.0.3.2", 1, 2, seq=i * 100, flags="PA", payload=100) for i in range(200)]
    p = write_pcap(tmp_path / "r.pcap", frames, [T0 + i * 10 * MS for i in range(200)])
    raw = bytearray(p.read_bytes())
    rec = 16 + len(frames[0])
    struct.pack_into("<I", raw, 24 + 20 * rec + 8, 0x7FFF0000)  # record 20: an impossible captured length
    struct.pack_into("<I", raw, 24 + 90 * rec + 4, 1_500_000_000)  # record 90: sub-second field >= 1 s (ns file)
    (tmp_path / "r2.pcap").write_bytes(bytes(raw))
    assert main(["telemetry", "replay", str(tmp_path / "r2.pcap"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["drops"] == {"corrupt_record": 1, "record_fixed": 1} and out["packets"] == 199
    assert out["drop_bytes"] == {"corrupt_record": rec}


def test_a_stray_timestamp_in_the_other_tap_is_refused_not_a_memory_blowup(tmp_path, capsys):
    """Two taps: the merge may close periods up to the other tap's newest packet; a stray
    timestamp there must meet the period limit (exit 1 naming --skip-outliers), not exhaust memory."""
    eg = write_pcap(tmp_path / "e.pcap", [_tcp(("10.0.0.1", "10.0.3.2"))] * 5, [T0 + i * MS for i in range(5)])
    ing = write_pcap(tmp_path / "i.pcap", [_tcp(("10.0.0.1", "10.0.3.2"))] * 2, [T0, T0 + 60 * 365 * 86400 * S])  # 60 years on (pcap: 32-bit seconds)
    assert main(["telemetry", "replay", str(eg), "--ingress-pcap", str(ing), "--period", "1ms"]) == 1
    assert "--skip-outliers" in capsys.readouterr().err
    assert main(["telemetry", "replay", str(eg), "--ingress-pcap", str(ing), "--period", "1ms", "--skip-outliers",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["drops"] == {"outlier": 1}


def test_the_return_direction_alone_is_exit_1(tmp_path, capsys):
    """ACKs only (a one-way mirror of the wrong direction): packets match, nothing is measured."""
    acks = [frame("10.0.3.2", "10.0.0.1", 2, 1, ack=100 * i) for i in range(30)]
    p = write_pcap(tmp_path / "a.pcap", acks, [T0 + i * MS for i in range(30)])
    assert main(["telemetry", "replay", str(p)]) == 1
    assert "holds only the return direction" in capsys.readouterr().err
