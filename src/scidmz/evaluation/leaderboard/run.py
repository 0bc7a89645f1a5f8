"""``scidmz leaderboard``'s library side: check, open the ledger, run what is left, write and render.

``prepare`` checks everything that is bad input (one line, exit 2) before any trial:
the policies against the plant's declared capabilities, the plan's bounds, the ledger
(``--resume`` without one, onto a foreign one, or a ledger found without ``--resume``).
``run_leaderboard`` then runs the remaining trials (``units``), writes
``results.json`` (``results``) and renders ``report.md`` and ``ranking.png`` from it;
``render_only`` repeats only that last pass.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...policies.base import Policy
from ...scenario import Scenario
from ..results import provenance, read_results
from .ledger import Ledger, code_identity, files_sha256
from .plan import LeaderboardPlan, check_tuning_apart, seed_block
from .results import DEFAULT_MAX_STARVED, load_avg, render_outputs, results_doc, write_results
from .stats import BASELINE
from .trialunits import run_batched, run_realtime, target_hashes, todo_count

__all__ = ["Prepared", "prepare", "run_leaderboard", "render_only", "plant_model", "comparable_policies",
           "check_capabilities", "check_gains_apart", "tuning_seeds"]


def plant_model(plant: str, scenario: Scenario) -> dict[str, Any]:
    """What the plant's numbers depend on beyond the scenario: the fluid model's fingerprint; for
    netns the kernel release and the hash of the testbed's description (``plant.netns.spec``)."""
    if plant == "fluid":
        from ...plant.fluid.plant import model_fingerprint

        return {"fluid": model_fingerprint()}
    if plant == "netns":
        import dataclasses

        from ...plant.netns.spec import describe

        spec = dataclasses.asdict(describe(scenario, "sdz"))  # a fixed prefix: the wiring, not the names
        text = json.dumps(spec, sort_keys=True, default=str)
        return {"kernel": os.uname().release, "testbed": hashlib.sha256(text.encode()).hexdigest()[:16]}
    return {"kernel": os.uname().release}


def check_capabilities(plant: str, policies: Mapping[str, Policy]) -> None:
    """One line for a policy whose kind the plant does not declare (``plant.base.plant_capabilities``)."""
    from ...plant.base import check_plant_options, plant_capabilities

    caps = plant_capabilities(check_plant_options(plant).cls)
    for name, pol in policies.items():
        kind = getattr(pol, "kind", None)
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
    """Which policies the plant models on equal footing: the plant's ``noise_covers(kind)`` where it
    declares one (the fluid plant), else all (a real network has no model to be unequal in)."""
    from ...plant.base import check_plant_options, make_plant

    if not hasattr(check_plant_options(plant).cls, "noise_covers"):
        return dict.fromkeys(policies, True)
    with make_plant(plant, scenario) as pl:
        return {n: bool(pl.noise_covers(p.kind)) for n, p in policies.items()}  # type: ignore[attr-defined]


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


def prepare(scenario: Scenario, policies: Mapping[str, Policy], files: Mapping[str, Mapping[str, str]],
            plant: str, plan: LeaderboardPlan, out: str | os.PathLike[str], resume: bool = False,
            allow_drift: bool = False) -> Prepared:
    """Check the run and open its ledger (module docstring); one-line ValueError for bad input.
    ``allow_drift``: a resume may cross a change of code or kernel build (``ledger``)."""
    from ...fileio import ensure_dir
    from ...plant.base import check_plant_options

    if BASELINE not in policies:
        raise ValueError(f"the {BASELINE} baseline must be among the policies (it is the paired reference)")
    check_capabilities(plant, policies)
    check_gains_apart(plan, files)
    if check_plant_options(plant).max_batch is not None and "short" in plan.units and len(plan.units) > 1:
        raise ValueError(f"short-flow trials on the {plant} plant need a testbed of their own (an extra sender): "
                         "run them in a leaderboard of their own (--experiments short)")
    header = {
        "scenario": _scenario_id(scenario), "plant": plant, "plant_model": plant_model(plant, scenario),
        "code": code_identity(), "plan": plan.to_dict(), "targets": target_hashes(plan, scenario),
        "policies": {n: {"kind": p.kind, "files": {k: files_sha256(v) for k, v in (files.get(n) or {}).items()}}
                     for n, p in policies.items()},
    }
    out_dir = ensure_dir(out, "--out")
    ledger = Ledger.open(out_dir, header, resume, allow_drift)
    return Prepared(scenario, dict(policies), plant, plan, out_dir, ledger,
                    comparable_policies(plant, scenario, policies))


