"""The ABC and FFS papers' packet-level experiments: the numba decision cores on packet sequences.

No transport is needed where every sender is CBR or Poisson, so these run the
cores directly (the congestion-controlled experiments are ``disciplines.fluid``):

- ABC, Menth et al. 2019, section 6.2.1 / Fig. 4 (CBR vs CBR): client 1 sends
  40 Mbit/s, client 0 sends R_0; 50 Mbit/s bottleneck, 24-packet buffer,
  1448 B UDP payload (1500 B IP packets), 300 s runs; goodput of both with a
  drop-tail FIFO and with ABC (section 6.1.3 parameters). The packet sequence
  is exact: the core decides every packet in front of a FIFO drained at 50 Mbit/s.
- FFS, Wyss et al., Table II: the exact water-filling tau and allocations, and
  Algorithm 1 + Appendix A on Poisson packets at the paper's rates.

Timing jitter (ours): each CBR packet is displaced uniformly within +-50 % of
its spacing (seeded), because two perfectly periodic senders lock into one
phase and the FIFO then always favours whichever sender's packets arrive
first after a departure -- an artefact, not ABC.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ...disciplines import abc, ffs
from ...disciplines.droptail import droptail_run
from ...disciplines.ffs.waterfill import ffs_allocation, hwfq_allocation

__all__ = ["abc_cbr_point", "abc_cbr_rows", "abc_cbr_netns", "ffs_table2"]

PKT = 1500.0
PAYLOAD = 1448.0


def _cbr(rate: float, duration: float, rng: np.random.Generator) -> np.ndarray:
    dt = PKT * 8 / rate
    t = np.arange(rng.uniform(0, dt), duration, dt)
    return np.sort(t + rng.uniform(-0.5 * dt, 0.5 * dt, t.size).clip(-t))


def abc_cbr_point(r0: float, r1: float, duration: float, seed: int, use_abc: bool) -> tuple[float, float]:
    """Goodput (bit/s of UDP payload) of client 0 and 1 over the second half of the run."""
    rng = np.random.default_rng(seed)
    a, b = _cbr(r0, duration, rng), _cbr(r1, duration, rng)
    ts = np.concatenate([a, b])
    agg = np.r_[np.zeros(a.size, np.int64), np.ones(b.size, np.int64)]
    o = np.argsort(ts, kind="stable")
    ts, agg = ts[o], agg[o]
    sizes = np.full(ts.size, PKT)
    acc = np.zeros(ts.size, np.bool_)
    cfg = abc.ABCConfig(capacity_bps=50e6)
    if use_abc:
        meter, avg = abc.new_state(2)
        abc.abc_run_fifo(meter, avg, cfg.params(), agg, ts, sizes, 50e6, acc)
    else:
        droptail_run(ts, sizes, 50e6, cfg.buffer_pkts, acc)
    late = ts > duration / 2
    g0, g1 = (float(acc[late & (agg == k)].sum() * PAYLOAD * 8 / (duration / 2)) for k in (0, 1))
    return g0, g1


def abc_cbr_rows(rates: list[float], duration: float, seed: int, r1: float = 40e6) -> list[dict[str, Any]]:
    """Fig. 4: per R_0, both clients' goodput with a drop-tail FIFO and with ABC."""
    rows = []
    for r0 in rates:
        row: dict[str, Any] = {"r0_bps": r0, "r1_bps": r1}
        for name, use in (("fifo", False), ("abc", True)):
            row[f"{name}_goodput0_bps"], row[f"{name}_goodput1_bps"] = abc_cbr_point(r0, r1, duration, seed, use)
        rows.append(row)
    return rows


def abc_cbr_netns(rates: list[float], seconds: float, prefix: str) -> list[dict[str, Any]]:
    """Fig. 4 on the kernel: two iperf3 CBR senders through the NFQUEUE stage (ABC or pass-through)
    in front of a 50 Mbit/s tbf with a 24 x 1500 B buffer. Goodput = the receiver's payload rate."""
    import os
    import tempfile
    import time

    from ...plant.netns.nfqlab import nfq_lab

    rows = []
    for r0 in rates:
        row: dict[str, Any] = {"r0_bps": r0, "r1_bps": 40e6}
        for name, disc in (("fifo", "pass"), ("abc", "abc")):
            for attempt in range(3):
                try:
                    with tempfile.TemporaryDirectory() as d:
                        stats = os.path.join(d, "s.json")
                        args = ["--discipline", disc, "--config", json.dumps({"capacity_bps": 50e6}),
                                "--link-bps", "5e7"]
                        with nfq_lab(prefix, args, stats, 50e6, proto="udp") as lab:
                            a, b = lab.udp_pair(r0, 40e6, seconds)
                            time.sleep(1.2)
                            s = lab.stats()
                    break
                except RuntimeError:
                    # iperf3's control channel times out now and then on the loaded machine.
                    if attempt == 2:
                        raise
            for k, doc in ((0, a), (1, b)):
                # The receiver's byte count: sender rate x (1 - loss) overstates it when
                # iperf3's loss accounting lags (seen: 87 Mbit/s "through" a 50 Mbit/s tbf).
                row[f"{name}_goodput{k}_bps"] = doc["end"]["sum_received"]["bits_per_second"]
            row[f"{name}_stage_drops"] = s.get("queue_dropped", 0) + s.get("user_dropped", 0)
            row[f"{name}_cpu_per_packet_s"] = s["cpu_per_packet_s"]
        rows.append(row)
    return rows


def ffs_table2(duration: float, seed: int) -> dict[str, Any]:
    """Table II (15 Gbit/s egress, three streams from two ingresses): the exact water-filling tau and
    allocations, HWFQ's, and Algorithm 1 + Appendix A on Poisson 1500 B packets (second half)."""
    g = 1e9
    rates = np.array([3 * g, 4 * g, 16 * g])
    fair = np.array([6 * g, 1 * g, 8 * g])
    ingress = np.array([0, 0, 1])
    m = np.array([7 * g, 8 * g])
    exact, tau = ffs_allocation(rates, fair, ingress, m, 15 * g)
    hw = hwfq_allocation(rates, fair, ingress, m, 15 * g)
    rng = np.random.default_rng(seed)
    parts = [np.sort(rng.uniform(0, duration, rng.poisson(rates[s] * duration / (8 * PKT)))) for s in range(3)]
    ts = np.concatenate(parts)
    sid = np.concatenate([np.full(p.size, s) for s, p in enumerate(parts)])
    o = np.argsort(ts, kind="stable")
    ts, sid = ts[o], sid[o]
    cfg = ffs.FFSConfig(capacity_bps=15 * g, matrix_col_bps=(7 * g, 8 * g))
    res_p = ffs.run_sequence(cfg, ingress[sid], ts, np.full(ts.size, PKT), rates[sid], fair[sid], seed=seed + 1)
    late = ts > duration / 2
    packet = [float(res_p["accept"][late & (sid == s)].sum() * PKT * 8 / (duration / 2)) for s in range(3)]
    return {"rates_bps": rates.tolist(), "fair_bps": fair.tolist(), "exact_ffs_bps": exact.tolist(),
            "exact_tau": tau, "hwfq_bps": hw.tolist(), "packet_core_bps": packet,
            "packet_core_tau_mean": float(res_p["tau"][late].mean()), "packet_core_duration_s": duration}
