"""The Jenks papers' tests on the netns testbed: real kernel TCP through a real HTB.

The same tests as ``jenks.fluid`` (Test 1 / Exp 1, Test 3 / Exp 2, Exp 4,
Exp 5 / Test 2, Test 5, Test 6; papers: ``jenks-rtt-flow-separation*.txt``),
but every flow is a real sender host of the scenario's ``[[flows]]`` section
(iperf3 or sockflows with its own kernel CCA, per-path base RTT from the
delay stage), every flow meets the others only at BR1's WAN port (unshaped
flows: S3's path, no campus shaper), and the policy's configuration is
loaded on BR1 by ``HtbQueueActuator`` (HTB, one bfifo leaf per queue, u32
rules). The flow table the policy reads is the kernel's (tcp_info per
socket: the smoothed RTT and the kernel's own windowed minimum RTT; udp_diag
and S2's counters for UDP), and each flow's rate is what S2 delivered to its
receiver.

Scaling (ours): the papers ran 10-25 Gbit/s on hardware; this machine's
testbed runs 100 Mbit/s (two cores, user-space delay stage on the ACK path,
MACHINE.md). The RTTs are the papers'; buffers are BDP-sized at 100 Mbit/s
(so 80-100x fewer packets than at 10 Gbit/s); rates held from outside
(Exp 4's 2 of 5 Gbit/s, Exp 5's degradations) scale with C. Without
separation the bottleneck is the testbed's TBF over one drop-tail FIFO of the
BDP at the largest RTT, as ext Test 1. Periods the starvation check flags
(the machine, not TCP, limited them) are left out of every mean and counted.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...metrics import jain_index
from ...scenario import Scenario, load_scenario
from .flows import FlowRun, flow_scenario, run_flows, shares_summary, tail_rates

__all__ = ["CAPACITY", "flows_scenario", "run_netns", "reproduce_netns"]

CAPACITY = 100e6


def flows_scenario(name: str, flows: list[dict[str, Any]], duration: float, buffer_rtt: float) -> Scenario:
    """A testbed scenario of only ``[[flows]]`` (unshaped: no DTN, no campus hosts, shaper off), the
    bottleneck buffer the BDP at ``buffer_rtt``."""
    return flow_scenario(load_scenario("testbed"), name, flows, duration, buffer_rtt, CAPACITY,
                         shaper={"enabled": False})


def run_netns(name: str, flows: list[dict[str, Any]], duration: float, params: dict[str, Any] | None,
              seed: int = 0, until_done: bool = False) -> FlowRun:
    """One run on the testbed (``jenks.flows.run_flows``): per-period delivered rate and kernel RTT of
    every flow, starved periods; ``params`` None: no separation (the testbed's one FIFO), else the
    Jenks policy's options. The policy reads the kernel's flow table (tcp_info) through
    ``telemetry="kernel"``. ``until_done``: end early once every fixed-size flow has finished.
    """
    sc = flows_scenario(name, flows, duration, max(float(f["rtt"]) for f in flows))
    return run_flows(sc, params, "netns", seed, until_done, plant_options={"telemetry": "kernel"})


def _summary(run: FlowRun, cca: str, separated: bool) -> dict[str, Any]:
    return {"cca": cca, "separated": separated, **shares_summary(run, CAPACITY),
            "starved_periods": int(run.starved.sum()), "periods": int(run.rates.shape[0])}


def paper_test1(cca: str, separated: bool, duration: float) -> dict[str, Any]:
    """Test 1 / Exp 1: four long flows at 2/20/40/60 ms; K = 4 without rebalancing (as the fluid run)."""
    flows = [{"name": f"f{int(r * 1e3)}ms", "rtt": r, "cca": cca} for r in (0.002, 0.020, 0.040, 0.060)]
    run = run_netns(f"t1-{cca}", flows, duration, {"queues": 4, "rebalance": False} if separated else None)
    return _summary(run, cca, separated)


def paper_test3(cca: str, separated: bool, other: float, duration: float) -> dict[str, Any]:
    """Test 3 / Exp 2: a 10 ms flow against one at ``other`` s; K = 2."""
    flows = [{"name": "f10ms", "rtt": 0.010, "cca": cca}, {"name": "other", "rtt": other, "cca": cca}]
    run = run_netns(f"t3-{cca}", flows, duration, {"queues": 2, "rebalance": False} if separated else None)
    return _summary(run, cca, separated)


def paper_exp4(rebalance: bool, duration: float, cca: str = "cubic") -> dict[str, Any]:
    """Exp 4: 5 ms and 70 ms flows in two equal queues; the 70 ms flow's access link is 20 Mbit/s
    (40 % of its share, the paper's 2 of 5 Gbit/s)."""
    flows = [{"name": "f5ms", "rtt": 0.005, "cca": cca}, {"name": "f70ms", "rtt": 0.070, "cca": cca, "rate": 20e6}]
    run = run_netns(f"e4-{cca}", flows, duration, {"queues": 2, "rebalance": rebalance})
    return {**_summary(run, cca, True), "rebalance": rebalance}


def paper_exp5(duration: float, cca: str = "cubic") -> dict[str, Any]:
    """Exp 5 / Test 2: flow 2 joins at T/6, its access link drops to 15 Mbit/s at 2T/6 and recovers at 3T/6;
    flow 1 likewise at 4T/6 and 5T/6 (recovered = a 1 Gbit/s access link, ten times C)."""
    d = duration / 6.0
    flows = [{"name": "flow1", "rtt": 0.020, "cca": cca, "schedule": [[4 * d, 15e6], [5 * d, 1e9]]},
             {"name": "flow2", "rtt": 0.0201, "cca": cca, "start": d, "schedule": [[2 * d, 15e6], [3 * d, 1e9]]}]
    run = run_netns(f"e5-{cca}", flows, duration, {"queues": 2, "rebalance": True})
    util = np.nansum(run.rates, axis=1) / CAPACITY
    util[run.starved] = np.nan
    phases = [p[len(p) // 4:] for p in np.array_split(util, 6)]
    return {"cca": cca, "util_per_phase": [float(np.nanmean(p)) for p in phases],
            "rate_series": run.rates.tolist(), "util_series": util.tolist(),
            "starved_periods": int(run.starved.sum()), "periods": len(util)}


def paper_test5(rule: bool, duration: float, threshold: float = 0.015) -> dict[str, Any]:
    """Test 5: flow 1 (10 ms, 20 Mbit/s access link) alone; at T/3 a bulk CUBIC flow 2 (10 ms) joins the same
    queue (K = 1). With the rule (15 ms on the current RTT, ours) flow 2 is moved out."""
    d = duration / 3.0
    flows = [{"name": "flow1", "rtt": 0.010, "rate": 20e6}, {"name": "flow2", "rtt": 0.0101, "start": d}]
    run = run_netns("t5", flows, duration, {"queues": 1, "bloat_threshold": threshold if rule else None})
    rtt, ok = run.rtt, ~run.starved
    before = np.zeros(len(ok), dtype=bool)
    before[2:int(d)] = True
    after = np.zeros(len(ok), dtype=bool)
    after[int(d + 5):] = True
    return {"rule": rule, "threshold_s": threshold,
            "flow1_rtt_before_s": float(np.nanmean(rtt[before & ok, 0])),
            "flow1_rtt_after_s": float(np.nanmean(rtt[after & ok, 0])),
            "flow2_rtt_after_s": float(np.nanmean(rtt[after & ok, 1])),
            "starved_periods": int(run.starved.sum()), "periods": len(ok)}


def paper_test6(rule: bool, duration: float, tcp: int = 3) -> dict[str, Any]:
    """Test 6: UDP at 150 Mbit/s (above C) from t = 0, ``tcp`` CUBIC flows (20 ms) join one per phase;
    Jain over the active flows per phase (second half of each phase)."""
    phase = duration / (tcp + 1)
    flows = [{"name": "udp", "cca": "udp", "rate": 1.5 * CAPACITY, "rtt": 0.020}]
    flows += [{"name": f"tcp{i}", "rtt": 0.020 + 1e-4 * i, "start": phase * i} for i in range(1, tcp + 1)]
    run = run_netns("t6", flows, duration, {"queues": 2, "rebalance": True} if rule else None)
    jains, udp_share = [], float("nan")
    for j in range(tcp + 1):
        a, b = int((j + 0.5) * phase), int((j + 1) * phase)
        tail = tail_rates(run, a, b)[: j + 1]  # UDP + the j TCP flows that have joined
        jains.append(jain_index(tail))
        udp_share = float(tail[0] / tail.sum())
    return {"rule": rule, "jain_per_phase": jains, "udp_share_last_phase": udp_share,
            "starved_periods": int(run.starved.sum()), "periods": int(run.rates.shape[0])}


def paper_exp3(k: int, bbr_share: float, flows: int = 12, size: float = 20e6, seed: int = 0,
               limit: float = 120.0) -> dict[str, Any]:
    """Short Exp 3, scaled to the testbed: ``flows`` transfers of ``size`` bytes (RTTs drawn from
    1..100 ms, a ``bbr_share`` of them BBR), K queues (K = 1: one FIFO of the BDP at the largest RTT).
    A flow is classified once it has sent 10 MB (the data plane's long-flow mark), so ``size`` is
    twice that: each flow spends its second half in its Jenks queue."""
    rng = np.random.default_rng(seed)
    r = rng.choice(np.arange(1, 101) * 1e-3, flows)
    is_bbr = np.zeros(flows, dtype=bool)
    is_bbr[rng.permutation(flows)[:int(round(bbr_share * flows))]] = True
    spec = [{"name": f"x{i}", "rtt": float(r[i]), "cca": "bbr" if is_bbr[i] else "cubic", "size": size}
            for i in range(flows)]
    run = run_netns(f"e3-k{k}", spec, limit, {"queues": k, "rebalance": True} if k > 1 else None,
                    seed=seed, until_done=True)
    fct = np.array([x["fct"] for x in run.records if x["ok"]], dtype=np.float64)
    share = round(bbr_share * 100)
    return {"queues": k, "cca": f"cubic:bbr {100 - share}:{share}", "flows": flows, "size_bytes": size,
            "completed": int(fct.size), "mean_fct_s": float(fct.mean()) if fct.size else float("nan"),
            "median_fct_s": float(np.median(fct)) if fct.size else float("nan"),
            "starved_periods": int(run.starved.sum()), "periods": int(run.starved.size)}


def reproduce_netns(quick: bool = False) -> dict[str, Any]:
    """Every netns test; JSON-ready. ``quick``: 20-40 s runs and fewer RTT gaps."""
    dur = 20.0 if quick else 60.0
    out: dict[str, Any] = {"duration_s": dur, "capacity": CAPACITY, "test1": [], "test3": [], "exp4": []}
    for cca in ("cubic", "bbr"):
        for sep in (False, True):
            out["test1"].append(paper_test1(cca, sep, dur))
    gaps = [("cubic", 0.020), ("cubic", 0.100), ("bbr", 0.015)] if not quick else [("cubic", 0.100)]
    for cca, other in gaps:
        for sep in (False, True):
            out["test3"].append(paper_test3(cca, sep, other, dur))
    for rb in (False, True):
        out["exp4"].append(paper_exp4(rb, dur))
    out["exp5"] = [paper_exp5(2 * dur)]
    out["test5"] = [paper_test5(rule, dur) for rule in (False, True)]
    out["test6"] = [paper_test6(rule, 2 * dur) for rule in (False, True)]
    shares = (0.0,) if quick else (0.0, 0.5, 1.0)
    out["exp3"] = [paper_exp3(k, sh) for sh in shares for k in ((1, 4) if quick else (1, 2, 4))]
    return out
