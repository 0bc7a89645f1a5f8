"""``scidmz reproduce mlc|jenks|abc|ffs|disciplines-dmz``: rerun a paper's whole chain and write its report."""

from __future__ import annotations

import argparse
import sys

from ..guard.options import Needs, check_option_rules, declare_option_rules
from ._shared import add_json_arg, add_seed_arg, add_tracking_arg, emit


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="rerun a paper's whole chain and write a report")
    p.add_argument("paper", choices=["mlc", "jenks", "abc", "ffs", "disciplines-dmz"],
                   help="mlc: identify, train, tune, evaluate (CUBIC and BBRv2); jenks: RTT-based queue "
                        "separation (the Jenks papers' tests); abc, ffs: bottleneck disciplines; "
                        "disciplines-dmz: ABC and FFS vs the trivial TBF in the Science DMZ (paired trials)")
    p.add_argument("--netns", action="store_true",
                   help="jenks: also run the tests on the netns testbed (real kernel TCP, real HTB, root, ~30 min); "
                        "abc, ffs: also run the TCP experiments on the kernel through the NFQUEUE stage (root)")
    p.add_argument("--plant", default="fluid", choices=("fluid", "netns"),
                   help="mlc: where the paired MLC-vs-trivial trials run; netns = real kernel CUBIC on the "
                        "testbed scenario (root, real time: ~1 h at the default sizes), identification and "
                        "tuning on the fluid plant (default fluid)")
    p.add_argument("--quick", action="store_true", help="tiny sizes on small scenarios (CI, < 2 min)")
    p.add_argument("--out", default=None, help="report directory (default reports/PAPER, or reports/PAPER-quick)")
    add_seed_arg(p)
    add_tracking_arg(p)
    p.add_argument("--notes", default=None, metavar="FILE", help="Markdown file appended to the report as 'Analysis' (default: OUT/analysis.md if present)")
    p.add_argument("--render-only", action="store_true",
                   help="rewrite OUT/report.md from OUT/results.json (e.g. with --notes), no rerun")
    p.add_argument("--keep-netns", action="store_true",
                   help="jenks, abc, ffs: rerun the fluid and packet-level parts, keep the kernel part of "
                        "OUT/results.json from an earlier --netns run")
    g = p.add_argument_group("sizes (default: the paper's, or the --quick ones)")
    g.add_argument("--identify-duration", type=float, default=None, metavar="S", help="identification seconds (paper 28800)")
    g.add_argument("--epochs", type=int, default=None, help="inverse-ANN training epochs")
    g.add_argument("--cv-folds", type=int, default=None, help="k of the k-fold CV (0 = skip)")
    g.add_argument("--generations", type=int, default=None, help="GA generations (Table 2: 100)")
    g.add_argument("--population", type=int, default=None, help="GA population (Table 2: 30)")
    g.add_argument("--episode", type=float, default=None, metavar="S", help="GA fitness episode seconds (120)")
    g.add_argument("--trials", type=int, default=None, help="MRAE and FCT trials per policy (100)")
    g.add_argument("--fct-trials", type=int, default=None, help="FCT/utilisation trials per policy (default: --trials)")
    g.add_argument("--ns", default=None, metavar="LIST", help="N_s sweep values, e.g. 1,10,100,1000,10000")
    g.add_argument("--ns-trials", type=int, default=None, help="trials per N_s value")
    g.add_argument("--ns-max-flows", type=int, default=None, help="cap on trials x N_s per sweep point")
    g.add_argument("--short-trials", type=int, default=None, help="short-flow trials (600 s each)")
    g.add_argument("--experiments", default=None, help="comma list of mrae,fct,utilization,sweep,short")
    p.add_argument("--cca", default=None, metavar="LIST",
                   help="mlc --plant netns: the DTN congestion controls, each a section on `testbed` "
                        "(default cubic; this kernel has reno, cubic, bbr)")
    p.add_argument("--resume", action="store_true",
                   help="mlc: reuse identification datasets in --out that match this run (after an interruption)")
    p.add_argument("--evaluation-from", action="append", default=None, metavar="DIR",
                   help="mlc: lay the kernel evaluation of OUT's report out from a finished kernel leaderboard "
                        "run's mlc and trivial units (the same shipped model, gains and trial plan; checked) "
                        "instead of running them again; repeat per DTN CCA; runs nothing")
    p.add_argument("--executor", default=None, metavar="SPEC",
                   help="mlc: where the GA's fitness chunks and the fluid evaluation trials run: local (default) | "
                        "processes[:N] | dask://HOST:PORT; every trial keeps its seed, so the results are the same")
    add_json_arg(p)
    p.set_defaults(func=cmd_reproduce, prepare=prepare)
    declare_option_rules(p, _rules())


