"""``scidmz leaderboard``: every policy on the same paired trials, resumable, ranked.

Parses, builds the scenario and the policies through the one assembly
(``build.build_policies``: names from the registry, each with the trained files its
registry entry declares, given as ``--NAME-FILE`` or shipped), and hands them to
``evaluation.leaderboard.run``. Every piece of bad input is one line (exit 2) before
any trial runs.
"""

from __future__ import annotations

import argparse
import sys

from ..guard.options import Needs, declare_option_rules
from ._shared import (
    add_json_arg,
    add_policy_file_args,
    add_seed_arg,
    add_tracking_arg,
    emit,
    policy_file_args,
    policy_file_rules,
)

#: Configurations a leaderboard runs by default beside every ranked policy (ours: pace the DTN while a PI
#: shapes the campus, the question whether acting in two places beats pacing alone).
DEFAULT_CONFIGURATIONS = ("pacing+pi",)


def _default_policies() -> str:
    """The policies a leaderboard runs without --policies: every registered way of serving the DTN, and
    ``DEFAULT_CONFIGURATIONS``."""
    from ..policies.registry import ranked_policies

    return ",".join([*ranked_policies(), *DEFAULT_CONFIGURATIONS])


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ..plant.registry import DEFAULT_PLANT, plant_names

    default_policies = _default_policies()
    p = sub.add_parser("leaderboard", help="which way serves the DTN best: every policy on the same paired "
                                           "trials, resumable, with paired tests and a ranking")
    p.add_argument("scenario", nargs="?", default=None,
                   help="built-in scenario name or a .toml file (not needed with --render-only)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario key (e.g. --set dtn.cca=bbr) or, as plan.KEY=VALUE, a size of the "
                        "trials: plan.duration, plan.target_hold, plan.transfer, plan.fct_max_time, "
                        "plan.short_duration, plan.target_low, plan.target_high, plan.fct_target")
    p.add_argument("--plant", default=DEFAULT_PLANT, help=f"{' | '.join(plant_names())} (default {DEFAULT_PLANT}); "
                                                        "a real-time plant runs one trial at a time")
    p.add_argument("--policies", default=None,
                   help=f"comma list of registered policies or configurations of several, at most one per place "
                        f"(NAME+NAME, e.g. pacing+pi) (default {default_policies}); trivial, the paired "
                        "baseline, is always run")
    p.add_argument("--trials", type=int, default=None,
                   help="MRAE (and short-flow) trials per policy, >= 2 (default 50 fluid, 20 netns, 4 --quick)")
    p.add_argument("--fct-trials", type=int, default=None, help="FCT/utilisation trials per policy (default --trials)")
    p.add_argument("--policy-trials", default=None, metavar="NAME=N[/M],...",
                   help="fewer trials for some policies: N MRAE (and short-flow) trials, M FCT trials (default N), "
                        "each at most --trials / --fct-trials; they are trials 0..N-1, paired with the others' "
                        "(e.g. jenks=10/5,abc=10/5,ffs=10/5); not the trivial baseline")
    p.add_argument("--experiments", default=None,
                   help="comma list of mrae,fct,utilization,short (default all on fluid; mrae,fct,utilization "
                        "on netns)")
    p.add_argument("--out", default=None, help="the run's directory: ledger.jsonl, results.json, report.md, "
                                               "ranking.png, command.txt (required)")
    p.add_argument("--resume", action="store_true", help="continue the run whose ledger is in --out")
    p.add_argument("--allow-drift", action="store_true",
                   help="with --resume: continue although our code or the kernel build changed since the ledger's "
                        "last trials (recorded in the ledger and results.json; nothing else may differ)")
    p.add_argument("--quick", action="store_true", help="small sizes: 30 s trials, 150 MB transfer, 4 trials")
    p.add_argument("--render-only", action="store_true",
                   help="re-render report.md and ranking.png from --out/results.json; run nothing")
    p.add_argument("--merge", action="store_true",
                   help="merge the runs in --out's subfolders (--out/*/results.json) into --out/results.json and "
                        "--out/report.md; run nothing")
    p.add_argument("--recheck", default=None, metavar="FIRST",
                   help="compare the run in --out, a re-check after a fix, with FIRST, an earlier run of the same "
                        "plan, trial by trial: writes --out/recheck.md; runs nothing (docs/leaderboard.md)")
    add_seed_arg(p, what="trial i uses seed S + i")
    add_policy_file_args(p)
    p.add_argument("--max-starved", type=float, default=None,
                   help="refused: the starved share is evidence, not validity (it depends on what the policy "
                        "did); a trial's validity is the plan's rule, --set plan.max_cpu_pressure=, "
                        "plan.max_stage_late=, plan.min_probe_service=, plan.max_reruns= (docs/leaderboard.md)")
    p.add_argument("--executor", default=None, metavar="SPEC",
                   help="where the fluid plant's trials run: local (default) | processes[:N] | dask://HOST:PORT "
                        "(the same numbers)")
    add_tracking_arg(p)
    add_json_arg(p)
    p.set_defaults(func=cmd_leaderboard)
    declare_option_rules(p, _rules(p))


