"""``Testbed``: build one described testbed (``spec.py``) in namespaces, run it, tear it down.

``Testbed(scenario, prefix)`` describes the testbed at once (``spec.describe``:
bad input fails here, before anything is made); ``up()`` builds it step by
step (``build.py``), starts the delay stage (``stages/delay.py``) and
calibrates it; ``down()`` removes exactly what its record lists
(``manage/registry.py``). Teardown runs on normal exit, on exceptions, at
interpreter exit and on SIGINT/SIGTERM; ``scidmz testbed down --all`` covers
a SIGKILLed owner.

Every box is a network namespace named ``<prefix>-<role>``, so two testbeds
with different prefixes coexist and all interfaces live inside namespaces
the testbed made (the OVS daemons of ``switch="ovs"`` run inside S1's
namespace too).
"""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from typing import Any

from ...scenario import Scenario
from . import build
from .manage.registry import RUN_DIR, Record, check_prefix, teardown_record
from .procs import require_tools, spawn
from .spec import Host, TestbedSpec, describe
from .stages import delay_argv, read_stats, wait_started

__all__ = ["Testbed"]

log = logging.getLogger("scidmz.testbed")

_AUTO = itertools.count()

#: The most of a configured RTT that delay calibration may take off the stage's holds, s (ours). The
#: path's own hops add ~0.4 ms here (veth, OVS userspace, the stage's wake-up; `scidmz testbed check`:
#: 0.41 ms campus, 0.46 ms DTN). A larger minimum over the probes means they met a busy machine, not
#: the path: taking it cut a 50 ms DTN path to a 38 ms kernel min RTT in one CI run (cap was 0.5 RTT).
MAX_PATH_OFFSET = 0.002


