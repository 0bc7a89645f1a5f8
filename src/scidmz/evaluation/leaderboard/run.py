"""``scidmz leaderboard``'s library side: check, open the ledger, run what is left, write and render.

``prepare`` checks everything that is bad input (one line, exit 2) before any trial:
the policies against the plant's declared capabilities, the plan's bounds, the ledger
(``--resume`` without one, onto a foreign one, or a ledger found without ``--resume``).
``run_leaderboard`` then runs the remaining trials (``units``), writes
``results.json`` (``results``) and renders ``report.md`` and ``ranking.png`` from it;
``render_only`` repeats only that last pass.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...policies.base import Policy
from ...scenario import Scenario
from ..results import provenance, read_results
from ..stats import BASELINE
from .ledger import LEDGER_NAME, Ledger, code_identity, files_sha256
from .plan import LeaderboardPlan, check_tuning_apart, seed_block
from .results import DEFAULT_MAX_STARVED, load_avg, render_outputs, results_doc, write_results
from .trialunits import (
    check_sizes,
    planned_units,
    run_batched,
    run_realtime,
    target_hashes,
    todo_count,
)

#: The files a leaderboard run folder holds: each must be a regular file of its own (or absent)
#: before the run writes anything (``fileio.own_folder``).
MEMBERS = [LEDGER_NAME, "command.txt", "results.json", "report.md", "ranking.png"]

__all__ = ["MEMBERS", "Prepared", "prepare", "run_leaderboard", "render_only", "plant_model", "comparable_policies",
           "check_capabilities", "check_gains_apart", "tuning_seeds"]


def plant_model(plant: str, scenario: Scenario) -> dict[str, Any]:
    """What the plant's numbers depend on beyond the scenario, as its registry entry declares it
    (``register_plant(fingerprint=...)``: the fluid model's fingerprint; for netns the kernel release
    and the hash of the testbed's description); for a plant that declares none, the kernel release
    (ours: a real network's numbers depend at least on the kernel that runs it)."""
    from ...plant.base import plant_entry

    fingerprint = plant_entry(plant).fingerprint
    return {"kernel": os.uname().release} if fingerprint is None else fingerprint(scenario)


def check_capabilities(plant: str, policies: Mapping[str, Policy]) -> None:
    """One line for a policy (or a configuration's member) whose kind the plant does not declare
    (``plant.base.plant_capabilities``)."""
    from ...kinds import policy_places
    from ...plant.base import plant_capabilities, plant_entry

    caps = plant_capabilities(plant_entry(plant).cls)
    for name, pol in policies.items():
        for kind in policy_places(pol):
            if kind not in caps:
                raise ValueError(f"policy {name} ({kind} policy) cannot run on the {plant} plant: it runs "
                                 f"{', '.join(caps)} policies only")


def tuning_seeds(gains_file: str | os.PathLike[str]) -> dict[str, range]:
    """The plant seeds a gains file was tuned on, from its ``info`` (``scidmz tune``): the GA's fitness
    episodes (GA seed + the GA's offset, one per episode) and a refinement's episodes; {} where the
    file does not say (gains written by hand)."""
    from ...tuning.ga import _SEED_OFFSET

    try:
        info = json.loads(Path(gains_file).read_text()).get("info") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    out = {}
    if isinstance(info.get("seed"), int):
        out["GA"] = seed_block(info["seed"] + _SEED_OFFSET, int(info.get("episodes_per_individual") or 1))
    ref = info.get("refine") or {}
    if isinstance(ref.get("seed"), int):
        out["refinement"] = seed_block(ref["seed"], int(ref.get("episodes") or 1))
    return out


def check_gains_apart(plan: LeaderboardPlan, files: Mapping[str, Mapping[str, str]]) -> None:
    """Tuning apart from testing: gains tuned on any of the run's trial seeds are refused in one line
    (``plan.check_tuning_apart``)."""
    trials = seed_block(plan.seed, max(plan.trials, plan.fct_trials, plan.short_trials))
    for name, fs in files.items():
        if fs.get("gains"):
            check_tuning_apart(trials, **{f"{name} gains' {k}": v for k, v in tuning_seeds(fs["gains"]).items()})


def comparable_policies(plant: str, scenario: Scenario, policies: Mapping[str, Policy]) -> dict[str, bool]:
    """Which policies the plant models on equal footing: the plant's ``noise_covers(kind)`` for every
    place a policy (or each member of a configuration) acts in, where it declares one (the fluid plant),
    else all (a real network has no model to be unequal in)."""
    from ...kinds import policy_places
    from ...plant.base import make_plant, plant_entry

    if not hasattr(plant_entry(plant).cls, "noise_covers"):
        return dict.fromkeys(policies, True)
    with make_plant(plant, scenario) as pl:
        return {n: all(pl.noise_covers(k) for k in policy_places(p))  # type: ignore[attr-defined]
                for n, p in policies.items()}


def _scenario_id(sc: Scenario) -> dict[str, Any]:
    from ...regime import fingerprint
    from ..results import clean

    text = json.dumps(clean(sc.to_dict()), sort_keys=True)
    return {"name": sc.name, "fingerprint": fingerprint(sc), "sha256": hashlib.sha256(text.encode()).hexdigest()}


@dataclass
class Prepared:
    """A checked run: its objects, the open ledger and the header it was opened with."""

    scenario: Scenario
    policies: dict[str, Policy]
    plant: str
    plan: LeaderboardPlan
    out: Path
    ledger: Ledger
    comparable: dict[str, bool]
    #: holds the run's exclusive lock on ``out`` (``fileio.own_folder``) until ``run_leaderboard`` ends
    hold: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)


def prepare(scenario: Scenario, policies: Mapping[str, Policy], files: Mapping[str, Mapping[str, str]],
            plant: str, plan: LeaderboardPlan, out: str | os.PathLike[str], resume: bool = False,
            allow_drift: bool = False) -> Prepared:
    """Check the run, own its folder and open its ledger (module docstring); one-line ValueError for
    bad input. ``allow_drift``: a resume may cross a change of code or kernel build (``ledger``).

    The run holds an exclusive lock on ``out`` from here until ``run_leaderboard`` ends (a second
    run on the folder is refused with one line), and every file the folder holds (``MEMBERS``) is
    checked to be a regular file of its own before anything is written."""
    from ...fileio import own_folder
    from ...plant.base import plant_entry

    if BASELINE not in policies:
        raise ValueError(f"the {BASELINE} baseline must be among the policies (it is the paired reference)")
    check_capabilities(plant, policies)
    check_sizes(plan, scenario)
    check_gains_apart(plan, files)
    if plant_entry(plant).realtime and "short" in plan.units and len(plan.units) > 1:
        raise ValueError(f"short-flow trials on the {plant} plant need a testbed of their own (an extra sender): "
                         "run them in a leaderboard of their own (--experiments short)")
    header = {
        "scenario": _scenario_id(scenario), "plant": plant, "plant_model": plant_model(plant, scenario),
        "code": code_identity(), "plan": plan.to_dict(), "targets": target_hashes(plan, scenario),
        "policies": {n: {"kind": p.kind, "files": {k: files_sha256(v) for k, v in (files.get(n) or {}).items()}}
                     for n, p in policies.items()},
    }
    hold = contextlib.ExitStack()
    try:
        folder = hold.enter_context(own_folder(out, "--out", MEMBERS))
        assert folder is not None  # made when missing
        out_dir = folder.path
        ledger = Ledger.open(out_dir, header, resume, allow_drift, planned_units(plan, list(policies)))
        hold.callback(ledger.close)
        return Prepared(scenario, dict(policies), plant, plan, out_dir, ledger,
                        comparable_policies(plant, scenario, policies), hold)
    except BaseException:
        hold.close()
        raise


def _progress(total: int) -> Any:
    """A tqdm bar on stderr when it is a terminal (ARCHITECTURE.md conventions), else None."""
    if not total or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="leaderboard", unit="trial", file=sys.stderr)


