"""``AgentPacer``: the host place on real equipment, the DTNs' pacing set through their ``scidmz agent`` s.

The hardware plant's host actuator (``HostPlant.set_pacing``): one
``AgentClient`` per DTN (``--dtn-agent URL``, repeatable), each with a copy of
its agent's token file. ``set_pacing(R)`` splits the aggregate target R among
the agents and sets each one's rate, which grants (and extends) its lease;
``keep()`` renews the leases in a period where no rate was set (the controller
on its fallback rate still holds the DTNs' last rate), so the lease runs out
only when the controller itself stops. ``close()`` asks every agent to lift at
once (a clean exit); a controller that dies leaves that to the lease.

**Splitting R among several DTNs (ours): on demand, with a floor.** Each agent
shares its rate among its own connections by max-min water-filling on measured
demand (``actuators/share.py``); across DTNs the same rule applies one level up.
Every ``/rate`` and ``/renew`` answer carries what that DTN delivered over its
agent's last period, so the split costs no extra round trip. Each DTN first gets
a floor, ``FLOOR`` (10 %) of an even share R/n, so a DTN where a transfer starts
is paced at once and, delivering most of its floor, is unbounded the next
period; the rest of R is water-filled on the DTNs' demands (``share.demand``:
a DTN that delivered at least 90 % of its last rate, or has not been measured,
takes what is left; one held back by its disks or its peers gets 1.25 x what it
delivered). The shares always sum to R, so the DTNs together never exceed the
target, and an idle DTN no longer holds an even share the busy ones cannot use.
Why not an even split (what this did first): it is predictable from the target
alone, but a Science DMZ's DTNs rarely carry equal loads, and an idle DTN's
share was lost. Why a floor of 10 %: a new transfer on an idle DTN reaches a fair
share within two periods, while at most 10 % of an idle DTN's even share is held
back from the others.

**Several DTNs are asked at once** (ours): every period's calls (``/rate`` or
``/renew``), the start-up check and the lift at exit go to all agents in
parallel, up to ``MAX_PARALLEL`` at a time, so one dead agent costs the period at
most one timeout (a quarter period) however many DTNs there are, where asking
them one after the other cost a timeout per dead agent. One agent is asked on the
controller's own thread.

**Faults.** An agent that does not answer (or answers with an error) during a
run raises ``HostAgentError`` (an ``ActuatorError``) naming it; the controller
answers with the fallback cause ``host_agent`` (the campus held at the trivial
rate) and tries again the next period, so an agent that comes back is paced
again at once. At start (``check``) the same is bad input: one line, exit 2,
before anything is shaped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .agent_client import AgentClient
from .base import ActuatorError
from .share import demand, water_fill

__all__ = ["AgentPacer", "HostAgentError", "agent_token_files", "split_on_demand", "FLOOR", "MAX_PARALLEL"]

#: The share of an even split R/n every DTN keeps whatever its demand (module docstring; ours).
FLOOR = 0.10
#: Agents asked at the same time (ours): a Science DMZ has a handful of DTNs; beyond 16 the calls
#: queue, and the threads would only wait on the network.
MAX_PARALLEL = 16
#: What one agent's call may raise (each one line); anything else is a bug and propagates.
_AGENT_ERRORS = (ConnectionError, PermissionError, ValueError)

log = logging.getLogger("scidmz.actuators.host_agent")


class HostAgentError(ActuatorError):
    """A DTN agent did not answer, or refused a rate, during a run (the ``host_agent`` fallback cause)."""


def agent_token_files(urls: Sequence[str], tokens: Sequence[str] | str | None) -> list[str]:
    """One token file per agent URL: a single file serves every agent, else one per URL in order
    (``--dtn-agent-token`` given once, or as often as ``--dtn-agent``). One-line ValueError otherwise."""
    toks = [tokens] if isinstance(tokens, str | os.PathLike) else list(tokens or [])
    if not toks:
        raise ValueError("--dtn-agent needs the agent's token file: --dtn-agent-token FILE (a copy of the DTN's "
                         "/var/lib/scidmz/agent.token)")
    if len(toks) == 1:
        return [str(toks[0])] * len(urls)
    if len(toks) != len(urls):
        raise ValueError(f"{len(urls)} --dtn-agent URLs and {len(toks)} --dtn-agent-token files: give one token file "
                         "for all, or one per agent in the same order")
    return [str(t) for t in toks]


def split_on_demand(total: float, delivered: Sequence[float | None], last: Sequence[float | None]) -> list[float]:
    """R split among DTNs: a floor each, the rest water-filled on each DTN's demand (module docstring).

    ``delivered[i]`` is what DTN i delivered over its agent's last period and ``last[i]`` the rate it was
    given then (frame bit/s; None: unknown, so unbounded). The shares sum to ``total``."""
    n = len(delivered)
    floor = FLOOR * float(total) / n
    wants = [demand(d, r) for d, r in zip(delivered, last, strict=True)]
    rest = water_fill(float(total) - n * floor, [max(w - floor, 0.0) for w in wants])
    return [floor + x for x in rest]


class AgentPacer:
    """The DTNs' aggregate pacing rate through their agents (module docstring)."""

    def __init__(self, urls: Sequence[str], token_files: Sequence[str], period: float, shadow: bool = False) -> None:
        if not urls:
            raise ValueError("AgentPacer needs at least one agent URL")
        # On the management network an agent answers in milliseconds; a quarter period keeps a dead
        # one from holding the loop past its period.
        timeout = max(0.05, min(2.0, period / 4))
        self.clients = [AgentClient(u, t, timeout=timeout) for u, t in zip(urls, token_files, strict=True)]
        self.rates: list[float | None] = [None] * len(self.clients)
        self.errors: list[str | None] = [None] * len(self.clients)
        self._set_this_period = False
        self.shadow = bool(shadow)  # shadow mode: the shares are computed and reported, never set
        self._pool: ThreadPoolExecutor | None = None

    def _all(self, call: Callable[[int, AgentClient], Any]) -> list[Any]:
        """``call(i, client)`` for every agent at once (module docstring): each result, or the one-line
        error it raised, in the agents' order."""
        def one(i: int) -> Any:
            try:
                return call(i, self.clients[i])
            except _AGENT_ERRORS as exc:
                return exc

        n = len(self.clients)
        if n == 1:
            return [one(0)]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=min(n, MAX_PARALLEL), thread_name_prefix="scidmz-agent")
        return list(self._pool.map(one, range(n)))

    def check(self) -> list[dict[str, Any]]:
        """Every agent's status, for the start-up check (the first agent's one-line ValueError /
        PermissionError, in the order given)."""
        out = self._all(lambda _i, c: c.check())
        for r in out:
            if isinstance(r, Exception):
                raise r
        return out

    def split(self, total: float) -> list[float]:
        """The aggregate rate split among the agents on their last reported demand (module docstring)."""
        if len(self.clients) == 1:
            return [float(total)]
        return split_on_demand(total, [c.delivered for c in self.clients], self.rates)

    def set_pacing(self, rates: np.ndarray | float) -> None:
        """Set the DTNs' aggregate pacing rate (frame bit/s; a (1,) array or a scalar); HostAgentError if an
        agent fails (the others are still set)."""
        total = float(np.asarray(rates, dtype=np.float64).reshape(-1)[0])
        self._set_this_period = True
        if self.shadow:
            self.rates = self.split(total)
            return
        self._each(lambda c, share: c.set_rate(share), self.split(total), "set the rate on")

    def keep(self) -> None:
        """Renew the leases when no rate was set this period (the fallback keeps the last one); never raises:
        a failure here shows at the next ``set_pacing``."""
        if not self._set_this_period and not self.shadow:
            rates = list(self.rates)
            for i, r in enumerate(self._all(lambda i, c: None if rates[i] is None else self._renew(c, rates[i]))):
                if rates[i] is not None:
                    self.errors[i] = str(r) if isinstance(r, Exception) else None
        self._set_this_period = False

    @staticmethod
    def _renew(c: AgentClient, rate: float) -> None:
        if not c.renew():  # the agent lost the lease (restarted): give it its rate again
            c.set_rate(rate)

    def _each(self, call: Any, shares: list[float], what: str) -> None:
        failed = []
        for i, r in enumerate(self._all(lambda i, c: float(call(c, shares[i])))):
            if isinstance(r, Exception):
                self.errors[i] = str(r)
                failed.append(str(r))
            else:
                self.rates[i], self.errors[i] = r, None
        if failed:
            raise HostAgentError(f"cannot {what} {len(failed)} of {len(self.clients)} DTN agent(s): {failed[0]}")

    def status(self) -> list[dict[str, Any]]:
        """Per agent: its URL, the rate last set, and the last error (None: answering)."""
        return [{"url": c.url, "rate": r, "delivered": c.delivered, "error": e, "shadow": self.shadow}
                for c, r, e in zip(self.clients, self.rates, self.errors, strict=True)]

    def close(self) -> None:
        """Ask every agent to lift its caps now; an agent that does not answer lifts at its lease's end."""
        try:
            if self.shadow:
                return  # nothing was set
            for c, r in zip(self.clients, self._all(lambda _i, c: c.lift()), strict=True):
                if isinstance(r, Exception):
                    log.warning("agent %s: could not lift at exit (its lease lifts): %s", c.url, r)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
