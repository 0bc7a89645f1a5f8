"""``NetnsPlant``: the ``Plant`` protocol on the emulated testbed, in real time (batch = 1).

``step(u)`` sets the TBF on S1's uplink (the paper's S1-eth1, through the
actuators' ``TbfActuator``) to u, waits until the end of the period on an
absolute schedule (t_k = t_0 + kT, so periods do not drift), and returns y
measured over that period by the telemetry source: the software data plane
on mirrored packets of BR1 (``telemetry="dataplane"``, the paper's passive
taps) or the interim kernel-counter source (``"kernel"``); ``"auto"`` takes
the data plane when it can be started and falls back to kernel counters.

``reset()`` builds the testbed on first use (kept up across episodes),
stops the previous episode's traffic, returns the testbed to its default
configuration (``_restore_default``: the bottleneck's own TBF, no HTB queues left
by a queue policy, no NFQUEUE discipline stage unless ``set_discipline`` asked for
one before this reset, no DTN pacing), lets the queues drain, restores the
initial shaper rate and starts the scenario's traffic, so policies of
different kinds can alternate episode by episode on one testbed
(``scidmz leaderboard``). ``set_scenario`` switches the episodes' scenario on the
same testbed (an unlimited DTN, a fixed-size transfer, another duration). The DTN transfer
starts ``dtn.start`` seconds into the episode. ``info`` after a step holds
bytes delivered per class in that period and, once a fixed-size DTN
transfer has completed, its FCT (``dtn_fct``, s). ``close()`` tears it all
down.

``set_pacing`` (``HostPlant``) paces the DTN's own streams: ``SO_MAX_PACING_RATE`` on
the running sender's sockets (``actuators.pacing.SocketPacer``), changed live; the
next ``reset`` lifts it (a new sender starts unpaced).

Every ``info`` also says whether the machine, not TCP, limited that period:
``info["starved"]`` (a one-element bool array, a trace column) with ``info["starvation"]`` (the evidence and the
reasons, ``manage.starvation.StarvationMonitor``) and ``info["starved_periods"]``
(count since ``reset``). Benchmarks and reports refuse figures from starved
periods.
"""

from __future__ import annotations

import math
import subprocess
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ...scenario import Scenario
from ...state import N_STATE, STATE_FIELDS
from ...units import check_rates
from ..base import StateBatch, register_plant
from .sources import TELEMETRY_KINDS, NetnsTelemetry, TelemetryFactory, telemetry_factory
from .spec import CAMPUS_NET, DTN_NET, REMOTE_NET, Host
from .testbed import Testbed

__all__ = ["NetnsPlant", "TELEMETRY_KINDS"]


