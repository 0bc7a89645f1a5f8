"""The daemon's HTTP side on uvicorn + Starlette: the token-protected control API with its
dashboard on loopback, and an optional token-less read-only ``/metrics`` listener.

Why an async server: the old ``ThreadingHTTPServer`` had a listen
backlog of 5, no socket timeouts and one thread per connection, so 300
half-open connections held 304 threads and a Content-Length longer than the
body blocked and then applied the partial body. Here one event-loop thread
serves every connection; a connection must send a complete request head
within ``HEAD_TIMEOUT`` and its body within ``BODY_TIMEOUT`` (408 otherwise,
nothing applied), idle keep-alive connections close after
``KEEPALIVE_TIMEOUT``, at most ``MAX_CONNECTIONS`` are served at once (503
beyond), and the backlog is ``BACKLOG``. The numbers are ours: a loopback
admin API answers in milliseconds, so seconds are generous.

API (``Authorization: Bearer <token>`` on every JSON request):

* ``GET /status``: JSON with the last y, u, target, fallback flag, reason and cause, error counts;
* ``GET /history?since=K``: the periods after K still kept (for the dashboard);
* ``POST /target`` with ``{"target": "400M"}`` (or a number in bit/s);
* ``GET /metrics``: Prometheus text (also on ``--metrics-addr`` without a token);
* ``GET /`` and ``/static/...``: the live dashboard (static files; the page asks for the token
  and sends it with each JSON request, so without it the page shows nothing but the refusal).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import socket
import threading
from importlib import resources
from typing import Any, Protocol

from ..limits import BOUNDS

__all__ = ["Servers", "DaemonView", "ClientErrorLog", "build_api_app", "build_metrics_app", "MAX_BODY"]

log = logging.getLogger("scidmz.control")

MAX_BODY = int(BOUNDS["request_bytes"].hi)  # bytes of a POST /target body (limits.BOUNDS)
HEAD_TIMEOUT = 5.0
BODY_TIMEOUT = 5.0
KEEPALIVE_TIMEOUT = 5
MAX_CONNECTIONS = 1024
BACKLOG = 1024
_STATIC = "static"


class DaemonView(Protocol):
    """What the HTTP side needs of the daemon (``controller.serve.ControlDaemon`` provides it)."""

    token: str
    k: int
    period: float
    api_address: tuple[str, int] | None
    metrics_address: tuple[str, int] | None

    def status(self) -> dict[str, Any]: ...

    def recent(self, since: int = 0) -> list[dict[str, Any]]: ...

    def set_target(self, value: str | float, source: str = "api") -> float: ...

    def metrics_text(self) -> bytes | None: ...

    def client_error(self, kind: str) -> None: ...


def _json(code: int, obj: Any) -> Any:
    from starlette.responses import Response

    from ..state import json_default_lenient
    from ..strictjson import dumps

    body = dumps(obj, default=json_default_lenient) + "\n"
    return Response(body, status_code=code, media_type="application/json",
                    headers={"Cache-Control": "no-store"})


def build_api_app(daemon: DaemonView) -> Any:
    """The Starlette app of the control API and the dashboard."""
    from starlette.applications import Starlette
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import FileResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    static_dir = resources.files("scidmz.controller") / _STATIC
    token = daemon.token.encode()

    def authorised(request: Request) -> bool:
        got = request.headers.get("authorization", "")
        return got.startswith("Bearer ") and hmac.compare_digest(got[7:].strip().encode(), token)

    def refused() -> Any:
        daemon.client_error("unauthorized")
        return _json(401, {"error": "missing or wrong token (Authorization: Bearer <token from the token file>)"})

    async def status(request: Request) -> Any:
        if not authorised(request):
            return refused()
        return _json(200, daemon.status())

    async def history(request: Request) -> Any:
        if not authorised(request):
            return refused()
        try:
            since = int(request.query_params.get("since", "0"))
        except ValueError:
            return _json(400, {"error": "since must be an integer period number"})
        return _json(200, {"k": daemon.k, "period": daemon.period, "periods": daemon.recent(since)})

    async def metrics(request: Request) -> Any:
        if not authorised(request):
            return refused()
        text = daemon.metrics_text()
        if text is None:
            return _json(404, {"error": "prometheus-client is not installed (pip install prometheus-client)"})
        return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    async def target(request: Request) -> Any:
        if not authorised(request):
            return refused()
        try:
            n = int(request.headers.get("content-length", "-1"))
        except ValueError:
            n = -1
        if not 0 < n <= MAX_BODY:
            daemon.client_error("bad_body")
            return _json(400, {"error": f"request body must be 1..{MAX_BODY} bytes of JSON (with Content-Length)"})
        try:
            raw = await asyncio.wait_for(request.body(), BODY_TIMEOUT)
        except TimeoutError:
            # Content-Length promised more than arrived: refuse, never apply a partial body.
            daemon.client_error("partial_body")
            return _json(408, {"error": f"request body not complete within {BODY_TIMEOUT:g} s"})
        except ClientDisconnect:
            daemon.client_error("disconnect")
            return Response(status_code=400)
        if len(raw) != n:
            daemon.client_error("partial_body")
            return _json(400, {"error": "request body shorter than its Content-Length"})
        try:
            body = json.loads(raw.decode("utf-8"))
            value = body["target"]
        except (ValueError, UnicodeDecodeError, KeyError, TypeError, RecursionError):
            daemon.client_error("bad_body")
            return _json(400, {"error": 'body must be JSON like {"target": "400M"}'})
        try:
            new = daemon.set_target(value)
        except ValueError as exc:
            return _json(400, {"error": str(exc).splitlines()[0] if str(exc) else "bad target"})
        return _json(200, {"target": new})

    async def index(request: Request) -> Any:
        return FileResponse(str(static_dir / "index.html"), headers={"Cache-Control": "no-store"})

    async def not_found(request: Request, exc: Exception) -> Any:
        return _json(404, {"error": f"no such endpoint {request.url.path!r} "
                                    "(GET /status, GET /history, GET /metrics, POST /target, GET / dashboard)"})

    async def not_allowed(request: Request, exc: Exception) -> Any:
        return _json(405, {"error": f"{request.method} not allowed on {request.url.path!r}"})

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/status", status, methods=["GET"]),
        Route("/history", history, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/target", target, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=str(static_dir)), name="static"),
    ]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})


def build_metrics_app(daemon: DaemonView) -> Any:
    """Read-only, token-less ``GET /metrics`` for a Prometheus server (the control API stays on loopback)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route

    async def metrics(request: Request) -> Any:
        text = daemon.metrics_text()
        if text is None:
            return PlainTextResponse("prometheus-client is not installed\n", status_code=404)
        return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    return Starlette(routes=[Route("/metrics", metrics, methods=["GET"])])


