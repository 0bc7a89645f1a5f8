"""The buffer regime: how much of its target the trivial TBF gives the DTN, against the bottleneck buffer.

For each bottleneck buffer (in BDPs of the DTN path) and each DTN congestion
control, the trivial TBF of the MLC paper (section 3.7, u = B_max - R*_DTN)
holds a constant target R*_DTN = ``--target-frac`` x B_max, and we report

* ``fill``: mean R_DTN / R*_DTN over the periods after the warm-up (the
  DTN's rate in Ethernet frame bytes, ARCHITECTURE.md's ``rate_dtn``);
* ``qdelay``: mean per-packet queuing delay of the DTN's packets at the
  bottleneck (``qdelay_dtn``), and the mean DTN RTT (``rtt_dtn``);
* ``utilization``: (R_DTN + R_campus) / B_max.

Plants: ``fluid`` (the ``paper-*`` scenarios at 1 Gbit/s, all buffers and
seeds of one CCA in one batched plant; and ``fluid_testbed``, the
``testbed`` scenario at 100 Mbit/s, like for like with the testbed) and ``netns`` (the ``testbed``
scenario at 100 Mbit/s on real kernel TCP, one real-time episode per
buffer and CCA; needs root). ``--campus-cca`` sets the campus hosts' CCA
(default cubic; ``bbr`` gives the all-BBR rows of reports/fidelity). A netns
row also carries each class's kernel TCP counters over the measured periods
(``tcp_counters``: segments sent and retransmitted, RTOs, loss probes, from
each sender namespace's /proc/net/snmp and netstat) and the bottleneck's drops,
the evidence for which mechanism sets the fill. Each testbed period says whether the
machine's CPU rather than TCP limited it (``info["starved"]``, see
``scidmz.plant.netns.manage.starvation``). A run with more than
``RUN_STARVED_MAX`` (10 %) starved periods is not recorded: its fill is
null, its evidence is kept, and the script exits 1 unless
``--allow-starved`` asks only to mark it; otherwise its figures come from
its clean periods and the starved count is reported.

    python benchmarks/buffer_regime.py [--plant fluid|netns|both] [--quick]

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import numpy as np

BUFFERS_BDP = (0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)
FLUID_SCENARIOS = {"cubic": "paper-cubic", "bbr": "paper-bbr", "bbr2": "paper-bbr2"}


def _summary(y: np.ndarray, target: float, capacity: float) -> dict[str, float]:
    """y: (periods, 7) after the warm-up."""
    return {
        "fill": float(y[:, 0].mean() / target),
        "fill_std": float(y[:, 0].std() / target),
        "qdelay_dtn": float(y[:, 4].mean()),
        "qdelay_campus": float(y[:, 5].mean()),
        "rtt_dtn": float(y[:, 2].mean()),
        "utilization": float((y[:, 0] + y[:, 1]).mean() / capacity),
    }


# /proc/net/snmp "Tcp:" and /proc/net/netstat "TcpExt:" fields read per sender namespace.
_TCP_FIELDS = {"Tcp": ("OutSegs", "RetransSegs"),
               "TcpExt": ("TCPTimeouts", "TCPLossProbes", "TCPSackRecovery", "TCPLostRetransmit")}


def _read_tcp_counters(ns: str) -> dict[str, float]:
    """One namespace's TCP MIB counters (they are per network namespace)."""
    import subprocess

    out = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/snmp", "/proc/net/netstat"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    res: dict[str, float] = {}
    for head, vals in zip(out[::2], out[1::2], strict=False):
        keys, nums = head.split(), vals.split()
        if not keys or keys[0] != nums[0] or keys[0].rstrip(":") not in _TCP_FIELDS:
            continue
        want = _TCP_FIELDS[keys[0].rstrip(":")]
        res.update({k: float(v) for k, v in zip(keys[1:], nums[1:], strict=True) if k in want})
    return res


