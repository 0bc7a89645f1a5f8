"""Soak benchmark of the live daemon: the fluid plant in real time, a target change
every 10 s, N clients polling ``/status`` on loopback; prints JSON with the period jitter p99,
RSS growth and thread counts at the start and the end.

    python benchmarks/soak.py --duration 30min --clients 50 [--period 1s] [--out soak.json]

Not a test: the figures depend on the machine's load (report them with that caveat).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np


def _proc(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, val = line.partition(":")
        if key in ("VmRSS", "Threads"):
            out[key] = int(val.split()[0])
    out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return out


def main() -> int:
    from scidmz.units import parse_time

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", default="30min")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--period", default="1s")
    ap.add_argument("--poll", default="0.2s", help="pause between two polls of one client")
    ap.add_argument("--warmup", default="15s", help="excluded from the start figures (numba load, first steps)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    duration, period = parse_time(a.duration, "duration"), parse_time(a.period, "period")
    poll, warmup = parse_time(a.poll, "poll"), parse_time(a.warmup, "warmup")
    tmp = Path(tempfile.mkdtemp(prefix="scidmz-soak-"))
    tok, logf = tmp / "token", tmp / "log.jsonl"
    cmd = [sys.executable, "-m", "scidmz.cli", "control", "run", "testbed", "--plant", "fluid",
           "--set", f"period={period}", "--target", "60M", "--api", "127.0.0.1:0", "--token-file", str(tok),
           "--log", str(logf), "--duration", f"{warmup + duration + 5}s", "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()
    counts = {"ok": 0, "fail": 0}
    lock = threading.Lock()
    try:
        t0 = time.monotonic()
        while not tok.exists():
            if proc.poll() is not None or time.monotonic() - t0 > 120:
                raise SystemExit(f"daemon did not start: {proc.stderr.read() if proc.stderr else ''}")
            time.sleep(0.1)
        info = json.loads(tok.read_text())
        base, hdr = f"http://{info['api']}", {"Authorization": f"Bearer {info['token']}"}
        time.sleep(warmup)
        start = _proc(proc.pid)

        def client() -> None:
            while not stop.is_set():  # bounded: ends with the soak
                try:
                    with urllib.request.urlopen(urllib.request.Request(base + "/status", headers=hdr),
                                                timeout=10) as r:
                        r.read()
                    ok = True
                except (urllib.error.URLError, OSError):
                    ok = False
                with lock:
                    counts["ok" if ok else "fail"] += 1
                stop.wait(poll)

        threads = [threading.Thread(target=client, daemon=True) for _ in range(a.clients)]
        for t in threads:
            t.start()
        targets = [40e6, 60e6, 80e6, 20e6]
        t_end, n = time.monotonic() + duration, 0
        while time.monotonic() < t_end and proc.poll() is None:
            stop.wait(min(10.0, max(0.0, t_end - time.monotonic())))
            body = json.dumps({"target": targets[n % len(targets)]}).encode()
            req = urllib.request.Request(base + "/target", data=body, method="POST",
                                         headers={**hdr, "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    r.read()
                n += 1
            except (urllib.error.URLError, OSError):
                counts["fail"] += 1
        end = _proc(proc.pid)
        stop.set()
        for t in threads:
            t.join(15)
        proc.send_signal(signal.SIGTERM)
        t_sig = time.monotonic()
        proc.communicate(timeout=30)
        stop_s = time.monotonic() - t_sig
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    recs = [json.loads(x) for x in logf.read_text().splitlines() if x.strip()]
    per = [r for r in recs if "k" in r]
    times = np.array([r["time"] for r in per])
    first = times[0] + warmup
    dt = np.diff(times[times >= first])
    jitter = np.abs(dt - period)
    out: dict[str, Any] = {
        "duration_s": duration, "period_s": period, "clients": a.clients, "target_changes": n,
        "periods": len(dt) + 1, "fallback_periods": sum(1 for r in per if r["fallback"]),
        "jitter_p50_s": float(np.percentile(jitter, 50)), "jitter_p99_s": float(np.percentile(jitter, 99)),
        "jitter_max_s": float(jitter.max()),
        "rss_start_kib": start["VmRSS"], "rss_end_kib": end["VmRSS"],
        "rss_growth_kib": end["VmRSS"] - start["VmRSS"],
        "threads_start": start["Threads"], "threads_end": end["Threads"],
        "fds_start": start["fds"], "fds_end": end["fds"],
        "status_requests_ok": counts["ok"], "requests_failed": counts["fail"],
        "sigterm_to_exit_s": stop_s, "exit_code": proc.returncode,
        "loadavg_end": os.getloadavg(),
    }
    text = json.dumps(out, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