#: The options each paper takes besides --out, --quick, --notes, --render-only and --json; any other
#: given with a value other than its default is refused (``reproduce abc --plant netns``
#: used to be accepted silently and ran on the fluid plant).
_SIZES = ("identify_duration", "epochs", "cv_folds", "generations", "population", "episode", "trials",
          "fct_trials", "ns", "ns_trials", "ns_max_flows", "short_trials", "experiments")
APPLIES: dict[str, frozenset[str]] = {
    "mlc": frozenset({"plant", "cca", "seed", "tracking_uri", "resume", "evaluation_from", "executor", *_SIZES}),
    "jenks": frozenset({"netns", "keep_netns"}),
    "abc": frozenset({"netns", "keep_netns", "seed"}),
    "ffs": frozenset({"netns", "keep_netns", "seed"}),
    "disciplines-dmz": frozenset({"seed", "trials", "tracking_uri"}),
}
#: What --render-only does not use: it rewrites the report from results.json and runs nothing.
_RUN_ONLY = frozenset({"cca", "seed", "tracking_uri", "resume", "executor", *_SIZES})


def _rules() -> dict[str, tuple[Needs, ...]]:
    """When each option applies (``guard.options.declare_option_rules``): its papers, and not with --render-only."""
    rules: dict[str, tuple[Needs, ...]] = {k: () for k in ("paper", "quick", "out", "notes", "render_only", "json")}
    for dest in {k for papers in APPLIES.values() for k in papers}:
        papers = tuple(p for p, opts in APPLIES.items() if dest in opts)
        needs = [Needs(lambda a, ps=papers: a.paper in ps, f"goes with reproduce {' or '.join(papers)} only")]
        if dest in _RUN_ONLY or dest == "evaluation_from":
            needs.append(Needs(lambda a: not a.render_only, "does nothing with --render-only (it runs nothing)"))
        if dest in _RUN_ONLY:
            needs.append(Needs(lambda a: not getattr(a, "evaluation_from", None),
                               "does nothing with --evaluation-from (it runs nothing)"))
        if dest in _SIZE_OF:
            wanted = _SIZE_OF[dest]
            needs.append(Needs(lambda a, w=wanted: _runs_any(a, w),
                               f"sizes the {' or '.join(wanted)} experiment, which this run leaves out "
                               "(--experiments, or the plant's default)"))
        rules[dest] = tuple(needs)
    return rules


#: The experiments a size option sizes: given without them it would do nothing.
_SIZE_OF = {"fct_trials": ("fct", "utilization"), "ns": ("sweep",), "ns_trials": ("sweep",),
            "ns_max_flows": ("sweep",), "short_trials": ("short",)}


def _runs_any(a: argparse.Namespace, wanted: tuple[str, ...]) -> bool:
    """Whether reproduce mlc runs one of ``wanted``: those --experiments names, else the plan's default
    (every experiment on a simulated plant; MRAE, FCT and utilisation on a real-time one)."""
    if a.experiments is None:
        return not _realtime(a.plant) or any(w in ("fct", "utilization") for w in wanted)
    names = {e.strip() for e in a.experiments.split(",")}
    return "all" in names or any(w in names for w in wanted)


def _realtime(plant: str) -> bool:
    """The plant runs in real time (its registry entry says so): the testbed form of the MLC chain."""
    from ..plant.base import plant_entry

    return plant_entry(plant).realtime


def _default_out(a: argparse.Namespace) -> str:
    name = f"mlc-{a.plant}" if a.paper == "mlc" and _realtime(a.plant) else a.paper
    return f"reports/{name}-quick" if a.quick else f"reports/{name}"


def prepare(a: argparse.Namespace) -> None:
    """Before the path policy checks anything (``guard.check.check_args``): refuse options this paper does
    not take, and fill in the default --out, so that the directory actually written is the one checked."""
    check_option_rules(a)
    if a.keep_netns and (a.netns or a.render_only):
        raise ValueError("--keep-netns goes without --netns and --render-only")
    if a.paper == "mlc":
        _ccas(a)
        from ..executors import parse_executor

        parse_executor(a.executor)  # a bad SPEC in one line, before --out exists
    if a.out is None:
        from ..fileio import set_make_parents

        a.out = _default_out(a)
        # The default reports/PAPER is ours, not a typo: its parent is created (the README's
        # `reproduce mlc --quick --json` used to exit 2 in any folder without reports/).
        set_make_parents(True)


