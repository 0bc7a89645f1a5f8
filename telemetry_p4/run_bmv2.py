#!/usr/bin/env python3
"""Run the v1model telemetry program end to end on BMv2 and compare it with the twin.

1. Write two pcaps (ingress tap, egress tap) of TCP flows with known RTTs,
   queuing delays, rates and flow counts (``traffic()``; the truth per period
   comes with them).
2. Compile the program (p4c), start ``simple_switch_grpc`` in a namespace of
   its own with the ingress tap on port 1 and the egress tap on port 2
   (``scidmz.telemetry.p4.toolchain.Bmv2Switch``), push the pipeline and the table entries
   through scidmz's P4Runtime adapter (``P4RuntimeView``; registers over
   BMv2's Thrift service, as BMv2's P4Runtime server has no register reads).
3. Replay the pcaps into the two ports period by period, in real time
   (``speed`` > 1 compresses time), and after each period, once the switch has
   counted every frame of it, take a ``NetworkState`` with the collector.
4. Run the software twin on the frames *as they were sent* (host send times,
   so a loaded host's late sends reach both sides alike), sample it at the
   same instants, and compare both with the truth.

Every packet of a period, including the ACKs, falls inside its period
(``traffic()`` leaves a margin of the longest RTT + queuing delay at the end),
so pausing between periods to sample does not bend any RTT or queuing delay.

    python telemetry_p4/run_bmv2.py --periods 4 --speed 1     # prints JSON; root (namespaces)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "v1model" / "scidmz_telemetry.p4"

S = 1_000_000_000
T0 = 1_700_000_000 * S
DTN_R, REMOTE, DTN_S, CAMPUS = "10.0.3.2", "10.1.0.20", "10.0.0.10", "10.0.0.11"
DTN_R6, REMOTE6, DTN_S6, CAMPUS6 = "2001:db8:3::2", "2001:db8:1::20", "2001:db8::10", "2001:db8::11"
DTN_PREFIXES = [f"{DTN_R}/32", f"{DTN_R6}/128"]
REMOTE_PREFIXES = ["10.1.0.0/16", "2001:db8:1::/48"]
PORT_INGRESS, PORT_EGRESS = 1, 2
FIELDS = ("rate_dtn", "rate_campus", "rtt_dtn", "rtt_campus", "qdelay_dtn", "qdelay_campus", "active_flows")

# (src, dst, sport, rtt s, queuing delay s, period of the FIN or None, how the taps deliver
# the frames). Ours: three DTN flows and three campus flows, IPv4 and IPv6, with distinct
# RTTs/delays, one campus flow closing; some arrive with VLAN tags, MPLS labels or inside
# a remote mirror session (ERSPAN), as a switch fed by mirrors sees them.
FLOWS = (
    (DTN_S, DTN_R, 50000, 0.100, 0.010, None, None),
    (DTN_S, DTN_R, 50001, 0.100, 0.010, None, "mpls"),
    (CAMPUS, REMOTE, 40000, 0.030, 0.005, 2, "vlan3"),
    (CAMPUS, "10.1.0.21", 40001, 0.050, 0.005, None, "erspan2"),
    (DTN_S6, DTN_R6, 50002, 0.100, 0.010, None, None),
    (CAMPUS6, REMOTE6, 40002, 0.040, 0.005, None, "erspan3-v6"),
)
PAYLOAD = 1000


def deliver(fr: bytes, how: str | None, vlans: tuple[int, ...] = ()) -> bytes:
    """``fr`` as the tap delivers it (``FLOWS``' last column); ``vlans`` re-tags a plain frame."""
    from scidmz.telemetry.sources.synth import encapsulate

    if how is None:
        return fr if not vlans else fr[:12] + b"".join(b"\x81\x00" + v.to_bytes(2, "big") for v in vlans) + fr[12:]
    if how == "vlan3":
        return deliver(fr, None, (10, 20, 30))
    if how == "mpls":  # two labels between Ethernet and IP
        return fr[:12] + b"\x88\x47" + (16000 << 12 | 64).to_bytes(4, "big") + (17000 << 12 | 1 << 8 | 64).to_bytes(
            4, "big") + fr[14:]
    if how.endswith("-v6"):
        return encapsulate(fr, how[:-3], "2001:db8:ffff::1", "2001:db8:ffff::2")
    return encapsulate(fr, how)


def probes(k: int) -> list[bytes]:
    """One UDP frame to the remote network per encapsulation and parser path the switch reads,
    sent every period on the egress tap: BMv2's class counters must count each exactly as the
    twin (bytes and packets; ``class_counters`` in the result)."""
    from scidmz.telemetry.sources.synth import ENCAPSULATIONS, encapsulate, frame

    out = []
    port = 20000 + 64 * k  # a flow of its own per probe: never C_TH packets, never an active flow
    for fam, (src, dst) in enumerate(((CAMPUS, REMOTE), (CAMPUS6, REMOTE6))):
        for j, kind in enumerate(ENCAPSULATIONS):
            port += 1
            inner = frame(src, dst, port, 9000, proto=17, payload=100 + 10 * fam, vlans=() if kind == "gre-ip" else (5,))
            outer = ("192.0.2.1", "192.0.2.2") if j % 2 == 0 else ("2001:db8:ffff::1", "2001:db8:ffff::2")
            out.append(encapsulate(inner, kind, *outer))
        out.append(frame(src, dst, port + 1, 9000, proto=17, payload=60, vlans=(1, 2, 3, 4)))
        out.append(frame(src, dst, port + 2, 9000, proto=17, payload=60, mpls=(100, 200, 300, 400)))
        port += 2
    out.append(frame(CAMPUS6, REMOTE6, port + 1, 9000, proto=17, payload=60, ipv6_ext=((0, 8), (60, 64))))
    return out
# ours: BMv2 batches learn lists for 1 ms; 0.25 s without a new list is "all delivered".
# It is paid between every two periods, where it adds to every flow's silence: at 0.5 s a
# quiet machine's replay left flows silent 0.79 s of the program's T_TH = 1 s, and a loaded
# CI machine's went over it (flows idled out; 11 active, not 6).
DIGEST_QUIET_S = 0.25


def traffic(directory: Path, periods: int = 4, gap_s: float = 0.060) -> tuple[Path, Path, list[dict], dict[bytes, int]]:
    """Two pcaps (ingress, egress tap; nominal times T0 + ...), the truth per 1-s period and
    the index in ``FLOWS`` of every flow frame (``flow_silence``).

    Each flow sends a ``PAYLOAD``-byte segment every ``gap_s``; the segment
    crosses the ingress tap at t, the egress tap at t + q and its ACK the
    egress tap at t + q + rtt (the RTT the switch measures at the egress tap).
    """
    sys.path.insert(0, str(HERE.parent / "src"))
    from scidmz.telemetry import constants as C
    from scidmz.telemetry.sources.synth import Taps, frame

    taps = Taps()
    truth = []
    flow_of: dict[bytes, int] = {}
    seqs = [1000 * (i + 1) for i in range(len(FLOWS))]
    margin = 0.050
    for k in range(periods):
        base = T0 + k * S
        dtn_bytes = campus_bytes = 0
        active = 0
        for j, pr in enumerate(probes(k)):
            taps.add(C.TAP_EGRESS, base + int((margin / 2 + j * 1e-4) * S), pr)
            campus_bytes += _measured_len(pr)
        for f_i, (src, dst, sport, rtt, q, fin, how) in enumerate(FLOWS):
            if fin is not None and k > fin:
                continue
            active += 0 if fin is not None and k == fin else 1
            t = margin + f_i * 0.007
            times = []
            while t + q + rtt <= 1.0 - margin:
                times.append(t)
                t += gap_s
            for j, t in enumerate(times):
                last = fin is not None and k == fin and j == len(times) - 1
                fl = "FA" if last else "PA"
                fr = deliver(frame(src, dst, sport, 5201, seq=seqs[f_i], ack=1, flags=fl, payload=PAYLOAD,
                                   ip_id=(k * 100 + j) & 0xFFFF), how)
                ts = base + int(t * S)
                taps.add(C.TAP_INGRESS, ts, fr)
                taps.add(C.TAP_EGRESS, ts + int(q * S), fr)
                seqs[f_i] += PAYLOAD + (1 if last else 0)
                ack = deliver(frame(dst, src, 5201, sport, seq=1, ack=seqs[f_i], flags="A", payload=0), how)
                taps.add(C.TAP_EGRESS, ts + int((q + rtt) * S), ack)
                flow_of[fr] = flow_of[ack] = f_i
                if dst in (DTN_R, DTN_R6):
                    dtn_bytes += _measured_len(fr)
                else:
                    campus_bytes += _measured_len(fr)
        campus_rtts = [f[3] for f in FLOWS if f[1] not in (DTN_R, DTN_R6) and (f[5] is None or k < f[5])]
        truth.append({"bytes_dtn": dtn_bytes, "bytes_campus": campus_bytes,
                      "rtt_dtn": 0.100, "rtt_campus": sum(campus_rtts) / len(campus_rtts),
                      "qdelay_dtn": 0.010, "qdelay_campus": 0.005, "active_flows": active})
    eg, ing = taps.write(directory, "bmv2")
    return ing, eg, truth, flow_of


def flow_silence(sent: list[list[tuple[int, int, bytes]]], flow_of: dict[bytes, int]) -> float:
    """The longest a flow went without a frame on either tap, in host seconds, over the whole
    replay. The truth assumes no flow idles out between periods; the switch's ``T_TH`` runs on
    the host's clock, so a replay that paused longer (the drain between periods under load, a
    cold cache) is a run that tested the harness, not the program."""
    last: dict[int, int] = {}
    worst = 0
    for ts, _port, fr in sorted((r for period in sent for r in period), key=lambda r: r[0]):
        f = flow_of.get(fr)
        if f is None:
            continue
        if f in last:
            worst = max(worst, ts - last[f])
        last[f] = ts
    return worst / 1e9


def _measured_len(fr: bytes) -> int:
    """The frame length the telemetry counts for ``fr`` (inside a tunnel: the inner frame)."""
    import numpy as np

    from scidmz.telemetry.twin.parse import parse_frames

    one = np.array([len(fr)], np.int64)
    pk = parse_frames(np.frombuffer(fr, np.uint8), np.zeros(1, np.int64), one, one, 1, np.zeros(1, np.int64))
    assert pk["kind"][0] != 0, "a frame of the run the parser cannot read"
    return int(pk["frame_len"][0])


def _twin_states(sent: list[list[tuple[int, int, bytes]]], samples_ns: list[int], workdir: Path) -> list:
    """The twin's NetworkState per period on the frames as sent (host monotonic ns)."""
    import numpy as np

    from scidmz.telemetry import constants as C
    from scidmz.telemetry.collector import Collector
    from scidmz.telemetry.twin.dataplane import SoftwareDataPlane, merge_taps
    from scidmz.telemetry.sources.pcap import read_capture, write_pcap

    rows = [r for period in sent for r in period]
    caps = []
    for port, tap in ((PORT_INGRESS, C.TAP_INGRESS), (PORT_EGRESS, C.TAP_EGRESS)):
        mine = [r for r in rows if r[1] == port]
        path = write_pcap(workdir / f"sent-{port}.pcap", [r[2] for r in mine], [r[0] for r in mine])
        caps.append(read_capture(path, tap=tap).packets)
    pk = merge_taps(*caps)
    twin = SoftwareDataPlane(DTN_PREFIXES, REMOTE_PREFIXES)
    col = None
    kinds: list[dict[str, int]] = []
    out, lo = [], 0
    for b in samples_ns:  # the first instant starts the collector (see run())
        hi = int(np.searchsorted(pk["ts_ns"], b, side="left"))
        twin.process(pk[lo:hi])
        twin.advance_clock(b / 1e9)
        lo = hi
        if col is None:
            col = Collector(twin)
        else:
            out.append(col.sample())
            kinds.append(_kinds(col.last_flow_digests))
    return out, twin.read_class_counters(), kinds


def _warm_jit(ing: Path, eg: Path, fence: bytes) -> None:
    """Compile the numba kernels the replay loop calls (``_outgoing``'s parser and data plane,
    the collector's control plane) before the timed replay: with a cold numba cache (a fresh
    clone, CI) ``_outgoing`` took ~3 s between period 0's last frame and the collector's start,
    so period 0's flows idled out and came back as new ones (12 active, not 6)."""
    from scidmz.telemetry import constants as C
    from scidmz.telemetry.collector import Collector
    from scidmz.telemetry.twin.dataplane import SoftwareDataPlane, merge_taps
    from scidmz.telemetry.sources.pcap import read_capture

    pk = merge_taps(read_capture(ing, tap=C.TAP_INGRESS).packets, read_capture(eg, tap=C.TAP_EGRESS).packets)
    half = len(pk) // 2
    twin = SoftwareDataPlane(DTN_PREFIXES, REMOTE_PREFIXES)
    twin.process(pk[:half])
    twin.advance_clock(int(pk["ts_ns"][half]) / 1e9)
    col = Collector(twin)
    twin.process(pk[half:])
    twin.advance_clock(int(pk["ts_ns"][-1]) / 1e9 + 0.1)
    col.sample()
    # one frame of each kind a period carries (every flow's encapsulation, the probes, the fence):
    # the parser dispatches on the frame's kind, so each kind compiles its own kernels
    from scidmz.telemetry.sources.synth import frame

    kinds = [deliver(frame(src, dst, sport, 5201, seq=1, ack=1, flags="PA", payload=PAYLOAD), how)
             for src, dst, sport, _rtt, _q, _fin, how in FLOWS]
    _outgoing([(0, PORT_EGRESS, f) for f in [*kinds, *probes(0), fence]])


def run(periods: int = 4, speed: float = 1.0, gap_s: float = 0.060, prefix: str | None = None,
        workdir: str | os.PathLike[str] | None = None, compiled=None) -> dict:
    """Steps 1-4 of the module docstring; returns states, truth and timings as a JSON-able dict."""
    sys.path.insert(0, str(HERE.parent / "src"))
    from scidmz.telemetry.p4 import toolchain as p4tc
    from scidmz.telemetry import constants as C
    from scidmz.telemetry.collector import Collector
    from scidmz.telemetry.p4.p4runtime import P4RuntimeView

    prefix = prefix or f"p4e{os.getpid() % 100000}"
    from scidmz.telemetry.collector import DEFAULT_ALPHA
    from scidmz.telemetry.sources.synth import frame

    # the period's last egress-tap frame: classified (DTN), so once the switch has
    # counted it, it has processed every earlier frame of that port (ports are FIFO);
    # UDP, one a period: never an active flow, an RTT or a queuing sample
    fence = frame("192.0.2.1", DTN_R, 9, 9, proto=17, payload=18)
    with tempfile.TemporaryDirectory(prefix="scidmz-bmv2-") as tmp:
        wd = Path(workdir) if workdir is not None else Path(tmp)
        wd.mkdir(parents=True, exist_ok=True)
        ing, eg, truth, flow_of = traffic(wd, periods, gap_s)
        _warm_jit(ing, eg, fence)
        if compiled is None:
            compiled = p4tc.compile_bmv2(SRC, wd / "build")
        with p4tc.Bmv2Switch(prefix, 2, log=wd / "switch.log") as sw, \
                p4tc.PcapReplayer({PORT_INGRESS: ing, PORT_EGRESS: eg}, sw.host_ifaces) as rp:
            view = P4RuntimeView(sw.grpc_address, p4info=compiled.p4info, bmv2_json=compiled.json,
                                 thrift_address=sw.thrift_address)
            try:
                view.install(dtn_prefixes=DTN_PREFIXES, remote_prefixes=REMOTE_PREFIXES,
                             tap_ports={PORT_INGRESS: C.TAP_INGRESS, PORT_EGRESS: C.TAP_EGRESS})
                stamps: list[int] = []
                switch_clock = view.clock

                def clock() -> float:
                    stamps.append(time.monotonic_ns())
                    return switch_clock()

                view.clock = clock  # type: ignore[method-assign]
                col = None
                sent, samples_ns, states, drain_s = [], [], [], []
                kinds: list[dict[str, int]] = []
                want = 0
                for k in range(periods):
                    lo = T0 + k * S
                    got = rp.play(lo, lo + S, speed)
                    got.append((rp.send(PORT_EGRESS, fence), PORT_EGRESS, fence))
                    sent.append(got)
                    want += _outgoing(got)
                    t_d = time.monotonic()
                    while int(view.read_class_counters()[:, 1].sum()) < want:
                        if time.monotonic() - t_d > 60:
                            raise RuntimeError(f"BMv2 did not count period {k}'s frames within 60 s")
                        time.sleep(0.01)
                    # digests travel apart from the counters (learn lists, 1-ms batches, the
                    # gRPC stream): wait until none has come for DIGEST_QUIET_S
                    n_lists, t_q = view.lists_received, time.monotonic()
                    while time.monotonic() - t_q < DIGEST_QUIET_S:
                        time.sleep(0.02)
                        if view.lists_received != n_lists:
                            n_lists, t_q = view.lists_received, time.monotonic()
                    drain_s.append(time.monotonic() - t_d)
                    mark = len(stamps)
                    if col is None:
                        # period 0 warms up: its digests give the adapter the switch's
                        # clock offset; both collectors start at this instant
                        if view.lists_received == 0:
                            raise RuntimeError("no digest from BMv2 in the warm-up period")
                        col = Collector(view)
                    else:
                        states.append(col.sample())
                        kinds.append(_kinds(col.last_flow_digests))
                    # the instant the collector read the switch's clock: the twin samples there
                    samples_ns.append(stamps[mark] if len(stamps) > mark else time.monotonic_ns())
                twin, twin_ctr, twin_kinds = _twin_states(sent, samples_ns, wd)
                bmv2_ctr = view.read_class_counters()
            finally:
                view.close()
    n_sent = sum(len(p) for p in sent)
    # the truth of each compared period, in the units the collector reports
    exp = []
    smooth = None
    for k in range(1, periods):
        t = truth[k]
        dt = (samples_ns[k] - samples_ns[k - 1]) / 1e9
        fence_b = len(fence)
        raw = t["rtt_campus"] / speed
        smooth = raw if smooth is None else DEFAULT_ALPHA * smooth + (1 - DEFAULT_ALPHA) * raw
        exp.append({"rate_dtn": 8 * (t["bytes_dtn"] + fence_b) / dt, "rate_campus": 8 * t["bytes_campus"] / dt,
                    "rtt_dtn": t["rtt_dtn"] / speed, "rtt_campus": smooth,
                    "qdelay_dtn": t["qdelay_dtn"] / speed, "qdelay_campus": t["qdelay_campus"] / speed,
                    "active_flows": t["active_flows"]})
    bm = [{f: getattr(s, f) for f in FIELDS} for s in states]
    tw = [{f: getattr(s, f) for f in FIELDS} for s in twin]
    play_s = [(p[-1][0] - p[0][0]) / 1e9 for p in sent]
    return {
        "periods_compared": periods - 1, "speed": speed, "frames": n_sent,
        "offered_pps": round(n_sent / sum(play_s), 1),
        "max_drain_s": round(max(drain_s), 3), "digest_lists": view.lists_received,
        # against the program's T_TH (constants.T_TH_US): at or above it the truth does not hold
        "max_flow_silence_s": round(flow_silence(sent, flow_of), 3),
        "bmv2": bm, "twin": tw, "truth": exp,
        "bmv2_vs_twin": max_rel_diff(bm, tw), "bmv2_vs_truth": max_rel_diff(bm, exp),
        "twin_vs_truth": max_rel_diff(tw, exp),
        # egress-tap class counters [class][bytes, packets] after the run: every frame, IPv4 and
        # IPv6, plain or encapsulated, counted with the same length and class on both
        "class_counters": {"bmv2": bmv2_ctr.tolist(), "twin": twin_ctr.tolist()},
        # flow digests each compared period drained, by kind (a diagnosis of active_flows)
        "flow_digests": {"bmv2": kinds, "twin": twin_kinds},
    }


def _kinds(d) -> dict[str, int]:
    names = {1: "new", 2: "ended", 3: "long"}
    return {names.get(int(k), str(int(k))): int((d["kind"] == k).sum()) for k in sorted(set(d["kind"].tolist()))}


def _outgoing(got: list[tuple[int, int, bytes]]) -> int:
    """Frames of ``got`` the egress tap's class counters count (classified as outgoing)."""
    import numpy as np

    from scidmz.telemetry import constants as C
    from scidmz.telemetry.twin.dataplane import SoftwareDataPlane
    from scidmz.telemetry.twin.parse import parse_frames

    frames = [r[2] for r in got if r[1] == PORT_EGRESS]
    if not frames:
        return 0
    lens = np.array([len(f) for f in frames], np.int64)
    off = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    pk = parse_frames(np.frombuffer(b"".join(frames), np.uint8), off, lens, lens, 1,
                      np.arange(len(frames), dtype=np.int64), tap=C.TAP_EGRESS)
    dp = SoftwareDataPlane(DTN_PREFIXES, REMOTE_PREFIXES)
    dp.process(pk)
    return int(dp.read_class_counters()[:, 1].sum())


def max_rel_diff(a: list[dict], b: list[dict]) -> dict[str, float]:
    """Per field, the largest |a - b| / max(|b|, tiny) over the periods."""
    out = {}
    for f in FIELDS:
        out[f] = max(abs(x[f] - y[f]) / max(abs(y[f]), 1e-12) for x, y in zip(a, b, strict=True))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--periods", type=int, default=4)
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args(argv)
    if a.periods < 3 or a.speed <= 0:
        print("run_bmv2: --periods must be >= 3 and --speed > 0", file=sys.stderr)
        return 2
    try:
        res = run(a.periods, a.speed, workdir=a.workdir)
    except (RuntimeError, OSError) as exc:  # no toolchain (ToolchainMissing), switch failed, no root
        print(f"run_bmv2: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 1
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
