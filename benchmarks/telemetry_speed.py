"""Speed of the software telemetry data plane; prints one JSON object.

1. offline: a synthetic two-direction capture of N packets (10,000 concurrent
   TCP flows, campus and DTN, ACKs D = 5..150 ms after their data, 10 s long)
   replayed through the full path on one core: file walk + parse, data plane,
   and the periods closed at T = 1 s and 0.1 s. Reports packets/s for each
   stage and overall, and ``cli``: the whole ``scidmz telemetry replay --json``
   process on the same file at both T (wall packets/s, goal >= 2 M, ours;
   peak memory against the file's size), with ``startup_s``: the same process
   on a 10-packet capture (interpreter, imports, numba cache loads), the floor
   under any replay. ``sparse``: the same number of packets spread over 83
   minutes (the issue's "cost follows periods" capture: 50,000 periods at
   T = 0.1 s), through the CLI at both T: the replay time follows packets, not
   periods.
2. tables: occupancy of the RTT stages and of the active-flow table and the
   collision rates for those 10,000 flows (flows left untracked by a slot
   collision, RTT inserts refused because all stages were busy).
3. live (root only, skipped otherwise): iperf3 TCP between two namespaces
   through a veth whose both directions are mirrored (tc mirred) to a tap;
   ``scidmz telemetry capture`` on the tap reports the kernel's
   PACKET_STATISTICS drops at the rate iperf3 reaches with offloads off.

Run: python benchmarks/telemetry_speed.py [--packets 1000000] [--no-live]
Numbers are noisy on a shared machine; run it when the cores are quiet.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def synth_capture(path: Path, n_packets: int, n_flows: int, seed: int, duration: float = 10.0) -> dict[str, float]:
    from scidmz.telemetry.sources.synth import bulk_pcap, ip2int

    rng = np.random.default_rng(seed)
    n_data = n_packets // 2
    flow = rng.integers(0, n_flows, n_data)
    t_data = np.sort(rng.uniform(0, duration, n_data))
    delay = rng.uniform(0.005, 0.150, n_flows)
    src = ip2int("10.0.0.0") + 1 + (np.arange(n_flows) % 250)
    dtn = np.arange(n_flows) < 8
    dst = np.where(dtn, ip2int("10.0.3.2"), ip2int("10.1.0.0") + 1 + (np.arange(n_flows) // 250))
    sport = 10000 + np.arange(n_flows) % 50000
    # Per-flow sequence numbers: cumulative segment index of each flow.
    order = np.argsort(flow, kind="stable")
    idx_in_flow = np.empty(n_data, np.int64)
    counts = np.bincount(flow, minlength=n_flows)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    idx_in_flow[order] = np.arange(n_data) - np.repeat(starts, counts)
    isn = rng.integers(0, 1 << 32, n_flows)
    seq = (isn[flow] + idx_in_flow * 1448) % (1 << 32)
    t_ack = t_data + delay[flow]
    ts = np.concatenate([t_data, t_ack])
    o = np.argsort(ts, kind="stable")
    t0 = 1_700_000_000 * 10**9
    is_ack = np.concatenate([np.zeros(n_data, bool), np.ones(n_data, bool)])[o]
    f2 = np.concatenate([flow, flow])[o]
    s2 = np.concatenate([seq, seq])[o]
    bulk_pcap(
        path, t0 + (ts[o] * 1e9).astype(np.int64),
        src=np.where(is_ack, dst[f2], src[f2]), dst=np.where(is_ack, src[f2], dst[f2]),
        sport=np.where(is_ack, 5201, sport[f2]), dport=np.where(is_ack, sport[f2], 5201),
        seq=np.where(is_ack, 1, s2), ack=np.where(is_ack, (s2 + 1448) % (1 << 32), 1),
        flags=np.where(is_ack, 0x10, 0x18), payload=np.where(is_ack, 0, 1448),
    )
    return {"packets": 2 * n_data, "flows": n_flows, "duration_s": duration}


def af_slots(n_flows: int) -> int:
    """Distinct active-flow-table slots the benchmark's flows hash to (constants.py layout)."""
    from scidmz.telemetry import constants as C
    from scidmz.telemetry.sources.synth import ip2int
    from scidmz.telemetry.twin.dataplane import crc32_fields

    idx = set()
    for f in range(n_flows):
        dtn = f < 8
        v = {"src_addr": ip2int("10.0.0.0") + 1 + f % 250,
             "dst_addr": ip2int("10.0.3.2") if dtn else ip2int("10.1.0.0") + 1 + f // 250,
             "src_port": 10000 + f % 50000, "dst_port": 5201, "protocol": 6}
        idx.add(crc32_fields(v, C.FLOW_FIELDS) & (C.AF_TABLE_SIZE - 1))
    return len(idx)