def _ccas(a: argparse.Namespace) -> tuple[str, ...]:
    """``--cca LIST`` of ``reproduce mlc --plant netns`` (default cubic), each a kernel congestion control."""
    if a.cca is not None and not _realtime(a.plant):
        raise ValueError("--cca goes with reproduce mlc --plant netns")
    ccas = tuple(c.strip() for c in (a.cca or "cubic").split(",") if c.strip())
    bad = [c for c in ccas if c not in ("reno", "cubic", "bbr")]
    if bad or not ccas:
        raise ValueError(f"--cca: {bad[0] if bad else 'empty'!r} is not a congestion control of this kernel "
                         "(reno, cubic, bbr)")
    return ccas


def _notes(path: str | None, a: argparse.Namespace) -> str | None:
    """The analysis appended to the report: ``--notes``, else the report folder's own
    ``analysis.md`` (the committed reports keep theirs there, so a re-render keeps it).
    ``a.out`` is set by ``prepare`` (the default --out filled in)."""
    from pathlib import Path

    from ..fileio import read_text_input

    if not path:
        own = Path(a.out) / "analysis.md"
        if not own.is_file():
            return None
        print(f"scidmz: reproduce: appending {own} as the report's analysis (--notes FILE to choose another)",
              file=sys.stderr)
        path = str(own)
    return read_text_input(path, "notes file")


def _command() -> str | None:
    return "scidmz " + " ".join(sys.argv[1:]) if sys.argv[1:2] == ["reproduce"] else None


def cmd_reproduce(a: argparse.Namespace) -> int:
    from ..fileio import own_folder

    if a.out is None:  # called without cli.main (prepare not run): the same checks
        prepare(a)
    # The run owns --out for its whole life (fileio.own_folder): a second run on it is refused,
    # and its files are never opened through links. --render-only writes the report only.
    with own_folder(a.out, "--out", ["results.json", "report.md"], create=not (a.render_only or a.evaluation_from)):
        return _reproduce(a)


def _reproduce(a: argparse.Namespace) -> int:
    notes = _notes(a.notes, a)
    if a.paper == "jenks":
        from ..evaluation.jenks.reproduce import reproduce_jenks

        result, human = reproduce_jenks(a.out, a.quick, command=_command(), netns=a.netns, render_only=a.render_only,
                                        keep_netns=a.keep_netns, notes=notes)
        emit(result, a.json, human)
        return 0
    if a.paper in ("abc", "ffs"):
        from ..evaluation.disciplines.reproduce import reproduce_discipline

        result = reproduce_discipline(a.paper, a.out, a.quick, a.seed, a.netns, render_only=a.render_only,
                                      keep_netns=a.keep_netns, notes=notes, command=_command())
        emit(result, a.json, f"report written to {result['report']}")
        return 0
    if a.paper == "disciplines-dmz":
        from ..evaluation.disciplines.dmz import reproduce_dmz

        result, human = reproduce_dmz(a.out, a.quick, seed=a.seed, trials=a.trials, render_only=a.render_only,
                                      notes=notes, command=_command(), tracking_uri=a.tracking_uri,
                                      progress=sys.stderr.isatty())
        emit(result, a.json, human)
        return 0
    from ..evaluation.mlc.reproduce import reproduce_mlc

    out = a.out
    cmd = _command()
    from ..evaluation.mlc.reproduce import ReproducePlan

    if _realtime(a.plant):
        base = ReproducePlan.netns(a.seed, quick=a.quick, ccas=_ccas(a))
    else:
        base = ReproducePlan.quick(a.seed) if a.quick else ReproducePlan(seed=a.seed)
    plan = base.scaled(
        identify_duration=a.identify_duration, epochs=a.epochs, cv_folds=a.cv_folds, generations=a.generations,
        population=a.population, episode=a.episode, trials=a.trials, fct_trials=a.fct_trials, ns_values=a.ns,
        ns_trials=a.ns_trials,
        ns_max_flows=a.ns_max_flows, short_trials=a.short_trials, which=a.experiments,
    )
    if a.evaluation_from:
        from ..evaluation.mlc.fromledger import relay

        result, human = relay(out, list(a.evaluation_from), command=cmd, notes=notes)
        emit(result, a.json, human)
        return 0
    if a.render_only:
        from ..evaluation.mlc.reproduce import rerender_report

        result, human = rerender_report(out, notes, command=cmd)
        emit(result, a.json, human)
        return 0
    result, human = reproduce_mlc(out=out, quick=a.quick, tracking_uri=a.tracking_uri, seed=a.seed, plan=plan,
                                  command=cmd, notes=notes, progress=sys.stderr.isatty(),
                                  resume=a.resume, executor=a.executor)
    emit(result, a.json, human)
    return 0