class NetnsPlant:
    """Real kernel TCP in network namespaces; see the module docstring."""

    batch = 1

    def __init__(
        self,
        scenario: Scenario,
        prefix: str | None = None,
        switch: str = "bridge",
        telemetry: str | TelemetryFactory = "auto",
        rtts: dict[str, float] | None = None,
        drain: float | None = None,
        actuator: Callable[..., Any] | None = None,
        validity: Callable[[NetnsPlant], Any] | None = None,
    ) -> None:
        """``telemetry``: a factory ``(testbed) -> source`` (``sources.TelemetryFactory``, e.g.
        ``sources.kernel_telemetry``), or one of ``TELEMETRY_KINDS`` from the command line.
        ``actuator``: a factory ``(dev, netns=, burst=, latency=) -> RateActuator`` for the campus
        uplink (default ``TbfActuator``). ``validity``: a factory ``(plant) -> ValiditySource``
        (``plant.base.ValiditySource``) of the machine signals a leaderboard judges trials by
        (default ``manage.validity.MachineSignals`` on this plant). Composition, as Mininet passes
        link classes."""
        self._tel_factory = telemetry_factory(telemetry)
        if actuator is not None and not callable(actuator):
            raise ValueError(f"actuator must be a factory (dev, netns=, burst=, latency=), got {actuator!r}")
        self._act_factory = actuator
        if validity is not None and not callable(validity):
            raise ValueError(f"validity must be a factory (plant) -> ValiditySource, got {validity!r}")
        self._validity_factory = validity
        self._validity: Any = None
        self.scenario = scenario
        self._tb = Testbed(scenario, prefix=prefix, switch=switch, rtts=rtts)
        self._traffic: Any = None
        self._tel: NetnsTelemetry | None = None
        self._act: Any = None
        self._t0 = 0.0
        self._k = 0
        self._info: dict[str, Any] = {}
        self._closed = False
        self._dtn_started = False
        self._fct_reported = False
        self._monitor: Any = None
        self._tap_drops_prev = 0.0
        self._discipline: Any = None  # the stage's configuration this episode
        self._discipline_next: Any = None  # set_discipline's, for the next reset only
        self._stage: Any = None
        self._queues: Any = None
        self._pacer: Any = None  # actuators.pacing.SocketPacer on the running DTN sender
        self._pacing: float | None = None  # the DTN's aggregate pacing (frame bit/s); None: unpaced
        # Time for the previous episode's packets to leave: the longest RTT plus a full buffer.
        self._drain = drain if drain is not None else (
            2 * max(h.rtt for h in self._tb.senders) + scenario.buffer_bytes * 8 / scenario.capacity + 0.2
        )

    # -- Plant protocol -------------------------------------------------------------
    @property
    def period(self) -> float:
        return self.scenario.period

    @property
    def testbed(self) -> Testbed:
        return self._tb

    @property
    def telemetry(self) -> NetnsTelemetry | None:
        return self._tel

    def __enter__(self) -> NetnsPlant:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure_up(self) -> None:
        if self._closed:
            raise RuntimeError("NetnsPlant is closed")
        if self._act is not None:
            return
        from .traffic.episode import Traffic

        if self._act_factory is None:
            from ...actuators.tbf import TbfActuator

            self._act_factory = TbfActuator
        self._tb.up()
        dev, ns = self._tb.spec.uplink
        self._act = self._act_factory(dev, netns=ns, burst=self.scenario.shaper.burst,
                                      latency=self.scenario.shaper.latency)
        self._traffic = Traffic(self._tb, self.scenario.seed)
        self._traffic.start_servers()

    # -- validity signals (evaluation.leaderboard.validity) -----------------------------------------
    @property
    def validity_signals(self) -> Any:
        """The machine signals this plant records around an episode (``manage.validity``)."""
        if self._validity is None:
            if self._validity_factory is None:
                from .manage.validity import MachineSignals

                self._validity = MachineSignals(self._tb.delay_stats, self.calibration_probe)
            else:
                self._validity = self._validity_factory(self)
        return self._validity

    def calibration_probe(self) -> dict[str, Any]:
        """Whether the machine can serve the emulated link now (``manage.validity``, ours): the previous
        episode's traffic stopped, the testbed in its default configuration (no queues, stage or pacing;
        the campus shaper at u_max), a fixed, unpaced sender with ``PROBE_STREAMS`` TCP streams (the
        first campus host, else the idle probe host a scenario without campus hosts gets, ``spec.py``)
        saturates the bottleneck, whose TBF's byte counter over ``PROBE_WINDOW`` s after
        ``PROBE_WARMUP`` s gives ``probe_service`` (sent bits / (B_max x window)).
        None with ``probe_error`` when the sender failed (never guessed). About 2 s."""
        from .manage.validity import PROBE_STREAMS, PROBE_WARMUP, PROBE_WINDOW
        from .traffic.iperf import iperf_tcp

        self._ensure_up()
        if self._tel is not None:
            self._tel.close()
            self._tel = None
        self._traffic.stop_clients()
        # a discipline asked for the next episode (set_discipline) is kept for it, not spent on the probe
        keep, self._discipline_next = self._discipline_next, None
        self._restore_default()
        self._discipline_next = keep
        self._act.set_rate(self.scenario.u_max)
        time.sleep(self._drain)
        h = self._tb.spec.probe
        argv = iperf_tcp(self._tb.hosts[h.peer].ip, h.cca, PROBE_STREAMS)
        argv[argv.index("-t") + 1] = str(int(math.ceil(PROBE_WARMUP + PROBE_WINDOW)) + 1)
        proc = self._tb.spawn(h.ns, argv, log_name="probe.log")
        try:
            time.sleep(PROBE_WARMUP)
            b0, t0 = self._bottleneck_bytes(), time.monotonic()
            time.sleep(PROBE_WINDOW)
            b1, t1 = self._bottleneck_bytes(), time.monotonic()
            alive = proc.poll() is None
        finally:
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if not alive or b0 is None or b1 is None:
            return {"probe_service": None, "probe_error": "the probe's sender exited early" if not alive
                    else "no bottleneck counter", "probe_host": h.name}
        return {"probe_service": (b1 - b0) * 8.0 / (self.scenario.capacity * (t1 - t0)), "probe_s": t1 - t0,
                "probe_host": h.name}

    def _bottleneck_bytes(self) -> float | None:
        """Bytes BR1's root qdisc on the WAN port has sent (``tc -s -j``), None if unreadable."""
        import json

        from .procs import run_in

        dev, ns = self._tb.spec.bottleneck
        try:
            out = json.loads(run_in(ns, ["tc", "-s", "-j", "qdisc", "show", "dev", dev], timeout=5))
        except (RuntimeError, ValueError, OSError, subprocess.SubprocessError):
            return None
        root = next((q for q in out if isinstance(q, dict) and q.get("root")), None)
        return float(root["bytes"]) if root is not None and isinstance(root.get("bytes"), int | float) else None

    @property
    def actuator(self) -> Any:
        """The campus TBF actuator (None before ``reset``): the daemon applies fallbacks through it."""
        return self._act

    # -- a bottleneck discipline on BR1's WAN egress (the NFQUEUE stage) ------------------------
    def set_discipline(self, config: Any, **kwargs: Any) -> None:
        """Run ABC or FFS (an ``ABCConfig`` / ``FFSConfig``) on BR1's WAN egress in the next episode.

        The NFQUEUE stage (``stages/nfq.py``, the same numba core as the fluid plant) sits
        on BR1's forwarded traffic towards ``wan``, in front of the bottleneck's TBF;
        the DTN host is aggregate/ingress 0, every campus host 1. Weights follow
        ``set_discipline_weights`` (a file the stage re-reads every second). The
        campus shaper stays at whatever rate the policy gives (B_max for the
        discipline policies). It holds for the episode the next ``reset`` starts
        only (the runner sets it before every reset of a discipline policy's
        episode); a reset without it runs no stage.
        """
        if kwargs.get("groups") is not None or kwargs.get("labels") is not None or kwargs.get("exact"):
            raise ValueError("the netns plant's discipline takes no groups, labels or exact mode "
                             "(DTN vs campus, first-node labels)")
        if config is not None:
            from ...disciplines.registry import for_config

            for_config(config)  # one line naming the known ones otherwise
        self._discipline_next = config

    def set_discipline_weights(self, weights: np.ndarray | list[float]) -> None:
        """Per-aggregate weights (bit/s, (2,) or (1, 2)): the stage picks them up within a second."""
        if self._discipline is None or self._stage is None:
            raise ValueError("set_discipline_weights: this plant runs no bottleneck discipline")
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if w.shape != (2,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ValueError("discipline weights must be two finite rates > 0 bit/s (DTN, campus)")
        self._stage.set_weights(w.tolist())

    def _start_stage(self) -> None:
        from .stages import NfqStage

        tb = self._tb
        dev, ns = tb.spec.bottleneck
        ingress = {h.ip: (0 if h.kind == "dtn" else 1) for h in tb.senders}
        self._stage = NfqStage.start(tb.spawn, ns, dev, tb.logdir, self._discipline, self.scenario.capacity, ingress)

    def _restore_default(self) -> None:
        """The testbed's default configuration for a new episode (module docstring): the bottleneck's
        own TBF instead of a queue policy's HTB, a fresh discipline stage only if one was asked for
        since the last reset, no pacing."""
        if self._queues is not None:
            from .build import Links, bottleneck_qdisc

            queues, self._queues = self._queues, None
            queues.close()  # deletes its root HTB (classes, bfifos, filters)
            with Links(self._tb.spec) as links:
                bottleneck_qdisc(self._tb.spec, links)
        if self._stage is not None:
            # A fresh stage every episode: no meter or queue state carries over between trials.
            stage, self._stage = self._stage, None
            stage.stop()
        self._discipline, self._discipline_next = self._discipline_next, None
        if self._discipline is not None:
            self._start_stage()
        # An episode starts unpaced: the old sender is gone, and the new one is not paced until asked.
        self._pacing = None
        if self._pacer is not None:
            self._pacer.detach()

    def set_scenario(self, scenario: Scenario) -> None:
        """Run ``scenario`` from the next ``reset`` on, on the same testbed.

        Only what an episode's traffic reads may differ (duration, seed, the DTN's transfer
        size and start): anything that shapes the testbed (hosts, rates, buffer, RTTs, CCAs,
        period) is a one-line ``ValueError``; build another plant for it.
        """
        old = self.scenario
        same = scenario.replace(name=old.name, description=old.description, duration=old.duration,
                                seed=old.seed, dtn={"transfer": old.dtn.transfer, "start": old.dtn.start})
        if same != old:
            raise ValueError(f"the netns plant cannot switch from scenario '{old.name}' to '{scenario.name}' "
                             "on one testbed (only duration, seed and the DTN transfer may differ)")
        import dataclasses

        self.scenario = scenario
        self._tb.scenario = scenario
        self._tb.spec = dataclasses.replace(self._tb.spec, scenario=scenario)
        if self._traffic is not None:
            self._traffic.sc = scenario
            self._traffic.start_servers()  # a fixed-size transfer needs the DTN receiver's sockflows server

    def discipline_stats(self) -> dict[str, Any]:
        """The stage's counters (received, accepted, dropped, stage drops, CPU per packet), {} without one."""
        return self._stage.stats() if self._stage is not None else {}

    # -- queue policies (runner.Episode: plant.flows() -> policy -> plant.apply_queues) -----------
    def flows(self) -> list[dict[str, list[Any]]]:
        """The per-flow table a queue policy reads, one per instance (this plant has one): the
        telemetry source's (data plane, or the kernel's tcp_info per socket)."""
        if self._tel is None:
            raise RuntimeError("NetnsPlant.flows() before reset()")
        return [self._tel.flows()]

    def apply_queues(self, configs: Any) -> None:
        """Load a ``QueueConfig`` (or a list of one) on BR1's WAN egress: an HTB with one leaf per
        queue (``actuators.htb``) replaces the testbed's single TBF for the rest of this plant's life.

        The HTB's rate is the scenario's capacity, as the TBF's was; rules may name only the
        senders' and receivers' networks. A configuration the kernel refuses leaves the previous
        one in force (ActuatorError).
        """
        cfgs = list(configs) if isinstance(configs, list | tuple) else [configs]
        if len(cfgs) != 1:
            raise ValueError(f"got {len(cfgs)} queue configurations for a batch of 1")
        self._ensure_up()
        if self._queues is None:
            from ...actuators.htb import HtbQueueActuator

            dev, ns = self._tb.spec.bottleneck
            # The testbed's own TBF (build.bottleneck_qdisc) goes; the HTB actuator refuses a foreign root.
            subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root"],
                           capture_output=True, check=False)
            self._queues = HtbQueueActuator(dev, netns=ns, scope=[CAMPUS_NET, REMOTE_NET, DTN_NET])
        self._queues.apply(cfgs[0])

    @property
    def queue_actuator(self) -> Any:
        """The HTB on BR1's WAN port once a queue policy ran (None before)."""
        return self._queues

    # -- the DTN host's own pacing (HostPlant; runner.Episode: host policies) ---------------------
    def set_pacing(self, rates: np.ndarray | float | None) -> None:
        """Pace the DTN at ``rates`` (bit/s of Ethernet frames, its aggregate over its streams; (1,) or a
        number) from now on: every stream's socket gets ``SO_MAX_PACING_RATE`` = rate / streams in TCP
        payload bytes/s (``actuators.pacing``), set live on the running sender; streams that open later
        get it too. ``None`` lifts it; so does the next ``reset``. This acts on the DTN host itself:
        on a real network it needs that host's control (root or CAP_SYS_PTRACE there)."""
        if rates is None:
            self._pacing = None
            if self._pacer is not None:
                self._pacer.lift()
            return
        arr = check_rates(rates, 1, 0.0, np.inf, "netns plant pacing", clip=False)
        self._pacing = float(arr[0])
        if self._pacer is not None:
            self._pacer.set_rate(self._pacing)

    def pacing_readback(self) -> list[int]:
        """``SO_MAX_PACING_RATE`` read back from each socket of the running DTN sender to its receiver
        (TCP payload bytes/s; ``actuators.pacing.UNLIMITED`` when unpaced); [] before a sender runs."""
        return self._pacer.socket_rates() if self._pacer is not None else []

    def _attach_pacer(self) -> None:
        """A new DTN sender started: pace it from its first socket if a pacing is set."""
        from ...actuators.pacing import SocketPacer

        proc = self._traffic.dtn_proc
        if proc is None:
            return
        if self._pacer is None:
            self._pacer = SocketPacer(self._tb.hosts["dtnr"].ip, max(self.scenario.dtn.streams, 1))
        self._pacer.attach(proc.pid)
        if self._pacing is not None:
            self._pacer.set_rate(self._pacing)

    def _pace_new_sockets(self) -> None:
        if self._pacer is not None and self._pacing is not None:
            self._pacer.refresh()

    # -- episodes -----------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> StateBatch:
        self._ensure_up()
        sc = self.scenario
        if self._tel is not None:
            self._tel.close()
            self._tel = None
        self._traffic.stop_clients()
        self._traffic.seed = sc.seed if seed is None else int(seed)
        self._act.set_rate(sc.shaper.rate if sc.shaper.rate is not None and sc.shaper.enabled else sc.u_max)
        self._restore_default()
        time.sleep(self._drain)
        self._traffic.start_campus()
        tel = self._tel = self._tel_factory(self._tb)
        self._dtn_started = False
        self._fct_reported = False
        self._k = 0
        tel.sample(0.0)  # start the first period's counters here
        # Period boundaries follow the telemetry's own clock (the data plane's
        # periods start when its capture rings open).
        start = getattr(tel, "start_mono", None)
        self._t0 = float(start) if start is not None else time.monotonic()
        self._maybe_start_dtn(0.0)
        self._traffic.start_flows()
        self._udp_to_telemetry()
        from .manage.starvation import StarvationMonitor

        self._monitor = StarvationMonitor(
            sc.capacity, sc.period, min(h.rtt for h in self._tb.senders), stage_stats=self._tb.delay_stats,
        )
        self._tap_drops_prev = 0.0
        self._info = {}
        y = np.zeros((1, N_STATE))
        y[0, 2] = self._tb.dtn.rtt
        y[0, 3] = sc.campus.rtt
        return StateBatch(0.0, y)

    def _maybe_start_dtn(self, t: float) -> None:
        if not self._dtn_started and t >= self.scenario.dtn.start - 1e-9:
            self._traffic.start_dtn()
            self._dtn_started = True
            self._attach_pacer()

    def _wait_until(self, deadline: float) -> float:
        """Sleep until ``deadline`` (monotonic s), pacing the DTN's new sockets meanwhile; how late we woke (s).

        A sender opens its streams after it starts (iperf3: a few RTTs): every 50 ms the
        sockets that appeared get the pacing, so none runs unpaced for long.
        """
        while True:
            self._pace_new_sockets()
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, 0.05))
        return max(time.monotonic() - deadline, 0.0)

    def step(self, u: np.ndarray | float) -> StateBatch:
        if self._act is None or self._tel is None:
            raise RuntimeError("call reset() before step()")
        arr = check_rates(u, 1, 0.0, self.scenario.u_max, "netns plant", clip=False)
        # shaper.enabled = false: the campus TBF stays at B_max whatever u says
        self._act.set_rate(float(arr[0]) if self.scenario.shaper.enabled else self.scenario.u_max)
        self._k += 1
        t = self._k * self.period
        deadline = self._t0 + t
        woke_late = self._wait_until(deadline)
        self._tb.raise_if_interrupted()  # never measure a testbed a lost Ctrl-C tore down
        st = self._tel.sample(t)
        # The DTN starts at the first period boundary at or after dtn.start.
        self._maybe_start_dtn(t)
        self._traffic.flow_events(t)
        self._udp_to_telemetry()
        res = self._traffic.poll_dtn()
        fct = np.nan
        if res is not None and not self._fct_reported:
            fct = float(res["fct"]) if res.get("ok", True) else np.nan
            self._fct_reported = True
        ti = self._tel.last_info
        starvation = self._starvation(ti, woke_late, dtn_done=res is not None)
        self._info = self._period_info(st, ti, fct, deadline, starvation) | self._extra_info(ti) | self._pacing_info()
        y = st.as_vector()
        if not np.all(np.isfinite(y)):
            bad = [i for i in range(N_STATE) if not math.isfinite(y[i])]
            raise RuntimeError(f"telemetry returned non-finite values at t={t:.1f}s (fields {bad})")
        return StateBatch(t, y[None, :])

    def _starvation(self, ti: dict[str, Any], woke_late: float, dtn_done: bool) -> tuple[bool, dict[str, Any]]:
        """The period's starvation verdict (``manage.starvation``) from the telemetry's ground truth."""
        tap_drops = float(ti.get("tap_drops", 0.0))
        out = self._monitor.check(
            step_late=woke_late, tap_drops=max(tap_drops - self._tap_drops_prev, 0.0),
            bottleneck=ti.get("bottleneck"),
            # A finished fixed-size transfer leaves its sockets idle: not starvation.
            senders=ti.get("senders") if not dtn_done and not self._fct_reported else None,
        )
        self._tap_drops_prev = tap_drops
        return out

    def _period_info(self, st: Any, ti: dict[str, Any], fct: float, deadline: float,
                     starvation: tuple[bool, dict[str, Any]]) -> dict[str, Any]:
        """Ground truth every period has: bytes per class, drops, the stages' health, the starvation
        verdict, u read back."""
        from .manage.starvation import symptom_mask

        ds = self._tb.delay_stats()
        shorts = self._traffic.short_flows() if self._traffic.short_logs else []
        return {
            "dtn_bytes": np.array([ti.get("dtn_bytes", np.nan)]),
            "campus_bytes": np.array([ti.get("campus_bytes", np.nan)]),
            "bottleneck_drops": np.array([ti.get("bottleneck_drops", np.nan)]),
            "utilization": np.array([(st.rate_dtn + st.rate_campus) / self.scenario.capacity]),
            "dtn_fct": np.array([fct]),
            "short_flows_done": np.array([float(sum(1 for f in shorts if f.get("ok")))]),
            "delay_stage_lost": np.array([float(ds.get("kernel_drops", 0) + ds.get("tx_errors", 0))]),
            "delay_stage_reordered": np.array([float(ds.get("reordered", 0))]),
            "late_s": np.array([max(time.monotonic() - deadline, 0.0)]),
            "tap_drops": np.array([float(ti.get("tap_drops", 0.0))]),
            # an array like the columns above, so the runner keeps it as a trace column and
            # the experiments count starved periods per trial
            "starved": np.array([bool(starvation[0])]),
            "starved_by": np.array([symptom_mask(starvation[1].get("symptoms", ()))]),
            "starvation": starvation[1],
            "starved_periods": self._monitor.starved_periods,
            "telemetry": getattr(self._tel, "name", "kernel"),
            "u_applied": np.array([self._act.current_rate()]),
        }

    def _extra_info(self, ti: dict[str, Any]) -> dict[str, Any]:
        """What only some runs have: [[flows]] rates, stale flags, kernel truth, the stage's drops."""
        out: dict[str, Any] = {}
        fh = self._tb.spec.flow_hosts
        if fh:
            # Delivered rate of every [[flows]] flow in the period, from its receiver's S2 port.
            pb, dt = ti.get("port_bytes", {}), float(ti.get("interval", self.period))
            out["flow_rate"] = np.array([[pb.get(self._tb.spec.delivery_port(h), np.nan) * 8.0 / dt for h in fh]])
        for f in STATE_FIELDS:
            if f"stale_{f}" in ti:  # the data plane held this variable from an earlier period
                out[f"stale_{f}"] = np.array([float(ti[f"stale_{f}"])])
        if "shaper_delay" in ti:
            # Mean sojourn in the campus shaper (S1's TBF): part of the campus senders' RTT, not of y.
            out["shaper_delay"] = np.array([float(ti["shaper_delay"])])
        if "kernel_y" in ti:
            # Kernel truth for the same period when y came from the data plane.
            out["kernel_y"] = np.asarray(ti["kernel_y"], dtype=np.float64)
        if self._stage is not None:
            ds = self.discipline_stats()
            out["discipline_dropped"] = np.array([float(ds.get("dropped", 0))])
            out["discipline_stage_drops"] = np.array([float(ds.get("queue_dropped", 0) + ds.get("user_dropped", 0))])
        if self._tb.spec.cca_mapped:
            out["cca_mapped"] = {k: f"{a}->{b}" for k, (a, b) in self._tb.spec.cca_mapped.items()}
        return out

    def _pacing_info(self) -> dict[str, Any]:
        """While the DTN is paced: how many of its sockets to its receiver carry the pacing now (a trace
        column; an iperf3 sender's control connection is one of them, harmlessly: it carries no data)."""
        if self._pacing is None or self._pacer is None:
            return {}
        return {"dtn_paced_sockets": np.array([float(self._pacer.paced_sockets)])}

    @property
    def info(self) -> dict[str, Any]:
        return dict(self._info)

    def _udp_to_telemetry(self) -> None:
        """Tell the telemetry which [[flows]] UDP senders run, and how many UDP sources there are."""
        assert self._tel is not None
        udp = self._traffic.running_udp_flows()
        cbr = len(self._tb.spec.campus) if self.scenario.campus.traffic == "udp" else 0
        self._tel.set_udp([h.name for h in udp], cbr + len(udp))

    @property
    def flow_hosts(self) -> list[Host]:
        """The testbed's ``[[flows]]`` senders (``spec.Host``), in ``info["flow_rate"]``'s order."""
        return self._tb.spec.flow_hosts

    def flow_records(self) -> Any:
        """This episode's flows, one row each, ``class`` dtn | campus | short (as the fluid plant's):
        the fixed-size DTN transfer once done, every ``[[flows]]`` flow (campus: ``name``, ``host``,
        ``src``, ``rtt``, ``cca``, ``start`` s; a fixed-size one with ``bytes`` and, once delivered,
        ``fct``) and every finished Weibull short flow (``bytes``, ``fct``). ``fct`` is s until the
        last byte was delivered, NaN while running or if stopped first; ``instance`` is 0."""
        import pandas as pd

        cols = ["instance", "class", "name", "host", "src", "rtt", "cca", "start", "bytes", "fct", "ok"]
        rows: list[dict[str, Any]] = []
        tr = self._traffic
        if tr is not None:
            res = tr.poll_dtn()
            if res is not None:
                dtn = self._tb.dtn
                rows.append({"class": "dtn", "name": "dtn", "host": "dtns", "src": dtn.ip, "rtt": dtn.rtt,
                             "cca": dtn.cca, "start": self.scenario.dtn.start,
                             "bytes": float(self.scenario.dtn.transfer or np.nan),
                             "fct": float(res["fct"]) if res.get("ok", True) else np.nan, "ok": bool(res.get("ok", True))})
            rows += [{**r, "class": "campus"} for r in tr.flow_records()]
            rows += [{"class": "short", "name": "short", "bytes": float(f.get("size", np.nan)),
                      "fct": float(f["fct"]) if f.get("ok") else np.nan, "ok": bool(f.get("ok"))}
                     for f in tr.short_flows()]
        df = pd.DataFrame(rows, columns=cols)
        df["instance"] = 0
        df["fct"] = pd.to_numeric(df["fct"], errors="coerce")
        return df

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._tel is not None:
                self._tel.close()
            if self._pacer is not None:
                self._pacer.close()
            for a in (self._act, self._queues):
                if a is None:
                    continue
                try:
                    a.close()
                except Exception:  # noqa: BLE001 - the namespace goes away next anyway
                    pass
        finally:
            self._tel = None
            self._act = None
            self._queues = None
            self._pacer = None
            self._tb.down()


def testbed_fingerprint(scenario: Scenario) -> dict[str, str]:
    """What a netns trial's numbers depend on beyond the scenario: the kernel release and the hash of
    the testbed's description (``spec.describe``, with a fixed prefix: the wiring, not the names)."""
    import dataclasses
    import hashlib
    import json
    import os

    from .spec import describe

    text = json.dumps(dataclasses.asdict(describe(scenario, "sdz")), sort_keys=True, default=str)
    return {"kernel": os.uname().release, "testbed": hashlib.sha256(text.encode()).hexdigest()[:16]}


register_plant("netns", NetnsPlant, realtime=True, cli=("telemetry",), fingerprint=testbed_fingerprint)