def offline(n_packets: int, n_flows: int, seed: int) -> dict[str, object]:
    from scidmz.telemetry.sources.pcap import read_capture
    from scidmz.telemetry.twin.dataplane import SoftwareDataPlane
    from scidmz.telemetry.twin.source import TelemetrySource

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "bench.pcap"
        info = synth_capture(p, n_packets, n_flows, seed)
        # warm the numba caches on a small capture so compile time is not measured
        small = Path(d) / "small.pcap"
        synth_capture(small, 2000, 10, seed)
        list(TelemetrySource.from_pcaps(str(small)))
        tiny = Path(d) / "tiny.pcap"
        synth_capture(tiny, 10, 2, seed)

        t, c = time.perf_counter(), time.process_time()
        cap = read_capture(p, tap=1)
        t_read, c_read = time.perf_counter() - t, time.process_time() - c
        dp = SoftwareDataPlane()
        t, c = time.perf_counter(), time.process_time()
        half = len(cap.packets) // 2
        dp.process(cap.packets[:half])
        occ_mid = dp.occupancy()  # mid-run: cells of segments still waiting for their ACK
        dp.process(cap.packets[half:])
        t_dp, c_dp = time.perf_counter() - t, time.process_time() - c
        n = len(cap.packets)
        del cap

        e2e = {}
        for period in (1.0, 0.1):
            t, c = time.perf_counter(), time.process_time()
            src = TelemetrySource.from_pcaps(str(p), period=period)
            ys = list(src)
            e2e[f"T={period:g}s"] = {"pps": round(n / (time.perf_counter() - t)),
                                     "pps_cpu": round(n / (time.process_time() - c)), "periods": len(ys)}
        st = src.stats()
        occ = src.dp.occupancy()
        cli = {f"T={period:g}s": cli_replay(p, n, period) for period in (0.1, 1.0)}
        startup = cli_replay(tiny, 10, 1.0)["wall_s"]
        slots = af_slots(n_flows)
        sparse_p = Path(d) / "sparse.pcap"
        synth_capture(sparse_p, n_packets, n_flows, seed + 1, duration=83 * 60.0)
        sparse = {f"T={period:g}s": cli_replay(sparse_p, n, period) for period in (0.1, 1.0)}
        out = {
            **info,
            "file_mb": round(p.stat().st_size / 1e6, 1),
            "read_parse_pps": round(n / t_read),
            "dataplane_pps": round(n / t_dp),
            "end_to_end": e2e,
            # CPU time of this process: what one core does when it is not shared
            "read_parse_pps_cpu": round(n / c_read),
            "dataplane_pps_cpu": round(n / c_dp),
            "load_average_1min": os.getloadavg()[0],
            # the whole `scidmz telemetry replay --json` process (numba cache load included)
            "cli": cli,
            "startup_s": startup,
            "cli_minus_startup_pps": {k: round(n / max(v["wall_s"] - startup, 1e-9)) for k, v in cli.items()},
            "sparse_83min": sparse,
            "periods": len(ys),
            "rtt_samples": st["rtt_samples"],
            "tables": {
                "rtt_stage_occupancy_mid": [round(x, 4) for x in occ_mid["rtt_stages"]],
                "rtt_stage_occupancy_end": [round(x, 4) for x in occ["rtt_stages"]],
                "rtt_insert_refused_rate": st["rtt_table_full"] / max(1, st["rtt_stored"] + st["rtt_table_full"]),
                "af_occupancy_mid": round(occ_mid["af_table"], 4),
                "af_occupancy_end": round(occ["af_table"], 4),
                "af_distinct_slots": slots,
                "af_collision_rate": round(1.0 - slots / n_flows, 4),
                "af_collision_events": st["af_collisions"],
                "af_evictions": st["af_evictions"],
                "af_expected_collision_rate_uniform": round(
                    1.0 - (1 - (1 - 1 / 65536) ** n_flows) * 65536 / n_flows, 4),
                "active_flows_last_period": ys[-2].active_flows if len(ys) > 1 else None,
            },
        }
        return out


_CLI = """
import sys
from scidmz.cli import main
code = main(["telemetry", "replay", sys.argv[1], "--json", "--period", sys.argv[2], "--allow-drops"])
# VmHWM starts afresh at exec: the peak of this process alone (a fork's rusage would also
# count the parent's pages it shared before exec)
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(int(hwm.split()[1]) / 1024, file=sys.stderr)
sys.exit(code)
"""


