"""``scidmz testbed up|check|down|status``: the emulated Science DMZ on real kernel TCP."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._shared import add_json_arg, add_set_arg, emit


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("testbed", help="the emulated Science DMZ on real kernel TCP (root)")
    tsub = p.add_subparsers(dest="testbed_cmd", metavar="ACTION", required=True)
    for name, hlp in (("up", "build a testbed and keep it up until Ctrl-C"),
                      ("check", "build a testbed, measure RTTs, delay stage and bottleneck rate, tear down")):
        q = tsub.add_parser(name, help=hlp)
        q.add_argument("scenario", nargs="?", default="testbed", help="scenario name or .toml (default testbed)")
        add_set_arg(q)
        q.add_argument("--switch", default="bridge", choices=("bridge", "ovs"), help="S1: Linux bridge or OVS userspace")
        q.add_argument("--prefix", default="sdz" if name == "up" else None,
                       help="namespace name prefix (1-8 lowercase letters/digits)")
        add_json_arg(q)
        q.set_defaults(func=cmd_testbed_up if name == "up" else cmd_testbed_check)
    q = tsub.add_parser("down", help="remove a testbed (or every recorded one, e.g. after a crash)")
    g = q.add_mutually_exclusive_group(required=True)
    g.add_argument("--prefix", help="the testbed's prefix")
    g.add_argument("--all", action="store_true", help="every testbed recorded in /run/scidmz")
    add_json_arg(q)
    q.set_defaults(func=cmd_testbed_down)
    q = tsub.add_parser("status", help="list recorded testbeds and whether their owner still runs")
    add_json_arg(q)
    q.set_defaults(func=cmd_testbed_status)


def _testbed_scenario(a: argparse.Namespace) -> Any:
    from ..scenario import resolve_scenario

    return resolve_scenario(a.scenario, a.set)


def cmd_testbed_up(a: argparse.Namespace) -> int:
    from ..plant.netns.manage import testbed_up

    def ready(summary: dict[str, Any]) -> None:
        human = (f"testbed {summary['prefix']} up: {summary['campus_hosts']} campus hosts, DTN, "
                 f"B_max {summary['capacity'] / 1e6:.1f} Mbit/s, switch {summary['switch']}; "
                 f"namespaces {summary['prefix']}-*; Ctrl-C to tear down")
        emit(summary, a.json, human)
        sys.stdout.flush()

    testbed_up(_testbed_scenario(a), switch=a.switch, prefix=a.prefix, ready=ready, progress=True)
    return 0


def cmd_testbed_check(a: argparse.Namespace) -> int:
    from ..plant.netns.manage import testbed_check
    from ..plant.netns.manage.check import human

    res = testbed_check(_testbed_scenario(a), switch=a.switch, prefix=a.prefix, progress=True)
    emit(res, a.json, human(res))
    return 0 if all(res["ok"].values()) else 1


def cmd_testbed_down(a: argparse.Namespace) -> int:
    from ..plant.netns.manage import testbed_down

    res = testbed_down(prefix=a.prefix, all_=a.all)
    names = ", ".join(res["removed"]) or "nothing"
    live = res.get("skipped_live") or {}
    kept = ("; still in use, left up: " + ", ".join(f"{p} (pid {pid})" for p, pid in live.items())) if live else ""
    skipped = res.get("skipped_records") or []
    for line in skipped:  # one line each: a record that could not be used is left as it is, named
        print(f"scidmz testbed down: {line}", file=sys.stderr)
    tail = f"; {len(skipped)} record(s) skipped (named above)" if skipped else ""
    emit(res, a.json, f"removed: {names}{kept}{tail}")
    return 0


def cmd_testbed_status(a: argparse.Namespace) -> int:
    from ..plant.netns.manage import human_status, testbed_status

    res = testbed_status()
    emit(res, a.json, human_status(res))
    return 0
