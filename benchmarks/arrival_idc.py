"""How bursty are the frames arriving at the testbed's bottleneck? (constants.ARRIVAL_IDC)

The fluid plant's bottleneck queue is a mean; its packet-level noise (plant/fluid/kernel.py,
``_packet_noise_excess``) needs one number: the index of dispersion of the arrivals, Var(N) / E(N)
of the frames N arriving in a window. This measures it on real kernel TCP: the ``testbed``
scenario under the trivial TBF (u = B_max - R*, R* = half of B_max), one episode per bottleneck
buffer; after the warm-up, tcpdump records every frame entering BR1 on its two LAN ports (campus
and DTN: everything bound for the bottleneck queue) for ``--capture`` seconds. Reported per buffer:
the IDC of the frame counts (in 1514-byte frames) in windows of 0.5-100 ms, the arrival rate, the
trivial TBF's fill, and the run's starvation verdict (a starved run's figures are refused:
exit 1 unless ``--allow-starved``). Needs root and tcpdump. Prints one JSON object.

    sudo python benchmarks/arrival_idc.py [--buffers 0.01,0.02,0.05,0.1] [--capture 20] [--cca bbr]
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

FRAME = 1514.0
WINDOWS_S = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)


def read_pcap(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(timestamps s, original frame lengths) of a classic pcap file (micro- or nanosecond)."""
    data = path.read_bytes()
    if len(data) < 24:
        return np.empty(0), np.empty(0)
    magic = struct.unpack("<I", data[:4])[0]
    if magic not in (0xA1B2C3D4, 0xA1B23C4D):
        raise ValueError(f"{path}: not a little-endian pcap file")
    frac = 1e-9 if magic == 0xA1B23C4D else 1e-6
    ts, ln = [], []
    off = 24
    rec = struct.Struct("<IIII")
    while off + 16 <= len(data):
        sec, sub, incl, orig = rec.unpack_from(data, off)
        ts.append(sec + sub * frac)
        ln.append(orig)
        off += 16 + incl
    return np.array(ts), np.array(ln, dtype=float)


def dispersion(ts: np.ndarray, lengths: np.ndarray) -> dict[str, Any]:
    """IDC of the frame counts (bytes / 1514) in each window length, over the capture's span."""
    order = np.argsort(ts)
    ts, lengths = ts[order], lengths[order]
    span = float(ts[-1] - ts[0])
    out: dict[str, Any] = {"frames": int(ts.size), "span_s": span,
                           "rate_bps": float(lengths.sum() * 8 / span), "idc": {}}
    for w in WINDOWS_S:
        n = int(span / w)
        counts = np.bincount(((ts - ts[0]) / w).astype(np.int64), weights=lengths, minlength=n)[:n] / FRAME
        out["idc"][f"{w * 1e3:g}ms"] = float(counts.var() / counts.mean())
    return out


def run(buffer_bdp: float, capture: float, warmup: float, workdir: Path, cca: str = "cubic") -> dict[str, Any]:
    from scidmz.plant.base import make_plant
    from scidmz.plant.netns.manage.starvation import run_verdict
    from scidmz.scenario import load_scenario

    sc = load_scenario("testbed").replace(link={"buffer_bdp": buffer_bdp, "buffer": None}, dtn={"cca": cca})
    target = 0.5 * sc.capacity
    u = sc.trivial_rate(target)
    skip = int(round(warmup / sc.period))
    steps = skip + int(round(capture / sc.period))
    ys, flags, procs, files = [], [], [], []
    with make_plant("netns", sc, telemetry="kernel") as plant:
        plant.reset(sc.seed)
        ns = plant.testbed.ns("br1")
        try:
            for k in range(steps):
                if k == skip:
                    for port in ("dtn", "campus"):
                        f = workdir / f"{buffer_bdp:g}_{port}.pcap"
                        files.append(f)
                        procs.append(subprocess.Popen(
                            ["ip", "netns", "exec", ns, "tcpdump", "-i", port, "-Q", "in", "-s", "64",
                             "-w", str(f)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                ys.append(plant.step(u).y[0])
                if k >= skip:
                    flags.append(bool(plant.info.get("starved")))
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(timeout=10)
    refused, n_starved = run_verdict(flags)
    y = np.array(ys)[skip:]
    row: dict[str, Any] = {"buffer_bdp": buffer_bdp, "buffer_frames": sc.buffer_bytes / FRAME,
                           "starved_periods": n_starved, "periods": len(flags), "starved": bool(refused)}
    if refused:
        return row
    parts = [read_pcap(f) for f in files]
    ts = np.concatenate([p[0] for p in parts])
    ln = np.concatenate([p[1] for p in parts])
    row.update(dispersion(ts, ln))
    row["fill"] = float(y[:, 0].mean() / target)
    row["utilization"] = float((y[:, 0] + y[:, 1]).mean() / sc.capacity)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--buffers", default="0.01,0.02,0.05,0.1", help="BDP multiples")
    ap.add_argument("--capture", type=float, default=20.0, help="s of capture per buffer")
    ap.add_argument("--warmup", type=float, default=15.0, help="s before the capture starts")
    ap.add_argument("--cca", default="cubic", help="the DTN's congestion control (the campus stays CUBIC)")
    ap.add_argument("--allow-starved", action="store_true", help="mark starved runs instead of exiting 1")
    a = ap.parse_args()
    try:
        buffers = [float(b) for b in a.buffers.split(",")]
    except ValueError:
        print(f"arrival_idc: --buffers must be comma-separated numbers, got {a.buffers!r}", file=sys.stderr)
        return 2
    if shutil.which("tcpdump") is None:
        print("arrival_idc: tcpdump is not installed (apt install tcpdump)", file=sys.stderr)
        return 1
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="scidmz-idc-") as tmp:
        rows = [run(b, a.capture, a.warmup, Path(tmp), a.cca) for b in buffers]
    print(json.dumps({"benchmark": "arrival_idc", "scenario": "testbed", "dtn_cca": a.cca, "target_frac": 0.5,
                      "capture_s": a.capture, "results": rows, "wall_s": time.time() - t0}))
    starved = [r["buffer_bdp"] for r in rows if r["starved"]]
    if starved and not a.allow_starved:
        print(f"arrival_idc: starved runs at {starved} BDP: no figure recorded", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
