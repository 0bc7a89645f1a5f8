"""The live controller daemon: the closed loop an administrator runs, with a local HTTP API.

Every period T the daemon reads y from the plant, asks the policy for u and
applies it (``Plant.step(u)`` applies u and returns y measured at the end of
the period; ARCHITECTURE.md alignment). The DTN target can be changed while
it runs through an HTTP API on loopback, protected by a random token.

Safety (issue 5, item 8): the daemon falls back to the trivial rate
``B_max - target`` (MLC paper section 3.7, ``Scenario.trivial_rate``) and
keeps running, logging why, when

* no telemetry sample arrived for 2T (``plant.step`` has not returned; if the
  plant exposes its ``actuator`` the fallback rate is applied through it at
  once, otherwise with the next step), or a sample is not finite;
* the actuator call failed (``ActuatorError`` anywhere in the exception chain
  of ``plant.step``; any other exception of ``step`` counts as a plant error
  and is handled the same way);
* the policy raised or returned a non-finite rate.

A failure makes the next period use the trivial rate; the policy takes over
again after one clean period. Bad targets (unparsable, negative, above
B_max) are rejected by the API with HTTP 400 and a one-line message; the loop
is not disturbed.

API (``Authorization: Bearer <token>`` on every request):

* ``GET /status``: JSON with the last y, u, target, fallback flag and reason;
* ``POST /target`` with ``{"target": "400M"}`` (or a number in bit/s);
* ``GET /metrics``: Prometheus text (needs ``prometheus-client``).

The token is generated at start and written, with the API address and the
daemon's pid, to a 0600 JSON file (``/run/scidmz/control.token`` as root,
``~/.scidmz/control.token`` otherwise) that ``ControlClient`` reads; the file
is removed on shutdown.

Log: one JSON object per line, per period ``{"k", "time", "t", "y", "u",
"u_policy", "target", "fallback", "reason"}`` and events
``{"event": "start"|"target"|"fallback"|"recovered"|"stop", ...}``.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import math
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..actuators.base import ActuatorError
from ..fileio import atomic_write_text
from ..plant.base import Plant
from ..policies.base import Policy
from ..state import STATE_FIELDS, History
from ..units import format_rate, parse_rate

__all__ = [
    "ControlDaemon",
    "ControlClient",
    "default_token_file",
    "parse_api_address",
    "DEFAULT_API",
]

log = logging.getLogger("scidmz.control")

DEFAULT_API = "127.0.0.1:8642"
_MAX_BODY = 4096


def default_token_file() -> Path:
    """Where the daemon writes (and the client reads) the token: /run/scidmz as root, else ~/.scidmz."""
    env = os.environ.get("SCIDMZ_CONTROL_TOKEN")
    if env:
        return Path(env)
    if os.geteuid() == 0 and Path("/run").is_dir():
        return Path("/run/scidmz/control.token")
    return Path.home() / ".scidmz" / "control.token"


def parse_api_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` with a loopback HOST; anything else is a one-line ValueError."""
    host, sep, port_s = str(text).rpartition(":")
    host = host.strip("[]")
    if not sep or not host:
        raise ValueError(f"API address {text!r}: expected HOST:PORT, e.g. {DEFAULT_API}")
    try:
        port = int(port_s)
    except ValueError:
        raise ValueError(f"API address {text!r}: port must be a number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"API address {text!r}: port out of range")
    try:
        loop = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loop = False
    if not loop:
        raise ValueError(f"API address {text!r}: the control API only listens on loopback (127.0.0.1, ::1)")
    return host, port


@dataclass
class _Sample:
    t: float
    y: np.ndarray  # (7,)


class ControlDaemon:
    """Run ``policy`` on ``plant`` in real time until stopped (see module doc).

    ``api``: ``HOST:PORT`` on loopback (port 0 picks a free one) or None for
    no API. ``log``: a path, an open text stream, or None (no log).
    ``duration``: stop after this many seconds of loop time (None: run until
    ``stop()``/SIGTERM). ``telemetry_timeout`` defaults to 2T; the very first
    step gets ``max(telemetry_timeout, startup_grace)``.
    """

    def __init__(
        self,
        plant: Plant,
        policy: Policy,
        target: float,
        *,
        api: str | None = DEFAULT_API,
        token_file: str | os.PathLike[str] | None = None,
        log: str | os.PathLike[str] | IO[str] | None = None,
        duration: float | None = None,
        telemetry_timeout: float | None = None,
        seed: int | None = None,
        startup_grace: float = 15.0,
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
        self.seed = seed
        # The first step may include one-off work (JIT compilation of the fluid kernel, traffic
        # start-up in a testbed), so the first sample gets this much time before it counts as lost.
        self.startup_grace = float(startup_grace)
        self.api_address = parse_api_address(api) if api is not None else None
        self.token_file = Path(token_file) if token_file is not None else default_token_file()
        self.token = secrets.token_urlsafe(32)
        self._log_target = log
        self._log: IO[str] | None = None
        self._own_log = False
        self._lock = threading.Lock()
        self._log_lock = threading.Lock()
        self._stop = threading.Event()
        self._stop_reason = ""
        self._server: ThreadingHTTPServer | None = None
        self._server_thread: threading.Thread | None = None
        self._step_thread: threading.Thread | None = None
        self._started = False
        # -- state shown by /status --
        self.k = 0
        self.last: _Sample | None = None
        self.u: float | None = None
        self.u_policy: float | None = None
        self.fallback = False
        self.fallback_reason: str | None = None
        self.fallback_periods = 0
        self.errors: dict[str, int] = {}
        self._last_sample_wall: float | None = None
        self._t_start = time.monotonic()
        self._metrics: Any = None

    # -- target --------------------------------------------------------------------------------
    @property
    def target(self) -> float:
        with self._lock:
            return self._target

    def set_target(self, value: str | float, source: str = "api") -> float:
        """Validate and apply a new DTN target (``"400M"`` or bit/s); ValueError with a clear message."""
        if isinstance(value, str):
            bps = parse_rate(value, "target")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            bps = float(value)
        else:
            raise ValueError(f"target must be a rate like '400M' or a number of bit/s, got {value!r}")
        if not math.isfinite(bps):
            raise ValueError(f"target must be finite, got {value!r}")
        bps = self.scenario.check_target(bps)
        with self._lock:
            old, self._target = self._target, bps
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
                "fallback_periods": self.fallback_periods,
                "errors": dict(self.errors),
                "last_sample_age": None if self._last_sample_wall is None else now - self._last_sample_wall,
                "period": self.period,
                "capacity": self.scenario.capacity,
                "policy": getattr(self.policy, "name", type(self.policy).__name__),
                "plant": type(self.plant).__name__,
                "scenario": self.scenario.name,
                "api": None if self.api_address is None else f"{self.api_address[0]}:{self.api_address[1]}",
            }

    # -- lifecycle -----------------------------------------------------------------------------------
    def stop(self, reason: str = "stop requested") -> None:
        """Ask the loop to finish the current period and shut down (safe from any thread or a signal)."""
        if not self._stop.is_set():
            self._stop_reason = reason
            self._stop.set()

    def start_api(self) -> tuple[str, int]:
        """Start the HTTP API and write the token file; returns the bound (host, port)."""
        if self.api_address is None:
            raise RuntimeError("this daemon was built without an API address")
        self._claim_token_file()
        host, port = self.api_address
        handler = _make_handler(self)
        try:
            server_cls = _Server6 if ":" in host else _Server
            self._server = server_cls((host, port), handler)
        except OSError as exc:
            self._remove_token_file()
            raise RuntimeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        self.api_address = (host, int(self._server.server_address[1]))
        self._write_token_file()
        self._server_thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                               name="scidmz-control-api", daemon=True)
        self._server_thread.start()
        return self.api_address

    def run(self) -> dict[str, Any]:
        """Run the loop until stopped or ``duration`` is over; always closes the plant and the API."""
        self._open_log()
        try:
            if self.api_address is not None and self._server is None:
                self.start_api()
            self._started = True
            self._write({"event": "start", "time": time.time(), "target": self.target,
                         "policy": self.status()["policy"], "plant": type(self.plant).__name__,
                         "scenario": self.scenario.name, "period": self.period,
                         "api": self.status()["api"], "pid": os.getpid()})
            self._loop()
        finally:
            summary = self._shutdown()
        return summary

    def _shutdown(self) -> dict[str, Any]:
        self._stop.set()
        problems: list[str] = []
        if self._step_thread is not None and self._step_thread.is_alive():
            # A step blocked on lost telemetry: closing the plant is what unblocks it.
            self._step_thread.join(self.telemetry_timeout + self.period)
        try:
            self.plant.close()
        except Exception as exc:  # report, but keep shutting the rest down
            problems.append(f"plant close failed: {exc}")
        if self._step_thread is not None:
            self._step_thread.join(5.0)
            if self._step_thread.is_alive():
                problems.append("the plant step thread is still blocked after close")
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._server_thread is not None:
            self._server_thread.join(5.0)
            self._server_thread = None
        self._remove_token_file()
        st = self.status()
        summary = {"periods": self.k, "fallback_periods": self.fallback_periods, "errors": st["errors"],
                   "target": st["target"], "u": st["u"], "reason": self._stop_reason or "finished",
                   "problems": problems}
        self._write({"event": "stop", "time": time.time(), **summary})
        self._close_log()
        return summary

    # -- the loop -------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        sc = self.scenario
        state0 = self.plant.reset(self.seed)
        self.policy.reset(sc, 1)
        hist = History(state0.y, capacity_hint=256)
        with self._lock:
            self.last = _Sample(float(state0.t), np.asarray(state0.y[0], dtype=np.float64))
            self._last_sample_wall = time.monotonic()
        t_loop = time.monotonic()
        failure: str | None = None  # why the *next* period must use the trivial rate
        actuator = getattr(self.plant, "actuator", None)
        while not self._stop.is_set():
            if self.duration is not None and time.monotonic() - t_loop >= self.duration - 1e-9:
                self.stop("duration reached")
                break
            period_start = time.monotonic()
            target = self.target
            u_policy: float | None = None
            reason = failure
            if reason is None:
                try:
                    raw = np.asarray(self.policy.decide(hist, np.array([target])), dtype=np.float64).reshape(-1)
                    u_policy = float(raw[0])
                except Exception as exc:
                    reason = f"policy error: {_one_line(exc)}"
                    self._count("policy")
                else:
                    if not math.isfinite(u_policy):
                        reason = f"policy returned a non-finite rate ({u_policy})"
                        self._count("policy_nonfinite")
            if reason is None:
                u = float(np.clip(u_policy, sc.u_min, sc.u_max))
            else:
                u = sc.trivial_rate(target)
            self._set_fallback(reason, u)

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
            while True:
                # Short slices so that a stop request is seen while a step is pending.
                if done.wait(min(max(next_check - time.monotonic(), 0.0), 0.1)):
                    break
                if self._stop.is_set():
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
                self._set_fallback(why, fb)
                self._record(None, fb, None, why)
                lost_logged = True
                next_check = time.monotonic() + self.period
            if not done.is_set():
                break  # stopping while the step is still blocked; _shutdown closes the plant
            if "error" in box:
                exc = box["error"]
                kind = "actuator" if _is_actuator_error(exc) else "plant"
                failure = f"{kind} call failed: {_one_line(exc)}"
                self._count(kind)
                self._set_fallback(failure, u)
                self._record(None, u, u_policy, failure)
            else:
                st = box["state"]
                y = np.asarray(st.y[0], dtype=np.float64)
                now = time.monotonic()
                if not (np.all(np.isfinite(y)) and math.isfinite(float(st.t))):
                    failure = "telemetry sample is not finite"
                    self._count("telemetry_invalid")
                    self._set_fallback(failure, u)
                    self._record(None, u, u_policy, failure)
                else:
                    hist.append(np.array([u]), y[None, :], np.array([target]))
                    if len(hist) >= _HISTORY_KEEP * 4:
                        hist = _trim(hist, _HISTORY_KEEP)
                    with self._lock:
                        self.last = _Sample(float(st.t), y)
                        self._last_sample_wall = now
                    if lost_logged:
                        # The loop kept applying the fallback while waiting; this sample closes the gap.
                        failure = "telemetry recovering (first sample after a loss)"
                    self._record(y, u, u_policy, reason if not lost_logged else failure)
            # Pace to the period grid: real-time plants already took T, the fluid plant took ~0.
            rest = period_start + self.period - time.monotonic()
            if rest > 0:
                self._stop.wait(rest)

    # -- helpers ---------------------------------------------------------------------------------------------
    def _set_fallback(self, reason: str | None, u: float) -> None:
        with self._lock:
            was = self.fallback
            self.fallback = reason is not None
            self.fallback_reason = reason
            self.u = u
        if reason is not None and not was:
            log.warning("falling back to the trivial rate %s: %s", format_rate(u), reason)
            self._write({"event": "fallback", "time": time.time(), "u": u, "reason": reason})
        elif reason is None and was:
            log.warning("policy back in control")
            self._write({"event": "recovered", "time": time.time()})

    def _record(self, y: np.ndarray | None, u: float, u_policy: float | None, reason: str | None) -> None:
        with self._lock:
            self.k += 1
            self.u_policy = u_policy
            if reason is not None:
                self.fallback_periods += 1
            t = None if self.last is None else self.last.t
            target = self._target
        self._write({
            "k": self.k, "time": time.time(), "t": t if y is not None else None,
            "y": None if y is None else dict(zip(STATE_FIELDS, map(float, y), strict=True)),
            "u": u, "u_policy": u_policy, "target": target,
            "fallback": reason is not None, "reason": reason,
        })
        self._update_metrics()

    def _count(self, kind: str) -> None:
        with self._lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1

    # -- log -------------------------------------------------------------------------------------------------
    def _open_log(self) -> None:
        t = self._log_target
        if t is None:
            self._log = None
        elif isinstance(t, str | os.PathLike):
            path = Path(t)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - closed in _close_log
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
        line = json.dumps(obj, default=_json_default)
        with self._log_lock:
            self._log.write(line + "\n")
            self._log.flush()

    # -- token file --------------------------------------------------------------------------------------------
    def _claim_token_file(self) -> None:
        path = self.token_file
        try:
            info = json.loads(path.read_text())
            pid = int(info.get("pid", 0))
        except (OSError, ValueError, TypeError, AttributeError):
            return
        if pid and pid != os.getpid() and _pid_alive(pid):
            raise RuntimeError(f"another control daemon (pid {pid}) owns {path}; stop it or pass --token-file")

    def _write_token_file(self) -> None:
        path = self.token_file
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        assert self.api_address is not None
        host, port = self.api_address
        body = json.dumps({"token": self.token, "api": f"{host}:{port}", "pid": os.getpid()})
        atomic_write_text(path, body + "\n", mode=0o600)  # the token is a secret

    def _remove_token_file(self) -> None:
        try:
            if json.loads(self.token_file.read_text()).get("token") == self.token:
                self.token_file.unlink()
        except (OSError, ValueError, AttributeError):
            pass

    # -- Prometheus ----------------------------------------------------------------------------------------------
    def metrics_text(self) -> bytes | None:
        """Prometheus exposition of y, u and target; None without prometheus-client."""
        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            return None
        with self._lock:
            if self._metrics is None:
                self._metrics = _Metrics()
        self._update_metrics()
        from prometheus_client import generate_latest

        return generate_latest(self._metrics.registry)

    def _update_metrics(self) -> None:
        m = self._metrics
        if m is None:
            return
        st = self.status()
        for name, v in (st["y"] or {}).items():
            m.y.labels(name).set(v)
        m.u.set(st["u"] if st["u"] is not None else float("nan"))
        m.target.set(st["target"])
        m.fallback.set(1.0 if st["fallback"] else 0.0)
        m.periods.set(st["k"])


