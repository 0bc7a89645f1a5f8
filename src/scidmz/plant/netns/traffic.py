"""Traffic inside a testbed: iperf3 long flows and UDP CBR, the DTN transfer, Weibull short flows.

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
* ``[[flows]]`` (one host per flow, ``Testbed.flow_hosts``): started, stopped
  and re-rated at the period boundaries the plant passes to ``flow_events``,
  as the fluid plant does. A TCP flow is ``iperf3 -C CCA`` (unlimited) or
  ``sockflows.py bulk --streams 1`` (a ``size``: its FCT is until the last
  byte is delivered); a UDP flow is ``iperf3 -u -b RATE``, restarted with the
  new rate when its schedule changes it (UDP has no connection state to
  lose). A TCP flow's ``rate`` is its access link: a TBF on the sender's own
  interface (ours: the kernel's TCP small queues then pace the socket as a
  slower NIC would), changed in place by the schedule.

Every process runs in the testbed's namespaces and talks only to addresses
inside them.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from ...units import FRAME_BYTES
from .topology import Host, Testbed

__all__ = ["Traffic", "IPERF_PORT", "SHORT_PORT", "parse_iperf_json", "access_tbf"]

IPERF_PORT = 5201
SHORT_PORT = 5300
_FOREVER = 86400  # s; iperf3's maximum -t (3.12 has no "until killed")


def parse_iperf_json(text: str) -> dict[str, Any]:
    """Bytes, duration and per-stream details from an ``iperf3 -J`` report (one-line error if bad)."""
    try:
        rep = json.loads(text)
    except ValueError:
        raise ValueError(f"iperf3 report is not JSON: {text[:200]!r}") from None
    if rep.get("error"):
        raise RuntimeError(f"iperf3 failed: {rep['error']}")
    end = rep.get("end", {})
    sent = end.get("sum_sent", {})
    recv = end.get("sum_received", {})
    streams = [s.get("sender", {}) for s in end.get("streams", [])]
    return {
        "bytes_sent": float(sent.get("bytes", 0.0)),
        "bytes_received": float(recv.get("bytes", 0.0)),
        "seconds": float(recv.get("seconds", sent.get("seconds", 0.0))),
        "retransmits": int(sent.get("retransmits", 0) or 0),
        "streams": len(streams),
        "mean_rtt": (sum(s.get("mean_rtt", 0) for s in streams) / len(streams) * 1e-6) if streams else None,
        "cca": rep.get("end", {}).get("sender_tcp_congestion"),
    }


def _listening(tb: Testbed, ns: str, port: int) -> bool:
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


def _drop_access_tbf(ns: str, dev: str = "eth0") -> None:
    from pyroute2 import IPRoute

    with IPRoute(netns=ns) as ipr:
        idx = ipr.link_lookup(ifname=dev)[0]
        try:
            ipr.tc("del", index=idx, handle=0x10000)
        except Exception:  # noqa: BLE001 - none was there (pyroute2 raises NetlinkError)
            pass


class _FlowRun:
    """One ``[[flows]]`` host's state in an episode."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.proc: Any = None
        self.started: float | None = None  # s into the episode
        self.stopped = False
        self.next_sched = 0  # index of the first schedule entry not yet applied
        self.rate = host.flow.rate if host.flow is not None else None
        self.tbf = False
        self.log: Path | None = None
        self.result: dict[str, Any] | None = None