def _progress(total: int) -> Any:
    """A tqdm bar on stderr when it is a terminal (ARCHITECTURE.md conventions), else None."""
    if not total or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="leaderboard", unit="trial", file=sys.stderr)


def _command_file(out: Path, command: str, resumed: bool) -> None:
    from ...fileio import atomic_write_text

    path = out / "command.txt"
    old = path.read_text() if resumed and path.is_file() else ""
    atomic_write_text(path, old + ("# resumed\n" if old else "") + command + "\n")


def run_leaderboard(prep: Prepared, command: str, max_starved: float = DEFAULT_MAX_STARVED,
                    executor: str | None = None) -> dict[str, Any]:
    """Run every trial not yet in the ledger, then write results.json, report.md and ranking.png.

    ``executor``: where a batched plant's trials run (``local``, ``processes[:N]``,
    ``dask://HOST:PORT``; ``evaluation.trials.using_executor``): the same seeds per trial, so
    the same numbers.
    """
    from ...executors import open_executor, parse_executor
    from ...plant.base import check_plant_options
    from ..trials import using_executor

    t0 = time.perf_counter()
    load0 = load_avg()
    resumed = prep.ledger.path.exists()
    if prep.ledger.cut:
        print(f"scidmz: leaderboard: cut a partial last line ({prep.ledger.cut} bytes) off {prep.ledger.path}: "
              "a write the last run did not finish", file=sys.stderr)
    names = list(prep.policies)
    todo = todo_count(prep.plan, names, prep.ledger)
    _command_file(prep.out, command, resumed)
    bar = _progress(todo)
    tick = bar.update if bar is not None else None
    realtime = check_plant_options(prep.plant).max_batch is not None
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
    return {"out": str(prep.out), "results": str(res), **files, "units_run": todo,
            "units": len(prep.ledger.done), "cut_bytes": prep.ledger.cut, "wall_s": time.perf_counter() - t0,
            "rows": doc["rows"]}


def _write(prep: Prepared, command: str, max_starved: float,
           load0: list[float] | None) -> tuple[dict[str, Any], Path, dict[str, str]]:
    """results.json, report.md and ranking.png from the ledger as it stands; ``complete`` says
    whether every unit of the plan is in it (an interrupted run's results are only so far)."""
    names = list(prep.policies)
    doc = results_doc(prep.ledger.header, prep.ledger.done.values(), prep.comparable, command=command,
                      max_starved=max_starved, load_start=load0, cut=prep.ledger.cut,
                      scenario=prep.scenario.to_dict(), drift=prep.ledger.drifts)
    left = todo_count(prep.plan, names, prep.ledger)
    doc["complete"] = left == 0
    doc["units_left"] = left
    res = write_results(doc, prep.out)
    return doc, res, render_outputs(prep.out, doc)


def render_only(out: str | os.PathLike[str], command: str) -> dict[str, Any]:
    """Re-render report.md and ranking.png from ``out/results.json`` (nothing is run)."""
    doc = read_results(Path(out) / "results.json", "scidmz leaderboard")
    if not isinstance(doc.get("rows"), list):
        raise ValueError(f"{Path(out) / 'results.json'}: not a leaderboard results file (no \"rows\" list)")
    files = render_outputs(out, doc, rendered=command)
    return {"out": str(out), **files, "rows": doc["rows"]}