def cli_replay(path: Path, n_packets: int, period: float = 1.0) -> dict[str, float]:
    """Wall time and peak memory (VmHWM) of `scidmz telemetry replay PATH --json` as a new process."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CLI, str(path), f"{period:g}s"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"telemetry replay failed: {proc.stderr[-300:]}")
    return {"wall_s": round(wall, 3), "pps_wall": round(n_packets / wall),
            "peak_rss_mb": round(float(proc.stderr.strip().splitlines()[-1]), 1),
            "file_mb": round(path.stat().st_size / 1e6, 1)}


def live(seconds: float) -> dict[str, object]:
    if os.geteuid() != 0:
        return {"skipped": "needs root"}
    from pyroute2 import NetNS, netns

    tag = f"tb{os.getpid() % 100000}"
    a, b = f"{tag}a", f"{tag}b"
    procs: list[subprocess.Popen] = []
    try:
        netns.create(a)
        netns.create(b)
        with NetNS(b) as m:
            m.link("add", ifname="eth0", kind="veth", peer={"ifname": "eth0", "net_ns_fd": a})
            m.link("add", ifname="tap", kind="veth", peer={"ifname": "tapr"})
            idx = {n: m.link_lookup(ifname=n)[0] for n in ("lo", "eth0", "tap", "tapr")}
            for i in idx.values():
                m.link("set", index=i, state="up")
            m.addr("add", index=idx["eth0"], address="10.0.3.2", prefixlen=24)
            mirror = {"kind": "mirred", "direction": "egress", "action": "mirror", "ifindex": idx["tap"]}
            m.tc("add", "ingress", idx["eth0"], 0xFFFF0000)
            m.tc("add-filter", "u32", idx["eth0"], parent=0xFFFF0000, protocol=3, target=0x10001,
                 keys=["0x0/0x0+0"], action=[mirror])
            m.tc("add", "htb", idx["eth0"], 0x10000, default=1)
            m.tc("add-class", "htb", idx["eth0"], 0x10001, parent=0x10000, rate="100gbit", ceil="100gbit")
            m.tc("add-filter", "u32", idx["eth0"], parent=0x10000, protocol=3, target=0x10001,
                 keys=["0x0/0x0+0"], action=[mirror])
        with NetNS(a) as h:
            for n in ("lo", "eth0"):
                h.link("set", index=h.link_lookup(ifname=n)[0], state="up")
            h.addr("add", index=h.link_lookup(ifname="eth0")[0], address="10.0.3.1", prefixlen=24)
        subprocess.run(["ip", "netns", "exec", a, "ethtool", "-K", "eth0", "tso", "off", "gso", "off"],
                       check=True, capture_output=True)
        procs.append(subprocess.Popen(["ip", "netns", "exec", b, "iperf3", "-s", "-1", "-B", "10.0.3.2"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        cap = subprocess.Popen(["ip", "netns", "exec", b, sys.executable, "-m", "scidmz.cli", "telemetry",
                                "capture", "--egress", "tapr", "--duration", f"{seconds + 4:.0f}s", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(cap)
        time.sleep(3.0)
        ip = subprocess.run(["ip", "netns", "exec", a, "iperf3", "-c", "10.0.3.2", "-t", f"{seconds:.0f}", "-J"],
                            capture_output=True, text=True, timeout=seconds + 30)
        out, err = cap.communicate(timeout=seconds + 60)
        res = json.loads(out.strip().splitlines()[-1])
        ipj = json.loads(ip.stdout) if ip.stdout.strip() else {}
        bps = ipj.get("end", {}).get("sum_received", {}).get("bits_per_second")
        rates = [y["rate_dtn"] for y in res["series"] if y["rate_dtn"] > 0]
        pk = res["drops"].get("kernel_packets", 0)
        return {
            "iperf3_bps": bps,
            # per period; the first and last are partial (iperf3 starts/stops inside them)
            "twin_rate_dtn_bps_per_period": [round(x) for x in rates],
            "kernel_packets": pk,
            "kernel_drops": res["drops"].get("kernel_drops", 0),
            "captured_pps": round(pk / (seconds + 4), 1),
            "drops": res["drops"],
        }
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
        for n in (a, b):
            try:
                netns.remove(n)
            except OSError:
                pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--flows", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--live-seconds", type=float, default=5.0)
    ap.add_argument("--no-live", action="store_true")
    a = ap.parse_args()
    res = {"offline": offline(a.packets, a.flows, a.seed)}
    if not a.no_live:
        res["live"] = live(a.live_seconds)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