class Traffic:
    """Starts and stops one episode's traffic on a built ``Testbed``."""

    def __init__(self, tb: Testbed, seed: int = 0) -> None:
        self.tb = tb
        self.seed = int(seed)
        self.sc = tb.scenario
        self.dtn_proc: Any = None
        self.dtn_started: float | None = None
        self.dtn_log: Path | None = None
        self.dtn_result: dict[str, Any] | None = None
        self.short_logs: list[Path] = []
        self._procs: list[Any] = []
        self._servers_up = False
        self._episode = 0
        self._flows: list[_FlowRun] = []

    # -- servers -------------------------------------------------------------------
    def start_servers(self) -> None:
        if self._servers_up:
            return
        recv = [h for h in self.tb.hosts.values() if h.kind == "receiver"]
        for h in recv:
            self.tb.spawn(h.ns, ["iperf3", "-s", "-p", str(IPERF_PORT)], log_name=f"iperf3-s-{h.name}.log")
        short_dsts = {self.tb.hosts[h.peer] for h in self._short_senders()}
        short_dsts |= {self.tb.hosts[h.peer] for h in self.tb.flow_hosts if h.flow is not None and h.flow.size}
        if self.sc.dtn.transfer is not None and self.sc.dtn.streams > 0:
            short_dsts.add(self.tb.hosts["dtnr"])
        for h in short_dsts:
            self.tb.spawn(h.ns, [sys.executable, "-m", "scidmz.plant.netns.sockflows", "server",
                                 "--port", str(SHORT_PORT)], log_name=f"short-s-{h.name}.log")
        deadline = time.monotonic() + 15
        pending = [(h.ns, IPERF_PORT) for h in recv] + [(h.ns, SHORT_PORT) for h in short_dsts]
        while pending:
            pending = [(ns, p) for ns, p in pending if not _listening(self.tb, ns, p)]
            if not pending:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"servers did not start listening in {pending[0][0]}")
            time.sleep(0.05)
        self._servers_up = True

    def _short_senders(self) -> list[Host]:
        if self.sc.campus.traffic == "weibull":
            return self.tb.campus + self.tb.short
        return self.tb.short

    # -- clients -------------------------------------------------------------------
    def start_campus(self) -> None:
        """Long TCP flows or UDP CBR from every campus host, plus Weibull short flows."""
        self._episode += 1
        c = self.sc.campus
        for h in self.tb.campus:
            dst = self.tb.hosts[h.peer].ip
            if c.traffic == "long":
                argv = ["iperf3", "-c", dst, "-p", str(IPERF_PORT), "-t", str(_FOREVER), "-C", h.cca,
                        "-P", str(c.flows_per_host), "-i", "0"]
            elif c.traffic == "udp":
                argv = ["iperf3", "-c", dst, "-p", str(IPERF_PORT), "-u", "-b", str(int(c.udp_rate)),
                        "-l", "1400", "-t", str(_FOREVER), "-i", "0"]
            else:
                continue
            self._procs.append(self.tb.spawn(h.ns, argv, log_name=f"iperf3-c-{h.name}.log"))
        w = c.weibull
        for i, h in enumerate(self._short_senders()):
            out = self.tb.logdir / f"short-{h.name}-{self._episode}.jsonl"
            self.short_logs.append(out)
            argv = [
                sys.executable, "-m", "scidmz.plant.netns.sockflows", "client",
                "--dst", self.tb.hosts[h.peer].ip, "--port", str(SHORT_PORT),
                "--seed", str(self.seed * 1000 + i), "--out", str(out), "--cca", h.cca,
                "--gap-shape", str(w.gap_shape), "--gap-scale", str(w.gap_scale),
                "--gap-min", str(w.gap_min), "--gap-max", str(w.gap_max),
                "--size-shape", str(w.size_shape), "--size-scale", str(w.size_scale),
                "--size-min", str(w.size_min), "--size-max", str(w.size_max),
            ]
            self._procs.append(self.tb.spawn(h.ns, argv, log_name=f"short-c-{h.name}.log"))

    def start_dtn(self) -> None:
        """The DTN transfer: ``dtn.streams`` parallel streams, a fixed size if ``dtn.transfer``."""
        d = self.sc.dtn
        if d.streams <= 0:
            return
        h = self.tb.dtn
        dst = self.tb.hosts["dtnr"].ip
        if d.transfer is not None:
            argv = [sys.executable, "-m", "scidmz.plant.netns.sockflows", "bulk", "--dst", dst,
                    "--port", str(SHORT_PORT), "--bytes", str(int(d.transfer)),
                    "--streams", str(d.streams), "--cca", h.cca]
        else:
            argv = ["iperf3", "-c", dst, "-p", str(IPERF_PORT), "-C", h.cca,
                    "-P", str(d.streams), "-J", "-i", "0", "-t", str(_FOREVER)]
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
        self._flows = [_FlowRun(h) for h in self.tb.flow_hosts]
        self.flow_events(0.0)

    def _flow_argv(self, fr: _FlowRun) -> list[str]:
        h = fr.host
        g = h.flow
        assert g is not None
        dst = self.tb.hosts[h.peer].ip
        if h.cca == "udp":
            return ["iperf3", "-c", dst, "-p", str(IPERF_PORT), "-u", "-b", str(int(fr.rate or 0)),
                    "-l", "1400", "-t", str(_FOREVER), "-i", "0"]
        if g.size is not None:
            return [sys.executable, "-m", "scidmz.plant.netns.sockflows", "bulk", "--dst", dst,
                    "--port", str(SHORT_PORT), "--bytes", str(int(g.size)), "--streams", "1", "--cca", h.cca]
        return ["iperf3", "-c", dst, "-p", str(IPERF_PORT), "-t", str(_FOREVER), "-C", h.cca, "-i", "0"]

    def _flow_start(self, fr: _FlowRun, t: float) -> None:
        h = fr.host
        if h.cca != "udp" and fr.rate is not None:
            access_tbf(h.ns, fr.rate)
            fr.tbf = True
        fr.log = self.tb.logdir / f"flow-{h.name}-{self._episode}.log"
        fr.proc = self.tb.spawn(h.ns, self._flow_argv(fr), log_name=fr.log.name)
        if fr.started is None:
            fr.started = t

    @staticmethod
    def _end(p: Any) -> None:
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=3)
            except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
                p.kill()
                p.wait()

    def flow_events(self, t: float) -> None:
        """Start, stop and re-rate the ``[[flows]]`` due by ``t`` (s into the episode)."""
        eps = 1e-9
        for fr in self._flows:
            g = fr.host.flow
            assert g is not None
            self._flow_result(fr)
            if fr.stopped:
                continue
            if g.stop is not None and g.stop <= t + eps:
                self._end(fr.proc)
                fr.stopped = True
                self._flow_result(fr)
                continue
            new_rate = None
            while fr.next_sched < len(g.schedule) and g.schedule[fr.next_sched][0] <= t + eps:
                new_rate = g.schedule[fr.next_sched][1]
                fr.next_sched += 1
            if new_rate is not None and new_rate != fr.rate:
                fr.rate = new_rate
                if fr.proc is not None and fr.host.cca == "udp":
                    self._end(fr.proc)  # iperf3 cannot change -b mid-test
                    fr.proc = None
                    self._flow_start(fr, t)
                elif fr.proc is not None:
                    access_tbf(fr.host.ns, new_rate)
                    fr.tbf = True
            if fr.proc is None and fr.started is None and g.start <= t + eps:
                self._flow_start(fr, t)

    def _flow_result(self, fr: _FlowRun) -> None:
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

    def flow_records(self) -> list[dict[str, Any]]:
        """Per ``[[flows]]`` flow: host, name, rtt, cca, start (s), and for a fixed-size flow
        bytes, fct (s, until the last byte was delivered) and ok; ``fct`` is None while running."""
        out = []
        for fr in self._flows:
            h, g = fr.host, fr.host.flow
            assert g is not None
            self._flow_result(fr)
            rec: dict[str, Any] = {"host": h.name, "name": g.name, "src": h.ip, "rtt": h.rtt, "cca": h.cca,
                                   "start": fr.started, "bytes": g.size, "fct": None, "ok": None}
            if fr.result is not None:
                rec["fct"] = fr.result["fct"] if fr.result["ok"] else None
                rec["ok"] = fr.result["ok"]
            out.append(rec)
        return out

    def running_udp_flows(self) -> list[Host]:
        """The ``[[flows]]`` UDP senders sending now."""
        return [fr.host for fr in self._flows if fr.host.cca == "udp" and fr.proc is not None and not fr.stopped]

    def stop_clients(self) -> None:
        """Stop this episode's clients (servers stay up for the next episode)."""
        for fr in self._flows:
            if fr.tbf:
                _drop_access_tbf(fr.host.ns)
        flow_procs = [fr.proc for fr in self._flows if fr.proc is not None]
        self._flows = []
        procs = [*self._procs, *flow_procs, *([self.dtn_proc] if self.dtn_proc is not None else [])]
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=3)
            except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
                p.kill()
                p.wait()
        self._procs.clear()
        self.dtn_proc = None
