"""The scenario's ``[[flows]]`` on a testbed: one sender host per flow, started, stopped and
re-rated at the period boundaries the plant passes to ``FlowRuns.events``, as the fluid plant does.

A TCP flow is ``iperf3 -C CCA`` (unlimited) or ``sockflows.py bulk --streams 1``
(a ``size``: its FCT is until the last byte is delivered); a UDP flow is
``iperf3 -u -b RATE``, restarted with the new rate when its schedule changes it
(UDP has no connection state to lose). A TCP flow's ``rate`` is its access
link: a TBF on the sender's own interface (ours: the kernel's TCP small
queues then pace the socket as a slower NIC would), changed in place by the
schedule.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ....units import FRAME_BYTES
from ..spec import Host
from .iperf import iperf_tcp, iperf_udp, sockflows_bulk

__all__ = ["FlowRuns", "access_tbf", "drop_access_tbf", "end_process"]

_EPS = 1e-9


def access_tbf(ns: str, rate: float, dev: str = "eth0") -> None:
    """Put (or re-rate) a TBF at ``rate`` bit/s on ``dev`` in ``ns``: a sender's access link.

    Burst: 1 ms of tokens, at least two frames (as the bottleneck's); limit: 10 ms of
    traffic, at least four frames (ours: TCP small queues keep a local sender's backlog to
    a few packets, so the limit only bounds what a UDP burst could queue).
    """
    from pyroute2 import IPRoute

    with IPRoute(netns=ns) as ipr:
        idx = ipr.link_lookup(ifname=dev)[0]
        burst = int(max(2 * FRAME_BYTES, rate / 8 * 0.001))
        limit = int(max(4 * FRAME_BYTES, rate / 8 * 0.010))
        ipr.tc("replace", "tbf", idx, 0x10000, rate=f"{int(rate)}bit", burst=burst, limit=limit)


def drop_access_tbf(ns: str, dev: str = "eth0") -> None:
    from pyroute2 import IPRoute

    with IPRoute(netns=ns) as ipr:
        idx = ipr.link_lookup(ifname=dev)[0]
        try:
            ipr.tc("del", index=idx, handle=0x10000)
        except Exception:  # noqa: BLE001 - none was there (pyroute2 raises NetlinkError)
            pass


def end_process(p: subprocess.Popen | None) -> None:
    """Terminate ``p`` (kill after 3 s) if it still runs."""
    if p is not None and p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=3)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class _FlowRun:
    """One ``[[flows]]`` host's state in an episode."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.proc: subprocess.Popen | None = None
        self.started: float | None = None  # s into the episode
        self.stopped = False
        self.next_sched = 0  # index of the first schedule entry not yet applied
        self.rate = host.flow.rate if host.flow is not None else None
        self.tbf = False
        self.log: Path | None = None
        self.result: dict[str, Any] | None = None


class FlowRuns:
    """One episode's ``[[flows]]``. ``spawn(ns, argv, log_name)`` starts a process in the testbed;
    ``dst(host)`` is the address of a sender's receiver; ``logdir`` holds the flows' logs."""

    def __init__(self, hosts: list[Host], spawn: Callable[..., subprocess.Popen], dst: Callable[[Host], str],
                 logdir: Path, episode: int) -> None:
        self._runs = [_FlowRun(h) for h in hosts]
        self._spawn = spawn
        self._dst = dst
        self._logdir = logdir
        self._episode = episode

    def _argv(self, fr: _FlowRun) -> list[str]:
        h, g = fr.host, fr.host.flow
        assert g is not None
        if h.cca == "udp":
            return iperf_udp(self._dst(h), fr.rate or 0)
        if g.size is not None:
            return sockflows_bulk(self._dst(h), g.size, 1, h.cca)
        return iperf_tcp(self._dst(h), h.cca)

    def _start(self, fr: _FlowRun, t: float) -> None:
        h = fr.host
        if h.cca != "udp" and fr.rate is not None:
            access_tbf(h.ns, fr.rate)
            fr.tbf = True
        fr.log = self._logdir / f"flow-{h.name}-{self._episode}.log"
        fr.proc = self._spawn(h.ns, self._argv(fr), log_name=fr.log.name)
        if fr.started is None:
            fr.started = t

    def _rerate(self, fr: _FlowRun, t: float) -> None:
        """Apply the schedule entries due by ``t``."""
        g = fr.host.flow
        assert g is not None
        new_rate = None
        while fr.next_sched < len(g.schedule) and g.schedule[fr.next_sched][0] <= t + _EPS:
            new_rate = g.schedule[fr.next_sched][1]
            fr.next_sched += 1
        if new_rate is None or new_rate == fr.rate:
            return
        fr.rate = new_rate
        if fr.proc is not None and fr.host.cca == "udp":
            end_process(fr.proc)  # iperf3 cannot change -b mid-test
            fr.proc = None
            self._start(fr, t)
        elif fr.proc is not None:
            access_tbf(fr.host.ns, new_rate)
            fr.tbf = True

    def events(self, t: float) -> None:
        """Start, stop and re-rate the flows due by ``t`` (s into the episode)."""
        for fr in self._runs:
            g = fr.host.flow
            assert g is not None
            self._result(fr)
            if fr.stopped:
                continue
            if g.stop is not None and g.stop <= t + _EPS:
                end_process(fr.proc)
                fr.stopped = True
                self._result(fr)
                continue
            self._rerate(fr, t)
            if fr.proc is None and fr.started is None and g.start <= t + _EPS:
                self._start(fr, t)

    def _result(self, fr: _FlowRun) -> None:
        """A fixed-size flow's outcome once its process ended (``ok`` False if it was stopped early)."""
        g = fr.host.flow
        if fr.result is not None or fr.proc is None or g is None or g.size is None or fr.proc.poll() is None:
            return
        res: dict[str, Any] = {}
        try:
            assert fr.log is not None
            res = json.loads(fr.log.read_text().strip().splitlines()[-1])
        except (OSError, IndexError, ValueError, AssertionError):
            res = {"ok": False, "fct": float("nan")}
        # A flow stopped before its last byte was delivered was killed: no result line, not ok.
        fr.result = {"ok": bool(res.get("ok", False)), "fct": float(res.get("fct", float("nan")))}

    def records(self) -> list[dict[str, Any]]:
        """Per flow: host, name, rtt, cca, start (s), and for a fixed-size flow bytes, fct (s, until
        the last byte was delivered) and ok; ``fct`` is None while running."""
        out = []
        for fr in self._runs:
            h, g = fr.host, fr.host.flow
            assert g is not None
            self._result(fr)
            rec: dict[str, Any] = {"host": h.name, "name": g.name, "src": h.ip, "rtt": h.rtt, "cca": h.cca,
                                   "start": fr.started, "bytes": g.size, "fct": None, "ok": None}
            if fr.result is not None:
                rec["fct"] = fr.result["fct"] if fr.result["ok"] else None
                rec["ok"] = fr.result["ok"]
            out.append(rec)
        return out

    def running_udp(self) -> list[Host]:
        """The UDP senders sending now."""
        return [fr.host for fr in self._runs if fr.host.cca == "udp" and fr.proc is not None and not fr.stopped]

    def stop(self) -> list[subprocess.Popen]:
        """Remove the access TBFs and hand back the processes to stop (the caller stops them all at once)."""
        for fr in self._runs:
            if fr.tbf:
                drop_access_tbf(fr.host.ns)
        procs = [fr.proc for fr in self._runs if fr.proc is not None]
        self._runs = []
        return procs