def tcp_counters(classes: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Summed TCP counters per class, ``classes``: class name -> its sender namespaces."""
    out: dict[str, dict[str, float]] = {}
    for cls, nss in classes.items():
        tot: dict[str, float] = {}
        for ns in nss:
            for k, v in _read_tcp_counters(ns).items():
                tot[k] = tot.get(k, 0.0) + v
        out[cls] = tot
    return out


def counter_delta(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """b - a per class, with the retransmitted share of the segments sent."""
    out: dict[str, dict[str, float]] = {}
    for cls in b:
        d = {k: b[cls][k] - a[cls].get(k, 0.0) for k in b[cls]}
        if d.get("OutSegs", 0.0) > 0:
            d["retrans_frac"] = d.get("RetransSegs", 0.0) / d["OutSegs"]
        out[cls] = d
    return out


_SS_FIELDS = {  # ss -ti field -> (our key, unit scale to SI)
    "cwnd": ("cwnd_pkts", 1.0), "rtt": ("srtt_s", 1e-3), "minrtt": ("min_rtt_s", 1e-3),
    "pacing_rate": ("pacing_bps", 1.0), "delivery_rate": ("delivery_bps", 1.0),
    "bw": ("bbr_bw_bps", 1.0), "mrtt": ("bbr_min_rtt_s", 1e-3), "pacing_gain": ("bbr_pacing_gain", 1.0),
    "cwnd_gain": ("bbr_cwnd_gain", 1.0), "lost": ("lost_pkts", 1.0), "unacked": ("unacked_pkts", 1.0),
    "rto": ("rto_s", 1e-3), "ssthresh": ("ssthresh_pkts", 1.0),
}
_RATE_UNITS = {"bps": 1.0, "Kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9}


def _ss_value(text: str) -> float | None:
    import re

    m = re.match(r"^([0-9.]+)(bps|Kbps|Mbps|Gbps)?", text)
    if not m:
        return None
    return float(m.group(1)) * _RATE_UNITS.get(m.group(2) or "", 1.0)


def ss_snapshot(classes: dict[str, list[str]]) -> dict[str, list[dict[str, float]]]:
    """Per-socket congestion state of every sender's data sockets (``ss -tin``): cwnd, RTTs, pacing and
    delivery rates, BBR's bandwidth estimate and gains, lost and unacked packets, RTO."""
    import re
    import subprocess

    out: dict[str, list[dict[str, float]]] = {}
    for cls, nss in classes.items():
        socks: list[dict[str, float]] = []
        for ns in nss:
            text = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tinH", "state", "established"],
                                  capture_output=True, text=True, check=False).stdout
            for line in text.splitlines():
                if not line.startswith((" ", "\t")):
                    continue
                row: dict[str, float] = {}
                line = re.sub(r"bbr:\((.*?)\)", lambda m: " " + m.group(1).replace(",", " "), line)
                line = re.sub(r"(pacing_rate|delivery_rate) ", r"\1:", line)
                for tok in line.split():
                    key, _, val = tok.partition(":")
                    if key in _SS_FIELDS and val:
                        name, scale = _SS_FIELDS[key]
                        v = _ss_value(val.split("/")[0])
                        if v is not None:
                            row[name] = v * scale
                if "retrans" in line:
                    m = re.search(r"retrans:\d+/(\d+)", line)
                    if m:
                        row["retrans_total"] = float(m.group(1))
                m = re.search(r"bytes_acked:(\d+)", line)
                if m and float(m.group(1)) > 1e6:  # a data flow, not iperf3's control connection
                    socks.append(row)
        out[cls] = socks
    return out


def sender_namespaces(plant: Any) -> dict[str, list[str]]:
    """The netns plant's sender namespaces per class (DTN, campus hosts)."""
    tb = plant.testbed
    return {"dtn": [tb.dtn.ns], "campus": [h.ns for h in tb.campus]}


