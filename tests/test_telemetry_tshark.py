"""The twin on real captures, with tshark as the reference.

The corpus is ``tests/data/captures/`` (README.md there: each file's source and
licence). For every file the replay must read it (exit 0, no drop reason over
half, packets classified); per period and class the bytes must equal tshark's
``frame.len`` sums (for link types without an Ethernet header: 14 + the IP
packet, the twin's definition), and every RTT sample must equal tshark's
``tcp.analysis.ack_rtt`` for the same ACK to the microsecond tick. With both
taps of the netns capture, each period's mean queuing delay must equal the
mean over the same packets matched in tshark's output of the two files.

tshark comes from Debian (``scripts/test.sh`` installs it): without it this
skips with one line, unless ``CI`` is set, where it fails.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from scidmz.cli import main

CORPUS = Path(__file__).resolve().parent / "data" / "captures"
PERIOD = 0.5

# file -> DTN prefixes, remote prefixes, RTT samples at least (None: no RTT check), both
# classes carry traffic. The frame length tshark must give is decided per packet from its
# protocol stack (``_frame_len``).
NETNS_PREFIXES = (["fd00:2::2/128", "10.9.2.2/32"], ["10.9.2.0/24", "fd00:2::/64"])
# For the one-flow files only the receiver is given (DTN-r); the remote prefix is an unused
# documentation prefix, as it must not cover the sending side.
NONE4, NONE6 = "198.51.100.0/24", "2001:db8:ffff::/48"
MANIFEST: dict[str, tuple[list[str], list[str], int | None, bool]] = {
    "netns-egress.pcap": (*NETNS_PREFIXES, 500, True),
    "netns-ingress.pcap": (*NETNS_PREFIXES, None, True),
    "netns-sender-any.pcapng": (*NETNS_PREFIXES, 500, True),
    "tcpdump-ssh.pcap": (["202.108.87.165/32"], [NONE4], 10, False),  # the client receives the data
    "tcpdump-mptcp-v1.pcap": (["10.0.2.1/32"], [NONE4], 3, False),
    "tcpdump-erspan-type-i-4.pcap": (["10.1.1.1/32"], ["224.0.0.0/4"], None, True),
    "tcpdump-erspan-type-iii-ft-0.pcap": (["10.29.20.21/32"], [NONE4], None, False),
    "tcpdump-bigtcp-ipv4.pcap": (["10.25.132.11/32"], [NONE4], None, False),
    "tcpdump-bigtcp-ipv6.pcap": (["2604:1380:4091:ce00::d/128"], [NONE6], None, False),
    "tcpdump-bigtcp-ipv6-hbh.pcap": (["2604:1380:4091:ce00::b/128"], [NONE6], None, False),
    "tcpdump-gso-ipv4-vxlan-ipv4.pcap": (["192.168.1.1/32"], [NONE4], None, False),
    "tcpdump-gso-ipv6-vxlan-ipv6.pcap": (["fd00::1/128"], [NONE6], None, False),
    "tcpdump-ipv4_tcp_http_xml_tso.pcap": (["199.43.68.163/32"], [NONE4], None, False),
    "tcpdump-LINKTYPE_IPV4.pcap": (["9.9.9.9/32"], [NONE4], None, False),
    "tcpdump-LINKTYPE_IPV6.pcap": (["2620:fe::9/128"], [NONE6], None, False),
    "tcpdump-LINKTYPE_RAW_ipv6.pcap": (["2620:fe::9/128"], [NONE6], None, False),
}
# files that hold nothing to measure: the replay must say so (exit 1, one line)
UNMEASURABLE = {
    "tcpdump-erspan-type-ii-3.pcap": "108 of 108 packets are neither IPv4 nor IPv6",
    "tcpdump-802.1ad_QinQ.pcap": "2 of 2 packets are neither IPv4 nor IPv6",
    "tcpdump-loopback.pcap": "6 of 6 packets are neither IPv4 nor IPv6",
}


def _frame_len(r: dict[str, str]) -> int | None:
    """The frame length the twin counts, from tshark's fields: the frame on an Ethernet link;
    the inner Ethernet frame inside a tunnel (its tags and the inner IP packet); 14 + the IP
    packet with no Ethernet header (cooked, raw, IP in GRE)."""
    protos = r["frame.protocols"].split(":")
    ip = int(r["ipv6.plen"]) + 40 if r.get("ipv6.plen") else int(r["ip.len"]) if r.get("ip.len") else None
    if ip is None:
        return None
    if protos[0] != "eth":
        return 14 + ip
    inner = [j for j, x in enumerate(protos) if x == "eth"]
    tunnel = next((j for j, x in enumerate(protos) if x in ("gre", "vxlan")), None)
    if tunnel is None:
        return int(r["frame.len"])
    if len(inner) > 1:  # Ethernet inside: its VLAN tags and the IP packet
        return 14 + 4 * protos[inner[1]:].count("vlan") + ip
    return 14 + ip  # IP directly in GRE
@pytest.fixture(scope="module")
def tshark() -> str:
    exe = shutil.which("tshark")
    if exe is None:
        reason = "tshark is not installed (Debian package tshark; scripts/test.sh installs it)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} -- and CI is set, where this test must run")
        pytest.skip(reason)
    return exe


def fields(exe: str, path: Path, names: list[str], filt: str = "") -> list[dict[str, str]]:
    """tshark's per-frame fields (the innermost occurrence of each)."""
    cmd = [exe, "-r", str(path), "-n", "-T", "fields", "-E", "separator=\t", "-E", "occurrence=l",
           "-o", "tcp.relative_sequence_numbers:FALSE", "-o", "tcp.calculate_timestamps:TRUE"]
    if filt:
        cmd += ["-Y", filt]
    for n in names:
        cmd += ["-e", n]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env={**os.environ, "LC_ALL": "C"}).stdout
    return [dict(zip(names, line.split("\t"), strict=False)) for line in out.splitlines() if line]


