"""Jenks policy speed: prints one JSON object.

1. One re-grouping of 10,000 long TCP flows with K = 8 (goal < 50 ms):
   ``jenks_groups`` alone (exact Fisher-Jenks: kmeans1d at this size) and a whole
   ``JenksSeparator.decide`` epoch (grouping, hysteresis, rates, buffers,
   10,000 rules, validation).
2. Applying 8 queues + 1,000 flow rules to the kernel (goal < 1 s):
   ``HtbQueueActuator.apply`` on a veth in a private namespace, first
   install and a re-apply where every rule changes queue. Needs root;
   skipped (reported as null) otherwise.

Usage: PYTHONPATH=src python3 benchmarks/jenks_speed.py [--flows 10000] [--rules 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

import numpy as np

from scidmz.policies.queue.jenks import JenksParams, JenksSeparator, jenks_groups
from scidmz.queueconfig import FlowMatch, FlowRule, QueueConfig, QueueSpec


def flow_table(n: int, rng: np.random.Generator) -> dict[str, list]:
    return {
        "src": [f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}" for i in range(n)],
        "dst": ["10.200.0.1"] * n,
        "sport": list(range(10000, 10000 + n)),
        "dport": [5201] * n,
        "proto": [6] * n,
        "rtt": rng.uniform(0.001, 0.100, n).tolist(),
        "rate": rng.uniform(1e5, 1e6, n).tolist(),
        "long_flow": [True] * n,
    }


def bench_grouping(n: int, k: int, repeat: int) -> dict[str, float]:
    rng = np.random.default_rng(1)
    table = flow_table(n, rng)
    x = np.asarray(table["rtt"])
    g = []
    for _ in range(repeat):
        t = time.perf_counter()
        jenks_groups(x, k)
        g.append(time.perf_counter() - t)
    sep = JenksSeparator(JenksParams(queues=k))
    d = []
    for _ in range(repeat):
        t = time.perf_counter()
        sep.decide(table, 10e9)
        d.append(time.perf_counter() - t)
    return {"jenks_groups_s": float(np.median(g)), "decide_epoch_s": float(np.median(d))}


def bench_kernel(rules: int, k: int) -> dict[str, float] | None:
    if os.geteuid() != 0:
        return None
    from scidmz.actuators.htb import HtbQueueActuator

    ns = f"jkbench{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "add", "b0", "type", "veth", "peer", "name", "b1"], check=True)
        subprocess.run(["ip", "-n", ns, "link", "set", "b0", "up"], check=True)
        cap = 10e9
        queues = tuple(QueueSpec(10 + j, cap / (k + 1), cap / (k + 1), 100_000) for j in range(k))
        queues = (QueueSpec(1, cap / (k + 1), cap / (k + 1), 100_000),) + queues

        def cfg(shift: int) -> QueueConfig:
            rs = tuple(
                FlowRule(FlowMatch(f"10.0.{i >> 8}.{i & 255}", "10.200.0.1", 10000 + i, 5201, 6), 10 + (i + shift) % k)
                for i in range(rules)
            )
            return QueueConfig(cap, queues, 1, rs)

        a, b = cfg(0), cfg(1)
        with HtbQueueActuator("b0", netns=ns) as act:
            t = time.perf_counter()
            act.apply(a)
            first = time.perf_counter() - t
            t = time.perf_counter()
            act.apply(b)
            again = time.perf_counter() - t
            cur = act.current()
            ok = cur is not None and len(cur.rules) == rules
            queues_in_force = cur.summary()["queues"] if cur is not None else None
        return {"apply_first_s": first, "apply_all_rules_moved_s": again, "readback_ok": ok,
                "queues_in_force": queues_in_force}
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flows", type=int, default=10_000)
    ap.add_argument("--rules", type=int, default=1_000)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    out: dict[str, object] = {"flows": args.flows, "queues": args.queues, "rules": args.rules}
    out["grouping"] = bench_grouping(args.flows, args.queues, args.repeat)
    out["grouping"]["goal_s"] = 0.050
    out["kernel"] = bench_kernel(args.rules, args.queues)
    if out["kernel"] is not None:
        out["kernel"]["goal_s"] = 1.0
    out["load_avg_1min"] = os.getloadavg()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
