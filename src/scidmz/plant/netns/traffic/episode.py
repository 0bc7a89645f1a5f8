"""``Traffic``: one episode's senders on a built ``Testbed``, and the servers they talk to.

* Campus long flows: one ``iperf3 -c r_i -C CCA -P flows_per_host`` per host
  (MLC section 3.1: one long flow per campus host by default).
* UDP CBR: ``iperf3 -u -b udp_rate`` per host.
* DTN: ``dtn.streams`` parallel TCP streams (GridFTP style). An unlimited
  DTN (no ``dtn.transfer``) is ``iperf3 -c DTN-r -P 8 -C CCA -t ... -J``. A
  fixed-size transfer uses ``sockflows.py bulk`` on real sockets instead,
  because ``iperf3 -n`` ends when the last byte is written, not delivered,
  and its server resets the tail (see sockflows.py); the FCT is until
  every byte is delivered.
* Weibull short flows (Table 6): ``sockflows.py`` on real sockets, from the
  extra ``short`` hosts (campus.short_flow_senders) or from every campus
  host when ``campus.traffic = "weibull"``.
* ``[[flows]]`` (one host per flow): ``flows.py``.

Every process runs in the testbed's namespaces and talks only to addresses
inside them.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from ..spec import Host
from ..testbed import Testbed
from .flows import FlowRuns
from .iperf import (
    IPERF_PORT,
    SHORT_PORT,
    campus_argv,
    iperf_server,
    iperf_tcp,
    sockflows_bulk,
    sockflows_server,
    sockflows_weibull,
)

__all__ = ["Traffic"]


def _listening(ns: str, port: int) -> bool:
    from pyroute2 import netns

    netns.pushns(ns)
    try:
        # iperf3 listens on a dual-stack socket, which shows up in tcp6. thread-self, not
        # self: pushns switches only this thread, and self follows the main thread.
        text = Path("/proc/thread-self/net/tcp").read_text() + Path("/proc/thread-self/net/tcp6").read_text()
    finally:
        netns.popns()
    want = f":{port:04X}"
    return any(ln.split()[1].endswith(want) and ln.split()[3] == "0A" for ln in text.splitlines()[1:])


class Traffic:
    """Starts and stops one episode's traffic on a built ``Testbed``."""

    def __init__(self, tb: Testbed, seed: int = 0) -> None:
        self.tb = tb
        self.seed = int(seed)
        self.sc = tb.scenario
        self.dtn_proc: subprocess.Popen | None = None
        self.dtn_started: float | None = None
        self.dtn_log: Path | None = None
        self.dtn_result: dict[str, Any] | None = None
        self.short_logs: list[Path] = []
        self._procs: list[subprocess.Popen] = []
        self._listening: set[tuple[str, int]] = set()  # (receiver, port) of the servers started
        self._episode = 0
        self._flows = self._flow_runs([])

    def _flow_runs(self, hosts: list[Host]) -> FlowRuns:
        return FlowRuns(hosts, self.tb.spawn, lambda h: self.tb.hosts[h.peer].ip, self.tb.logdir, self._episode)

    # -- servers -------------------------------------------------------------------
    def start_servers(self) -> None:
        """iperf3 on every receiver, sockflows on those fixed-size or short flows go to; waits until
        they listen. Idempotent: only servers not yet running start (the scenario may have changed
        between episodes: ``NetnsPlant.set_scenario`` gives the DTN a fixed-size transfer)."""
        spec = self.tb.spec
        short_dsts = {self.tb.hosts[h.peer] for h in self._short_senders()}
        short_dsts |= {self.tb.hosts[h.peer] for h in spec.flow_hosts if h.flow is not None and h.flow.size}
        if self.sc.dtn.transfer is not None and self.sc.dtn.streams > 0:
            short_dsts.add(self.tb.hosts["dtnr"])
        iperf = [h for h in spec.receivers if (h.name, IPERF_PORT) not in self._listening]
        short = [h for h in short_dsts if (h.name, SHORT_PORT) not in self._listening]
        for h in iperf:
            self.tb.spawn(h.ns, iperf_server(), log_name=f"iperf3-s-{h.name}.log")
        for h in short:
            self.tb.spawn(h.ns, sockflows_server(), log_name=f"short-s-{h.name}.log")
        deadline = time.monotonic() + 15
        pending = [(h, IPERF_PORT) for h in iperf] + [(h, SHORT_PORT) for h in short]
        while pending:
            pending = [(h, p) for h, p in pending if not _listening(h.ns, p)]
            if not pending:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"servers did not start listening in {pending[0][0].ns}")
            time.sleep(0.05)
        self._listening |= {(h.name, IPERF_PORT) for h in iperf} | {(h.name, SHORT_PORT) for h in short}

    def _short_senders(self) -> list[Host]:
        spec = self.tb.spec
        return spec.campus + spec.short if self.sc.campus.traffic == "weibull" else spec.short

    # -- clients -------------------------------------------------------------------
    def start_campus(self) -> None:
        """Long TCP flows or UDP CBR from every campus host, plus Weibull short flows."""
        self._episode += 1
        # A new episode's short flows only: the trial units of a leaderboard trial share one plant,
        # and each unit's short-flow median must be over its own flows (found 2026-12-07: kept,
        # a unit's median pooled the flows of every earlier unit of its trial).
        self.short_logs = []
        for h in self.tb.spec.campus:
            argv = campus_argv(self.sc, self.tb.hosts[h.peer].ip, h.cca)
            if argv is not None:
                self._procs.append(self.tb.spawn(h.ns, argv, log_name=f"iperf3-c-{h.name}.log"))
        for i, h in enumerate(self._short_senders()):
            out = self.tb.logdir / f"short-{h.name}-{self._episode}.jsonl"
            self.short_logs.append(out)
            argv = sockflows_weibull(self.tb.hosts[h.peer].ip, self.seed * 1000 + i, str(out), h.cca,
                                     self.sc.campus.weibull)
            self._procs.append(self.tb.spawn(h.ns, argv, log_name=f"short-c-{h.name}.log"))

    def start_dtn(self) -> None:
        """The DTN transfer: ``dtn.streams`` parallel streams, a fixed size if ``dtn.transfer``."""
        d = self.sc.dtn
        if d.streams <= 0:
            return
        h = self.tb.dtn
        dst = self.tb.hosts["dtnr"].ip
        if d.transfer is not None:
            argv = sockflows_bulk(dst, d.transfer, d.streams, h.cca)
        else:
            argv = iperf_tcp(dst, h.cca, d.streams, report=True)
        self.dtn_log = self.tb.logdir / f"dtn-{self._episode}.json"
        self.dtn_result = None
        self.dtn_started = time.monotonic()
        self.dtn_proc = self.tb.spawn(h.ns, argv, log_name=self.dtn_log.name)

    def poll_dtn(self) -> dict[str, Any] | None:
        """The fixed-size DTN transfer's result once finished (``fct`` in s), else None."""
        if self.dtn_result is not None:
            return self.dtn_result
        p = self.dtn_proc
        if p is None or self.sc.dtn.transfer is None or p.poll() is None:
            return None
        assert self.dtn_log is not None
        text = self.dtn_log.read_text().strip().splitlines()
        try:
            res = json.loads(text[-1])
        except (IndexError, ValueError):
            raise RuntimeError(f"DTN transfer failed: {' '.join(text)[-300:]}") from None
        res["wall"] = time.monotonic() - (self.dtn_started or time.monotonic())
        self.dtn_result = res
        return res

    def short_flows(self) -> list[dict[str, Any]]:
        """Every finished Weibull short flow of this episode so far (size, fct, ok), none of an earlier one."""
        out = []
        for p in self.short_logs:
            try:
                out += [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()]
            except (OSError, ValueError):
                continue
        return out

    # -- [[flows]] --------------------------------------------------------------------
    def start_flows(self) -> None:
        """A new episode's ``[[flows]]``: those due at t = 0 start now, the rest at ``flow_events``."""
        self._flows = self._flow_runs(self.tb.spec.flow_hosts)
        self._flows.events(0.0)

    def flow_events(self, t: float) -> None:
        """Start, stop and re-rate the ``[[flows]]`` due by ``t`` (s into the episode)."""
        self._flows.events(t)

    def flow_records(self) -> list[dict[str, Any]]:
        return self._flows.records()

    def running_udp_flows(self) -> list[Host]:
        """The ``[[flows]]`` UDP senders sending now."""
        return self._flows.running_udp()

    def stop_clients(self) -> None:
        """Stop this episode's clients (servers stay up for the next episode)."""
        procs = [*self._procs, *self._flows.stop(), *([self.dtn_proc] if self.dtn_proc is not None else [])]
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._procs.clear()
        self.dtn_proc = None
