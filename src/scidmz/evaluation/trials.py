"""Paired trials through the runner: one batched plant per policy, chunks on an executor.

A *trial* is one plant instance; trial i of every policy uses seed + i, so two
policies meet the same campus randomness trial for trial (paired trials,
``evaluation.stats.paired``). ``run_trials`` runs all trials of one policy in
one batched plant (``runner.run_episode``) when the backend allows it; plants
that run in real time hold one instance (their registry entry's ``max_batch``)
and run their trials one after another with the same seeds. Inside ``using_executor(ex)`` the
trials are cut into as many chunks as the executor has worker slots and run
there; trial i still gets seed + i, so the numbers equal the local run's.

Every plant built here is noted in the current ``results.provenance`` (its
scenario's fingerprint and, for the fluid plant, the model version).

``run_flows`` is the single-instance form for the reproductions that read the
plant's per-flow table after every period (the Jenks and discipline papers'
tests): the same runner, with ``on_period`` looking at the plant.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from ..plant.registry import PlantSpec, plant_spec
from ..policies.base import Policy
from ..scenario import Scenario
from ..state import Trace
from .results import note_run

__all__ = ["run_trials", "using_executor", "run_plant"]

#: Where ``run_trials`` sends its trial chunks (set by ``using_executor``); None: in this process.
_TRIAL_EXECUTOR: ContextVar[Any] = ContextVar("scidmz_trial_executor", default=None)


@contextmanager
def using_executor(executor: Any) -> Iterator[None]:
    """Run every ``run_trials`` inside the block on ``executor`` (a ``concurrent.futures.Executor``,
    e.g. from ``executors.open_executor``; None: in this process)."""
    token = _TRIAL_EXECUTOR.set(executor)
    try:
        yield
    finally:
        _TRIAL_EXECUTOR.reset(token)


def run_trials(
    scenario: Scenario,
    policy: Policy,
    targets: np.ndarray,
    seed: int,
    plant: str | PlantSpec = "fluid",
    until_done: bool = False,
    want_flows: bool = False,
    progress: bool = False,
) -> tuple[list[Trace], Any]:
    """Run ``policy`` with one plant instance per column of ``targets`` (steps, B); trial i uses seed + i.

    With ``until_done`` the episode stops early once every instance's DTN transfer
    has finished (``info['dtn_fct']`` finite), so a bounded FCT run costs only what
    it needs. Returns one ``Trace`` per instance and, if ``want_flows``, the plant's
    ``flow_records()`` (finished flows, incl. short flows; ``instance`` = trial).
    """
    tg = np.asarray(targets, dtype=np.float64)
    if tg.ndim != 2:
        raise ValueError(f"targets must have shape (steps, trials), got {tg.shape}")
    for v in (float(tg.min()), float(tg.max())):
        scenario.check_target(v)
    spec = plant_spec(plant)
    note_run(scenario, spec.name)
    limit = spec.max_batch or tg.shape[1]
    executor = _TRIAL_EXECUTOR.get()
    if executor is not None:
        from ..executors import executor_width

        # Trial i keeps seed + i whichever chunk runs it, so the results equal the local run's.
        limit = min(limit, -(-tg.shape[1] // executor_width(executor)))
    if tg.shape[1] <= limit:
        return _run_batch(scenario, policy, tg, seed, spec, until_done, want_flows, progress)
    starts = list(range(0, tg.shape[1], limit))
    args = [(scenario, policy, tg[:, j : j + limit], seed + j, spec, until_done, want_flows) for j in starts]
    if executor is not None:
        futures = [executor.submit(_run_batch, *a, False) for a in args]
        chunks = [f.result() for f in futures]
    else:
        chunks = [_run_batch(*a, progress) for a in args]
    return _join_chunks(starts, chunks, seed)


def _join_chunks(starts: list[int], chunks: list[tuple[list[Trace], Any]], seed: int) -> tuple[list[Trace], Any]:
    """The chunks' traces and flow records renumbered as one run (instance = trial index)."""
    import pandas as pd

    traces: list[Trace] = []
    frames = []
    for j, (trs, fl) in zip(starts, chunks, strict=True):
        for i, tr in enumerate(trs):
            tr.meta.update({"instance": j + i, "seed": seed})
        traces.extend(trs)
        if fl is not None:
            fl = pd.DataFrame(fl).copy()
            if "instance" in fl.columns:
                fl["instance"] = fl["instance"] + j
            frames.append(fl)
    return traces, (pd.concat(frames, ignore_index=True) if frames else None)


def _run_batch(
    scenario: Scenario,
    policy: Policy,
    tg: np.ndarray,
    seed: int,
    plant: PlantSpec,
    until_done: bool,
    want_flows: bool,
    progress: bool,
) -> tuple[list[Trace], Any]:
    from ..runner import run_episode

    flows = None
    with plant.make(scenario, batch=tg.shape[1]) as pl:
        traces = run_episode(pl, policy, tg, seed, until_done=until_done, progress=progress,
                             meta={"plant": plant.name})
        if want_flows:
            flows = pl.flow_records()
    return traces, flows


def run_plant(
    scenario: Scenario,
    policy: Any,
    targets: np.ndarray | float,
    seed: int = 0,
    plant: str | PlantSpec = "fluid",
    on_period: Callable[[int, Any], bool | None] | None = None,
    setup: Callable[[Any], None] | None = None,
    plant_options: dict[str, Any] | None = None,
    until_done: bool = False,
    want_records: bool = False,
) -> tuple[list[Trace], Any]:
    """One episode of ``policy`` on a new ``plant`` built from ``scenario``; returns (traces, flow records).

    ``targets``: R*_DTN per period, (steps,) or (steps, B), or one number for
    ``scenario.steps`` periods. ``on_period(k, plant)`` runs after every period and
    may end the episode by returning True (``runner.run_episode``). ``setup(plant)``
    runs once before the episode, for a plant's own settings that no scenario field
    expresses (e.g. the fluid plant's FFS rate-feedback sender, ``set_ccas``).
    ``plant_options`` go to ``make_plant`` (e.g. ``scenarios=[...]`` for a fluid
    batch of different scenarios of one shape). ``want_records``: also return the
    plant's ``flow_records()`` (finished flows with their FCTs), else None.
    """
    from ..runner import run_episode

    spec = plant_spec(plant, plant_options)
    scs = spec.options.get("scenarios") or [scenario]
    tg = np.asarray(targets, dtype=np.float64)
    if tg.ndim == 0:
        tg = np.full(scenario.steps, float(tg))
    with spec.make(scenario, batch=len(scs)) as pl:
        for sc in scs:
            note_run(sc, spec.name, pl)
        if setup is not None:
            setup(pl)
        traces = run_episode(pl, policy, tg, seed, until_done=until_done, on_period=on_period,
                             meta={"plant": spec.name})
        records = pl.flow_records() if want_records else None
    return traces, records