class _Metrics:
    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Gauge

        self.registry = CollectorRegistry()
        self.y = Gauge("scidmz_state", "Last NetworkState y(t), SI units", ["var"], registry=self.registry)
        self.u = Gauge("scidmz_campus_rate_bps", "Campus shaper rate u applied (bit/s)", registry=self.registry)
        self.target = Gauge("scidmz_dtn_target_bps", "DTN target rate (bit/s)", registry=self.registry)
        self.fallback = Gauge("scidmz_fallback", "1 while the trivial fallback rate is applied",
                              registry=self.registry)
        self.periods = Gauge("scidmz_periods", "Control periods completed", registry=self.registry)


_HISTORY_KEEP = 1024  # periods of history a policy sees; a daemon runs for months


def _trim(hist: History, keep: int) -> History:
    """The last ``keep`` periods of ``hist`` as a new History (bounded memory, same last_y/last_u)."""
    n = len(hist)
    out = History(hist.y[n - keep - 1], capacity_hint=keep * 4)
    for j in range(n - keep, n):
        out.append(hist.u[j], hist.y[j], hist.target[j])
    return out


def _step_into(plant: Plant, u: float, box: dict[str, Any], done: threading.Event) -> None:
    try:
        box["state"] = plant.step(np.array([u]))
    except BaseException as exc:  # delivered to the loop thread, which decides what it means
        box["error"] = exc
    finally:
        done.set()


