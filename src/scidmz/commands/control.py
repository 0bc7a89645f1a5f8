"""``scidmz control run|set-target|status``: the live daemon as an administrator drives it.

``run`` builds the daemon (``scidmz.controller.build``), installs SIGTERM/SIGINT/SIGHUP
handlers that ask it to stop, and prints a summary; ``set-target`` and ``status`` talk
to the running daemon through ``ControlClient`` (token and address from the token file).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._shared import (
    add_json_arg,
    add_model_args,
    add_plant_args,
    add_policy_arg,
    add_seed_arg,
    add_set_arg,
    emit,
    plant_arg,
)
from .runconfig import ConfigOption, apply_config, config_spec

__all__ = ["add_parser", "cmd_run", "cmd_set_target", "cmd_status"]

#: ``control run``'s options a --config file may set (filled by ``add_parser``).
_RUN_OPTIONS: dict[str, ConfigOption] = {}


def add_parser(sub: argparse._SubParsersAction) -> None:
    """``scidmz control run|set-target|status``."""
    p = sub.add_parser("control", help="the live controller daemon: run it, change its target, see its status")
    csub = p.add_subparsers(dest="control_command", metavar="SUBCOMMAND")
    r = csub.add_parser(
        "run", help="run the closed loop in real time with a local HTTP API (until SIGTERM/Ctrl-C)",
        description="Every period T: read y from the plant, decide u with the policy, apply it. Falls back to "
                    "the trivial rate B_max - target on telemetry loss (no sample for 2T), a failed actuator "
                    "call or a non-finite policy output, and keeps running. Logs one JSON line per period.")
    r.add_argument("scenario", nargs="?", default="testbed",
                   help="built-in scenario name or .toml file (default: testbed)")
    add_set_arg(r, policy=True)
    add_plant_args(r, realtime_note=": a real-time paced simulator")
    _add_p4_args(r)
    add_policy_arg(r, note="; jenks needs a plant with queues (fluid, netns, or hardware with --queues-dev), "
                           "abc/ffs one with a bottleneck discipline, pacing control of the DTN host "
                           "(fluid, netns; hardware with --dtn-agent)")
    r.add_argument("--target", default=None,
                   help="initial DTN target, e.g. 60M (at most the scenario's B_max); required, here or in --config")
    add_model_args(r)
    r.add_argument("--shadow", action="store_true",
                   help="shadow mode: run the whole loop (telemetry, policy, fallback rules), log and export the "
                        "rate u it would apply, and touch no shaper (netns and hardware plants); promote to live "
                        "by restarting without --shadow")
    r.add_argument("--api", default="127.0.0.1:8642", help="loopback HOST:PORT of the HTTP API (default 127.0.0.1:8642)")
    r.add_argument("--no-api", action="store_true", help="run without the HTTP API (and dashboard)")
    r.add_argument("--metrics-addr", default=None, metavar="HOST:PORT",
                   help="also serve GET /metrics without a token (read-only) here, for a Prometheus server, "
                        "e.g. 0.0.0.0:9642 (default: off; /metrics on the API needs the token)")
    r.add_argument("--token-file", default=None,
                   help="where to write the API token (default /run/scidmz/control.token as root, else ~/.scidmz/)")
    r.add_argument("--log", default=None, metavar="FILE", help="append the JSON-lines log here (default stdout)")
    r.add_argument("--duration", default=None, help="stop after this long, e.g. 10min (default: run until stopped)")
    add_seed_arg(r, default=None, what="plant seed")
    add_json_arg(r)
    _RUN_OPTIONS.update(config_spec(r, exclude=("json",)))
    r.add_argument("--config", default=None, metavar="FILE",
                   help="read these options from a TOML file (their long names as keys, e.g. plant = \"hardware\", "
                        "token-file = \"/var/lib/scidmz/control.token\"); flags given here override it")
    r.set_defaults(func=cmd_run)
    for name, helptext in (("set-target", "change the DTN target of the running daemon"),
                           ("status", "show the running daemon's y, u, target and fallback state")):
        c = csub.add_parser(name, help=helptext)
        if name == "set-target":
            c.add_argument("target", help="new DTN target, e.g. 400M")
        c.add_argument("--api", default=None, help="HOST:PORT (default: read from the token file)")
        c.add_argument("--token-file", default=None, help="the daemon's token file (default as for run)")
        add_json_arg(c, "the answer as JSON")
        c.set_defaults(func=cmd_set_target if name == "set-target" else cmd_status)
    p.set_defaults(func=lambda a: p.error("a subcommand is required: run, set-target or status"))


def _add_p4_args(r: argparse.ArgumentParser) -> None:
    """The P4 telemetry switch's options (``--plant hardware --telemetry p4:HOST:PORT``)."""
    g = r.add_argument_group("P4 telemetry switch (--plant hardware --telemetry p4:HOST:PORT)")
    g.add_argument("--p4-pipeline", default=None, metavar="DIR",
                   help="load this pipeline on the switch first: p4c's output folder (the BMv2 JSON and the "
                        "P4Info, p4c --target bmv2 --p4runtime-files); default: use what the switch runs")
    g.add_argument("--p4-thrift", default=None, metavar="HOST:PORT",
                   help="BMv2's Thrift runtime address, for its registers (checked before the switch changes); "
                        "default: the switch's host, port 9090, tried when P4Runtime has no register reads")
    g.add_argument("--p4-taps", default=None, metavar="IN,OUT",
                   help="the switch ports the ingress and the egress tap enter (default 1,2)")


