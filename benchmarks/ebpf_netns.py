"""The eBPF telemetry on the netns testbed's border router BR1: y against the twin and the
kernel, and what the programs cost BR1 at 100 Mbit/s (root); prints one JSON object.

* ``compare``: the netns plant with the programs on BR1 (LAN: ``campus``,
  ``dtn``; WAN: ``wan``, transmit hook after the bottleneck TBF) and the
  software twin on the passive taps beside them
  (``sources.ebpf_telemetry(twin=True)``; the twin keeps
  kernel counters beside itself), a constant u (the trivial rate for a 50
  Mbit/s target), ``--periods`` periods. Per period the three NetworkStates:
  the programs', the twin's (``twin_y``) and kernel truth (``kernel_y``:
  S2's delivery counters, the bottleneck's backlog, the senders' tcp_info).
  ``summary``: per variable, the median and 90th percentile over the periods
  after the first two of |eBPF - twin| and |eBPF - kernel| (rates relative,
  delays in ms, flows in flows).
* ``overhead``: the testbed's own traffic (8 DTN streams at 100 ms, 10 campus
  hosts at 10 ms; the campus unshaped, so the 100 Mbit/s bottleneck is
  saturated) in ``--repeats`` pairs of ``--seconds`` windows, without the
  programs and with them on BR1 (sampled every T), alternating. For each:
  BR1's forwarding rate (bytes its WAN interface sent over the window) and
  the bytes delivered at S2. With the programs: packets the hooks saw
  against BR1's interface counters, read when no traffic runs (before the
  clients start, after they stopped and the queues drained), so both are
  exact (``missed`` = interface - hook); periods without a fresh rate
  sample; lost flow digests; parser counts. A last window with the kernel's
  BPF_ENABLE_STATS on gives the programs' run time per packet and the share
  of one core they took (statistics slow every program down, so the counts
  above come from windows without them).

Run it alone: ``flock /tmp/scidmz-root.lock sh -c 'touch /tmp/scidmz-quiet; trap "rm -f
/tmp/scidmz-quiet" EXIT; python benchmarks/ebpf_netns.py --out reports/ebpf/netns.json'``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

FIELDS = ("rate_dtn", "rate_campus", "rtt_dtn", "rtt_campus", "qdelay_dtn", "qdelay_campus", "active_flows")
SKIP = 2  # periods left out of the summary: the first is shorter for the programs (opened after the taps)


def _diff(field: str, a: float, b: float) -> float:
    if field.startswith("rate"):
        return abs(a - b) / max(abs(b), 1e6)  # relative; a class under 1 Mbit/s against 1 Mbit/s
    if field == "active_flows":
        return abs(a - b)
    return abs(a - b) * 1e3  # ms


def _stats(rows: list[dict[str, Any]], ref: str) -> dict[str, dict[str, float]]:
    out = {}
    for j, f in enumerate(FIELDS):
        d = np.array([_diff(f, r["ebpf"][j], r[ref][j]) for r in rows[SKIP:]])
        unit = "relative" if f.startswith("rate") else ("flows" if f == "active_flows" else "ms")
        out[f] = {"median": float(np.median(d)), "p90": float(np.percentile(d, 90)), "max": float(d.max()),
                  "unit": unit}
    return out


def compare(periods: int, prefix: str) -> dict[str, Any]:
    from scidmz.plant.netns.plant import NetnsPlant
    from scidmz.plant.netns.sources import ebpf_telemetry
    from scidmz.scenario import resolve_scenario

    sc = resolve_scenario("testbed")
    u = sc.trivial_rate(50e6)
    tel = functools.partial(ebpf_telemetry, twin=True)
    rows = []
    with NetnsPlant(sc, prefix=prefix, telemetry=tel) as pl:
        pl.reset(seed=0)
        for k in range(1, periods + 1):
            st = pl.step(np.array([u]))
            info = pl.telemetry.last_info
            rows.append({"k": k, "ebpf": [float(v) for v in st.y[0]],
                         "twin": [float(v) for v in info["twin_y"]], "kernel": [float(v) for v in info["kernel_y"]],
                         "stale": {f: bool(info.get(f"stale_{f}", 0.0)) for f in FIELDS},
                         "starved": bool(pl.info["starved"][0]), "telemetry": pl.info["telemetry"]})
        counters = pl.telemetry.tel.counters()
    return {"scenario": sc.name, "u": u, "periods": periods, "rows": rows, "skip": SKIP,
            "vs_twin": _stats(rows, "twin"), "vs_kernel": _stats(rows, "kernel"),
            "starved_periods": sum(r["starved"] for r in rows),
            "events_lost": int(counters["events_lost"])}


def _links(ns: str) -> dict[str, dict[str, int]]:
    r = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show"], capture_output=True, text=True, check=True)
    out = {}
    for d in json.loads(r.stdout):
        s = d.get("stats64", {})
        out[d["ifname"]] = {f"{side}_{k}": int(s.get(side, {}).get(k, 0)) for side in ("rx", "tx")
                            for k in ("packets", "bytes", "dropped")}
    return out


def _delta(a: dict[str, dict[str, int]], b: dict[str, dict[str, int]], dev: str, key: str) -> int:
    return b[dev][key] - a[dev][key]


def _window(tb: Any, traffic: Any, seconds: float, warm: float, tel: Any = None) -> dict[str, Any]:
    """Start the traffic, skip ``warm`` s, measure ``seconds`` s, stop and let the queues drain."""
    br1, sw2 = tb.spec.ns("br1"), tb.spec.ns("sw2")
    traffic.start_campus()
    traffic.start_dtn()
    time.sleep(warm)
    a1, s1, t1 = _links(br1), _links(sw2), time.monotonic()
    stale = samples = 0
    if tel is not None:
        tel.sample()  # the measured window's first period starts here
    while time.monotonic() < t1 + seconds:
        time.sleep(min(tb.scenario.period, t1 + seconds - time.monotonic()))
        if tel is not None:
            tel.sample()
            samples += 1
            stale += int(tel.stale.get("rate_dtn", False) or tel.stale.get("rate_campus", False))
    a2, s2, t2 = _links(br1), _links(sw2), time.monotonic()
    traffic.stop_clients()
    dt = t2 - t1
    ports = [h.port for h in tb.spec.receivers]
    return {"seconds": dt, "br1_forwarded_bps": _delta(a1, a2, "wan", "tx_bytes") * 8 / dt,
            "br1_wan_tx_dropped": _delta(a1, a2, "wan", "tx_dropped"),
            "delivered_bps": sum(_delta(s1, s2, p, "tx_bytes") for p in ports) * 8 / dt,
            "periods": samples, "periods_without_fresh_rates": stale}


def _with_programs(tb: Any, traffic: Any, seconds: float, warm: float, stats: bool) -> dict[str, Any]:
    """One window with the programs on BR1; packets against interface counters read with no traffic."""
    from scidmz.plant.netns.sources import ebpf_points
    from scidmz.telemetry.ebpf.source import EbpfTelemetry

    pts = ebpf_points(tb)
    br1, progs = pts["netns"], ("scidmz_lan_in", "scidmz_wan_in", "scidmz_wan_xmit")
    with EbpfTelemetry(**pts) as tel:
        stats_fd = tel.obj.enable_stats() if stats else None
        try:
            time.sleep(1.0)  # whatever was in flight is gone; nothing runs now
            i0, c0, m0 = _links(br1), tel.counters(), tel.obj.prog_misses("scidmz_wan_xmit")
            r0 = {p: tel.obj.prog_stats(p) for p in progs}
            out = _window(tb, traffic, seconds, warm, tel)
            time.sleep(2.0)  # the queues drain, the last ACKs arrive
            i1, c1, m1 = _links(br1), tel.counters(), tel.obj.prog_misses("scidmz_wan_xmit")
            r1 = {p: tel.obj.prog_stats(p) for p in progs}
        finally:
            if stats_fd is not None:
                os.close(stats_fd)
    dc = {k: int(c1[k] - c0[k]) for k in c0}
    seen = {"lan_in": sum(_delta(i0, i1, d, "rx_packets") for d in pts["lan"]),
            "wan_in": _delta(i0, i1, "wan", "rx_packets"), "wan_out": _delta(i0, i1, "wan", "tx_packets")}
    hooks = {h: dc[f"hook_{h}"] for h in seen}
    out.update({
        "bpf_stats": stats, "interface_packets": seen, "hook_packets": hooks,
        "missed_packets": {h: seen[h] - hooks[h] for h in seen},
        "flow_events_lost": dc["events_lost"], "xmit_recursion_misses": m1 - m0,
        "parsed_not_measured": {k[len("parse_"):]: v for k, v in dc.items() if k.startswith("parse_") and v},
    })
    if stats:
        run = {p: (r1[p][0] - r0[p][0], r1[p][1] - r0[p][1]) for p in progs}
        out["ns_per_run"] = {p: (v[0] / v[1] if v[1] else None) for p, v in run.items()}
        out["runs"] = {p: v[1] for p, v in run.items()}
        out["core_share"] = sum(v[0] for v in run.values()) / 1e9 / (out["seconds"] + warm + 2.0)
    return out


def overhead(seconds: float, prefix: str, repeats: int, warm: float = 5.0) -> dict[str, Any]:
    """``repeats`` pairs of windows without and with the programs, alternating (so a drift in the
    machine's load hits both), then one with the kernel's run-time statistics on (they slow every
    BPF program down, so the counts come from the windows without them)."""
    from scidmz.plant.netns.testbed import Testbed
    from scidmz.plant.netns.traffic.episode import Traffic
    from scidmz.scenario import resolve_scenario

    sc = resolve_scenario("testbed")
    without, with_ = [], []
    with Testbed(sc, prefix=prefix) as tb:
        tb.up()
        traffic = Traffic(tb, 0)
        traffic.start_servers()
        for _ in range(repeats):
            without.append(_window(tb, traffic, seconds, warm))
            time.sleep(2.0)
            with_.append(_with_programs(tb, traffic, seconds, warm, stats=False))
            time.sleep(2.0)
        cost = _with_programs(tb, traffic, seconds, warm, stats=True)
    fwd = [w["br1_forwarded_bps"] for w in without], [w["br1_forwarded_bps"] for w in with_]
    missed = {h: sum(w["missed_packets"][h] for w in with_) for h in ("lan_in", "wan_in", "wan_out")}
    seen = {h: sum(w["interface_packets"][h] for w in with_) for h in missed}
    return {"without_programs": without, "with_programs": with_, "with_programs_and_bpf_stats": cost,
            "forwarded_bps_without": float(np.mean(fwd[0])), "forwarded_bps_with": float(np.mean(fwd[1])),
            "forwarding_ratio": float(np.mean(fwd[1]) / np.mean(fwd[0])),
            "missed_packets": missed, "missed_share": {h: missed[h] / max(seen[h], 1) for h in missed},
            "periods_without_fresh_rates": sum(w["periods_without_fresh_rates"] for w in with_),
            "flow_events_lost": sum(w["flow_events_lost"] for w in with_)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--periods", type=int, default=30, help="compare: periods (default 30)")
    ap.add_argument("--seconds", type=float, default=15.0, help="overhead: measured seconds per window (default 15)")
    ap.add_argument("--repeats", type=int, default=2, help="overhead: window pairs without/with (default 2)")
    ap.add_argument("--skip", choices=("compare", "overhead"), action="append", default=[])
    ap.add_argument("--out", default=None, help="also write the JSON here")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("benchmarks/ebpf_netns.py needs root (the netns testbed, BPF)", file=sys.stderr)
        return 2
    res: dict[str, Any] = {"benchmark": "ebpf_netns", "kernel": platform.release(), "cpus": os.cpu_count(),
                           "loadavg_start": os.getloadavg()[0], "time": time.time()}
    p = f"eb{os.getpid() % 1000}"
    if "compare" not in a.skip:
        res["compare"] = compare(a.periods, p + "c")
    if "overhead" not in a.skip:
        res["overhead"] = overhead(a.seconds, p + "o", a.repeats)
    res["loadavg_end"] = os.getloadavg()[0]
    text = json.dumps(res)
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