def _is_actuator_error(exc: BaseException | None) -> bool:
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, ActuatorError):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _json_default(o: Any) -> Any:
    from ..state import json_default

    try:
        return json_default(o)
    except TypeError:
        return str(o)  # a log/API line must never fail on an odd value


# -- HTTP API ----------------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


def _make_handler(daemon: ControlDaemon) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "scidmz-control"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            log.debug("api: " + format, *args)

        def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, code: int, obj: dict[str, Any]) -> None:
            self._send(code, (json.dumps(obj, default=_json_default) + "\n").encode())

        def _authorised(self) -> bool:
            got = self.headers.get("Authorization", "")
            ok = got.startswith("Bearer ") and hmac.compare_digest(got[7:].strip().encode(), daemon.token.encode())
            if not ok:
                self._json(401, {"error": "missing or wrong token (Authorization: Bearer <token from the token file>)"})
            return ok

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            if not self._authorised():
                return
            if self.path == "/status":
                self._json(200, daemon.status())
            elif self.path == "/metrics":
                text = daemon.metrics_text()
                if text is None:
                    self._json(404, {"error": "prometheus-client is not installed (pip install prometheus-client)"})
                else:
                    self._send(200, text, "text/plain; version=0.0.4; charset=utf-8")
            else:
                self._json(404, {"error": f"no such endpoint {self.path!r} (GET /status, GET /metrics, POST /target)"})

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            if not self._authorised():
                return
            if self.path != "/target":
                self._json(404, {"error": f"no such endpoint {self.path!r} (POST /target)"})
                return
            try:
                n = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                n = -1
            if not 0 < n <= _MAX_BODY:
                self._json(400, {"error": f"request body must be 1..{_MAX_BODY} bytes of JSON"})
                return
            raw = self.rfile.read(n)
            try:
                body = json.loads(raw.decode("utf-8"))
                value = body["target"]
            except (ValueError, UnicodeDecodeError, KeyError, TypeError):
                self._json(400, {"error": 'body must be JSON like {"target": "400M"}'})
                return
            try:
                new = daemon.set_target(value)
            except ValueError as exc:
                self._json(400, {"error": str(exc)})
                return
            self._json(200, {"target": new})

    return Handler


