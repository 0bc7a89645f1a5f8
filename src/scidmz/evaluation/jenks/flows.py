"""The Jenks papers' tests as ``[[flows]]`` scenarios, run through the runner on either plant.

A test is a list of flows (name, base RTT, CCA, start, size, a rate outside the
bottleneck and its schedule: ``scenario.FlowGroup``) meeting at one bottleneck,
and a policy: the Jenks queue policy (``policies.queue.jenks``, every period: epoch =
T = 1 s) or, without separation, nothing (``none``: the bottleneck's one
drop-tail FIFO). ``run_flows`` builds the plant from the scenario and runs the
episode with ``runner.run_episode``; after every period it reads each flow's
delivered rate and current RTT (``on_period``), which a ``Trace`` does not keep.

- fluid plant: the per-flow table ``plant.flows()`` (the active flows, by name);
  an idle flow (not started, finished) counts rate 0 and its base RTT.
- netns plant: each flow's rate is what S2 delivered to its receiver
  (``info["flow_rate"]``, in ``plant.flow_hosts`` order), its RTT the kernel's
  (``plant.flows()``, by source address); periods the starvation check flags
  (``info["starved"]``) are marked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...metrics import jain_index
from ...scenario import Scenario
from ..trials import run_plant

__all__ = ["FlowRun", "flow_scenario", "run_flows", "tail_rates", "shares_summary"]


@dataclass
class FlowRun:
    """Per-period, per-flow observations of one run (rows: periods, columns: flows in list order)."""

    names: list[str]
    rtts: list[float]  # base RTTs, s
    ccas: list[str]
    rates: np.ndarray  # delivered bit/s
    rtt: np.ndarray  # current RTT, s (NaN where the plant had no sample)
    starved: np.ndarray  # bool per period (the netns starvation check; all False on the fluid plant)
    records: list[dict[str, Any]] = field(default_factory=list)  # the flows' records (fixed-size: fct)


def flow_scenario(base: Scenario, name: str, flows: Sequence[Mapping[str, Any]], duration: float,
                  buffer_rtt: float, capacity: float, **sections: Any) -> Scenario:
    """``base`` with only ``flows`` as traffic (no DTN streams, no campus hosts), unshaped unless a
    flow says ``shaped``, the bottleneck buffer one BDP at ``buffer_rtt``; ``sections`` override more."""
    sc = base.replace(
        name=name, campus={"hosts": 0, "short_flow_senders": 0}, dtn={"streams": 0, "rtt": buffer_rtt},
        link={"capacity": capacity, "buffer": None, "buffer_bdp": 1.0}, duration=duration, period=1.0,
        **sections)
    d = sc.to_dict()
    d["flows"] = [{"shaped": False, **f} for f in flows]
    return Scenario.from_dict(d, source=name)


class _FluidObserver:
    """Reads the fluid plant's per-flow table after every period."""

    def __init__(self, sc: Scenario, steps: int, until_done: bool) -> None:
        self.names = [g.name for g in sc.flows]
        self.base = np.array([g.rtt for g in sc.flows])
        n = len(self.names)
        self.rates = np.zeros((steps, n))
        self.rtt = np.tile(self.base, (steps, 1))
        self.until_done = until_done
        self.k = -1

    def __call__(self, k: int, plant: Any) -> bool:
        self.k = k
        table = plant.flows()[0]
        col = {name: j for j, name in enumerate(self.names)}
        for name, rate, rtt in zip(table["name"], table["rate"], table["rtt"], strict=True):
            j = col[name]
            self.rates[k, j] = rate
            self.rtt[k, j] = rtt
        return self.until_done and len(table["name"]) == 0

    def starved(self) -> np.ndarray:
        return np.zeros(self.k + 1, dtype=bool)


class _NetnsObserver:
    """Reads the netns plant's delivered rates, kernel RTTs and starvation flags after every period."""

    def __init__(self, sc: Scenario, steps: int, until_done: bool) -> None:
        n = len(sc.flows)
        self.rates = np.full((steps, n), np.nan)
        self.rtt = np.full((steps, n), np.nan)
        self.flags = np.zeros(steps, dtype=bool)
        self.until_done = until_done
        self.k = -1

    def __call__(self, k: int, plant: Any) -> bool:
        self.k = k
        info = plant.info
        self.rates[k] = info["flow_rate"][0]
        self.flags[k] = bool(np.asarray(info["starved"]).reshape(-1)[0])
        table = plant.flows()[0]
        by_src = dict(zip(table["src"], table["rtt"], strict=True))
        self.rtt[k] = [by_src.get(h.ip, np.nan) for h in plant.flow_hosts]
        if not self.until_done:
            return False
        rec = plant.flow_records()
        return bool(rec.loc[rec["class"] == "campus", "ok"].notna().all())

    def starved(self) -> np.ndarray:
        return self.flags[: self.k + 1]


def run_flows(sc: Scenario, params: Mapping[str, Any] | None, plant: str = "fluid", seed: int = 0,
              until_done: bool = False, plant_options: Mapping[str, Any] | None = None) -> FlowRun:
    """One run of ``sc``'s flows for ``sc.steps`` periods; ``params``: the Jenks policy's options
    (``policy.*``: queues, rebalance, bloat_threshold, ...), None for no separation.

    ``until_done``: end once every flow has finished (fixed-size flows). The target R*_DTN is 0
    (there is no DTN here), so the queue policy applies the Jenks configuration as it is.
    """
    from ...policies import make_policy

    if any(g.count != 1 for g in sc.flows):
        raise ValueError("run_flows observes flows one by one: every [[flows]] entry needs count = 1")
    policy = make_policy("jenks", **params) if params is not None else make_policy("none")
    steps = sc.steps
    from ...plant.base import plant_entry

    # A testbed names its flows' hosts and reports kernel RTTs by address; a simulator names its flows.
    testbed = hasattr(plant_entry(plant).cls, "flow_hosts")
    obs: Any = (_NetnsObserver if testbed else _FluidObserver)(sc, steps, until_done)
    _, records = run_plant(sc, policy, np.zeros(steps), seed, plant, on_period=obs,
                           plant_options=dict(plant_options or {}), want_records=True)
    n = obs.k + 1
    rec = records[records["class"].astype(str) == "campus"] if records is not None else None
    return FlowRun([g.name for g in sc.flows], [g.rtt for g in sc.flows], [g.cca for g in sc.flows],
                   obs.rates[:n], obs.rtt[:n], obs.starved(),
                   [] if rec is None else rec.to_dict(orient="records"))


def tail_rates(run: FlowRun, a: int, b: int | None = None) -> np.ndarray:
    """Mean per-flow rate over periods [a, b), starved periods left out (NaN if all are)."""
    r = run.rates[a:b]
    ok = ~run.starved[a:b]
    return np.nanmean(r[ok], axis=0) if ok.any() else np.full(r.shape[1], np.nan)


def shares_summary(run: FlowRun, capacity: float) -> dict[str, Any]:
    """Jain's index, rate shares and utilisation over the run's second half (the papers' Test 1/3 figures)."""
    tail = tail_rates(run, run.rates.shape[0] // 2)
    return {"rtts": list(run.rtts), "jain": jain_index(tail), "shares": (tail / tail.sum()).tolist(),
            "utilisation": float(tail.sum() / capacity)}