class _Progress:
    """A build progress bar on stderr (``testbed up``/``check``), or nothing."""

    def __init__(self, total: int, desc: str, enabled: bool) -> None:
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit="step", leave=False)

    def __call__(self, what: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(what)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Testbed:
    """Build, run and tear down one emulated Science DMZ (see the module docstring).

    Use as a context manager (or call ``up()``/``down()``). The description is ``spec``;
    ``hosts``, ``senders``, ``dtn`` and ``ns()`` are its most used parts.
    """

    __test__ = False  # a "Test..." class that pytest must not collect

    def __init__(
        self,
        scenario: Scenario,
        prefix: str | None = None,
        switch: str = "bridge",
        rtts: dict[str, float] | None = None,
        sender_offloads: bool = False,
        calibrate: bool = True,
        progress: bool = False,
    ) -> None:
        # Default prefix: unique per process and instance, so plants built one after
        # another (or side by side) in one process never collide.
        prefix = check_prefix(prefix or f"n{os.getpid() % 100000:05d}{next(_AUTO) % 100:02d}")
        self.spec: TestbedSpec = describe(scenario, prefix, switch, rtts, sender_offloads)
        self.scenario = scenario
        self.prefix = prefix
        self.progress = bool(progress)
        self.calibrate = calibrate
        # Intrinsic round-trip time of the emulated wires, switches and the stage
        # itself, per sender class; subtracted from the hold times (see calibrate_delay).
        self.path_offset: dict[str, float] = {"campus": 0.0, "dtn": 0.0}
        self.tools = require_tools("nsenter", "ethtool", "iperf3")
        self.record: Record | None = None
        self.procs: list[subprocess.Popen] = []
        self.logdir = RUN_DIR / self.prefix
        self.delay_stats_path = self.logdir / "delaystage.json"
        self.ovs: Any = None
        self._stage: subprocess.Popen | None = None
        self._old_handlers: dict[int, Any] = {}
        self._interrupted: int | None = None  # the signal that tore this testbed down (raise_if_interrupted)
        self._lock = threading.Lock()
        self._is_up = False

    # -- the description's most used parts ----------------------------------------------
    def ns(self, role: str) -> str:
        return self.spec.ns(role)

    @property
    def hosts(self) -> dict[str, Host]:
        return self.spec.hosts

    @property
    def senders(self) -> list[Host]:
        return self.spec.senders

    @property
    def dtn(self) -> Host:
        return self.spec.dtn

    # -- lifecycle ------------------------------------------------------------------
    def __enter__(self) -> Testbed:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    def up(self) -> Testbed:
        if self._is_up:
            return self
        self.record = Record.create(self.prefix)
        self._interrupted = None
        self._install_handlers()
        atexit.register(self.down)
        try:
            self.logdir.mkdir(parents=True, exist_ok=True)
            self._build()
            self._is_up = True
        except BaseException:
            self.down()
            raise
        return self

    def down(self) -> None:
        if self.record is not None and self.record.data.get("owner_pid") != os.getpid():
            return  # a forked child never tears down its parent's testbed
        with self._lock:
            rec, self.record = self.record, None
            if rec is None:
                return
            self._stop_ovs()
            self._stop_processes()
            try:
                teardown_record(rec)
            finally:
                shutil.rmtree(self.logdir, ignore_errors=True)
                self._is_up = False
                self._restore_handlers()
                try:
                    atexit.unregister(self.down)
                except Exception:  # noqa: BLE001
                    pass

    def _stop_ovs(self) -> None:
        if self.ovs is None:
            return
        try:
            self.ovs.stop()
        except Exception as exc:  # noqa: BLE001 - teardown must go on
            log.warning("OVS stop failed: %s", exc)
        self.ovs = None

    def _stop_processes(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=2)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()

    def _install_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        owner = os.getpid()

        def handler(signum: int, frame: Any) -> None:
            if os.getpid() != owner:
                # A forked helper (pyroute2 forks to open sockets in namespaces)
                # inherits this handler; it must just die, not tear anything down.
                os._exit(128 + signum)
            self._interrupted = signum
            self.down()
            old = self._old_handlers.get(signum)
            if callable(old):
                old(signum, frame)
            raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)

        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old_handlers[sig] = signal.getsignal(sig)
            signal.signal(sig, handler)

    def raise_if_interrupted(self) -> None:
        """Raise again the signal that tore this testbed down, if its exception was lost.

        The handler raises KeyboardInterrupt (SystemExit for SIGTERM) wherever the main thread
        is. If that is inside a finalizer (``__del__``), Python prints "Exception ignored" and
        goes on: on 2026-12-07 a Ctrl-C landed in an asyncio loop's ``__del__``, the testbed was
        down, and the episode kept running for 35 s on it and was recorded as a finished unit.
        The plant calls this every period, so a lost interrupt still ends the run there.
        """
        if self._interrupted is not None:
            raise KeyboardInterrupt if self._interrupted == signal.SIGINT else SystemExit(128 + self._interrupted)

    def _restore_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        self._old_handlers.clear()

    # -- processes ---------------------------------------------------------------------
    def spawn(self, ns: str, argv: list[str], log_name: str | None = None) -> subprocess.Popen:
        """Start a process in one of this testbed's namespaces; recorded and reaped by ``down``."""
        if self.record is None:
            raise RuntimeError(f"testbed '{self.prefix}' is not up")
        out: Any = subprocess.DEVNULL
        if log_name:
            out = open(self.logdir / log_name, "wb")  # noqa: SIM115 - handed to the child
        try:
            p = spawn(ns, argv, stdout=out, stderr=subprocess.STDOUT if log_name else subprocess.DEVNULL)
        finally:
            if log_name:
                out.close()
        self.procs.append(p)
        self.record.add_process(p.pid, argv)
        return p

    # -- build ------------------------------------------------------------------------
    def _build(self) -> None:
        spec, rec = self.spec, self.record
        assert rec is not None
        t0 = time.monotonic()
        build.check_free(spec)
        done = _Progress(len(spec.roles) + 6 + int(self.calibrate), f"testbed {self.prefix}", self.progress)
        try:
            build.create_namespaces(spec, rec, done)
            with build.Links(spec) as links:
                build.create_links(spec, links)
                build.join_switches(spec, links)
                for sw in spec.switches:
                    if sw.kind == "ovs":
                        self.ovs = build.start_ovs(spec, sw, self.logdir / "ovs")
                done("links")
                build.address_and_route(spec, links)
                done("addresses and routes")
                build.bottleneck_qdisc(spec, links)
                done("bottleneck")
                build.delay_forwarding(spec, links)
                done("delay path")
            build.host_settings(spec)
            done("sysctls and offloads")
            self._start_delay_stage()
            done("delay stage")
            if self.calibrate:
                self.calibrate_delay()
                done("delay calibration")
        finally:
            done.close()  # a failed build: the error line, not a half bar, is what stays
        rec.data["info"] = spec.info() | {"build_s": time.monotonic() - t0, "path_offset": dict(self.path_offset)}
        rec.save()
        log.info("testbed %s up in %.1f s", self.prefix, time.monotonic() - t0)

    def add_taps(self) -> tuple[str, str, str]:
        """Build the passive taps once (``build.add_taps``); (tap namespace, egress veth, ingress veth)."""
        if self.record is None:
            raise RuntimeError(f"testbed '{self.prefix}' is not up")
        return build.add_taps(self.spec, self.record)

    # -- the delay stage -------------------------------------------------------------------
    def calibrate_delay(self, probes: int = 7) -> dict[str, float]:
        """Measure each class's intrinsic RTT and take it off the stage's hold times.

        The veth hops, the switch (OVS userspace adds ~0.3 ms) and the stage's
        own wake-up add a few hundred microseconds to every round trip. The
        minimum over a few idle SYN/RST probes (robust to a busy machine) minus
        the configured RTT is that offset; the stage is restarted with holds
        reduced by it, so measured idle RTTs match the configuration. An offset
        above ``MAX_PATH_OFFSET`` is a busy machine, not the path: the probes are
        repeated (three rounds at most, the lowest minimum kept) and the offset
        capped there, so a busy build can never cut a path's RTT by more.
        """
        from .probe import measure_rtt

        reps = {"campus": next((h for h in self.spec.paths if h.shaped), None), "dtn": self.dtn}
        for c, h in reps.items():
            if h is None:
                continue
            low = float("inf")
            for _ in range(3):  # a round on a busy machine is retried, the lowest minimum kept
                low = min(low, measure_rtt(self, h.name, probes=probes, gap=0.005)["min"])
                if low - h.rtt + self.path_offset[c] <= MAX_PATH_OFFSET:
                    break
            self.path_offset[c] = min(max(low - h.rtt + self.path_offset[c], 0.0), MAX_PATH_OFFSET, 0.5 * h.rtt)
        self._restart_delay_stage()
        return dict(self.path_offset)

    def _restart_delay_stage(self) -> None:
        p = self._stage
        if p is not None and p.poll() is None:
            p.terminate()
            p.wait(timeout=5)
        self.delay_stats_path.unlink(missing_ok=True)
        self._start_delay_stage()

    def _start_delay_stage(self) -> None:
        d = self.spec.delay
        argv = delay_argv(d.outward, d.inward, self.spec.delay_table(self.path_offset), self.delay_stats_path)
        self._stage = self.spawn(self.ns(d.role), argv, log_name="delaystage.log")
        wait_started(self._stage, self.delay_stats_path, self.logdir / "delaystage.log", "delay stage", 10.0)

    # -- observation -------------------------------------------------------------------
    def delay_stats(self) -> dict[str, Any]:
        """The delay stage's cumulative counters ({} before its first write)."""
        return read_stats(self.delay_stats_path)

    def summary(self) -> dict[str, Any]:
        sc, spec = self.scenario, self.spec
        return {
            "prefix": self.prefix,
            "switch": spec.switch,
            "scenario": sc.name,
            "capacity": sc.capacity,
            "buffer_bytes": sc.buffer_bytes,
            "campus_hosts": len(spec.campus),
            "short_flow_senders": len(spec.short),
            "flow_hosts": len(spec.flow_hosts),
            "rtt_campus": sc.campus.rtt,
            "rtt_dtn": self.dtn.rtt,
            "path_offset": dict(self.path_offset),
            "cca": {"dtn": spec.dtn_cca, "campus": spec.campus_cca},
            "cca_mapped": {k: f"{a}->{b}" for k, (a, b) in spec.cca_mapped.items()},
            "namespaces": list(self.record.data["namespaces"]) if self.record else [],
            "uplink": {"dev": spec.uplink[0], "netns": spec.uplink[1]},
            "bottleneck": {"dev": spec.bottleneck[0], "netns": spec.bottleneck[1]},
        }
