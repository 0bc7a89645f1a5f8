"""The ABC and FFS papers' TCP experiments on the real kernel, through the NFQUEUE stage (root).

Same experiments and metrics as :mod:`scidmz.evaluation.disciplines.fluid`, on
the three-namespace lab (``scidmz.plant.netns.nfqlab``): client 0 (10.77.1.2)
and client 1 (10.77.1.3) send through a router whose egress runs the stage
(the numba decision core per packet) in front of a tbf bottleneck; the
return path is held by the user-space delay stage for the base RTT (no netem
on this kernel). Kernel CCAs: reno, cubic, bbr (BBR v1; no BBRv2 here).
Goodput is the receiver's (iperf3 ``sum_received``) over the whole run, slow
start included (ours: the paper does not say which window it averaged).
Every lab is torn down on every exit path (the context manager).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import tempfile
import time
from typing import Any

import numpy as np

from .fluid import (
    ABC_BUFFER_PKTS,
    ABC_LINK,
    ABC_RTT,
    T3_BUFFER_PKTS,
    T3_LINK,
    T3_RTT,
    table3_metrics,
)

KERNEL_CCAS = ("reno", "cubic", "bbr")
PKT = 1500


def _lab(prefix: str, disc: str, config: dict[str, Any], link: float, buffer_pkts: int, rtt: float,
         ingress_of: dict[str, int] | None = None, proto: str | None = None):  # noqa: ANN202 - nfq_lab's manager
    from ...plant.netns.nfqlab import nfq_lab

    d = tempfile.mkdtemp(prefix="scidmz-nfq-")
    args = ["--discipline", disc, "--config", json.dumps(config), "--link-bps", str(link)]
    if ingress_of:
        args += ["--ingress-of", json.dumps(ingress_of)]
    # proto="tcp" (Table III): the RTT prober's UDP datagrams bypass the stage, as ping's ICMP would
    return nfq_lab(prefix, args, os.path.join(d, "stage.json"), link, proto=proto, rtt_s=rtt,
                   buffer_bytes=buffer_pkts * PKT)


def _stage_drops(s: dict[str, Any]) -> int:
    return int(s.get("queue_dropped", 0) + s.get("user_dropped", 0))


def _retry(fn, attempts: int = 3):  # noqa: ANN001, ANN202
    # iperf3's control channel times out now and then on the loaded 2-core machine
    for k in range(attempts):
        try:
            return fn()
        except RuntimeError:
            if k == attempts - 1:
                raise
            time.sleep(1.0)
    return None


def abc_tcp_flows(counts: list[int], seconds: float, prefix: str) -> list[dict[str, Any]]:
    """ABC Fig. 5 on the kernel: client 0 with N CUBIC connections vs client 1 with one."""
    rows = []
    for n in counts:
        row: dict[str, Any] = {"n_flows": n}
        for name, disc in (("fifo", "pass"), ("abc", "abc")):
            def run(disc: str = disc, n: int = n) -> tuple[dict, dict, dict]:
                with _lab(prefix, disc, {"capacity_bps": ABC_LINK}, ABC_LINK, ABC_BUFFER_PKTS, ABC_RTT) as lab:
                    a, b, _ = lab.tcp_pair(n, 1, seconds)
                    time.sleep(1.2)
                    return a, b, lab.stats()
            a, b, st = _retry(run)
            row[f"{name}_goodput0_bps"] = a["end"]["sum_received"]["bits_per_second"]
            row[f"{name}_goodput1_bps"] = b["end"]["sum_received"]["bits_per_second"]
            row[f"{name}_stage_drops"] = _stage_drops(st)
            row[f"{name}_cpu_per_packet_s"] = st.get("cpu_per_packet_s")
        rows.append(row)
    return rows


def abc_cbr_vs_tcp(rates: list[float], seconds: float, prefix: str) -> list[dict[str, Any]]:
    """ABC Fig. 6 on the kernel: client 0 iperf3 UDP CBR at R_0 vs client 1 with one CUBIC connection."""
    rows = []
    for r0 in rates:
        row: dict[str, Any] = {"r0_bps": r0}
        for name, disc in (("fifo", "pass"), ("abc", "abc")):
            def run(disc: str = disc, r0: float = r0) -> tuple[dict, dict, dict]:
                with _lab(prefix, disc, {"capacity_bps": ABC_LINK}, ABC_LINK, ABC_BUFFER_PKTS, ABC_RTT) as lab:
                    cmd = ["ip", "netns", "exec", lab.snd, "iperf3", "-c", "10.77.2.2", "-J", "-t", str(seconds)]
                    udp = subprocess.Popen([*cmd, "-p", "5201", "-B", "10.77.1.2", "-u", "-b", str(int(r0)),
                                            "-l", "1448", "-w", "4M"], stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True)
                    tcp = subprocess.Popen([*cmd, "-p", "5202", "-B", "10.77.1.3", "-C", "cubic"],
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                    docs = []
                    for p in (udp, tcp):
                        out, err = p.communicate(timeout=seconds + 60)
                        doc = json.loads(out) if out.strip() else {}
                        if "sum_received" not in doc.get("end", {}):
                            raise RuntimeError(f"iperf3 failed: {doc.get('error', err.strip())}")
                        docs.append(doc)
                    time.sleep(1.2)
                    return docs[0], docs[1], lab.stats()
            a, b, st = _retry(run)
            row[f"{name}_goodput0_bps"] = a["end"]["sum_received"]["bits_per_second"]
            row[f"{name}_goodput1_bps"] = b["end"]["sum_received"]["bits_per_second"]
            row[f"{name}_stage_drops"] = _stage_drops(st)
        rows.append(row)
    return rows


def ffs_table3(ccas: tuple[str, ...], seconds: float, prefix: str) -> dict[str, Any]:
    """Table III on the kernel: every pair of different kernel CCAs, FIFO / FFS-C100 / FFS-C85."""
    pairs = list(itertools.combinations(ccas, 2))
    ingress = {"10.77.1.2": 0, "10.77.1.3": 1}
    schemes: dict[str, Any] = {}
    drops = {}
    for name, frac in (("fifo", None), ("ffs100", 1.0), ("ffs85", 0.85)):
        tput = np.zeros((len(pairs), 2))
        rtts = []
        n_drops = 0
        for i, (a, b) in enumerate(pairs):
            disc, cfg = "pass", {}
            if frac is not None:
                cap = frac * T3_LINK
                disc, cfg = "ffs", {"capacity_bps": cap, "matrix_col_bps": [cap / 2, cap / 2]}

            def run(a: str = a, b: str = b, disc: str = disc, cfg: dict = cfg) -> tuple[dict, dict, list, dict]:
                with _lab(prefix, disc, cfg, T3_LINK, T3_BUFFER_PKTS, T3_RTT, ingress, proto="tcp") as lab:
                    d0, d1, r = lab.tcp_pair(1, 1, seconds, a, b, ping=True)
                    time.sleep(1.2)
                    return d0, d1, r, lab.stats()
            d0, d1, r, st = _retry(run)
            tput[i] = (d0["end"]["sum_received"]["bits_per_second"], d1["end"]["sum_received"]["bits_per_second"])
            rtts.append(np.asarray(r[2:]))  # the first probes go before the flows have ramped up
            n_drops += _stage_drops(st)
        schemes[name] = table3_metrics(pairs, tput, rtts, T3_LINK, T3_RTT)
        drops[name] = n_drops
    return {"ccas": list(ccas), "pairs": [list(p) for p in pairs], "duration_s": seconds, "link_bps": T3_LINK,
            "buffer_pkts": T3_BUFFER_PKTS, "rtt_s": T3_RTT, "schemes": schemes, "stage_drops": drops}
