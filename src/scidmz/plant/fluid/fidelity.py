"""Fidelity experiments: behaviours the papers and the literature report, run on the fluid plant.

Each function runs one small experiment and returns plain numbers (JSON-able).
``tests/test_fidelity.py`` asserts on them; ``benchmarks/fidelity.py`` prints
them. Where the model and the literature disagree, docs/fluid_model.md says so;
the model constants are not tuned to these numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...scenario import Scenario, load_scenario
from .plant import FluidPlant

__all__ = [
    "bbr_rtt_unfairness",
    "cubic_utilization",
    "standing_queue",
    "shallow_buffer_loss",
    "static_map",
    "run_all",
]


def _mean_state(plant: FluidPlant, u: np.ndarray | float, steps: int, skip: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    ys, infos = [], []
    for _ in range(steps):
        ys.append(plant.step(u).y)
        infos.append(plant.info)
    info = {k: np.array([i[k] for i in infos[skip:]]).mean(axis=0) for k in infos[0]}
    return np.array(ys)[skip:].mean(axis=0), info


def bbr_rtt_unfairness(
    rtt_short: float = 0.010,
    rtt_long: tuple[float, ...] = (0.015, 0.020, 0.040, 0.100),
    seeds: int = 2,
    duration: float = 40.0,
    skip: float = 10.0,
    cca: str = "bbr",
) -> dict[str, Any]:
    """Two flows (one per class), no shaping, 1 Gbit/s, buffer = 1 BDP of the longer path.

    Jenks et al. (extended), Test 3 / Fig. 7(c): with BBR the longer-RTT flow
    takes >= 75 % of the bottleneck; Fig. 7(a): with CUBIC the shorter-RTT flow
    takes about 60 %. Returns the long flow's mean share per RTT (over seeds).
    """
    base = Scenario(name=f"fid-{cca}-rtt")
    scs = [
        base.replace(
            dtn={"streams": 1, "rtt": r, "cca": cca},
            campus={"hosts": 1, "rtt": rtt_short, "cca": cca},
            seed=s,
        )
        for r in rtt_long
        for s in range(seeds)
    ]
    plant = FluidPlant(scs[0], scenarios=scs)
    y, _ = _mean_state(plant, scs[0].u_max, int(duration), int(skip))
    share = (y[:, 0] / (y[:, 0] + y[:, 1])).reshape(len(rtt_long), seeds).mean(axis=1)
    util = ((y[:, 0] + y[:, 1]) / scs[0].capacity).reshape(len(rtt_long), seeds).mean(axis=1)
    return {
        "cca": cca,
        "rtt_short": rtt_short,
        "rtt_long": list(rtt_long),
        "long_share": share.tolist(),
        "utilization": util.tolist(),
    }


def cubic_utilization(
    buffer_bdp: tuple[float, ...] = (0.5, 1.0),
    streams: tuple[int, ...] = (1, 8),
    duration: float = 60.0,
    skip: float = 10.0,
) -> dict[str, Any]:
    """CUBIC alone on 1 Gbit/s at 100 ms with a drop-tail buffer of ``buffer_bdp`` BDP, no shaping.

    A buffer of (1 - beta) BDP = 0.3 BDP suffices for full utilisation of one
    CUBIC flow (RFC 8312 section 5), so 1 BDP must give rho ~ 1.
    """
    base = Scenario(name="fid-cubic-util")
    cases = [(n, b) for n in streams for b in buffer_bdp]
    scs = [base.replace(dtn={"streams": n, "cca": "cubic"}, campus={"hosts": 0}, link={"buffer_bdp": b}) for n, b in cases]
    out: dict[str, Any] = {"cases": []}
    for (n, b), sc in zip(cases, scs, strict=True):
        plant = FluidPlant(sc)
        y, info = _mean_state(plant, sc.u_max, int(duration), int(skip))
        out["cases"].append(
            {"streams": n, "buffer_bdp": b, "utilization": float(info["utilization"][0]), "qdelay": float(y[0, 4])}
        )
    return out


def standing_queue(
    buffer_bdp: float = 4.0, ccas: tuple[str, ...] = ("cubic", "bbr", "bbr2"), duration: float = 60.0, skip: float = 10.0
) -> dict[str, Any]:
    """Eight DTN streams alone in a deep buffer: mean queueing delay and utilisation per CCA.

    Loss-based CUBIC fills the buffer; BBR bounds inflight to ~2 BDP, so its
    standing queue is about one BDP (Cardwell et al. 2016; Scherrer et al. 2022).
    """
    base = Scenario(name="fid-deep-buffer")
    scs = [base.replace(dtn={"streams": 8, "cca": c}, campus={"hosts": 0}, link={"buffer_bdp": buffer_bdp}) for c in ccas]
    plant = FluidPlant(scs[0], scenarios=scs)
    y, info = _mean_state(plant, scs[0].u_max, int(duration), int(skip))
    return {
        "buffer_bdp": buffer_bdp,
        "buffer_delay": scs[0].buffer_bytes * 8 / scs[0].capacity,
        "qdelay": {c: float(y[i, 4]) for i, c in enumerate(ccas)},
        "utilization": {c: float(info["utilization"][i]) for i, c in enumerate(ccas)},
    }


def shallow_buffer_loss(
    buffer_bdp: float = 0.1, ccas: tuple[str, ...] = ("cubic", "bbr", "bbr2"), duration: float = 40.0, skip: float = 10.0
) -> dict[str, Any]:
    """Eight DTN streams alone in a shallow buffer: loss rate (lost / sent) and utilisation per CCA.

    BBRv1 ignores loss and keeps sending at its bandwidth estimate, so with
    several flows and a shallow buffer it loses heavily (Hock et al., ICNP
    2017: retransmission rates of several percent up to ~10 %); BBRv2 bounds
    inflight once the loss rate of a round exceeds 2 % (draft-cardwell-02).
    """
    base = Scenario(name="fid-shallow-buffer")
    scs = [base.replace(dtn={"streams": 8, "cca": c}, campus={"hosts": 0}, link={"buffer_bdp": buffer_bdp}) for c in ccas]
    plant = FluidPlant(scs[0], scenarios=scs)
    lost = np.zeros(len(ccas))
    sent = np.zeros(len(ccas))
    util = np.zeros(len(ccas))
    for k in range(int(duration)):
        plant.step(scs[0].u_max)
        if k >= int(skip):
            info = plant.info
            lost += info["dtn_lost_bytes"]
            sent += info["dtn_sent_bytes"]
            util += info["utilization"]
    n = int(duration) - int(skip)
    return {
        "buffer_bdp": buffer_bdp,
        "loss_rate": {c: float(lost[i] / sent[i]) for i, c in enumerate(ccas)},
        "utilization": {c: float(util[i] / n) for i, c in enumerate(ccas)},
    }


def static_map(
    scenario: str | Scenario = "paper-cubic",
    points: int = 10,
    seeds: int = 3,
    duration: float = 60.0,
    skip: float = 15.0,
) -> dict[str, Any]:
    """R_DTN(u): mean DTN rate for constant u from 5 % to 100 % of B_max (one batch of points x seeds)."""
    sc = load_scenario(scenario) if isinstance(scenario, str) else scenario
    us = np.linspace(0.05, 1.0, points) * sc.capacity
    scs = [sc.replace(seed=sc.seed + s) for _ in us for s in range(seeds)]
    plant = FluidPlant(sc, scenarios=scs)
    u = np.repeat(us, seeds)
    y, _ = _mean_state(plant, u, int(duration), int(skip))
    r = y[:, 0].reshape(points, seeds)
    c = y[:, 1].reshape(points, seeds)
    return {
        "scenario": sc.name,
        "u": us.tolist(),
        "rate_dtn": r.mean(axis=1).tolist(),
        "rate_dtn_std": r.std(axis=1).tolist(),
        "rate_campus": c.mean(axis=1).tolist(),
        "max_increase": float(np.max(np.diff(r.mean(axis=1)))),
    }


def run_all(quick: bool = False) -> dict[str, Any]:
    """Every experiment above with its default settings (``quick`` halves the durations)."""
    f = 0.5 if quick else 1.0
    return {
        "bbr_rtt_unfairness": bbr_rtt_unfairness(duration=40 * f, skip=10 * f),
        "cubic_rtt_unfairness": bbr_rtt_unfairness(cca="cubic", duration=40 * f, skip=10 * f),
        "cubic_utilization": cubic_utilization(duration=60 * f, skip=10 * f),
        "standing_queue": standing_queue(duration=60 * f, skip=10 * f),
        "shallow_buffer_loss": shallow_buffer_loss(duration=40 * f, skip=10 * f),
        "static_map_cubic": static_map("paper-cubic", duration=60 * f, skip=15 * f),
        "static_map_bbr2": static_map("paper-bbr2", duration=60 * f, skip=15 * f),
        "static_map_bbr": static_map("paper-bbr", duration=60 * f, skip=15 * f),
    }