# -- client ----------------------------------------------------------------------------------------------------------


class ControlClient:
    """Talks to a running daemon: reads the token (and the API address) from the token file."""

    def __init__(self, api: str | None = None, token_file: str | os.PathLike[str] | None = None,
                 timeout: float = 5.0) -> None:
        path = Path(token_file) if token_file is not None else default_token_file()
        try:
            info = json.loads(path.read_text())
            self.token = str(info["token"])
        except FileNotFoundError:
            raise FileNotFoundError(
                f"no control token file at {path}: is `scidmz control run` running? (or pass --token-file)"
            ) from None
        except PermissionError:
            raise PermissionError(f"cannot read the control token file {path} (run as its owner)") from None
        except (ValueError, KeyError, TypeError):
            raise ValueError(f"{path} is not a control token file") from None
        host, port = parse_api_address(api or info.get("api") or DEFAULT_API)
        self.base = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        self.timeout = timeout

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        import urllib.error
        import urllib.request

        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read().decode())
        except urllib.error.HTTPError as exc:
            try:
                msg = json.loads(exc.read().decode()).get("error", exc.reason)
            except ValueError:
                msg = exc.reason
            if exc.code == 400:
                raise ValueError(msg) from None
            if exc.code == 401:
                raise PermissionError(f"control API rejected the token: {msg}") from None
            raise RuntimeError(f"control API {path}: HTTP {exc.code}: {msg}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RuntimeError(f"cannot reach the control daemon at {self.base}: {reason}") from None

    def status(self) -> dict[str, Any]:
        return self._request("GET", "/status")

    def set_target(self, target: str | float) -> float:
        return float(self._request("POST", "/target", {"target": target})["target"])


def run_daemon(
    *,
    scenario: str,
    overrides: list[str] | None = None,
    plant: str = "fluid",
    policy: str = "trivial",
    target: str = "600M",
    model: str | None = None,
    gains: str | None = None,
    api: str | None = DEFAULT_API,
    token_file: str | None = None,
    log_path: str | None = None,
    duration: str | None = None,
    seed: int | None = None,
    plant_kwargs: dict[str, Any] | None = None,
    on_start: Callable[[ControlDaemon], None] | None = None,
) -> dict[str, Any]:
    """Build scenario, plant and policy from CLI-style strings and run the daemon (``scidmz control run``)."""
    import sys

    from ..plant.base import PLANT_KINDS, make_plant
    from ..policies import make_policy
    from ..scenario import load_scenario
    from ..units import parse_time

    sc = load_scenario(scenario)
    if overrides:
        sc = sc.with_overrides(overrides)
    tgt = sc.check_target(parse_rate(target, "target"))
    dur = parse_time(duration, "duration") if duration is not None else None
    if plant not in PLANT_KINDS:
        raise ValueError(f"unknown plant '{plant}' (choose from {', '.join(PLANT_KINDS)})")
    if policy == "mlc":
        if not model or not gains:
            raise ValueError("policy mlc needs --model DIR and --gains FILE")
        pol = make_policy("mlc", model=model, gains=gains)
    else:
        pol = make_policy(policy)
    if api is not None:
        parse_api_address(api)  # fail on a bad address before building a testbed
    plant_obj = make_plant(plant, sc, **(plant_kwargs or {}))
    try:
        d = ControlDaemon(plant_obj, pol, tgt, api=api, token_file=token_file,
                          log=log_path if log_path not in (None, "-") else sys.stdout,
                          duration=dur, seed=seed)
    except BaseException:
        plant_obj.close()
        raise
    if on_start is not None:
        on_start(d)
    return d.run()