#: At most one log line per kind of client error in this many seconds (ours); the rest are counted
#: (``/metrics``: scidmz_http_client_errors_total{kind}) and summarised in the next line.
LOG_INTERVAL = 10.0


class ClientErrorLog(logging.Filter):
    """uvicorn's and h11's log records about clients, as operators want them.

    Attached to the uvicorn loggers: every record is classified (``metrics.CLIENT_ERRORS``) and
    counted through ``controller.client_error``; at most one line per kind per ``LOG_INTERVAL`` is
    let through, rewritten as one line ("HTTP client error (bad_request): ...; 12 more since"),
    never with a traceback (``SCIDMZ_DEBUG=1`` keeps them). 50 partial bodies cut by SIGTERM
    printed 2,143 lines of tracebacks before this.
    """

    def __init__(self, daemon: DaemonView, interval: float = LOG_INTERVAL, clock: Any = None) -> None:
        super().__init__()
        import os
        import time

        self.daemon = daemon
        self.interval = float(interval)
        self._clock = clock or time.monotonic
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._debug = bool(os.environ.get("SCIDMZ_DEBUG"))
        self._lock = threading.Lock()

    @staticmethod
    def classify(record: logging.LogRecord) -> tuple[str, str]:
        """(kind, one-line detail) of a uvicorn record."""
        msg = record.getMessage().strip()
        exc = record.exc_info[1] if record.exc_info else None
        if msg.startswith("Invalid HTTP request"):
            return "bad_request", "malformed HTTP request (refused with 400)"
        if msg.startswith("Exceeded concurrency limit"):
            return "overload", f"more than {MAX_CONNECTIONS} connections (refused with 503)"
        if exc is not None:
            name = type(exc).__name__
            if isinstance(exc, asyncio.CancelledError | ConnectionError) or name == "ClientDisconnect":
                return "disconnect", "a request was cut short (client gone, or the daemon stopping)"
            if name in ("LocalProtocolError", "RemoteProtocolError"):
                return "bad_request", f"HTTP protocol error after a malformed request ({name})"
            text = " ".join(str(exc).split())[:200]
            return "app_error", f"{msg.splitlines()[0] if msg else 'error'}: {name}: {text}".rstrip(": ")
        return ("app_error" if record.levelno >= logging.ERROR else "bad_request"), " ".join(msg.split())[:200]

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        kind, detail = self.classify(record)
        try:
            self.daemon.client_error(kind)
        except Exception:  # noqa: BLE001 - counting must never break the server's logging
            pass
        now = self._clock()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self.interval:
                self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
                return False
            self._last[kind] = now
            more = self._suppressed.pop(kind, 0)
        tail = f" ({more} more since the last line; all counted in /metrics)" if more else ""
        record.msg = f"HTTP client error ({kind}): {detail}{tail}"
        record.args = ()
        if not self._debug:
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
        return True


#: uvicorn's loggers the filter sits on (a logger's filters see only its own records).
_UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.asgi")