def _command_file(out: Path, command: str, resumed: bool) -> None:
    from ...fileio import atomic_write_text, read_member

    path = out / "command.txt"
    # Never read through a link (a planted command.txt -> a 0600 file would be copied into a new,
    # readable one): read_member opens it O_NOFOLLOW and only as a regular file of its own.
    raw = read_member(path, "--out: command.txt", 1 << 20) if resumed else None
    old = raw.decode("utf-8", errors="replace") if raw else ""
    atomic_write_text(path, old + ("# resumed\n" if old else "") + command + "\n")


def run_leaderboard(prep: Prepared, command: str, max_starved: float = DEFAULT_MAX_STARVED,
                    executor: str | None = None) -> dict[str, Any]:
    """Run every trial not yet in the ledger, then write results.json, report.md and ranking.png.

    ``executor``: where a batched plant's trials run (``local``, ``processes[:N]``,
    ``dask://HOST:PORT``; ``evaluation.trials.using_executor``): the same seeds per trial, so
    the same numbers.
    """
    t0 = time.perf_counter()
    load0 = load_avg()
    try:
        return _run_owned(prep, command, max_starved, executor, t0, load0)
    finally:
        prep.hold.close()  # the ledger's descriptor, then the folder's lock


def _run_owned(prep: Prepared, command: str, max_starved: float, executor: str | None, t0: float,
               load0: list[float] | None) -> dict[str, Any]:
    from ...executors import open_executor, parse_executor
    from ...plant.base import plant_entry
    from ..trials import using_executor

    resumed = prep.ledger.path.exists()
    if prep.ledger.cut:
        print(f"scidmz: leaderboard: cut a partial last line ({prep.ledger.cut} bytes) off {prep.ledger.path}: "
              "a write the last run did not finish", file=sys.stderr)
    names = list(prep.policies)
    todo = todo_count(prep.plan, names, prep.ledger)
    before = len(prep.ledger.lines)
    _command_file(prep.out, command, resumed)
    bar = _progress(todo)
    tick = bar.update if bar is not None else None
    realtime = plant_entry(prep.plant).realtime
    spec = parse_executor(executor)
    try:
        with prep.ledger, provenance(command), open_executor(spec) as ex, using_executor(ex):
            if realtime:
                run_realtime(prep.scenario, prep.policies, prep.plan, prep.ledger, prep.plant, tick)
            else:
                run_batched(prep.scenario, prep.policies, prep.plan, prep.ledger, prep.plant, tick)
    except KeyboardInterrupt:
        # Ours: an interrupted run (Ctrl-C, SIGINT) still says what
        # its finished trials show, marked incomplete, before the interruption goes on (exit 130).
        if prep.ledger.header is not None and prep.ledger.done:
            _write(prep, command, max_starved, load0)
        raise
    finally:
        if bar is not None:
            bar.close()
    doc, res, files = _write(prep, command, max_starved, load0)
    return {"out": str(prep.out), "results": str(res), **files, "units_run": len(prep.ledger.lines) - before,
            "units": len(prep.ledger.lines), "cut_bytes": prep.ledger.cut, "wall_s": time.perf_counter() - t0,
            "reruns": doc.get("reruns") or {}, "stayed_invalid": doc.get("stayed_invalid") or {}, "rows": doc["rows"]}


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold a Ctrl-C (SIGINT) until the block ends, then raise it: results.json is written from the
    ledger whatever moment the interruption hit (a Ctrl-C during the final pass used to leave no
    results.json although the ledger held every unit). Outside the main thread, no deferral."""
    got: list[int] = []
    try:
        old = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if got:
        raise KeyboardInterrupt


def _write(prep: Prepared, command: str, max_starved: float,
           load0: list[float] | None) -> tuple[dict[str, Any], Path, dict[str, str]]:
    """results.json, report.md and ranking.png from the ledger as it stands; ``complete`` says
    whether every unit of the plan is in it (an interrupted run's results are only so far)."""
    names = list(prep.policies)
    with _sigint_deferred():
        doc = results_doc(prep.ledger.header, prep.ledger.lines, prep.comparable, command=command,
                          max_starved=max_starved, load_start=load0, cut=prep.ledger.cut,
                          scenario=prep.scenario.to_dict(), drift=prep.ledger.drifts)
        left = todo_count(prep.plan, names, prep.ledger)
        doc["complete"] = left == 0
        doc["units_left"] = left
        res = write_results(doc, prep.out)
    return doc, res, render_outputs(prep.out, doc)


def render_only(out: str | os.PathLike[str], command: str) -> dict[str, Any]:
    """Re-render report.md and ranking.png from ``out/results.json`` (nothing is run), owning ``out``
    meanwhile (``prepare``) so a run cannot write it at the same time."""
    from ...fileio import own_folder

    with own_folder(out, "--out", MEMBERS, create=False):
        doc = read_results(Path(out) / "results.json", "scidmz leaderboard")
        if not isinstance(doc.get("rows"), list):
            raise ValueError(f"{Path(out) / 'results.json'}: not a leaderboard results file (no \"rows\" list)")
        files = render_outputs(out, doc, rendered=command)
    return {"out": str(out), **files, "rows": doc["rows"]}
