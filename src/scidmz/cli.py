"""The ``scidmz`` command line: argument parsing only, the work lives in the library.

Each command group registers its parser in one ``_add_*`` function listed in
``_GROUPS`` and dispatches to a library function through ``func``. Imports
of anything heavy happen inside the handlers, so ``scidmz --help`` is
instant. Every command that produces results takes ``--json`` and then
prints one JSON object as the last line of stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from .cli_guard import OneLineArgumentParser, add_mkdir_flags, check_paths, guarded, json_line

__all__ = ["main", "build_parser"]


def _emit(result: dict[str, Any], as_json: bool, human: str | None = None) -> None:
    if human and not as_json:
        print(human)
    if as_json:
        if human:
            print(human, file=sys.stderr)
        print(json_line(result, default=_json_default))


def _json_default(o: Any) -> Any:
    from .state import json_default

    try:
        return json_default(o)
    except TypeError:
        return str(o)  # a log/API line must never fail on an odd value


def _add_common_scenario(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="built-in scenario name (see `scidmz scenarios`) or a .toml file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario key, e.g. --set dtn.cca=bbr2 --set link.capacity=100M")


# -- simulate ------------------------------------------------------------------


def _add_simulate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="run one episode of a policy on a plant and summarise it")
    _add_common_scenario(p)
    p.add_argument("--policy", default="trivial", help="trivial | none | mlc (default trivial)")
    p.add_argument("--plant", default="fluid", help="fluid (default) | netns | hardware")
    p.add_argument("--target", default=None,
                   help="DTN target rate R*_DTN, e.g. 600M (default: half the scenario's B_max)")
    p.add_argument("--duration", default=None, help="episode length, e.g. 120 or 120s (default: scenario's)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: scenario's)")
    p.add_argument("--model", default=None, help="inverse-model directory (policy mlc)")
    p.add_argument("--gains", default=None, help="gains JSON file (policy mlc)")
    p.add_argument("--out", default=None, help="write the Trace as Parquet here")
    p.add_argument("--plot", default=None, help="draw y(t), u(t) and the target to this PNG")
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    p.set_defaults(func=_cmd_simulate)


def _cmd_simulate(a: argparse.Namespace) -> int:
    from .evaluation.simulate import simulate

    result, human = simulate(
        scenario=a.scenario, overrides=a.set, policy=a.policy, plant=a.plant, target=a.target,
        duration=a.duration, seed=a.seed, model=a.model, gains=a.gains, out=a.out, plot=a.plot,
        progress=not a.json and sys.stderr.isatty(),
    )
    _emit(result, a.json, human)
    return 0


# -- scenarios -------------------------------------------------------------------


def _add_scenarios(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scenarios", help="list the built-in scenarios, or show one in SI units")
    p.add_argument("name", nargs="?", help="show this scenario (name or .toml path)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_scenarios)


def _cmd_scenarios(a: argparse.Namespace) -> int:
    from .scenario import builtin_names, load_scenario

    if a.name:
        sc = load_scenario(a.name)
        d = sc.to_dict()
        human = "\n".join(f"{k}: {v}" for k, v in d.items())
        _emit({"scenario": d, "buffer_bytes": sc.buffer_bytes}, a.json, human)
    else:
        names = builtin_names()
        _emit({"scenarios": names}, a.json, "\n".join(names))
    return 0


# -- evaluate / reproduce (MLC paper, section 4) ------------------------------------


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="the MLC paper's section 4 experiments: MLC vs trivial TBF")
    _add_common_scenario(p)
    p.add_argument("--model", required=True, help="inverse-model directory (from `scidmz train`)")
    p.add_argument("--gains", required=True, help="gains JSON file (from `scidmz tune`)")
    p.add_argument("--trials", type=int, default=100, help="trials per experiment and policy (default 100)")
    p.add_argument("--experiments", default="all",
                   help="comma list of mrae,fct,utilization,sweep,short (default all)")
    p.add_argument("--quick", action="store_true", help="small sizes (30 s trials, 150 MB transfer)")
    p.add_argument("--seed", type=int, default=0, help="seed of the trials (default 0)")
    p.add_argument("--plant", default="fluid", help="fluid (default) | netns | hardware")
    p.add_argument("--out", default=None, help="write CSV, results.json and CDF plots to this directory")
    p.add_argument("--tracking-uri", default=None, help="mlflow store (default ./mlruns or $MLFLOW_TRACKING_URI)")
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    p.set_defaults(func=_cmd_evaluate)


def _cmd_evaluate(a: argparse.Namespace) -> int:
    from .evaluation.experiments import evaluate

    result, human = evaluate(
        scenario=a.scenario, model=a.model, gains=a.gains, trials=a.trials, experiments=a.experiments,
        out=a.out, overrides=a.set, plant=a.plant, seed=a.seed, quick=a.quick, tracking_uri=a.tracking_uri,
        progress=not a.json and sys.stderr.isatty(),
    )
    _emit(result, a.json, human)
    return 0


def _add_reproduce(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="rerun a paper's whole chain and write a report")
    p.add_argument("paper", choices=["mlc", "abc", "ffs"],
                   help="mlc: identify, train, tune, evaluate (CUBIC and BBRv2); abc, ffs: bottleneck disciplines")
    p.add_argument("--netns", action="store_true", help="abc: also run on the netns testbed (root)")
    p.add_argument("--quick", action="store_true", help="tiny sizes on small scenarios (CI, < 2 min)")
    p.add_argument("--out", default=None, help="report directory (default reports/mlc, or reports/mlc-quick)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tracking-uri", default=None, help="mlflow store (default ./mlruns or $MLFLOW_TRACKING_URI)")
    p.add_argument("--notes", default=None, metavar="FILE", help="Markdown file appended to the report as 'Analysis'")
    p.add_argument("--render-only", action="store_true",
                   help="rewrite OUT/report.md from OUT/results.json (e.g. with --notes), no rerun")
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
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    p.set_defaults(func=_cmd_reproduce)


def _cmd_reproduce(a: argparse.Namespace) -> int:
    if a.paper in ("abc", "ffs"):
        from .disciplines.reproduce import reproduce_discipline

        result = reproduce_discipline(a.paper, a.out, a.quick, a.seed, a.netns)
        _emit(result, a.json, f"report written to {result['out']}/report.md")
        return 0
    from .evaluation.reproduce import reproduce_mlc

    out = a.out or ("reports/mlc-quick" if a.quick else "reports/mlc")
    cmd = "scidmz " + " ".join(sys.argv[1:]) if sys.argv[1:2] == ["reproduce"] else None
    from .evaluation.reproduce import ReproducePlan

    base = ReproducePlan.quick(a.seed) if a.quick else ReproducePlan(seed=a.seed)
    plan = base.scaled(
        identify_duration=a.identify_duration, epochs=a.epochs, cv_folds=a.cv_folds, generations=a.generations,
        population=a.population, episode=a.episode, trials=a.trials, fct_trials=a.fct_trials, ns_values=a.ns,
        ns_trials=a.ns_trials,
        ns_max_flows=a.ns_max_flows, short_trials=a.short_trials, which=a.experiments,
    )
    notes = None
    if a.notes:
        from pathlib import Path

        if not Path(a.notes).is_file():
            raise FileNotFoundError(f"notes file not found: {a.notes}")
        notes = Path(a.notes).read_text()
    if a.render_only:
        from .evaluation.reproduce import rerender_report

        result, human = rerender_report(out, notes, command=cmd)
        _emit(result, a.json, human)
        return 0
    result, human = reproduce_mlc(out=out, quick=a.quick, tracking_uri=a.tracking_uri, seed=a.seed, plan=plan,
                                  command=cmd, notes=notes, progress=sys.stderr.isatty())
    _emit(result, a.json, human)
    return 0


# -- identify / train / tune (MLC paper, sections 3.3 and 3.5) -------------------------


def _add_mlc_pipeline(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("identify", help="record an identification dataset (MLC section 3.5 excitation)")
    _add_common_scenario(p)
    p.add_argument("--duration", required=True, help="recorded time, e.g. 28800 or 8h (the paper: 28800 s)")
    p.add_argument("--out", required=True, help="dataset path (.parquet)")
    p.add_argument("--seed", type=int, default=0, help="excitation and plant seed (default 0)")
    p.add_argument("--batch", type=int, default=32, help="episodes run side by side in one batched plant (default 32)")
    p.add_argument("--plant", default="fluid", help="fluid (default) | netns | hardware")
    p.add_argument("--tracking-uri", default=None, help="mlflow store (default ./mlruns or $MLFLOW_TRACKING_URI)")
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    p.set_defaults(func=_cmd_identify)

    p = sub.add_parser("train", help="train the inverse ANN (MLC section 3.5, Fig. 8) on a dataset")
    p.add_argument("dataset", help="identification dataset (.parquet from `scidmz identify`)")
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--epochs", type=int, default=30, help="training epochs (default 30)")
    p.add_argument("--folds", type=int, default=5, help="k of k-fold cross-validation, 0 to skip (default 5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tracking-uri", default=None, help="mlflow store (default ./mlruns or $MLFLOW_TRACKING_URI)")
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("tune", help="GA-tune the MLC gains Kp, Ki, Kw (MLC section 3.3, Table 2)")
    _add_common_scenario(p)
    p.add_argument("--model", required=True, help="inverse-model directory (from `scidmz train`)")
    p.add_argument("--out", required=True, help="gains .json file, or a directory for gains + convergence")
    p.add_argument("--generations", type=int, default=100, help="GA generations (default 100, Table 2)")
    p.add_argument("--population", type=int, default=30, help="population / mating pool (default 30)")
    p.add_argument("--parents", type=int, default=15, help="parents mating (default 15)")
    p.add_argument("--episode", default="120", help="fitness episode length (default 120 s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=0, help="process-pool workers per generation (default: in-process)")
    p.add_argument("--executor", default=None, metavar="SPEC",
                   help="where fitness chunks run: local | processes[:N] | dask://HOST:PORT (overrides --workers)")
    p.add_argument("--delta-u", type=float, default=None,
                   help="+-Delta_u saturator of Fig. 5 as a fraction of B_max (default 0.02)")
    p.add_argument("--limiter", choices=["band", "rate"], default="band",
                   help="centre of the +-Delta_u interval: the trivial rate (band) or u(t-T) (rate)")
    p.add_argument("--episodes", type=int, default=1, help="fitness episodes per individual (default 1, the paper's)")
    p.add_argument("--tracking-uri", default=None, help="mlflow store (default ./mlruns or $MLFLOW_TRACKING_URI)")
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    p.set_defaults(func=_cmd_tune)


def _cmd_identify(a: argparse.Namespace) -> int:
    from .identification.record import record_dataset

    result, human = record_dataset(
        scenario=a.scenario, duration=a.duration, out=a.out, overrides=a.set, seed=a.seed, batch=a.batch,
        plant=a.plant, tracking_uri=a.tracking_uri, progress=not a.json and sys.stderr.isatty(),
    )
    _emit(result, a.json, human)
    return 0


def _cmd_train(a: argparse.Namespace) -> int:
    from .models.train import train_model

    result, human = train_model(
        dataset=a.dataset, out=a.out, epochs=a.epochs, folds=a.folds, seed=a.seed,
        tracking_uri=a.tracking_uri, progress=not a.json and sys.stderr.isatty(),
    )
    _emit(result, a.json, human)
    return 0


def _cmd_tune(a: argparse.Namespace) -> int:
    from .tuning.run import tune_from_paths

    result, human = tune_from_paths(
        scenario=a.scenario, model=a.model, out=a.out, overrides=a.set, generations=a.generations,
        population=a.population, parents=a.parents, episode=a.episode, seed=a.seed, workers=a.workers,
        executor=a.executor, delta_u=a.delta_u, limiter=a.limiter, episodes=a.episodes,
        tracking_uri=a.tracking_uri, progress=not a.json and sys.stderr.isatty(),
    )
    _emit(result, a.json, human)
    return 0


# -- telemetry ---------------------------------------------------------------------


def _add_telemetry(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("telemetry", help="passive telemetry: software twin of the P4 data plane on pcaps or live taps")
    tsub = p.add_subparsers(dest="telemetry_command", metavar="SUBCOMMAND")
    r = tsub.add_parser(
        "replay", help="replay tap captures and print y(t) every period",
        description="PCAP (or --egress-pcap) is the bottleneck-interface tap of router BR1: outgoing packets "
                    "after its queue and the returning ACKs; rates, RTT and active flows come from it. "
                    "--ingress-pcap is the tap before BR1's queue: with it, queuing delay is measured too.")
    r.add_argument("pcap", nargs="?", help="egress (bottleneck) tap capture, pcap or pcapng")
    r.add_argument("--egress-pcap", default=None, help="same as PCAP")
    r.add_argument("--ingress-pcap", default=None, help="ingress tap capture (before the queue)")
    _add_telemetry_common(r)
    r.add_argument("--realtime", action="store_true", help="pace periods at wall-clock speed")
    r.set_defaults(func=_cmd_telemetry_replay)
    c = tsub.add_parser("capture", help="capture live on mirror interfaces and stream y(t)")
    c.add_argument("--egress", required=True, metavar="IFACE", help="interface carrying the bottleneck tap")
    c.add_argument("--ingress", default=None, metavar="IFACE", help="interface carrying the ingress tap")
    c.add_argument("--duration", default=None, help="stop after this long, e.g. 30s (default: until Ctrl-C)")
    _add_telemetry_common(c)
    c.set_defaults(func=_cmd_telemetry_capture)
    p.set_defaults(func=lambda a: p.error("a subcommand is required"))


def _add_telemetry_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--period", default="1s", help="control period T (default 1s)")
    p.add_argument("--dtn-prefix", action="append", default=None,
                   help="DTN-r host prefix for class_lpm (repeatable; default 10.0.3.2/32)")
    p.add_argument("--remote-prefix", action="append", default=None,
                   help="remote network prefix for class_lpm (repeatable; default 10.1.0.0/16)")
    p.add_argument("--rtt-tap", default="egress", choices=("egress", "ingress"),
                   help="tap where data and ACKs are matched for RTT (default egress)")
    p.add_argument("--json", action="store_true", help="print a JSON object (series, drops) as the last line")


def _telemetry_prefixes(a: argparse.Namespace) -> dict[str, Any]:
    from .telemetry import constants as tc

    return {"dtn_prefix": a.dtn_prefix or [tc.DEFAULT_DTN_PREFIX],
            "remote_prefix": a.remote_prefix or [tc.DEFAULT_REMOTE_PREFIX]}


def _cmd_telemetry_replay(a: argparse.Namespace) -> int:
    from .telemetry.run import replay
    from .units import parse_time

    egress = a.egress_pcap or a.pcap
    if a.pcap and a.egress_pcap and a.pcap != a.egress_pcap:
        raise ValueError("give the egress tap capture once: PCAP or --egress-pcap, not both")
    if not egress:
        raise ValueError("telemetry replay needs the egress tap capture (PCAP or --egress-pcap)")
    result, human = replay(egress, a.ingress_pcap, period=parse_time(a.period, "--period"),
                           realtime=a.realtime, rtt_tap=a.rtt_tap, **_telemetry_prefixes(a))
    _emit(result, a.json, human)
    return 0


def _cmd_telemetry_capture(a: argparse.Namespace) -> int:
    from .telemetry.run import capture
    from .units import parse_time

    duration = parse_time(a.duration, "--duration") if a.duration else None
    result, human = capture(a.egress, a.ingress, period=parse_time(a.period, "--period"), duration=duration,
                            rtt_tap=a.rtt_tap, **_telemetry_prefixes(a))
    _emit(result, a.json, human)
    return 0


# -- control (live daemon): scidmz.commands.control --------------------------------


def _add_control(sub: argparse._SubParsersAction) -> None:
    from .commands.control import add_parser

    add_parser(sub)


# -- testbed ---------------------------------------------------------------------


def _add_testbed(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("testbed", help="the emulated Science DMZ on real kernel TCP (root)")
    tsub = p.add_subparsers(dest="testbed_cmd", metavar="ACTION", required=True)
    for name, hlp in (("up", "build a testbed and keep it up until Ctrl-C"),
                      ("check", "build a testbed, measure RTTs, delay stage and bottleneck rate, tear down")):
        q = tsub.add_parser(name, help=hlp)
        q.add_argument("scenario", nargs="?", default="testbed", help="scenario name or .toml (default testbed)")
        q.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key")
        q.add_argument("--switch", default="bridge", choices=("bridge", "ovs"), help="S1: Linux bridge or OVS userspace")
        q.add_argument("--prefix", default="sdz" if name == "up" else None,
                       help="namespace name prefix (1-8 lowercase letters/digits)")
        q.add_argument("--json", action="store_true")
        q.set_defaults(func=_cmd_testbed_up if name == "up" else _cmd_testbed_check)
    q = tsub.add_parser("down", help="remove a testbed (or every recorded one, e.g. after a crash)")
    g = q.add_mutually_exclusive_group(required=True)
    g.add_argument("--prefix", help="the testbed's prefix")
    g.add_argument("--all", action="store_true", help="every testbed recorded in /run/scidmz")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=_cmd_testbed_down)
    q = tsub.add_parser("status", help="list recorded testbeds and whether their owner still runs")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=_cmd_testbed_status)


def _testbed_scenario(a: argparse.Namespace) -> Any:
    from .scenario import resolve_scenario

    return resolve_scenario(a.scenario, a.set)


def _cmd_testbed_up(a: argparse.Namespace) -> int:
    from .plant.netns.manage import testbed_up

    def ready(summary: dict[str, Any]) -> None:
        human = (f"testbed {summary['prefix']} up: {summary['campus_hosts']} campus hosts, DTN, "
                 f"B_max {summary['capacity'] / 1e6:.1f} Mbit/s, switch {summary['switch']}; "
                 f"namespaces {summary['prefix']}-*; Ctrl-C to tear down")
        _emit(summary, a.json, human)
        sys.stdout.flush()

    testbed_up(_testbed_scenario(a), switch=a.switch, prefix=a.prefix, ready=ready)
    return 0


def _cmd_testbed_check(a: argparse.Namespace) -> int:
    from .plant.netns.check import human
    from .plant.netns.manage import testbed_check

    res = testbed_check(_testbed_scenario(a), switch=a.switch, prefix=a.prefix)
    _emit(res, a.json, human(res))
    return 0 if all(res["ok"].values()) else 1


def _cmd_testbed_down(a: argparse.Namespace) -> int:
    from .plant.netns.manage import testbed_down

    res = testbed_down(prefix=a.prefix, all_=a.all)
    names = ", ".join(res["removed"]) or "nothing"
    live = res.get("skipped_live") or {}
    kept = ("; still in use, left up: " + ", ".join(f"{p} (pid {pid})" for p, pid in live.items())) if live else ""
    _emit(res, a.json, f"removed: {names}{kept}")
    return 0


def _cmd_testbed_status(a: argparse.Namespace) -> int:
    from .plant.netns.manage import human_status, testbed_status

    res = testbed_status()
    _emit(res, a.json, human_status(res))
    return 0


_GROUPS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_simulate,
    _add_scenarios,
    _add_telemetry,
    _add_evaluate,
    _add_reproduce,
    _add_mlc_pipeline,
    _add_control,
    _add_testbed,
]


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = OneLineArgumentParser(
        prog="scidmz",
        description="Keep a Science DMZ DTN at its target rate while campus traffic shares the WAN bottleneck.",
    )
    parser.add_argument("--version", action="version", version=f"scidmz {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in _GROUPS:
        add(sub)
    add_mkdir_flags(parser)
    return parser


def _quiet_frameworks() -> None:
    """Silence TensorFlow/absl/oneDNN start-up chatter (INFO/WARNING/ERROR log lines, not exceptions).

    Only defaults: an exported TF_CPP_MIN_LOG_LEVEL wins. Numerics are untouched
    (TF_ENABLE_ONEDNN_OPTS is left alone, so the same seed gives the same model).
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("ABSL_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("GLOG_minloglevel", "3")


def main(argv: list[str] | None = None) -> int:
    _quiet_frameworks()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        print("scidmz: error: a command is required (see scidmz --help)", file=sys.stderr)
        return 2
    # Paths are checked before any work; every failure is one line (cli_guard).
    return guarded(lambda: (check_paths(args), args.func(args))[1])


if __name__ == "__main__":
    sys.exit(main())