def fluid_sweep(cca: str, buffers: list[float], seeds: int, duration: float, warmup: float,
                target_frac: float, base: str | None = None,
                cca_override: str | None = None, campus_cca: str | None = None) -> list[dict[str, Any]]:
    """All buffers x seeds of one CCA in one batched fluid plant."""
    from scidmz.plant.base import make_plant
    from scidmz.scenario import load_scenario

    sc0 = load_scenario(base or FLUID_SCENARIOS[cca])
    if cca_override is not None:
        sc0 = sc0.replace(dtn={"cca": cca_override})
    if campus_cca is not None:
        sc0 = sc0.replace(campus={"cca": campus_cca})
    scs = [sc0.replace(link={"buffer_bdp": b, "buffer": None}, seed=s) for b in buffers for s in range(seeds)]
    target = target_frac * sc0.capacity
    u = np.full(len(scs), sc0.trivial_rate(target))
    steps = int(round(duration / sc0.period))
    skip = int(round(warmup / sc0.period))
    with make_plant("fluid", sc0, scenarios=scs) as plant:
        plant.reset(sc0.seed)
        ys = np.array([plant.step(u).y for _ in range(steps)])[skip:]  # (periods, B, 7)
    out = []
    for i, b in enumerate(buffers):
        rows = [_summary(ys[:, i * seeds + s, :], target, sc0.capacity) for s in range(seeds)]
        fills = np.array([r["fill"] for r in rows])
        out.append({
            "buffer_bdp": b,
            "buffer_bytes": scs[i * seeds].buffer_bytes,
            "seeds": seeds,
            **{k: float(np.mean([r[k] for r in rows])) for k in rows[0]},
            "fill_seed_std": float(fills.std()),
        })
    return out


