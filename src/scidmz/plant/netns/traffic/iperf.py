"""The traffic generators' command lines and reports: iperf3 and ``sockflows.py``.

Pure functions (no process is started here): what each kind of sender runs,
and how an ``iperf3 -J`` report is read. ``episode.py`` and ``flows.py``
start them in the testbed's namespaces.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ....scenario import Scenario, WeibullConfig

__all__ = ["IPERF_PORT", "SHORT_PORT", "FOREVER", "parse_iperf_json", "iperf_tcp", "iperf_udp", "iperf_server",
           "sockflows_server", "sockflows_bulk", "sockflows_weibull", "campus_argv"]

IPERF_PORT = 5201
SHORT_PORT = 5300
FOREVER = 86400  # s; iperf3's maximum -t (3.12 has no "until killed")
_SOCKFLOWS = [sys.executable, "-m", "scidmz.plant.netns.traffic.sockflows"]


def parse_iperf_json(text: str) -> dict[str, Any]:
    """Bytes, duration and per-stream details from an ``iperf3 -J`` report (one-line error if bad)."""
    try:
        rep = json.loads(text)
    except ValueError:
        raise ValueError(f"iperf3 report is not JSON: {text[:200]!r}") from None
    if rep.get("error"):
        raise RuntimeError(f"iperf3 failed: {rep['error']}")
    end = rep.get("end", {})
    sent = end.get("sum_sent", {})
    recv = end.get("sum_received", {})
    streams = [s.get("sender", {}) for s in end.get("streams", [])]
    return {
        "bytes_sent": float(sent.get("bytes", 0.0)),
        "bytes_received": float(recv.get("bytes", 0.0)),
        "seconds": float(recv.get("seconds", sent.get("seconds", 0.0))),
        "retransmits": int(sent.get("retransmits", 0) or 0),
        "streams": len(streams),
        "mean_rtt": (sum(s.get("mean_rtt", 0) for s in streams) / len(streams) * 1e-6) if streams else None,
        "cca": rep.get("end", {}).get("sender_tcp_congestion"),
    }


def iperf_server() -> list[str]:
    return ["iperf3", "-s", "-p", str(IPERF_PORT)]


def iperf_tcp(dst: str, cca: str, streams: int | None = None, report: bool = False) -> list[str]:
    """Unlimited TCP to ``dst`` over ``streams`` parallel sockets (``report``: a JSON report at the end)."""
    argv = ["iperf3", "-c", dst, "-p", str(IPERF_PORT), "-t", str(FOREVER), "-C", cca]
    if streams is not None:
        argv += ["-P", str(streams)]
    return [*argv, *(["-J"] if report else []), "-i", "0"]


def iperf_udp(dst: str, rate: float) -> list[str]:
    """Constant bit rate UDP to ``dst`` at ``rate`` bit/s, 1400-byte datagrams."""
    return ["iperf3", "-c", dst, "-p", str(IPERF_PORT), "-u", "-b", str(int(rate)), "-l", "1400",
            "-t", str(FOREVER), "-i", "0"]


def sockflows_server() -> list[str]:
    return [*_SOCKFLOWS, "server", "--port", str(SHORT_PORT)]


def sockflows_bulk(dst: str, size: float, streams: int, cca: str) -> list[str]:
    """A fixed-size transfer over ``streams`` sockets; its last line is the FCT as JSON."""
    return [*_SOCKFLOWS, "bulk", "--dst", dst, "--port", str(SHORT_PORT), "--bytes", str(int(size)),
            "--streams", str(streams), "--cca", cca]


def sockflows_weibull(dst: str, seed: int, out: str, cca: str, w: WeibullConfig) -> list[str]:
    """Table 6's Weibull short flows to ``dst``, seeded, one JSON line per finished flow in ``out``."""
    return [*_SOCKFLOWS, "client", "--dst", dst, "--port", str(SHORT_PORT), "--seed", str(seed), "--out", out,
            "--cca", cca, "--gap-shape", str(w.gap_shape), "--gap-scale", str(w.gap_scale),
            "--gap-min", str(w.gap_min), "--gap-max", str(w.gap_max), "--size-shape", str(w.size_shape),
            "--size-scale", str(w.size_scale), "--size-min", str(w.size_min), "--size-max", str(w.size_max)]


def campus_argv(sc: Scenario, dst: str, cca: str) -> list[str] | None:
    """A campus host's long-flow or UDP CBR client (None for Weibull-only campus traffic)."""
    c = sc.campus
    if c.traffic == "long":
        return iperf_tcp(dst, cca, c.flows_per_host)
    if c.traffic == "udp":
        return iperf_udp(dst, c.udp_rate)
    return None