#: Options every mode uses: the run's folder and the output line.
_ALWAYS = ("out", "json")


def _rules(p: argparse.ArgumentParser) -> dict[str, tuple[Needs, ...]]:
    """When each option applies (``guard.options.declare_option_rules``): --merge and --render-only run
    nothing, so every option of a run is refused with them (``--merge --render-only`` used to merge
    and ignore --render-only); --allow-drift goes with --resume; --NAME-FILE with a run of NAME."""
    not_merge = Needs(lambda a: not a.merge, "does nothing with --merge (it runs nothing)")
    not_render = Needs(lambda a: not a.render_only, "does nothing with --render-only (it runs nothing)")
    not_recheck = Needs(lambda a: a.recheck is None, "does nothing with --recheck (it runs nothing)")
    rules: dict[str, tuple[Needs, ...]] = {
        a.dest: (not_merge, not_render, not_recheck) for a in p._actions if a.dest not in ("help", "func", *_ALWAYS)}
    rules.update({k: () for k in _ALWAYS}, merge=(), render_only=(not_merge,), recheck=(not_merge, not_render))
    rules["allow_drift"] += (Needs(lambda a: a.resume, "goes with --resume (it lets a resumed run cross a "
                                                      "code or kernel change)"),)
    rules["fct_trials"] += (Needs(lambda a: a.experiments is None or bool({"all", "fct", "utilization"} & {
        e.strip() for e in a.experiments.split(",")}), "sizes the fct and utilization experiments, which "
                                                      "--experiments leaves out"),)
    for dest, needs in policy_file_rules(lambda a: _names(a.policies)).items():
        rules[dest] += needs
    return rules


def _names(policies: str | None) -> list[str]:
    from ..evaluation.leaderboard.plan import MAX_POLICIES
    from ..evaluation.stats import BASELINE
    from ..policies.configuration import canonical_name

    policies = _default_policies() if policies is None else policies
    # canonical names (pi+pacing -> pacing+pi): one configuration is one row, under one name
    names = list(dict.fromkeys(canonical_name(n) for n in policies.split(",") if n.strip()))
    if not names:
        raise ValueError("--policies needs at least one policy")
    if BASELINE not in names:
        names.insert(0, BASELINE)
    if len(names) > MAX_POLICIES:
        raise ValueError(f"--policies: at most {MAX_POLICIES} policies, got {len(names)}")
    return names


def _canonical_trials(fewer: tuple[tuple[str, int, int], ...]) -> tuple[tuple[str, int, int], ...]:
    """``--policy-trials`` under the policies' canonical names, as ``--policies`` (one line if unknown)."""
    from ..policies.configuration import canonical_name

    return tuple((canonical_name(n), t, f) for n, t, f in fewer)


def _check_policy_trials(fewer: tuple[tuple[str, int, int], ...], names: list[str]) -> None:
    """``--policy-trials`` names policies of this run, and never the baseline (it runs every trial)."""
    from ..evaluation.stats import BASELINE

    for name, _, _ in fewer:
        if name == BASELINE:
            raise ValueError(f"--policy-trials: {BASELINE} is the paired baseline and runs every trial")
        if name not in names:
            raise ValueError(f"--policy-trials: {name} is not among --policies ({','.join(names)})")


def _our_options(msg: str) -> str:
    """The policies' messages name ``--model``/``--gains`` (simulate's); here they are ``--NAME-FILE``."""
    from ..policies.registry import policy_file_flags

    for name, file in policy_file_flags().values():
        if msg.startswith(f"policy {name} "):
            msg = msg.replace(f"--{file} ", f"--{name}-{file} ")
    return msg


