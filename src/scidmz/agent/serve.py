"""``serve``: the agent's period loop with its API, until stopped; every exit path lifts its pacing.

Order (each failure before the loop is one line): the mechanism's rights (the
caller's), the API's address, the token, the owner record (a live agent's is
refused, a dead one's reclaimed); then the loop runs ``DtnAgent.step`` every period (at once
when the controller sets a rate) and re-reads the host's qdisc caps every
``HOSTCAPS_EVERY`` periods. ``stop`` (SIGTERM, SIGINT) and any error end it, and
``DtnAgent.close`` lifts every cap the agent set before the process exits.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from .api import AgentServer, build_app, parse_address
from .core import DtnAgent
from .token import load_or_create

__all__ = ["serve", "HOSTCAPS_EVERY"]

log = logging.getLogger("scidmz.agent")

HOSTCAPS_EVERY = 30  # periods; the host's qdiscs change by hand, rarely (ours)


def _metrics(agent: DtnAgent) -> Any:
    try:
        from .prometheus import AgentMetrics
    except ImportError:
        return None
    try:
        return AgentMetrics(agent.status)
    except ImportError:  # prometheus-client is optional; /metrics then answers 404
        return None


def serve(agent: DtnAgent, api: str, token_file: str, stop: threading.Event,
          on_ready: Any = None) -> dict[str, Any]:
    """Run until ``stop`` is set; returns the final status. The caller made ``agent`` and checks rights."""
    host, port = parse_address(api)
    server = AgentServer(host, port)
    try:
        server.bind()  # a bad or taken address: one line, before the token or the record is written
    except BaseException:
        agent.close()
        raise
    try:
        token = load_or_create(token_file)
        agent.reclaim()
        server.start(build_app(agent, token, _metrics(agent)))
        if on_ready is not None:
            on_ready((server.host, server.port))
        _loop(agent, stop)
    finally:
        server.stop()
        st = agent.status()
        lifted = agent.close("agent stopping")
        log.warning("stopped: pacing lifted from %d connections", lifted)
    return st


def _loop(agent: DtnAgent, stop: threading.Event) -> None:
    next_t = time.monotonic()
    while not stop.is_set():
        if agent.k % HOSTCAPS_EVERY == 0:
            agent.refresh_host_caps()
        agent.step()
        next_t += agent.period
        delay = next_t - time.monotonic()
        if delay < 0:  # a period overran: start the schedule again from now
            next_t, delay = time.monotonic(), 0.0
        agent.wake.wait(delay)
        agent.wake.clear()
