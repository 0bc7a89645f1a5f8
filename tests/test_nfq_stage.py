"""The NFQUEUE stage: verdicts equal the numba core's; bad packets pass and are counted; live forwarding."""

import json
import os
import pathlib
import struct

import numpy as np
import pytest

from scidmz.disciplines import abc
from scidmz.plant.netns.stages.nfq import Stage, parse_ipv4


class FakePacket:
    def __init__(self, payload: bytes) -> None:
        self.payload = payload
        self.verdict: str | None = None

    def get_payload(self) -> bytes:
        return self.payload

    def accept(self) -> None:
        self.verdict = "accept"

    def drop(self) -> None:
        self.verdict = "drop"


def ipv4(src: str, total: int) -> bytes:
    a = bytes(int(x) for x in src.split("."))
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0, 64, 17, 0, a, bytes([10, 0, 0, 9])) + b"\0" * 8


def test_parse_ipv4() -> None:
    assert parse_ipv4(ipv4("10.0.0.1", 1500)) == (0x0A000001, 1500)
    assert parse_ipv4(b"\x60" + b"\0" * 39) is False  # IPv6
    assert parse_ipv4(b"") is False
    assert parse_ipv4(b"\x45\0\0") is None  # truncated
    assert parse_ipv4(b"\x43" + b"\0" * 19) is None  # IHL < 5


def test_malformed_and_non_ip_forwarded_and_counted() -> None:
    st = Stage("abc", {"capacity_bps": 1e6}, 1e6, {}, seed=0)
    pkts = [FakePacket(b"\x60" + b"\0" * 39), FakePacket(b"\x45"), FakePacket(b"\x4f" + b"\0" * 19), FakePacket(b"")]
    for p in pkts:
        st(p)
    assert [p.verdict for p in pkts] == ["accept"] * 4
    assert st.counts == {"received": 4, "accepted": 4, "dropped": 0, "malformed": 2, "non_ip": 2, "unstamped": 0}


def test_stage_verdicts_equal_core() -> None:
    """The stage and abc_run_fifo on the same packet sequence give the same verdicts."""
    rng = np.random.default_rng(4)
    n = 3000
    ts = np.cumsum(rng.exponential(1500 * 8 / 20e6, n))  # 20 Mbit/s into a 10 Mbit/s link
    aggs = rng.integers(0, 2, n)
    clock = iter(np.r_[0.0, ts])  # the first reading is the stage's t0
    srcs = ["10.0.0.1", "10.0.0.2"]
    st = Stage("abc", {"capacity_bps": 10e6}, 10e6, {}, seed=0, clock=lambda: next(clock))
    got = []
    for k in range(n):
        p = FakePacket(ipv4(srcs[aggs[k]], 1500))
        st(p)
        got.append(p.verdict == "accept")
    cfg = abc.ABCConfig(capacity_bps=10e6)
    meter, avg = abc.new_state(64)
    want = np.zeros(n, np.bool_)
    # the stage decides on frame bytes (IP length + the 14 B Ethernet header the qdisc counts)
    abc.abc_run_fifo(meter, avg, cfg.params(), aggs, ts, np.full(n, 1514.0), 10e6, want)
    assert np.array_equal(np.array(got), want)
    assert 0 < st.counts["dropped"] < n


def test_stage_aggregates_from_the_map_and_live_weights(tmp_path: pathlib.Path) -> None:
    import socket

    from scidmz.plant.netns.stages.nfq import _load_weights

    ip = {k: int.from_bytes(socket.inet_aton(k), "big") for k in ("10.3.0.2", "10.1.0.2", "10.1.0.9")}
    st = Stage("abc", {"capacity_bps": 20e6, "ref_rates_bps": [10e6, 10e6]}, 20e6,
               {"10.3.0.2": 0, "10.1.0.2": 1}, seed=0, clock=lambda: 0.0)
    assert st.decider.slot(ip["10.3.0.2"]) == 0 and st.decider.slot(ip["10.1.0.2"]) == 1
    assert st.decider.slot(ip["10.1.0.9"]) == 1  # unmapped sources: the last aggregate
    w = tmp_path / "w.json"
    w.write_text(json.dumps([14e6, 6e6]))
    _load_weights(st, str(w))
    assert st.decider.meter[:, abc.M_REF].tolist() == [14e6, 6e6]
    w.write_text("[1, -2]")  # a bad file keeps the last weights and is counted
    _load_weights(st, str(w))
    assert st.decider.meter[:, abc.M_REF].tolist() == [14e6, 6e6] and st.counts["bad_weights"] == 1
    f = Stage("ffs", {"capacity_bps": 20e6, "matrix_col_bps": [10e6, 10e6]}, 0.0, {"10.3.0.2": 0}, seed=0)
    f.set_weights([3.0, 1.0])
    assert f.decider.matrix.tolist() == [15e6, 5e6]  # rescaled to the capacity
    with pytest.raises(ValueError, match="3 weights"):
        f.set_weights([1.0, 1.0, 1.0])


def test_stage_bad_config_exit_2(capsys: pytest.CaptureFixture) -> None:
    from scidmz.plant.netns.stages.nfq import main

    assert main(["--queue", "0", "--discipline", "abc", "--config", '{"capacity_bps": 1e6, "ref_rate_bps": 0}',
                 "--link-bps", "1e6", "--stats", "/nonexistent/x"]) == 2
    err = capsys.readouterr().err.strip()
    assert "R_r" in err and "\n" not in err


@pytest.mark.root
@pytest.mark.parametrize("discipline", ["abc", "ffs"])
def test_live_stage_carries_100mbit(tmp_path: pathlib.Path, discipline: str) -> None:
    """100 Mbit/s of 1500 B frames forwarded through the stage: every packet gets a verdict, no stage drops."""
    from scidmz.plant.netns.nfqlab import nfq_lab

    prefix = f"dq{os.getpid() % 10000}{discipline[0]}"
    stats = str(tmp_path / "stats.json")
    cfg = {"capacity_bps": 1e9} if discipline == "abc" else {"capacity_bps": 1e9, "matrix_col_bps": [1e9]}
    args = ["--discipline", discipline, "--config", json.dumps(cfg), "--link-bps", "1e9",
            "--ingress-of", json.dumps({"10.77.1.2": 0})]
    with nfq_lab(prefix, args, stats) as lab:
        doc = lab.udp(100e6, 4)
        import time

        time.sleep(1.5)  # one stats period
        s = lab.stats()
    sent = doc["end"]["sum"]["packets"]
    assert sent > 0.9 * 100e6 * 4 / (1500 * 8)
    assert s["queue_dropped"] == 0 and s["user_dropped"] == 0
    assert s["received"] >= sent  # plus a few iperf3 control packets
    assert s["received"] == s["accepted"] + s["dropped"]
    assert s["unstamped"] == 0  # kernel arrival stamps reached the meters
    if discipline == "ffs":
        assert s["dropped"] == 0  # R_* < C: FFS never drops without congestion
    else:
        # ABC's virtual 24-packet FIFO at 1 Gbit/s only overflows on iperf3's catch-up bursts.
        assert s["dropped"] <= 0.01 * sent
    # Every verdict "drop" is a loss the receiver sees (it may see more: its own socket buffer).
    assert doc["end"]["sum"]["lost_packets"] >= s["dropped"]
    assert not os.path.exists(f"/run/netns/{prefix}-r")
