"""The agent's token-protected HTTP API on its management address (uvicorn + Starlette).

Every request carries ``Authorization: Bearer <token>`` (``agent.token``):

* ``POST /rate`` ``{"rate": "400M"}`` (or bit/s): set the aggregate rate and grant the lease;
* ``POST /renew``: renew the lease (409 if none is held: it expired, set the rate again);
  both answer with ``delivered``, what the DTN's matching connections delivered over the
  agent's last period (frame bit/s, null before one was measured), so a controller serving
  several DTNs splits its rate on demand without another request;
* ``GET /status``: state, rate, lease, host caps, every matching connection with its share,
  pacing rate and delivery rates (from ``tcp_info``);
* ``GET /metrics``: Prometheus text.

Unlike the controller's loopback API this one listens on a management address
(the controller runs on another host), so the token is what guards it; run it
on a management network only (docs/deployment.md, "DTN host").
The server settings follow the controller's API (bounded bodies, keep-alive and
connection limits; its reasons are in ``controller/api.py``).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import socket
import threading
from typing import Any

__all__ = ["build_app", "AgentServer", "MAX_BODY", "parse_address"]

log = logging.getLogger("scidmz.agent")

MAX_BODY = 4096
BODY_TIMEOUT = 5.0


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) of the management API; a one-line ValueError otherwise."""
    host, sep, port_s = str(text).rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_s.isdigit() or not 0 <= int(port_s) <= 65535:
        raise ValueError(f"agent API address {text!r}: expected HOST:PORT, e.g. 10.0.0.7:8643")
    return host, int(port_s)


def _clean(o: Any) -> Any:
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_clean(v) for v in o]
    return o


def _json(code: int, obj: Any) -> Any:
    from starlette.responses import Response

    return Response(json.dumps(_clean(obj), allow_nan=False) + "\n", status_code=code,
                    media_type="application/json", headers={"Cache-Control": "no-store"})


async def _body(request: Any) -> tuple[dict[str, Any] | None, Any]:
    """The JSON object of a POST body (empty allowed), or an error response."""
    try:
        n = int(request.headers.get("content-length", "0"))
    except ValueError:
        n = -1
    if not 0 <= n <= MAX_BODY:
        return None, _json(400, {"error": f"request body must be 0..{MAX_BODY} bytes of JSON"})
    try:
        raw = await asyncio.wait_for(request.body(), BODY_TIMEOUT)
    except TimeoutError:
        return None, _json(408, {"error": "request body not complete in time"})
    if not raw:
        return {}, None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        return None, _json(400, {"error": 'body must be a JSON object like {"rate": "400M"}'})
    return doc, None


def build_app(agent: Any, token: str, metrics: Any = None) -> Any:
    """The Starlette app over ``agent`` (a ``core.DtnAgent``)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from ..units import parse_rate

    secret = token.encode()

    def authorised(request: Request) -> bool:
        got = request.headers.get("authorization", "")
        return got.startswith("Bearer ") and hmac.compare_digest(got[7:].strip().encode(), secret)

    def refused() -> Any:
        return _json(401, {"error": "missing or wrong token (Authorization: Bearer <token from the agent's token file>)"})

    async def status(request: Request) -> Any:
        return _json(200, agent.status()) if authorised(request) else refused()

    async def rate(request: Request) -> Any:
        if not authorised(request):
            return refused()
        body, err = await _body(request)
        if err is not None:
            return err
        try:
            v = agent.set_rate(parse_rate(body["rate"], "aggregate rate"))
        except (KeyError, TypeError):
            return _json(400, {"error": 'body must be JSON like {"rate": "400M"}'})
        except ValueError as exc:
            return _json(400, {"error": str(exc).splitlines()[0]})
        return _json(200, {"rate": v, "lease_remaining": agent.lease.remaining(), "delivered": agent.delivered()})

    async def renew(request: Request) -> Any:
        if not authorised(request):
            return refused()
        if not agent.renew():
            return _json(409, {"error": "no lease held (it expired or no rate was set): POST /rate again"})
        return _json(200, {"lease_remaining": agent.lease.remaining(), "delivered": agent.delivered()})

    async def lift(request: Request) -> Any:
        # The controller's clean exit: the DTN is unpaced at once rather than at the lease's end.
        if not authorised(request):
            return refused()
        return _json(200, {"lifted": agent.lift("released by the controller")})

    async def prom(request: Request) -> Any:
        if not authorised(request):
            return refused()
        if metrics is None:
            return _json(404, {"error": "prometheus-client is not installed (pip install prometheus-client)"})
        return Response(metrics.text(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def not_found(request: Request, exc: Exception) -> Any:
        return _json(404, {"error": f"no such endpoint {request.url.path!r} "
                                    "(POST /rate, POST /renew, POST /lift, GET /status, GET /metrics)"})

    async def not_allowed(request: Request, exc: Exception) -> Any:
        return _json(405, {"error": f"{request.method} not allowed on {request.url.path!r}"})

    routes = [Route("/status", status, methods=["GET"]), Route("/rate", rate, methods=["POST"]),
              Route("/lift", lift, methods=["POST"]), Route("/renew", renew, methods=["POST"]), Route("/metrics", prom, methods=["GET"])]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})


class AgentServer:
    """uvicorn on its own thread; ``bind`` in the caller's thread so a bad address is one line
    before anything else is done (the app is given to ``start``)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._sock: socket.socket | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def bind(self) -> tuple[str, int]:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        try:
            self._sock = socket.create_server((self.host, self.port), family=family, backlog=1024)
        except (OSError, OverflowError) as exc:
            raise ValueError(f"cannot listen on {self.host}:{self.port} (agent API): "
                             f"{getattr(exc, 'strerror', None) or exc}") from None
        self.port = int(self._sock.getsockname()[1])
        return self.host, self.port

    def start(self, app: Any, timeout: float = 10.0) -> None:
        import uvicorn

        cfg = uvicorn.Config(app, ws="none", lifespan="off", log_config=None, access_log=False,
                             log_level="warning", timeout_keep_alive=5, limit_concurrency=256,
                             timeout_graceful_shutdown=1, server_header=False)
        self._server = uvicorn.Server(cfg)
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve(sockets=[self._sock])),
                                        name="scidmz-agent-api", daemon=True)
        self._thread.start()
        waited = 0.0
        while not self._server.started:
            if waited > timeout or not self._thread.is_alive():
                self.stop()
                raise RuntimeError("the agent's HTTP server did not start")
            threading.Event().wait(0.02)
            waited += 0.02

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True
        if self._thread is not None:
            self._thread.join(2.0)
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
