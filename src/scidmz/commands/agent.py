"""``scidmz agent``: the DTN host agent (``scidmz.agent``), as an administrator runs it on the DTN.

Builds the socket match from ``--prefix``/``--ports``/``--process`` (a bad one is
one line, exit 2), checks the right the mechanism needs (exit 2 naming it),
installs SIGTERM/SIGINT/SIGHUP handlers that stop the loop, and runs
``agent.serve.serve``, which lifts every cap the agent set on any exit.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ._shared import add_json_arg, emit
from .runconfig import ConfigOption, apply_config, config_spec

__all__ = ["add_parser", "cmd_agent"]

_OPTIONS: dict[str, ConfigOption] = {}


def _default_state_dir() -> str:
    return "/var/lib/scidmz" if os.geteuid() == 0 else str(Path.home() / ".scidmz")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """``scidmz agent``."""
    p = sub.add_parser(
        "agent", help="the DTN host agent: pace the DTN's WAN transfers at the rate the controller sets",
        description="Runs on the DTN host. Every period: finds the TCP connections to the configured peer "
                    "prefixes, shares the aggregate rate the controller set among them (max-min water-filling on "
                    "their delivered rates) and paces each with SO_MAX_PACING_RATE. The rate is held under a "
                    "lease: if the controller stops renewing it, pacing is lifted (fail-open). Every exit lifts "
                    "what the agent set; a fresh start lifts what a killed one left. See docs/deployment.md, "
                    "'DTN host'.")
    p.add_argument("--prefix", action="append", default=None, metavar="PREFIX",
                   help="peer prefix whose connections are paced (the WAN side; IPv4 or IPv6; repeatable)")
    p.add_argument("--ports", action="append", default=None, metavar="RANGE",
                   help="only connections with a local or remote port in this range, e.g. 50000-51000 "
                        "(repeatable; default: any port)")
    p.add_argument("--process", action="append", default=None, metavar="NAME",
                   help="only connections held by a process of this name (/proc/PID/comm, e.g. iperf3, "
                        "globus-gridftp; repeatable; default: any process)")
    p.add_argument("--api", default="127.0.0.1:8643",
                   help="HOST:PORT of the management API the controller talks to (default 127.0.0.1:8643; put it "
                        "on the management network)")
    p.add_argument("--token-file", default=None,
                   help="the API token (created 0600 if missing; give the controller a copy; default "
                        "STATE-DIR/agent.token)")
    p.add_argument("--state-dir", default=None,
                   help="where the owner record lives (default /var/lib/scidmz as root, else ~/.scidmz)")
    p.add_argument("--period", default="1s", help="control period T (default 1s)")
    p.add_argument("--lease-periods", type=int, default=3,
                   help="lift pacing after this many periods without a renewal from the controller (default 3)")
    p.add_argument("--mechanism", default="pidfd", choices=("pidfd", "bpf"),
                   help="how a rate reaches a socket: pidfd (pidfd_getfd + setsockopt; needs CAP_SYS_PTRACE and "
                        "CAP_DAC_READ_SEARCH; the default) or bpf (a BPF TCP iterator that lists and paces the "
                        "sockets in one walk; needs CAP_BPF and CAP_PERFMON, and clang at first start)")
    p.add_argument("--shadow", action="store_true",
                   help="shadow mode: compute and report every connection's share, pace nothing")
    add_json_arg(p, "a JSON summary on exit")
    _OPTIONS.update(config_spec(p, exclude=("json",)))
    p.add_argument("--config", default=None, metavar="FILE",
                   help="read these options from a TOML file (long names as keys, e.g. prefix = [\"203.0.113.0/24\"]); "
                        "flags given here override it")
    p.set_defaults(func=cmd_agent)


def _build(a: argparse.Namespace) -> Any:
    from ..agent.core import DtnAgent
    from ..agent.match import SocketFilter
    from ..agent.mechanism import PidfdMechanism
    from ..units import parse_time

    match = SocketFilter.build(a.prefix or [], a.ports or [], a.process or [])
    period = parse_time(a.period, "period")
    if not 0.05 <= period <= 60:
        raise ValueError(f"--period {a.period}: the agent's period must be 50ms..60s")
    if not 1 <= a.lease_periods <= 1000:
        raise ValueError(f"--lease-periods {a.lease_periods}: must be 1..1000")
    state = Path(a.state_dir or _default_state_dir())
    if a.mechanism == "bpf":
        from ..agent.bpfiter import BpfIterMechanism

        BpfIterMechanism.check_rights()  # shadow mode too: the iterator is also how it lists the sockets
        mechanism: Any = BpfIterMechanism(os.environ.get("SCIDMZ_AGENT_BPF_CACHE") or state / "bpf")
    else:
        mechanism = PidfdMechanism()
        if not a.shadow:
            mechanism.check_rights()
    return DtnAgent(match, period=period, lease_periods=a.lease_periods, shadow=a.shadow,
                    record_path=str(state / "agent.record.json"), mechanism=mechanism), state


def cmd_agent(a: argparse.Namespace) -> int:
    import logging
    import signal
    import threading

    from ..agent.serve import serve

    apply_config(a, _OPTIONS, a.config)
    logging.basicConfig(level=logging.WARNING, format="scidmz agent: %(message)s", stream=sys.stderr)
    agent, state = _build(a)
    stop = threading.Event()

    def handler(signum: int, _frame: Any) -> None:
        stop.set()
        agent.wake.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}

    def ready(bound: tuple[str, int]) -> None:
        mode = "SHADOW mode: computing and reporting, pacing nothing; " if a.shadow else ""
        print(f"scidmz agent: {mode}API at http://{bound[0]}:{bound[1]}/ (token in {token_file})",
              file=sys.stderr, flush=True)

    token_file = a.token_file or str(state / "agent.token")
    try:
        st = serve(agent, a.api, token_file, stop, on_ready=ready)
    finally:
        for sig, h in previous.items():
            signal.signal(sig, h)
    summary = {"periods": st["k"], "state": st["state"], **st["counts"]}
    emit(summary, a.json, f"scidmz agent: stopped after {st['k']} periods")
    return 0