def netns_run(cca: str, buffer_bdp: float, duration: float, warmup: float, target_frac: float,
              telemetry: str, base: str = "testbed", campus_cca: str = "cubic") -> dict[str, Any]:
    """One real-time trivial-TBF episode on the testbed; refuses the figure if the run was starved."""
    from scidmz.plant.base import make_plant
    from scidmz.scenario import load_scenario

    sc = load_scenario(base)
    sc = sc.replace(link={"buffer_bdp": buffer_bdp, "buffer": None}, dtn={"cca": cca}, campus={"cca": campus_cca})
    target = target_frac * sc.capacity
    u = sc.trivial_rate(target)
    steps = int(round(duration / sc.period))
    skip = int(round(warmup / sc.period))
    from scidmz.plant.netns.manage.starvation import run_verdict

    ys: list[np.ndarray] = []
    flags: list[bool] = []
    evid: list[dict[str, Any]] = []
    t0 = time.time()
    drops = 0.0
    with make_plant("netns", sc, telemetry=telemetry) as plant:
        plant.reset(sc.seed)
        nss = sender_namespaces(plant)
        c0: dict[str, dict[str, float]] = {}
        snaps: list[dict[str, Any]] = []
        for k in range(steps):
            if k == skip:
                c0 = tcp_counters(nss)
            ys.append(plant.step(u).y[0])
            if k in (skip, (skip + steps) // 2, steps - 1):
                snaps.append({"t": (k + 1) * sc.period, **ss_snapshot(nss)})
            info = plant.info
            if k >= skip:
                evid.append({"t": (k + 1) * sc.period, **info.get("starvation", {})})
                flags.append(bool(info.get("starved")))
                drops += float(np.nansum(info.get("bottleneck_drops", [0.0])))
        counters = counter_delta(c0, tcp_counters(nss))
        tel = plant.info.get("telemetry")
    y = np.array(ys)[skip:]
    refused, n_starved = run_verdict(flags)
    row: dict[str, Any] = {"buffer_bdp": buffer_bdp, "buffer_bytes": sc.buffer_bytes, "telemetry": tel,
                           "campus_cca": campus_cca, "wall_s": time.time() - t0, "starved_periods": n_starved,
                           "periods": int(y.shape[0]), "tcp_counters": counters, "bottleneck_drops": drops,
                           "sockets": snaps}
    for key in ("stage_late_mean_s", "bottleneck_service", "cpu_pressure", "dtn_sender_busy", "dtn_rwnd_limited"):
        vals = [e[key] for e in evid if isinstance(e.get(key), float)]
        if vals:
            row[f"{key}_median"] = float(np.median(vals))
            row[f"{key}_worst"] = float(min(vals) if key in ("bottleneck_service", "dtn_sender_busy") else max(vals))
    bad = [e for e, f in zip(evid, flags, strict=True) if f]
    if bad:
        row["evidence"] = bad[:3]
    if refused:
        # A starved run measures the machine, not TCP: no figure is recorded from it.
        row.update({"fill": None, "starved": True})
    else:
        # Figures from the clean periods only (starved ones, if any, are counted above).
        row.update({"starved": False, **_summary(y[~np.array(flags, dtype=bool)], target, sc.capacity)})
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plant", choices=("fluid", "netns", "both"), default="fluid")
    ap.add_argument("--cca", default="cubic,bbr", help="comma-separated DTN CCAs (default cubic,bbr)")
    ap.add_argument("--campus-cca", default="cubic", help="the campus hosts' CCA (default cubic)")
    ap.add_argument("--buffers", default=",".join(str(b) for b in BUFFERS_BDP), help="BDP multiples")
    ap.add_argument("--target-frac", type=float, default=0.5, help="R*_DTN as a fraction of B_max")
    ap.add_argument("--seeds", type=int, default=4, help="fluid seeds per buffer")
    ap.add_argument("--duration", type=float, default=None, help="s per episode")
    ap.add_argument("--warmup", type=float, default=None, help="s left out at the start")
    ap.add_argument("--telemetry", default="kernel", choices=("kernel", "dataplane", "auto"),
                    help="netns telemetry source")
    ap.add_argument("--quick", action="store_true", help="short episodes (a smoke run)")
    ap.add_argument("--allow-starved", action="store_true",
                    help="mark starved netns runs instead of exiting 1")
    a = ap.parse_args()
    try:
        ccas = [c.strip() for c in a.cca.split(",") if c.strip()]
        buffers = [float(b) for b in a.buffers.split(",") if b.strip()]
    except ValueError as exc:
        print(f"buffer_regime: bad --buffers: {exc}", file=sys.stderr)
        return 2
    if not ccas or not buffers or any(b <= 0 for b in buffers):
        print("buffer_regime: --cca and --buffers need at least one value, buffers > 0", file=sys.stderr)
        return 2
    if not 0 < a.target_frac < 1:
        print(f"buffer_regime: --target-frac must be in (0, 1), got {a.target_frac}", file=sys.stderr)
        return 2
    res: dict[str, Any] = {"benchmark": "buffer_regime", "target_frac": a.target_frac, "campus_cca": a.campus_cca,
                           "buffers_bdp": buffers, "load_avg_start": os.getloadavg()}
    t0 = time.time()
    refused = 0
    if a.plant in ("fluid", "both"):
        dur = a.duration or (40.0 if a.quick else 120.0)
        warm = a.warmup if a.warmup is not None else (10.0 if a.quick else 20.0)
        res["fluid"] = {"duration_s": dur, "warmup_s": warm, "seeds": a.seeds, "capacity": 1e9}
        # The testbed's own scale (100 Mbit/s, 10 hosts): the like-for-like comparison with --plant netns.
        res["fluid_testbed"] = {"duration_s": dur, "warmup_s": warm, "seeds": a.seeds, "capacity": 1e8}
        for cca in ccas:
            res["fluid"][cca] = fluid_sweep(cca, buffers, a.seeds, dur, warm, a.target_frac,
                                            campus_cca=a.campus_cca)
            res["fluid_testbed"][cca] = fluid_sweep(cca, buffers, a.seeds, dur, warm, a.target_frac,
                                                    base="testbed", cca_override=cca, campus_cca=a.campus_cca)
    if a.plant in ("netns", "both"):
        if os.geteuid() != 0:
            print("buffer_regime: --plant netns needs root", file=sys.stderr)
            return 2
        dur = a.duration or (25.0 if a.quick else 60.0)
        warm = a.warmup if a.warmup is not None else (8.0 if a.quick else 15.0)
        res["netns"] = {"duration_s": dur, "warmup_s": warm, "capacity": 1e8, "telemetry": a.telemetry}
        for cca in ccas:
            rows = []
            for b in buffers:
                row = netns_run("bbr" if cca == "bbr2" else cca, b, dur, warm, a.target_frac, a.telemetry,
                                campus_cca="bbr" if a.campus_cca == "bbr2" else a.campus_cca)
                rows.append(row)
                refused += int(bool(row.get("starved")))
                why = "; ".join(sorted({r for e in row.get("evidence", []) for r in e.get("reasons", [])}))
                print(f"netns {cca} {b} BDP: fill {row.get('fill')} starved={row['starved']} {why}",
                      file=sys.stderr)
            res["netns"][cca] = rows
        res["netns"]["refused_runs"] = refused
    res["wall_s"] = time.time() - t0
    res["load_avg_end"] = os.getloadavg()
    print(json.dumps(res))
    if refused and not a.allow_starved:
        print(f"buffer_regime: {refused} netns run(s) were CPU-starved; their figures were not recorded",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
