"""Measurements of a built testbed: idle-path RTTs, delay-stage accuracy, bottleneck rate.

``measure_rtt`` times a TCP connect from a sender's namespace to a closed
port on its receiver: the SYN goes out, the RST comes back through the
delay stage, so the connect fails after exactly one round trip, measured by
the kernel's own packets (no ping here, none needed). The median of several
probes is compared with the configured RTT (requirement: within 1 ms).

``measure_bottleneck`` runs 4 parallel iperf3 TCP streams from a campus
host for a few seconds with the shaper open and reports the wire rate out
of the bottleneck (S2 port counters, L2 bytes as the TBF counts them) and
iperf3's goodput, plus what the delay stage dropped, failed or reordered
meanwhile (requirement: nothing).
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..probe import measure_rtt
from ..testbed import Testbed

__all__ = ["measure_rtt", "measure_bottleneck", "check_testbed"]

def _port_bytes(tb: Testbed) -> dict[str, int]:
    from pyroute2 import IPRoute

    with IPRoute(netns=tb.ns("sw2")) as ipr:
        return {ln.get_attr("IFLA_IFNAME"): int(ln.get_attr("IFLA_STATS64")["tx_bytes"]) for ln in ipr.get_links()}


def measure_bottleneck(tb: Testbed, seconds: float = 4.0, streams: int = 4, sender: str = "s1",
                       taps: bool = True) -> dict[str, Any]:
    """Saturate the bottleneck from one campus host; wire rate, goodput, delay-stage and tap health.

    With ``taps`` the data-plane telemetry runs on the mirrored packets
    meanwhile, and its capture rings' kernel drops are reported.
    """
    from ..traffic.iperf import IPERF_PORT, parse_iperf_json

    h = tb.hosts[sender]
    r = tb.hosts[h.peer]
    need_server = not any("iperf3" in " ".join(map(str, p.args)) and r.ns in " ".join(map(str, p.args))
                          and p.poll() is None for p in tb.procs)
    if need_server:
        tb.spawn(r.ns, ["iperf3", "-s", "-p", str(IPERF_PORT)], log_name=f"iperf3-s-{r.name}.log")
        time.sleep(0.5)
    tel = None
    if taps:
        from ..sources import dataplane_telemetry

        tel = dataplane_telemetry(tb)
        tap0 = tel.latest_drops()
    try:
        p = tb.spawn(h.ns, ["iperf3", "-c", r.ip, "-p", str(IPERF_PORT), "-t", str(seconds + 2.0),
                            "-P", str(streams), "-C", h.cca, "-J"], log_name=f"check-{sender}.json")
        time.sleep(1.0)  # past slow start: measure the steady state only
        ds0 = tb.delay_stats()
        b0 = _port_bytes(tb)
        t0 = time.monotonic()
        time.sleep(seconds)
        b1 = _port_bytes(tb)
        dt = time.monotonic() - t0
        p.wait(timeout=seconds + 30)
        time.sleep(1.1)  # let the stage write its next counters (and the taps close a period)
        ds1 = tb.delay_stats()
        tap = None
        if tel is not None:
            tap1 = tel.latest_drops()
            tap = {k: float(tap1.get(k, 0) - tap0.get(k, 0)) for k in tap1}
    finally:
        if tel is not None:
            tel.close()
    rep = parse_iperf_json((tb.logdir / f"check-{sender}.json").read_text())
    port = tb.spec.s2_port(r.name)
    wire = (b1.get(port, 0) - b0.get(port, 0)) * 8 / dt

    def d(k: str) -> float:
        return float(ds1.get(k, 0) - ds0.get(k, 0))

    return {
        "capacity": tb.scenario.capacity,
        "wire_rate": wire,
        "goodput": rep["bytes_received"] * 8 / rep["seconds"] if rep["seconds"] else 0.0,
        "retransmits": rep["retransmits"],
        "taps": tap,
        "delay_stage": {
            "frames": d("rx"),
            "kernel_drops": d("kernel_drops"),
            "tx_errors": d("tx_errors"),
            "reordered": d("reordered"),
            "late_max_s": float(ds1.get("late_max_s", 0.0)),
            "late_over_1ms": d("late_over_1ms"),
            "late_mean_s": (d("late_sum_s") / d("tx")) if d("tx") else 0.0,
        },
    }


def check_testbed(tb: Testbed, senders: list[str] | None = None, rate_seconds: float = 4.0,
                  progress: bool = False) -> dict[str, Any]:
    """All checks on an up testbed; ``ok`` says whether every requirement holds (``progress``: a bar on stderr)."""
    names = senders or [h.name for h in tb.spec.campus[:2]] + ["dtns"]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(names) + 1, desc="testbed check", unit="check", leave=False)
    rtts = {}
    for n in names:
        if bar is not None:
            bar.set_postfix_str(f"RTT of {n}")
        rtts[n] = measure_rtt(tb, n)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.set_postfix_str(f"bottleneck rate ({rate_seconds:g} s)")
    bn = measure_bottleneck(tb, seconds=rate_seconds, sender=tb.spec.campus[0].name if tb.spec.campus else "dtns")
    if bar is not None:
        bar.update(1)
        bar.close()
    st = bn["delay_stage"]
    ok_rtt = all(abs(v["error"]) <= 1e-3 for v in rtts.values())
    ok_stage = st["kernel_drops"] == 0 and st["tx_errors"] == 0 and st["reordered"] == 0
    # Held frames released on time on average (the emulated RTT is then within 0.5 ms).
    ok_punctual = st["late_mean_s"] <= 0.5e-3
    ok_taps = bn["taps"] is None or bn["taps"].get("kernel_drops", 0) == 0
    ok_rate = abs(bn["wire_rate"] / bn["capacity"] - 1) <= 0.05
    return {
        "testbed": tb.summary() | {"namespaces": len(tb.summary()["namespaces"])},
        "rtt": rtts,
        "bottleneck": bn,
        "ok": {"rtt_within_1ms": ok_rtt, "delay_stage_clean": ok_stage,
               "releases_punctual": ok_punctual, "taps_clean": ok_taps, "rate_within_5pct": ok_rate},
    }


def human(res: dict[str, Any]) -> str:
    lines = [f"testbed {res['testbed']['prefix']} ({res['testbed']['switch']}), "
             f"B_max {res['testbed']['capacity'] / 1e6:.1f} Mbit/s"]
    for n, v in res["rtt"].items():
        lines.append(f"  RTT {n:5s} configured {v['configured'] * 1e3:7.2f} ms  measured {v['median'] * 1e3:7.2f} ms"
                     f"  (error {v['error'] * 1e3:+.2f} ms)")
    bn = res["bottleneck"]
    st = bn["delay_stage"]
    lines.append(f"  bottleneck wire rate {bn['wire_rate'] / 1e6:.2f} Mbit/s, goodput {bn['goodput'] / 1e6:.2f} Mbit/s")
    lines.append(f"  delay stage: {st['frames']:.0f} frames, {st['kernel_drops']:.0f} dropped, "
                 f"{st['tx_errors']:.0f} failed, {st['reordered']:.0f} reordered, "
                 f"late mean {st['late_mean_s'] * 1e6:.0f} us, {st['late_over_1ms']:.0f} frames > 1 ms late "
                 f"(max {st['late_max_s'] * 1e3:.1f} ms)")
    if bn.get("taps") is not None:
        lines.append(f"  taps: {bn['taps'].get('kernel_packets', 0):.0f} frames captured, "
                     f"{bn['taps'].get('kernel_drops', 0):.0f} dropped by the kernel rings")
    lines.append("  " + ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in res["ok"].items()))
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - manual use
    from ....scenario import load_scenario

    with Testbed(load_scenario("testbed")) as _tb:
        print(json.dumps(check_testbed(_tb), indent=1))