def ns(t: str) -> int:
    return int(Decimal(t) * 1_000_000_000)


def replay(path: Path, dtn: list[str], remote: list[str], tmp_path: Path, capsys, *extra: str) -> dict:
    samples = tmp_path / f"{path.stem}-rtt.parquet"
    args = ["telemetry", "replay", str(path), "--period", f"{PERIOD}s", "--json", "--samples", str(samples)]
    for p in dtn:
        args += ["--dtn-prefix", p]
    for p in remote:
        args += ["--remote-prefix", p]
    code = main([*args, *extra])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    out = json.loads(cap.out.strip().splitlines()[-1])
    out["_samples"] = samples
    return out


def _cls(addr: str, dtn: list[str], remote: list[str]) -> int:
    """The class_lpm class of an address (longest prefix wins; 0: miss)."""
    a = ipaddress.ip_address(addr)
    best, cls = -1, 0
    for c, nets in ((1, dtn), (2, remote)):
        for n in map(ipaddress.ip_network, nets):
            if a.version == n.version and a in n and n.prefixlen > best:
                best, cls = n.prefixlen, c
    return cls


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_bytes_per_period_equal_tshark_frame_len(name, tshark, tmp_path, capsys):
    dtn, remote, _, both = MANIFEST[name]
    path = CORPUS / name
    out = replay(path, dtn, remote, tmp_path, capsys)
    # numbers only: tshark's "ip.len" of an IPv4 TSO/BIG TCP packet with a 0 total length is
    # its own estimate from the frame, which is what the twin takes too
    rows = fields(tshark, path, ["frame.time_epoch", "frame.len", "frame.protocols", "ip.len", "ipv6.plen",
                                 "ip.dst", "ipv6.dst"])
    t0 = min(ns(r["frame.time_epoch"]) for r in rows)
    want = np.zeros((len(out["series"]), 3), np.int64)
    for r in rows:
        dst = r.get("ipv6.dst") or r.get("ip.dst")
        c = _cls(dst, dtn, remote) if dst else 0
        n = _frame_len(r)
        if c and n is not None:
            if r.get("ipv6.plen") == "0" and "tcp" not in r["frame.protocols"]:
                n = int(r["frame.len"])  # BIG TCP without the jumbo option: tshark stops at IPv6
            want[(ns(r["frame.time_epoch"]) - t0) // int(PERIOD * 1e9), c] += n
    got = np.array([[0, round(s["rate_dtn"] * PERIOD / 8), round(s["rate_campus"] * PERIOD / 8)]
                    for s in out["series"]], np.int64)
    np.testing.assert_array_equal(got, want)
    assert want[:, 1].sum() > 0 and (want[:, 2].sum() > 0 or not both)
    assert out["classified"] > 0 and not out["warnings"], out["warnings"]


@pytest.mark.parametrize("name", sorted(UNMEASURABLE))
def test_files_with_nothing_to_measure_are_exit_1(name, tshark, capsys):
    assert main(["telemetry", "replay", str(CORPUS / name), "--json"]) == 1
    cap = capsys.readouterr()
    err = cap.err.strip().splitlines()
    assert cap.out == "" and len(err) == 1 and UNMEASURABLE[name] in err[0], err
    # tshark agrees that no packet is IP (or inside: the ERSPAN copies carry no IP)
    assert not [r for r in fields(tshark, CORPUS / name, ["ip.dst", "ipv6.dst"]) if any(r.values())
                and "erspan" not in name]


def test_corpus_readme_lists_every_file():
    text = (CORPUS / "README.md").read_text()
    for f in CORPUS.iterdir():
        if f.suffix in (".pcap", ".pcapng"):
            assert f"`{f.name}`" in text, f"{f.name} has no source and licence in README.md"
    assert set(MANIFEST) | set(UNMEASURABLE) == {f.name for f in CORPUS.iterdir() if f.suffix in (".pcap", ".pcapng")}


@pytest.mark.parametrize("name", sorted(n for n, m in MANIFEST.items() if m[2] is not None))
def test_rtt_samples_equal_tshark_ack_rtt(name, tshark, tmp_path, capsys):
    """Per ACK, the twin's sample equals tshark's ``ack_rtt`` to the 1-us tick. Where only one
    of them has a sample, the definitions differ, by design: tshark keeps the handshake in
    ``initial_rtt`` (no ``ack_rtt`` for a SYN's ACK) and skips some ACKs right after a loss
    the capture did not see; the twin rejects ACKs that may answer a retransmission (Karn)."""
    import pandas as pd

    dtn, remote, least, _ = MANIFEST[name]
    path = CORPUS / name
    out = replay(path, dtn, remote, tmp_path, capsys)
    ours = pd.read_parquet(out["_samples"])
    ref = fields(tshark, path, ["frame.time_epoch", "tcp.analysis.ack_rtt", "tcp.srcport", "tcp.dstport"],
                 "tcp.analysis.ack_rtt")
    # the ACK travels from the flow's destination port back to its source port
    theirs = {(ns(r["frame.time_epoch"]), int(r["tcp.dstport"]), int(r["tcp.srcport"])): float(r["tcp.analysis.ack_rtt"])
              for r in ref}
    mine = dict(zip(zip(ours["time"].astype("int64").tolist(), ours["sport"].astype(int).tolist(),
                        ours["dport"].astype(int).tolist(), strict=True), ours["rtt"].tolist(), strict=True))
    common = [k for k in mine if k in theirs]
    diffs = np.array([abs(mine[k] - theirs[k]) for k in common])
    assert len(common) >= least and diffs.max() <= 1.0001e-6, (len(common), diffs.max())
    syn_acks = len(fields(tshark, path, ["frame.number"], "tcp.flags.syn == 1 && tcp.flags.ack == 1"))
    assert len(mine) - len(common) <= syn_acks + 0.01 * len(mine), (len(mine), len(common), syn_acks)
    # tshark's samples in the measured direction that the twin lacks: Karn's rule, and little else
    flows = set((k[1], k[2]) for k in mine)
    only_theirs = [k for k in theirs if (k[1], k[2]) in flows and k not in mine]
    st = out["stats"]
    assert len(only_theirs) <= st["rtt_rejected_retx"] + st["rtt_rejected_ambiguous"] + 0.01 * len(mine)
    med_mine, med_theirs = np.median(list(mine.values())), np.median([theirs[k] for k in theirs if (k[1], k[2]) in flows])
    assert med_mine == pytest.approx(med_theirs, rel=0.01, abs=2e-6)


def test_queuing_delay_equals_the_two_taps_in_tshark(tshark, tmp_path, capsys):
    """Egress and ingress taps of the netns bottleneck: per period and class, the mean of
    (egress time - ingress time) of the same packets, matched in tshark's output."""
    eg, ing = CORPUS / "netns-egress.pcap", CORPUS / "netns-ingress.pcap"
    dtn, remote = NETNS_PREFIXES
    out = replay(eg, dtn, remote, tmp_path, capsys, "--ingress-pcap", str(ing))
    names = ["frame.time_epoch", "ip.dst", "ipv6.dst", "ip.id", "tcp.checksum", "tcp.srcport", "tcp.seq",
             "tcp.len"]
    key = ("ip.dst", "ipv6.dst", "ip.id", "tcp.checksum", "tcp.srcport", "tcp.seq", "tcp.len")
    # every ingress copy of a packet; an egress copy pairs with the latest one before it (a
    # retransmission after a drop in the queue repeats an IPv6 segment byte for byte, and the
    # switch's cell holds the latest stamp)
    seen: dict[tuple, list[int]] = {}
    for r in fields(tshark, ing, names):
        seen.setdefault(tuple(r.get(k, "") for k in key), []).append(ns(r["frame.time_epoch"]))
    t0 = min(ns(r["frame.time_epoch"]) for r in fields(tshark, eg, ["frame.time_epoch"]))
    sums = np.zeros((len(out["series"]), 3))
    cnts = np.zeros((len(out["series"]), 3))
    for r in fields(tshark, eg, names):
        k = tuple(r.get(x, "") for x in key)
        dst = r.get("ipv6.dst") or r.get("ip.dst")
        c = _cls(dst, dtn, remote) if dst else 0
        te = ns(r["frame.time_epoch"])
        before = [t for t in seen.get(k, []) if t <= te]
        if c and before:
            j = (te - t0) // int(PERIOD * 1e9)
            sums[j, c] += te // 1000 - max(before) // 1000  # the 1-us ticks of both taps
            cnts[j, c] += 1
    # The switch's table (and the twin's) holds one stamp per cell, so a packet whose cell
    # another packet in the queue took at the same time gives no sample: a handful in a
    # few thousand (the 65,536 cells hash ~40 queued packets). The periods' means may move
    # by those few samples; the totals may differ by them and no more.
    st = out["stats"]
    assert cnts.sum() - st["qd_samples"] <= st["qd_overwritten"] and st["qd_samples"] <= cnts.sum()
    for j, s in enumerate(out["series"]):
        for c, f in ((1, "qdelay_dtn"), (2, "qdelay_campus")):
            if cnts[j, c]:
                assert s[f] == pytest.approx(sums[j, c] / cnts[j, c] * 1e-6, rel=0.03, abs=20e-6), (j, f)
    assert (cnts[:, 1:] > 0).all(axis=1).any()
    assert max(s["qdelay_campus"] for s in out["series"]) > 1e-3, "the bottleneck's queue shows"
