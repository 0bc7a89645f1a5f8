"""``scidmz telemetry replay|capture|down``: the software twin of the P4 data plane; eBPF cleanup."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC
from typing import Any

from ._shared import add_json_arg, emit


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("telemetry", help="passive telemetry: software twin of the P4 data plane on pcaps or live taps")
    tsub = p.add_subparsers(dest="telemetry_command", metavar="SUBCOMMAND")
    r = tsub.add_parser(
        "replay", help="replay tap captures and print y(t) every period",
        description="PCAP (or --egress-pcap) is the bottleneck-interface tap of router BR1: outgoing packets "
                    "after its queue and the returning ACKs; rates, RTT and active flows come from it. "
                    "--ingress-pcap is the tap before BR1's queue: with it, queuing delay is measured too.")
    r.add_argument("pcap", nargs="?", help="egress (bottleneck) tap capture, pcap or pcapng")
    r.add_argument("--egress-pcap", default=None, help="same as PCAP")
    r.add_argument("--ingress-pcap", default=None, help="ingress tap capture (before the queue)")
    _add_telemetry_common(r)
    r.add_argument("--realtime", action="store_true", help="pace periods at wall-clock speed")
    r.add_argument("--start", default=None, metavar="TIME",
                   help="skip packets before TIME: a duration after the capture's first packet (e.g. 10s) "
                        "or an ISO 8601 date-time (e.g. 2024-05-01T12:00:00Z); counted as outside_window")
    r.add_argument("--end", default=None, metavar="TIME", help="skip packets from TIME on (as --start)")
    r.add_argument("--skip-outliers", action="store_true",
                   help="skip packets far off in time from the rest (more than about an hour of silence "
                        "between them and the bulk of the capture); counted as outlier")
    r.add_argument("--samples", default=None, metavar="FILE",
                   help="write every RTT sample to this Parquet file (time, flow, family, class, rtt)")
    r.set_defaults(func=cmd_telemetry_replay)
    c = tsub.add_parser("capture", help="capture live on mirror interfaces and stream y(t)")
    c.add_argument("--egress", required=True, metavar="IFACE", help="interface carrying the bottleneck tap")
    c.add_argument("--ingress", default=None, metavar="IFACE", help="interface carrying the ingress tap")
    c.add_argument("--duration", default=None, help="stop after this long, e.g. 30s (default: until Ctrl-C)")
    _add_telemetry_common(c)
    c.set_defaults(func=cmd_telemetry_capture)
    d = tsub.add_parser(
        "down", help="remove eBPF telemetry programs a killed scidmz left attached (root)",
        description="Reads the records in /run/scidmz/ebpf ($SCIDMZ_RUN_DIR) of every scidmz eBPF telemetry whose "
                    "process is gone (SIGKILL, a crash) and removes exactly what each lists: its filters, by "
                    "program id, and the clsact qdiscs it created if nothing else is left on them. Running "
                    "instances, and filters or qdiscs scidmz did not make, are left alone.")
    add_json_arg(d, "what was removed as JSON")
    d.set_defaults(func=cmd_telemetry_down)
    p.set_defaults(func=lambda a: p.error("a subcommand is required"))


def _add_telemetry_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--period", default="1s", help="control period T (default 1s)")
    p.add_argument("--dtn-prefix", action="append", default=None,
                   help="prefix of the receiving DTN (DTN-r, the host the data goes to), IPv4 or IPv6, "
                        "for class_lpm (repeatable or comma-separated; default 10.0.3.2/32)")
    p.add_argument("--remote-prefix", action="append", default=None,
                   help="remote network prefix, IPv4 or IPv6, for class_lpm (repeatable or comma-separated; "
                        "default 10.1.0.0/16)")
    p.add_argument("--rtt-tap", default="egress", choices=("egress", "ingress"),
                   help="tap where data and ACKs are matched for RTT (default egress)")
    p.add_argument("--rtt-timeout", default="1s",
                   help="an ACK for data older than this gives no RTT sample (default 1s, the P4 switch's)")
    p.add_argument("--allow-drops", action="store_true",
                   help="measure what can be read even when most packets cannot (a warning instead of exit 1)")
    add_json_arg(p, "a JSON object (series, drops)")
    p.add_argument("--plot", default=None, metavar="PNG",
                   help="draw y(t) to this PNG (periods whose value was held from an earlier one are hollow)")


def _plot(a: argparse.Namespace, result: dict[str, Any], title: str) -> None:
    if not a.plot:
        return
    from ..plots import plot_states, save_figure

    save_figure(plot_states(result["series"], result.get("stale"), title=title), a.plot)


def _telemetry_prefixes(a: argparse.Namespace) -> dict[str, Any]:
    from ..telemetry import constants as tc
    from ..telemetry.view import parse_prefixes

    out = {"dtn_prefix": a.dtn_prefix or [tc.DEFAULT_DTN_PREFIX],
           "remote_prefix": a.remote_prefix or [tc.DEFAULT_REMOTE_PREFIX]}
    for v in out.values():
        parse_prefixes(v)  # bad input: one line, exit 2, before any work
    return out


def _when(text: str | None, what: str) -> tuple[str, int] | None:
    """--start/--end: ("rel", ns after the first packet) for a duration, ("abs", ns) for a date-time."""
    if text is None:
        return None
    from datetime import datetime

    from ..units import parse_time

    t = str(text).strip()
    if "T" in t or t.count("-") >= 2:
        try:
            dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{what}: not an ISO 8601 date-time: {text!r} (e.g. 2024-05-01T12:00:00Z)") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return "abs", round(dt.timestamp() * 1e9)
    return "rel", round(parse_time(t, what) * 1e9)


def cmd_telemetry_replay(a: argparse.Namespace) -> int:
    from ..telemetry.run import replay
    from ..units import parse_time

    egress = a.egress_pcap or a.pcap
    if a.pcap and a.egress_pcap and a.pcap != a.egress_pcap:
        raise ValueError("give the egress tap capture once: PCAP or --egress-pcap, not both")
    if not egress:
        raise ValueError("telemetry replay needs the egress tap capture (PCAP or --egress-pcap)")
    from ..fileio import check_output_file

    if a.plot:
        check_output_file(a.plot, "--plot")
    if a.samples:
        check_output_file(a.samples, "--samples")
    result, human = replay(egress, a.ingress_pcap, period=parse_time(a.period, "--period"),
                           realtime=a.realtime, rtt_tap=a.rtt_tap, rtt_timeout=_rtt_timeout(a),
                           window=(_when(a.start, "--start"), _when(a.end, "--end")),
                           skip_outliers=a.skip_outliers, samples=a.samples, allow_drops=a.allow_drops,
                           **_telemetry_prefixes(a))
    for w in result["warnings"]:
        print(f"scidmz telemetry replay: warning: {w}", file=sys.stderr)
    _plot(a, result, f"telemetry replay of {egress}")
    emit(result, a.json, human)
    return 0


def _rtt_timeout(a: argparse.Namespace) -> float:
    from ..units import parse_time

    t = parse_time(a.rtt_timeout, "--rtt-timeout")
    if not 1e-6 <= t <= 3600:
        raise ValueError(f"--rtt-timeout must be between 1us and 1h, got {a.rtt_timeout!r}")
    return t


def cmd_telemetry_capture(a: argparse.Namespace) -> int:
    from ..telemetry.run import capture
    from ..units import parse_time

    duration = parse_time(a.duration, "--duration") if a.duration else None
    if a.plot:
        from ..fileio import check_output_file

        check_output_file(a.plot, "--plot")
    result, human = capture(a.egress, a.ingress, period=parse_time(a.period, "--period"), duration=duration,
                            rtt_tap=a.rtt_tap, rtt_timeout=_rtt_timeout(a), allow_drops=a.allow_drops,
                            **_telemetry_prefixes(a))
    for w in result["warnings"]:
        print(f"scidmz telemetry capture: warning: {w}", file=sys.stderr)
    _plot(a, result, f"telemetry capture on {a.egress}")
    emit(result, a.json, human)
    return 0


def cmd_telemetry_down(a: argparse.Namespace) -> int:
    from ..telemetry.ebpf.attach import down_stale, run_dir

    res = down_stale()
    res["run_dir"] = str(run_dir())
    skipped = res["skipped_records"]
    for line in skipped:  # one line each: left in place, named, the rest cleaned
        print(f"scidmz telemetry down: {line}", file=sys.stderr)
    tail = f"; {len(skipped)} record(s) skipped (named above)" if skipped else ""
    emit(res, a.json, f"removed {res['filters']} filters and {res['clsact']} clsact qdiscs of "
                      f"{res['records']} stale records ({res['run_dir']}){tail}")
    return 0
