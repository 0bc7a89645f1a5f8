"""The testbed's user-space data-path stages, one process each, and how a testbed starts them.

* ``delay.py``: the per-path base RTT, on DLY's return path (this kernel has
  no netem). Started by every testbed (``Testbed``), restarted once the
  build's calibration knows the path's own RTT.
* ``nfq.py``: a bottleneck discipline (ABC, FFS) on BR1's traffic towards the
  WAN, through NFQUEUE. Started by ``NetnsPlant.set_discipline``; the lab
  (``nfqlab.py``) runs it on its own.

The stages run as ``python -m scidmz.plant.netns.stages.<name>`` inside the
namespace (their argv is built here) and write their counters as JSON
every second; a stage is up once its first counters exist.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["delay_argv", "nfq_argv", "wait_started", "NfqStage", "read_stats"]

Spawn = Callable[..., subprocess.Popen]  # (netns, argv, log_name=...) -> process, reaped by its testbed


def delay_argv(rx: str, tx: str, table: Mapping[str, float], stats: Path) -> list[str]:
    """The delay stage reading ``rx``, writing to ``tx``, holding frames per source address."""
    return [sys.executable, "-m", "scidmz.plant.netns.stages.delay", "--rx", rx, "--tx", tx,
            "--table", json.dumps(dict(table)), "--stats", str(stats)]


def nfq_argv(kind: str, config: Mapping[str, Any], link_bps: float, ingress_of: Mapping[str, int],
             stats: Path, weights: Path, queue: int = 0) -> list[str]:
    """The NFQUEUE stage running discipline ``kind`` with ``config`` on queue ``queue``."""
    return [sys.executable, "-m", "scidmz.plant.netns.stages.nfq", "--queue", str(queue), "--discipline", kind,
            "--config", json.dumps(dict(config)), "--link-bps", str(link_bps),
            "--ingress-of", json.dumps(dict(ingress_of)), "--stats", str(stats), "--weights-file", str(weights)]


def wait_started(proc: subprocess.Popen, stats: Path, log: Path, what: str, timeout: float) -> None:
    """Return once the stage wrote its first counters; one-line error if it exited or took too long."""
    deadline = time.monotonic() + timeout
    while not stats.exists():
        if proc.poll() is not None:
            tail = log.read_text()[-500:] if log.exists() else ""
            raise RuntimeError(f"{what} exited at start: {tail}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start within {timeout:g} s")
        time.sleep(0.05)


def read_stats(path: Path) -> dict[str, Any]:
    """A stage's last counters ({} before its first write, or mid-replace)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


class NfqStage:
    """A running NFQUEUE stage on a router's forwarded traffic towards ``egress``.

    ``start`` spawns the stage (through the testbed's ``spawn``, so the testbed reaps it),
    waits for it, then queues the forwarded traffic to it with one iptables rule in that
    namespace only. Weights reach the running stage through a file it re-reads every second.
    """

    def __init__(self, proc: subprocess.Popen, stats: Path, weights: Path, kind: str,
                 netns: str = "", egress: str = "") -> None:
        self.proc = proc
        self.stats_path = stats
        self.weights_path = weights
        self.kind = kind
        self.netns = netns
        self.egress = egress

    @classmethod
    def start(cls, spawn: Spawn, netns: str, egress: str, logdir: Path, config: Any, link_bps: float,
              ingress_of: Mapping[str, int], timeout: float = 60.0) -> NfqStage:
        """``config``: an ``ABCConfig``/``FFSConfig`` dataclass; ``ingress_of``: source address ->
        aggregate/ingress index."""
        stats, weights = logdir / "nfqstage.json", logdir / "nfqstage-weights.json"
        stats.unlink(missing_ok=True)
        weights.unlink(missing_ok=True)
        argv = nfq_argv(config.kind, dataclasses.asdict(config), link_bps, ingress_of, stats, weights)
        proc = spawn(netns, argv, log_name="nfqstage.log")
        wait_started(proc, stats, logdir / "nfqstage.log", "nfqstage", timeout)
        subprocess.run(["ip", "netns", "exec", netns, "iptables", "-A", "FORWARD", "-o", egress, "-j",
                        "NFQUEUE", "--queue-num", "0"], check=True, capture_output=True)
        return cls(proc, stats, weights, config.kind, netns, egress)

    def stop(self) -> None:
        """Take the stage out of the path: the iptables rule first (a queue with no reader would
        drop every packet), then the process. The testbed's teardown does both anyway."""
        if self.netns and self.egress:
            subprocess.run(["ip", "netns", "exec", self.netns, "iptables", "-D", "FORWARD", "-o", self.egress,
                            "-j", "NFQUEUE", "--queue-num", "0"], check=False, capture_output=True)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def set_weights(self, weights: Sequence[float]) -> None:
        """Atomically replace the weights file (the stage picks it up within a second)."""
        tmp = self.weights_path.with_suffix(".tmp")
        tmp.write_text(json.dumps([float(w) for w in weights]))
        os.replace(tmp, self.weights_path)

    def stats(self) -> dict[str, Any]:
        """Received, accepted, dropped, stage drops, CPU per packet ({} before the first write)."""
        return read_stats(self.stats_path)