def cmd_leaderboard(a: argparse.Namespace) -> int:
    command = "scidmz " + " ".join(sys.argv[1:]) if sys.argv[1:2] == ["leaderboard"] else \
        f"scidmz leaderboard {a.scenario or ''} --plant {a.plant} --out {a.out}"
    if not a.out:
        raise ValueError("--out DIR is required (the run's ledger and results go there)")
    if a.merge:
        from ..evaluation.leaderboard.results import write_merged
        from ..fileio import own_folder

        # Owned while merging (a run cannot write it meanwhile); the runs' results.json below it
        # are read without following links, like every file of an owned folder.
        with own_folder(a.out, "--out", ["results.json", "report.md"], create=False):
            files = write_merged(a.out, command)
        emit({"out": a.out, **files}, a.json, f"merged: {files['report']}")
        return 0
    if a.recheck is not None:
        return _recheck(a)
    if a.render_only:
        from ..evaluation.leaderboard.run import render_only

        result = render_only(a.out, command)
        emit(result, a.json, f"report re-rendered: {result['report']}")
        return 0
    res, human = _run(a, command)
    emit(res, a.json, human)
    return 0


def _recheck(a: argparse.Namespace) -> int:
    """``--out AGAIN --recheck FIRST``: the re-check's page, written in AGAIN's folder while it is owned
    (a run cannot write it meanwhile); FIRST is only read."""
    from ..evaluation.leaderboard.recheck import RECHECK_NAME, write_recheck
    from ..fileio import own_folder

    with own_folder(a.out, "--out", [RECHECK_NAME], create=False) as folder:
        if folder is None:
            raise ValueError(f"--out {a.out}: no such run folder (the re-check's run)")
        page = write_recheck(a.recheck, a.out)
    emit({"out": a.out, "recheck": str(page)}, a.json, f"re-check written: {page}")
    return 0


def _validity_line(res: dict) -> str:
    """What the validity rule did, when it did anything: trials re-run, and those still invalid."""
    rerun = {u: sorted(by, key=int) for u, by in (res.get("reruns") or {}).items() if by}
    stayed = {u: t for u, t in (res.get("stayed_invalid") or {}).items() if t}
    if not rerun and not stayed:
        return ""
    line = "\nre-run (a disturbed machine): " + "; ".join(f"{u} trials {', '.join(t)}" for u, t in rerun.items())
    if stayed:
        line += "; still invalid, left out for every policy: " + "; ".join(
            f"{u} trials {', '.join(map(str, t))}" for u, t in stayed.items())
    return line


def _run(a: argparse.Namespace, command: str) -> tuple[dict, str]:
    from ..evaluation.leaderboard.plan import (
        make_plan,
        parse_experiments,
        parse_policy_trials,
        split_plan_overrides,
    )
    from ..evaluation.leaderboard.results import DEFAULT_MAX_STARVED
    from ..evaluation.leaderboard.run import prepare, run_leaderboard
    from ..plant.base import plant_spec
    from ..scenario import resolve_scenario
    from .build import build_policies

    if a.scenario is None:
        raise ValueError("a SCENARIO is required (a built-in name or a .toml file), except with --render-only")
    if a.max_starved is not None:
        # Ours: the starved share is counted per unit from symptoms the policy moves (its own step
        # lateness, the backlog it leaves), so it no longer decides validity (evaluation.leaderboard.validity).
        raise ValueError("--max-starved: a trial's starved share is evidence now, not its validity (it depends on "
                         "what the policy did); set the plan's rule with --set plan.max_cpu_pressure=, "
                         "plan.max_stage_late=, plan.min_probe_service=, plan.max_reruns=")
    ms = DEFAULT_MAX_STARVED
    plant = plant_spec(a.plant)
    from ..executors import parse_executor

    if parse_executor(a.executor).kind != "local" and plant.realtime:
        raise ValueError(f"--executor {a.executor} runs batched-plant trials only; the {a.plant} plant runs in real "
                         "time, one testbed at a time")
    scen_over, plan_over = split_plan_overrides(a.set)
    names = _names(a.policies)
    fewer = _canonical_trials(parse_policy_trials(a.policy_trials))
    _check_policy_trials(fewer, names)
    plan = make_plan(plant.name, a.trials, a.fct_trials, parse_experiments(a.experiments, plant.name), a.quick,
                     a.seed, plan_over, fewer)
    sc = resolve_scenario(a.scenario, scen_over)
    try:
        policies, files = build_policies(names, sc, files=policy_file_args(a, names), tracking_uri=a.tracking_uri)
    except ValueError as exc:
        raise ValueError(_our_options(str(exc))) from None
    prep = prepare(sc, policies, files, plant.name, plan, a.out, resume=a.resume, allow_drift=a.allow_drift)
    res = run_leaderboard(prep, command, ms, a.executor)
    best = {r["experiment"]: r["policy"] for r in res["rows"] if r.get("best")}
    human = (f"{res['units_run']} trials run, {res['units']} in the ledger; best: "
             + ", ".join(f"{e} {p}" for e, p in best.items()) + _validity_line(res) + f"\nreport: {res['report']}")
    return res, human
