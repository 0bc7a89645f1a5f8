"""One Jenks epoch on a real HTB for 10,000 flows (goal <= 100 ms): prints one JSON object.

An epoch is what the hardware plant's queue place does every period: ``JenksSeparator.decide``
on the flow table (classify by RTT, plan rates and buffers, one rule per flow) and
``HtbQueueActuator.apply`` of the result (the changed classes, then the rules' difference: each
flow keeps its own u32 filter, ``actuators.u32slots``). Measured on a
veth in a private namespace (``qgbench<pid>``), after a first install that is not counted:

* ``steady``: RTTs jitter 2 % around their values, so no flow changes class (hysteresis keeps
  them) and only the queues' rates move: no rule is rewritten;
* ``moving``: 1 % of the flows jump to another RTT range every epoch, so after ``hold`` epochs
  they move queue: the actuator replaces the class of those flows' filters only (~100 requests);
  ``requests_median`` counts the netlink requests the rules took.

Needs root (null otherwise). Usage: PYTHONPATH=src python3 benchmarks/jenks_epoch_htb.py
[--flows 10000] [--queues 4] [--epochs 8] [--out reports/jenks/epoch_htb.json]

``--out`` also writes the object there (atomically, with the date, kernel and cores): the
results file docs/deployment.md's "Measured" paragraph is rendered from. A quiet machine only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

import numpy as np

from scidmz.policies.queue.jenks import JenksParams, JenksSeparator


def flow_table(n: int, rtt: np.ndarray, rng: np.random.Generator) -> dict[str, list]:
    return {
        "src": [f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}" for i in range(n)],
        "dst": ["10.200.0.1"] * n,
        "sport": list(range(10000, 10000 + n)),
        "dport": [5201] * n,
        "proto": [6] * n,
        "rtt": rtt.tolist(),
        "rate": rng.uniform(1e5, 1e6, n).tolist(),
        "long_flow": [True] * n,
    }


def epochs(act: object, n: int, k: int, count: int, moving: bool) -> dict[str, float]:
    rng = np.random.default_rng(7)
    base = rng.choice([0.005, 0.020, 0.050, 0.100], n) * rng.uniform(0.9, 1.1, n)
    sep = JenksSeparator(JenksParams(queues=k))
    act.apply(sep.decide(flow_table(n, base, rng), 10e9))  # type: ignore[attr-defined]
    decide, apply, total, rules, reqs = [], [], [], [], []
    sent: list[int] = []
    real = act._nlb.send  # type: ignore[attr-defined]

    def counting(requests: list[bytes]) -> dict[int, int]:
        sent.append(len(requests))
        return real(requests)

    act._nlb.send = counting  # type: ignore[attr-defined]
    for e in range(count):
        rtt = base * rng.uniform(0.99, 1.01, n)
        if moving:
            idx = rng.choice(n, n // 100, replace=False)
            base[idx] = rng.choice([0.005, 0.100], idx.size)
        table = flow_table(n, rtt, rng)  # the telemetry's table: not part of the epoch's cost
        before = len(sent)
        t0 = time.perf_counter()
        cfg = sep.decide(table, 10e9)
        t1 = time.perf_counter()
        act.apply(cfg)  # type: ignore[attr-defined]
        t2 = time.perf_counter()
        reqs.append(sum(sent[before:]))
        decide.append(t1 - t0)
        apply.append(t2 - t1)
        total.append(t2 - t0)
        rules.append(len(cfg.rules))
        del e
    return {"decide_s_median": float(np.median(decide)), "apply_s_median": float(np.median(apply)),
            "epoch_s_median": float(np.median(total)), "epoch_s_max": float(np.max(total)),
            "rules": int(np.median(rules)), "requests_median": int(np.median(reqs))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flows", type=int, default=10_000)
    ap.add_argument("--queues", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--out", default=None, help="also write the JSON object to this results file")
    a = ap.parse_args()
    out: dict[str, object] = {"flows": a.flows, "queues": a.queues, "epochs": a.epochs, "goal_s": 0.100}
    if os.geteuid() != 0:
        out["steady"] = out["moving"] = None
    else:
        from scidmz.actuators.htb import HtbQueueActuator

        ns = f"qgbench{os.getpid()}"
        subprocess.run(["ip", "netns", "add", ns], check=True)
        try:
            subprocess.run(["ip", "-n", ns, "link", "add", "b0", "type", "veth", "peer", "name", "b1"], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", "b0", "up"], check=True)
            for mode in ("steady", "moving"):
                with HtbQueueActuator("b0", netns=ns) as act:
                    out[mode] = epochs(act, a.flows, a.queues, a.epochs, mode == "moving")
        finally:
            subprocess.run(["ip", "netns", "del", ns], check=False)
    out["load_avg_1min"] = os.getloadavg()[0]
    out |= {"date": time.strftime("%Y-%m-%d", time.gmtime()), "kernel": os.uname().release, "cpus": os.cpu_count()}
    print(json.dumps(out))
    if a.out and out["steady"] is not None:
        from scidmz.fileio import atomic_write_text

        atomic_write_text(a.out, json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
