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

Every process runs in the testbed's namespaces and talks only to addresses
inside them.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from .topology import Host, Testbed

__all__ = ["Traffic", "IPERF_PORT", "SHORT_PORT", "parse_iperf_json"]

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

    # -- servers -------------------------------------------------------------------
    def start_servers(self) -> None:
        if self._servers_up:
            return
        recv = [h for h in self.tb.hosts.values() if h.kind == "receiver"]
        for h in recv:
            self.tb.spawn(h.ns, ["iperf3", "-s", "-p", str(IPERF_PORT)], log_name=f"iperf3-s-{h.name}.log")
        short_dsts = {self.tb.hosts[h.peer] for h in self._short_senders()}
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

    def stop_clients(self) -> None:
        """Stop this episode's clients (servers stay up for the next episode)."""
        procs = [*self._procs, *([self.dtn_proc] if self.dtn_proc is not None else [])]
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