def _protocol_class() -> type:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadTimeoutProtocol(H11Protocol):
        """uvicorn's h11 protocol, plus: every request head must be complete in time.

        uvicorn times out idle keep-alive connections, but not one that keeps sending a
        request head that never ends (a slowloris), first request or later; this closes
        a connection on which no new request started within HEAD_TIMEOUT of connecting
        or of the previous response."""

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_head_timer()

        def _arm_head_timer(self) -> None:
            timer = getattr(self, "_head_timer", None)
            if timer is not None:
                timer.cancel()
            self._head_timer = self.loop.call_later(HEAD_TIMEOUT, self._head_timeout, self.cycle)

        def _head_timeout(self, cycle_when_armed: Any) -> None:
            if self.cycle is cycle_when_armed and not self.transport.is_closing():
                self.transport.close()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._head_timer.cancel()
            super().connection_lost(exc)

    return HeadTimeoutProtocol


def _bind(host: str, port: int, what: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=BACKLOG, reuse_port=False)
    except (OSError, OverflowError) as exc:
        raise RuntimeError(f"cannot listen on {host}:{port} ({what}): {getattr(exc, 'strerror', None) or exc}") \
            from None


class Servers:
    """Both listeners on one event-loop thread (``scidmz-control-api``)."""

    def __init__(self, daemon: DaemonView) -> None:
        self.daemon = daemon
        self._socks: dict[str, socket.socket] = {}
        self._servers: list[Any] = []
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.api_bound: tuple[str, int] | None = None
        self.metrics_bound: tuple[str, int] | None = None
        self._log_filter: ClientErrorLog | None = None

    def bind(self) -> None:
        d = self.daemon
        try:
            if d.api_address is not None:
                s = _bind(*d.api_address, "control API")
                self._socks["api"] = s
                self.api_bound = (d.api_address[0], int(s.getsockname()[1]))
            if d.metrics_address is not None:
                s = _bind(*d.metrics_address, "metrics")
                self._socks["metrics"] = s
                self.metrics_bound = (d.metrics_address[0], int(s.getsockname()[1]))
        except BaseException:
            self.close_sockets()
            raise

    def close_sockets(self) -> None:
        for s in self._socks.values():
            s.close()
        self._socks.clear()

    def start(self, timeout: float = 10.0) -> None:
        try:
            import starlette  # noqa: F401
            import uvicorn
        except ImportError as exc:
            self.close_sockets()
            raise RuntimeError(f"the control API needs uvicorn and starlette ({exc.name} is missing): "
                               "pip install 'scidmz[testbed]', or run with --no-api") from None

        proto = _protocol_class()
        self._log_filter = ClientErrorLog(self.daemon)
        for name in _UVICORN_LOGGERS:
            logging.getLogger(name).addFilter(self._log_filter)
        for kind, sock in self._socks.items():
            app = build_api_app(self.daemon) if kind == "api" else build_metrics_app(self.daemon)
            cfg = uvicorn.Config(app, http=proto, ws="none", lifespan="off", log_config=None,
                                 access_log=False, log_level="warning", backlog=BACKLOG,
                                 timeout_keep_alive=KEEPALIVE_TIMEOUT, limit_concurrency=MAX_CONNECTIONS,
                                 timeout_graceful_shutdown=1, server_header=False)
            self._servers.append((uvicorn.Server(cfg), sock))
        self._thread = threading.Thread(target=self._run, name="scidmz-control-api", daemon=True)
        self._thread.start()
        deadline = timeout
        while not self._ready.wait(0.05):
            deadline -= 0.05
            if self._error is not None or deadline <= 0 or not self._thread.is_alive():
                self.stop()
                raise RuntimeError(f"the HTTP server did not start: {self._error or 'timeout'}")
        if not all(srv.started for srv, _ in self._servers):
            self.stop()
            raise RuntimeError(f"the HTTP server did not start: {self._error or 'uvicorn gave up at start-up'}")

    def _run(self) -> None:
        async def main() -> None:
            tasks = [asyncio.create_task(srv.serve(sockets=[sock])) for srv, sock in self._servers]
            while not all(srv.started for srv, _ in self._servers):
                if any(t.done() for t in tasks):
                    break
                await asyncio.sleep(0.02)
            self._ready.set()
            await asyncio.gather(*tasks)

        try:
            asyncio.run(main())
        except BaseException as exc:  # reported to start(); a running daemon keeps its loop
            self._error = exc
            log.warning("HTTP server stopped: %s", exc)

    def stop(self) -> None:
        for srv, _ in self._servers:
            srv.should_exit = True
            srv.force_exit = True  # do not wait for open connections: SIGTERM must end the daemon in 2 s
        if self._thread is not None:
            self._thread.join(1.5)
            self._thread = None
        self.close_sockets()
        # The filter stays on until the server thread is gone: cancelled requests log as it ends.
        if self._log_filter is not None:
            for name in _UVICORN_LOGGERS:
                logging.getLogger(name).removeFilter(self._log_filter)
            self._log_filter = None