def _p4_options(a: argparse.Namespace) -> dict[str, Any]:
    """``_add_p4_args``' flags as the hardware plant's options (only those given)."""
    given = {"p4_pipeline": a.p4_pipeline, "p4_thrift": a.p4_thrift, "tap_ports": a.p4_taps}
    given = {k: v for k, v in given.items() if v is not None}
    if given:  # the plants that take them, by their registry entries (one line naming them)
        from ..plant.registry import plant_entry, plant_names

        if any(k not in plant_entry(a.plant).options() for k in given):
            takers = [n for n in plant_names() if all(k in plant_entry(n).options() for k in given)]
            raise ValueError(f"--p4-pipeline, --p4-thrift and --p4-taps are for --plant {' or '.join(takers)} "
                             "with a P4 switch")
    return given


def cmd_run(a: argparse.Namespace) -> int:
    import logging
    import signal

    from ..controller.build import run_daemon
    from ..guard.check import check_args
    from ..plant.registry import plant_spec
    from ..units import parse_time
    from .build import build_run

    apply_config(a, _RUN_OPTIONS, a.config)
    check_args(a)  # the file's paths and counts too (cli.main checked the command line's)
    if a.target is None:
        raise ValueError("control run needs a target: --target RATE, or target = \"RATE\" in --config")
    logging.basicConfig(level=logging.WARNING, format="scidmz control: %(message)s", stream=sys.stderr)
    # A registry model is fetched once, here, before the daemon starts.
    run = build_run(a.scenario, overrides=a.set, policy=a.policy, plant=plant_arg(a), target=a.target,
                    model=a.model, gains=a.gains)
    duration = parse_time(a.duration, "duration") if a.duration is not None else None
    previous: dict[int, Any] = {}

    def install(daemon: Any) -> None:
        def handler(signum: int, _frame: Any) -> None:
            daemon.stop(f"signal {signal.Signals(signum).name}")

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            previous[sig] = signal.signal(sig, handler)

        def ready(st: dict[str, Any]) -> None:
            if st["mode"] == "shadow":
                print("scidmz control: SHADOW mode: the loop runs and reports the rate it would apply; "
                      "no shaper is touched", file=sys.stderr)
            if st["api"]:
                print(f"scidmz control: API and dashboard at http://{st['api']}/ "
                      f"(token in {daemon.token_file})", file=sys.stderr)
            if st["metrics"]:
                print(f"scidmz control: Prometheus metrics at http://{st['metrics']}/metrics", file=sys.stderr)

        daemon.on_ready = ready

    try:
        summary = run_daemon(
            scenario=run.scenario, policy=run.policy, target=run.target, plant=plant_spec(run.plant, _p4_options(a)),
            api=None if a.no_api else a.api, metrics_addr=a.metrics_addr,
            token_file=a.token_file, log_path=a.log, duration=duration, seed=a.seed, on_start=install,
            shadow=a.shadow,
        )
    finally:
        for sig, h in previous.items():
            signal.signal(sig, h)
    human = (f"stopped ({summary['reason']}) after {summary['periods']} periods, "
             f"{summary['fallback_periods']} on the fallback rate")
    if not a.json:
        print(human, file=sys.stderr)
    else:
        emit(summary, True)
    return 1 if summary["problems"] else 0


def cmd_set_target(a: argparse.Namespace) -> int:
    from ..controller.client import ControlClient
    from ..units import format_rate

    new = ControlClient(api=a.api, token_file=a.token_file).set_target(a.target)
    emit({"target": new}, a.json, f"target set to {format_rate(new)}")
    return 0


def cmd_status(a: argparse.Namespace) -> int:
    from ..controller.client import ControlClient

    st = ControlClient(api=a.api, token_file=a.token_file).status()
    emit(st, a.json, status_text(st))
    return 0


def status_text(st: dict[str, Any]) -> str:
    """``control status``'s lines for a person, from the daemon's ``/status`` document."""
    from ..units import format_rate, format_time

    y = st.get("y") or {}
    shadow = st.get("mode") == "shadow"
    u = format_rate(st["u"]) if st["u"] is not None else "-"
    lines = [
        f"policy {st['policy']} on {st['plant']} ({st['scenario']}), period {format_time(st['period'])}, "
        f"{st['k']} periods" + (", SHADOW mode: nothing is applied" if shadow else ""),
        f"target   {format_rate(st['target'])}",
        (f"u        {u} would be applied (the trivial rate set by hand: {format_rate(st['trivial_rate'])})"
         if shadow and st.get("trivial_rate") is not None else f"u        {u}")
        + (f"   FALLBACK: {st['fallback_reason']}" if st["fallback"] else ""),
    ]
    if y:
        lines.append(f"DTN      {format_rate(y['rate_dtn'])}, RTT {format_time(y['rtt_dtn'])}")
        lines.append(f"campus   {format_rate(y['rate_campus'])}, RTT {format_time(y['rtt_campus'])}, "
                     f"{y['active_flows']:.0f} active flows")
    lines += _agent_lines(st.get("host_agents"))
    return "\n".join(lines)


def _agent_lines(agents: list[dict[str, Any]] | None) -> list[str]:
    """One line per DTN agent of the host place (``--dtn-agent``): the rate it holds, or why it is lost."""
    from ..units import format_rate

    return [f"agent    {a['url']}: " + (f"UNREACHABLE ({a['error']})" if a.get("error") else
                                        format_rate(a["rate"]) if a.get("rate") is not None else "no rate yet")
            for a in agents or []]
