"""The daemon's closed loop: one period at a time, in real time, never stopping on a fault.

``ControlLoop`` is the loop alone: no HTTP, no token file. ``controller.serve``
composes it with the HTTP API, the metrics listener and the token file into
the ``ControlDaemon`` that ``scidmz control run`` runs.

Every period T the daemon reads y from the plant, asks the policy for u and
applies it (``Plant.step(u)`` applies u and returns y measured at the end of
the period; ARCHITECTURE.md alignment). The target can be changed while it
runs (``set_target``, which the HTTP API of ``scidmz.controller.api`` calls).

Safety: the daemon falls back to the trivial rate
``B_max - target`` (MLC paper section 3.7, ``Scenario.trivial_rate``) and
keeps running, logging why, when

* no telemetry sample arrived for 2T (``plant.step`` has not returned; if the
  plant exposes its ``actuator`` the fallback rate is applied through it at
  once, otherwise with the next step), or a sample is not finite;
* the actuator call failed (``ActuatorError`` anywhere in the exception chain
  of ``plant.step``; any other exception of ``step`` counts as a plant error
  and is handled the same way);
* the policy raised or returned a non-finite rate, or (a policy with a
  ``fallbacks`` counter, the MLC) replaced its model's non-finite output by
  the trivial rate itself;
* the host place failed: a DTN's ``scidmz agent`` did not answer or refused
  the pacing rate (cause ``host_agent``; the agent is tried again every period);
* the actuator found someone else's configuration where its own was (an
  admin's root qdisc, QoS or meter put there while the daemon runs:
  ``ForeignConfigError``, cause ``foreign``). The actuator leaves it as it is
  and changes nothing there again, so the daemon stays on the fallback
  (which it cannot apply) until restarted, and says why every period.

A failure makes the next period use the trivial rate; the policy takes over
again after one clean period. Every cause is counted (``errors`` in
``/status``, ``scidmz_faults_total{cause}`` in the metrics).

Log: one JSON object per line, per period ``{"k", "time", "t", "y", "u",
"u_policy", "target", "fallback", "reason", "cause"}`` and events
``{"event": "start"|"target"|"fallback"|"recovered"|"stop", ...}``.

Shadow mode (``shadow=True``, ``control run --shadow``): the loop
is the same -- telemetry, policy, fallback rules -- but the plant was built
with a recording actuator (``actuators.recording``), so u is what the loop
*would* apply and nothing is applied. ``status()["mode"]`` is ``"shadow"``
(``"live"`` otherwise), each period's log line adds ``"mode": "shadow"`` and
the trivial rate, and the metrics export u as
``scidmz_shadow_rate_bits_per_second`` (the applied limit stays NaN).
Promoting to live is a restart without ``shadow``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..actuators.base import ActuatorError, ForeignConfigError
from ..actuators.host_agent import HostAgentError
from ..plant.base import Plant
from ..policies.base import Policy
from ..runner import Episode
from ..state import STATE_FIELDS, json_default_lenient
from ..units import format_rate, parse_rate

__all__ = ["ControlLoop", "HISTORY_PERIODS"]

log = logging.getLogger("scidmz.control")

_HISTORY_KEEP = 1024  # periods of history a policy sees; a daemon runs for months
HISTORY_PERIODS = 900  # periods the dashboard can show (15 min at T = 1 s); ours, bounded memory
_STOP_STEP_WAIT = 0.3  # s a pending plant step gets on shutdown before the plant is closed under it


@dataclass
class _Sample:
    t: float
    y: np.ndarray  # (7,)


class ControlLoop:
    """Run ``policy`` on ``plant`` in real time until stopped (see module doc).

    ``log``: a path, an open text stream, or None (no log). ``duration``: stop
    after this many seconds of loop time (None: run until ``stop()``/SIGTERM).
    ``telemetry_timeout`` defaults to 2T; the very first step gets
    ``max(telemetry_timeout, startup_grace)``. ``metrics``: an observer fed
    every period (``controller.prometheus.DaemonMetrics``), or None.

    Subclasses add services around the loop (``controller.serve.ControlDaemon``: the
    HTTP API) through ``_start_services`` / ``_stop_services``, called once
    before the first period and once at shutdown, after the plant is closed.
    """

    def __init__(
        self,
        plant: Plant,
        policy: Policy,
        target: float,
        *,
        log: str | os.PathLike[str] | IO[str] | None = None,
        duration: float | None = None,
        telemetry_timeout: float | None = None,
        seed: int | None = None,
        startup_grace: float = 15.0,
        metrics: Any = None,
        shadow: bool = False,
    ) -> None:
        if plant.batch != 1:
            raise ValueError(f"the control daemon drives one plant instance, got batch={plant.batch}")
        self.plant = plant
        self.policy = policy
        self.scenario = plant.scenario
        self.period = float(plant.period)
        self._target = self.scenario.check_target(float(target))
        self.telemetry_timeout = 2.0 * self.period if telemetry_timeout is None else float(telemetry_timeout)
        if not (self.telemetry_timeout > 0 and math.isfinite(self.telemetry_timeout)):
            raise ValueError(f"telemetry timeout must be a positive number of seconds, got {telemetry_timeout!r}")
        if duration is not None and not (duration > 0 and math.isfinite(duration)):
            raise ValueError(f"duration must be a positive number of seconds, got {duration!r}")
        self.duration = duration
        if seed is not None:
            from ..limits import check

            check("seed", seed, "seed")  # refused here, before any service starts
        self.seed = seed
        self.shadow = bool(shadow)
        # The first step may include one-off work (JIT compilation of the fluid kernel, traffic
        # start-up in a testbed), so the first sample gets this much time before it counts as lost.
        self.startup_grace = float(startup_grace)
        self._log_target = log
        self._log: IO[str] | None = None
        self._own_log = False
        self._lock = threading.Lock()
        self._log_lock = threading.Lock()
        self._stop = threading.Event()
        self._stop_reason = ""
        # Called once with status() when the services are up (the CLI prints the API's URL).
        self.on_ready: Callable[[dict[str, Any]], None] | None = None
        self._step_thread: threading.Thread | None = None
        self._started = False
        self._end: float | None = None  # monotonic time --duration ends the loop
        # -- state shown by /status --
        self.k = 0
        self.last: _Sample | None = None
        self.u: float | None = None
        self.u_policy: float | None = None
        self.fallback = False
        self.fallback_reason: str | None = None
        self.fallback_cause: str | None = None
        self.fallback_periods = 0
        self.errors: dict[str, int] = {}
        self.client_errors: dict[str, int] = {}  # HTTP client errors by kind (the API's, not the loop's)
        # Packets the plant's telemetry passed on unmeasured, by reason (UnmeasuredPlant; eBPF only).
        self.unmeasured: dict[str, int] = {}
        fn = getattr(plant, "unmeasured", None)
        self._read_unmeasured: Callable[[], dict[str, int]] | None = fn if callable(fn) else None
        self.history: deque[dict[str, Any]] = deque(maxlen=HISTORY_PERIODS)
        self._last_sample_wall: float | None = None
        self._t_start = time.monotonic()
        self.metrics = metrics
        if self.metrics is not None:
            self.metrics.static(period=self.period, capacity=self.scenario.capacity, shadow=self.shadow)
            self.metrics.target(self._target, self.scenario.trivial_rate(self._target))

    # -- target --------------------------------------------------------------------------------
    @property
    def target(self) -> float:
        with self._lock:
            return self._target

    def set_target(self, value: str | float, source: str = "api") -> float:
        """Validate and apply a new DTN target (``"400M"`` or bit/s); ValueError with a clear message."""
        try:
            if isinstance(value, str):
                if len(value) > 64:
                    raise ValueError(f"target must be a rate like '400M', got {len(value)} characters")
                bps = parse_rate(value, "target")
            elif isinstance(value, int | float) and not isinstance(value, bool):
                bps = float(value)  # a 400-digit integer raises OverflowError here
            else:
                raise ValueError(f"target must be a rate like '400M' or a number of bit/s, got {value!r}")
        except OverflowError:
            raise ValueError("target must be finite, got a number too large for a float") from None
        if not math.isfinite(bps):
            raise ValueError(f"target must be finite, got {str(value)[:40]!r}")
        bps = self.scenario.check_target(bps)
        with self._lock:
            old, self._target = self._target, bps
        if self.metrics is not None:
            self.metrics.target(bps, self.scenario.trivial_rate(bps), changed=True)
        self._write({"event": "target", "time": time.time(), "old": old, "new": bps, "source": source})
        log.info("target changed %s -> %s (%s)", format_rate(old), format_rate(bps), source)
        return bps

    # -- status ------------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        with self._lock:
            last = self.last
            now = time.monotonic()
            return {
                "running": self._started and not self._stop.is_set(),
                "mode": "shadow" if self.shadow else "live",
                "pid": os.getpid(),
                "k": self.k,
                "uptime": now - self._t_start,
                "t": None if last is None else last.t,
                "y": None if last is None else dict(zip(STATE_FIELDS, map(float, last.y), strict=True)),
                "u": self.u,
                "u_policy": self.u_policy,
                "target": self._target,
                "trivial_rate": self.scenario.trivial_rate(self._target),
                "fallback": self.fallback,
                "fallback_reason": self.fallback_reason,
                "fallback_cause": self.fallback_cause,
                "fallback_periods": self.fallback_periods,
                "errors": dict(self.errors),
                "client_errors": dict(self.client_errors),
                "telemetry_unmeasured": dict(self.unmeasured),
                "host_agents": self._host_agents(),
                "last_sample_age": None if self._last_sample_wall is None else now - self._last_sample_wall,
                "period": self.period,
                "capacity": self.scenario.capacity,
                "u_min": self.scenario.u_min,
                "u_max": self.scenario.u_max,
                "policy": getattr(self.policy, "name", type(self.policy).__name__),
                "plant": type(self.plant).__name__,
                "scenario": self.scenario.name,
                **self._service_status(),
            }

    def _host_agents(self) -> list[dict[str, Any]] | None:
        """The plant's DTN agents (URL, rate last set, last error); None without a host place on agents."""
        agents = getattr(self.plant, "host_status", None)
        return agents() if callable(agents) else None

    def _service_status(self) -> dict[str, Any]:
        """What the services add to ``status()`` (the API's addresses; nothing here)."""
        return {}

    def recent(self, since: int = 0) -> list[dict[str, Any]]:
        """The periods with ``k > since`` still kept for the dashboard (oldest first)."""
        with self._lock:
            return [p for p in self.history if p["k"] > since]

    def client_error(self, kind: str) -> None:
        """Count one HTTP client error (``metrics.CLIENT_ERRORS``); the API calls it, from its thread."""
        with self._lock:
            self.client_errors[kind] = self.client_errors.get(kind, 0) + 1
        if self.metrics is not None:
            self.metrics.client_error(kind)

    def metrics_text(self) -> bytes | None:
        """Prometheus exposition; None without prometheus-client."""
        return None if self.metrics is None else self.metrics.exposition()

    # -- lifecycle -----------------------------------------------------------------------------------
    def stop(self, reason: str = "stop requested") -> None:
        """Ask the loop to finish the current period and shut down (safe from any thread or a signal)."""
        if not self._stop.is_set():
            self._stop_reason = reason
            self._stop.set()

    def run(self) -> dict[str, Any]:
        """Run the loop until stopped or ``duration`` is over; always closes the plant and the services."""
        self._open_log()
        try:
            self._start_services()
            self._started = True
            st = self.status()
            if self.on_ready is not None:
                self.on_ready(st)
            self._write({"event": "start", "time": time.time(), "target": self.target, "mode": st["mode"],
                         "policy": st["policy"], "plant": type(self.plant).__name__,
                         "scenario": self.scenario.name, "period": self.period,
                         "api": st.get("api"), "metrics": st.get("metrics"), "pid": os.getpid()})
            self._loop()
        finally:
            summary = self._shutdown()
        return summary

    def _shutdown(self) -> dict[str, Any]:
        # Bounded in time whatever the state (SIGTERM ends the daemon within 2 s).
        self._stop.set()
        problems: list[str] = []
        if self._step_thread is not None and self._step_thread.is_alive():
            # A step blocked on lost telemetry: closing the plant is what unblocks it.
            self._step_thread.join(min(_STOP_STEP_WAIT, self.period))
        try:
            self.plant.close()
        except Exception as exc:  # report, but keep shutting the rest down
            problems.append(f"plant close failed: {_one_line(exc)}")
        if self._step_thread is not None:
            self._step_thread.join(0.7)
            if self._step_thread.is_alive():
                problems.append("the plant step thread is still blocked after close")
        self._stop_services()
        st = self.status()
        summary = {"periods": self.k, "fallback_periods": self.fallback_periods, "errors": st["errors"],
                   "target": st["target"], "u": st["u"], "reason": self._stop_reason or "finished",
                   "problems": problems}
        if self._started:  # a daemon that never started (bad address, token file) logs nothing
            self._write({"event": "stop", "time": time.time(), **summary})
        self._close_log()
        return summary

    def _start_services(self) -> None:
        """Start what runs beside the loop (``controller.serve``: the HTTP API); nothing here."""

    def _stop_services(self) -> None:
        """Stop what ``_start_services`` started; called once at shutdown, after the plant is closed."""

    # -- the loop -------------------------------------------------------------------------------------------
    def _decide(self, episode: Episode, target: float) -> tuple[float | None, str | None, str | None]:
        """(u_policy, fallback reason, cause) of one policy call."""
        before = getattr(self.policy, "fallbacks", None)
        try:
            raw = episode.propose(np.array([target])).reshape(-1)
            u_policy = float(raw[0])
        except Exception as exc:
            lost = _in_chain(exc, HostAgentError)
            if lost is not None:
                # The host place failed (a DTN agent is unreachable): the campus goes to the trivial rate,
                # the DTN runs unpaced once its agent's lease ends, and the next period tries the agent again.
                return None, f"DTN agent unreachable: {_one_line(lost)}", "host_agent"
            return None, f"policy error: {_one_line(exc)}", "policy"
        if not math.isfinite(u_policy):
            return u_policy, f"policy returned a non-finite rate ({u_policy})", "policy_nonfinite"
        after = getattr(self.policy, "fallbacks", None)
        if isinstance(before, int) and isinstance(after, int) and after > before:
            # The MLC already replaced its model's NaN by the trivial rate; monitoring must see it.
            return u_policy, "policy returned a non-finite rate (its model's output; trivial rate used)", \
                "policy_nonfinite"
        return u_policy, None, None

    def _loop(self) -> None:
        sc = self.scenario
        # The one runner (runner.Episode), stepped by hand: the daemon puts fallbacks between
        # the policy's proposal and the plant, and a timeout around the plant's step.
        episode = Episode(self.plant, self.policy, keep=_HISTORY_KEEP)
        state0 = episode.reset(self.seed)
        with self._lock:
            self.last = _Sample(float(state0.t), np.asarray(state0.y[0], dtype=np.float64))
            self._last_sample_wall = time.monotonic()
        t_loop = time.monotonic()
        # --duration ends the loop at its time, also inside a period longer than it (else
        # `--set period=3600 --duration 2` would run for an hour).
        self._end = None if self.duration is None else t_loop + self.duration
        failure: tuple[str, str] | None = None  # (reason, cause) why the *next* period uses the trivial rate
        actuator = getattr(self.plant, "actuator", None)
        while not self._stop.is_set():
            if self._past_end():
                break
            period_start = time.monotonic()
            target = self.target
            u_policy: float | None = None
            if failure is None:
                u_policy, reason, cause = self._decide(episode, target)
                if cause is not None:
                    self._count(cause)
            else:
                reason, cause = failure
            if reason is None:
                u = float(np.clip(u_policy, sc.u_min, sc.u_max))
            else:
                u = sc.trivial_rate(target)
            self._set_fallback(reason, cause, u)

            # Apply u and wait for y_k; the step runs on its own thread so that a plant whose
            # telemetry went silent cannot freeze the loop (or the API).
            box: dict[str, Any] = {}
            done = threading.Event()
            self._step_thread = threading.Thread(target=_step_into, args=(self.plant, u, box, done),
                                                 name="scidmz-plant-step", daemon=True)
            self._step_thread.start()
            failure = None
            lost_logged = False
            timeout = self.telemetry_timeout if self.k else max(self.telemetry_timeout, self.startup_grace)
            deadline = (self._last_sample_wall or period_start) + timeout
            next_check = deadline
            cut = self._end is not None and period_start + self.period > self._end
            while True:
                # Short slices so that a stop request is seen while a step is pending.
                if done.wait(min(max(next_check - time.monotonic(), 0.0), 0.1)):
                    break
                # A period that reaches past --duration is cut at its end; a step that is merely
                # late (start-up, a slow plant) is waited for as before.
                if self._stop.is_set() or (cut and self._past_end()):
                    break
                if time.monotonic() < next_check:
                    continue
                # No sample for 2T: telemetry is lost. Fall back now, keep logging every period.
                age = time.monotonic() - (self._last_sample_wall or period_start)
                why = f"no telemetry sample for {age:.2f} s (> {timeout:.2f} s)"
                fb = sc.trivial_rate(self.target)
                if not lost_logged:
                    self._count("telemetry_timeout")
                    if actuator is not None and hasattr(actuator, "set_rate"):
                        try:
                            actuator.set_rate(fb)
                        except Exception as exc:
                            why += f"; applying the fallback through the actuator failed: {_one_line(exc)}"
                self._set_fallback(why, "telemetry_timeout", fb)
                self._record(None, fb, None, why, "telemetry_timeout")
                lost_logged = True
                next_check = time.monotonic() + self.period
            if not done.is_set():
                break  # stopping while the step is still blocked; _shutdown closes the plant
            if "error" in box:
                exc = box["error"]
                failure = _step_failure(exc)
                kind = failure[1]
                self._count(kind)
                self._set_fallback(*failure, u)
                self._record(None, u, u_policy, *failure)
            else:
                st = box["state"]
                y = np.asarray(st.y[0], dtype=np.float64)
                now = time.monotonic()
                if not (np.all(np.isfinite(y)) and math.isfinite(float(st.t))):
                    failure = ("telemetry sample is not finite", "telemetry_invalid")
                    self._count("telemetry_invalid")
                    self._set_fallback(*failure, u)
                    self._record(None, u, u_policy, *failure)
                else:
                    self._note_unmeasured()
                    episode.observe(np.array([u]), st, np.array([target]))
                    with self._lock:
                        self.last = _Sample(float(st.t), y)
                        self._last_sample_wall = now
                    if lost_logged:
                        # The loop kept applying the fallback while waiting; this sample closes the gap.
                        failure = ("telemetry recovering (first sample after a loss)", "telemetry_timeout")
                        self._record(y, u, u_policy, *failure)
                    else:
                        self._record(y, u, u_policy, reason, cause)
            # Pace to the period grid: real-time plants already took T, the fluid plant took ~0.
            until = period_start + self.period if self._end is None else min(period_start + self.period, self._end)
            rest = until - time.monotonic()
            if rest > 0:
                self._stop.wait(rest)

    # -- helpers ---------------------------------------------------------------------------------------------
    def _past_end(self) -> bool:
        """True (and the loop asked to stop) once ``duration`` is over."""
        if self._end is not None and time.monotonic() >= self._end - 1e-9:
            self.stop("duration reached")
            return True
        return False

    def _set_fallback(self, reason: str | None, cause: str | None, u: float) -> None:
        with self._lock:
            was = self.fallback
            self.fallback = reason is not None
            self.fallback_reason = reason
            self.fallback_cause = cause
            self.u = u
        if reason is not None and not was:
            log.warning("falling back to the trivial rate %s: %s", format_rate(u), reason)
            self._write({"event": "fallback", "time": time.time(), "u": u, "reason": reason, "cause": cause})
        elif reason is None and was:
            log.warning("policy back in control")
            self._write({"event": "recovered", "time": time.time()})

    def _record(self, y: np.ndarray | None, u: float, u_policy: float | None, reason: str | None,
                cause: str | None) -> None:
        wall = time.time()
        yd = None if y is None else dict(zip(STATE_FIELDS, map(float, y), strict=True))
        with self._lock:
            self.k += 1
            self.u_policy = u_policy
            if reason is not None:
                self.fallback_periods += 1
            t = None if self.last is None else self.last.t
            target = self._target
            rec = {"k": self.k, "time": wall, "t": t if y is not None else None, "y": yd,
                   "u": u, "u_policy": u_policy, "target": target,
                   "fallback": reason is not None, "reason": reason, "cause": cause}
            if self.shadow:  # what it would apply, next to the rate an admin would set by hand
                rec.update(mode="shadow", trivial_rate=self.scenario.trivial_rate(target))
            self.history.append(rec)
        self._write(rec)
        if self.metrics is not None:
            if yd is not None:
                self.metrics.sample(yd, wall)
            self.metrics.period(u, u_policy if u_policy is None or math.isfinite(u_policy) else None, cause)

    def _note_unmeasured(self) -> None:
        """Refresh the plant's unmeasured-packet counts (a failing read only skips this period's)."""
        if self._read_unmeasured is None:
            return
        try:
            counts = {str(k): int(v) for k, v in self._read_unmeasured().items()}
        except Exception as exc:  # a telemetry hiccup must not stop the loop; the sample itself was fine
            log.debug("unmeasured counts not read: %s", _one_line(exc))
            return
        with self._lock:
            self.unmeasured = counts
        if self.metrics is not None:
            self.metrics.unmeasured(counts)

    def _count(self, kind: str) -> None:
        with self._lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1
        if self.metrics is not None:
            self.metrics.fault(kind)

    # -- log -------------------------------------------------------------------------------------------------
    def _open_log(self) -> None:
        t = self._log_target
        if t is None:
            self._log = None
        elif isinstance(t, str | os.PathLike):
            from ..fileio import make_parents, open_append

            path = Path(t)
            if path.is_dir():
                raise ValueError(f"log {path} is a directory")
            if make_parents():
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise ValueError(f"cannot open the log {path}: {exc.strerror or exc}") from None
            # Appends never follow a symlink (O_NOFOLLOW): docs/safety.md, a link's target is never written.
            self._log = open_append(path, "log")
            self._own_log = True
        else:
            self._log = t

    def _close_log(self) -> None:
        if self._log is not None and self._own_log:
            self._log.close()
        self._log = None

    def _write(self, obj: dict[str, Any]) -> None:
        if self._log is None:
            return
        line = json.dumps(obj, default=json_default_lenient)
        with self._log_lock:
            try:
                self._log.write(line + "\n")
                self._log.flush()
            except (OSError, ValueError):  # a full disk must not stop the control loop
                pass


def _step_into(plant: Plant, u: float, box: dict[str, Any], done: threading.Event) -> None:
    try:
        box["state"] = plant.step(np.array([u]))
    except BaseException as exc:  # delivered to the loop thread, which decides what it means
        box["error"] = exc
    finally:
        done.set()


def _step_failure(exc: BaseException) -> tuple[str, str]:
    """(reason, cause) of a failed plant step: ``foreign`` when the actuator found someone else's
    configuration where its own was (it leaves it as it is), ``actuator``, or ``plant``."""
    foreign = _in_chain(exc, ForeignConfigError)
    if foreign is not None:
        text = str(foreign).strip().splitlines()
        return f"not scidmz's to change: {text[0] if text else type(foreign).__name__}", "foreign"
    kind = "actuator" if _in_chain(exc, ActuatorError) is not None else "plant"
    return f"{kind} call failed: {_one_line(exc)}", kind


def _in_chain(exc: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    """The first exception of type ``kind`` in ``exc``'s chain (a wrapper, e.g. a configuration's, keeps
    the cause), or None."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, kind):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
