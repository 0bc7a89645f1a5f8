"""``ControlDaemon``: the control loop wired to its HTTP API, its metrics and its token file.

The composition of ``scidmz control run``: ``loop.ControlLoop`` (the real-time
closed loop and its fallback rules), ``metrics.DaemonMetrics`` (fed by the loop
every period, when prometheus-client is installed), ``api.Servers`` (the
token-protected API with the dashboard, and the token-less read-only
``/metrics`` listener) and ``tokenfile.TokenFile`` (the 0600 file a client
reads the token and the address from). The loop knows none of them but the
metrics observer; the API sees the daemon only through ``api.DaemonView``.
"""

from __future__ import annotations

import os
import secrets
from typing import IO, Any

from ..plant.base import Plant
from ..policies.base import Policy
from .api import Servers
from .loop import ControlLoop
from .tokenfile import DEFAULT_API, TokenFile, parse_api_address, parse_listen_address

__all__ = ["ControlDaemon"]


def _prometheus_metrics() -> Any:
    try:
        from .prometheus import DaemonMetrics
    except ImportError:  # prometheus-client is optional; /metrics then answers 404
        return None
    return DaemonMetrics()


class ControlDaemon(ControlLoop):
    """Run ``policy`` on ``plant`` in real time with the HTTP API, until stopped.

    ``api``: ``HOST:PORT`` on loopback (port 0 picks a free one) or None for
    no API. ``metrics_addr``: ``HOST:PORT`` of a token-less, read-only
    ``/metrics`` listener for a Prometheus server (any address), or None.
    ``token_file``: where the API token is written (default as for
    ``tokenfile.default_token_file``). The other options are the loop's
    (``loop.ControlLoop``).
    """

    def __init__(
        self,
        plant: Plant,
        policy: Policy,
        target: float,
        *,
        api: str | None = DEFAULT_API,
        metrics_addr: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        log: str | os.PathLike[str] | IO[str] | None = None,
        duration: float | None = None,
        telemetry_timeout: float | None = None,
        seed: int | None = None,
        startup_grace: float = 15.0,
        shadow: bool = False,
    ) -> None:
        super().__init__(plant, policy, target, log=log, duration=duration, telemetry_timeout=telemetry_timeout,
                         seed=seed, startup_grace=startup_grace, metrics=_prometheus_metrics(), shadow=shadow)
        self.api_address = parse_api_address(api) if api is not None else None
        self.metrics_address = parse_listen_address(metrics_addr, "metrics address") if metrics_addr else None
        self.token = secrets.token_urlsafe(32)
        self._token = TokenFile(token_file, self.token)
        self.token_file = self._token.path
        self._servers: Servers | None = None

    def _service_status(self) -> dict[str, Any]:
        return {
            "api": None if self.api_address is None else f"{self.api_address[0]}:{self.api_address[1]}",
            "metrics": None if self.metrics_address is None else
            f"{self.metrics_address[0]}:{self.metrics_address[1]}",
        }

    def start_api(self) -> tuple[str, int]:
        """Start the HTTP API (and the metrics listener), write the token file; returns the API's (host, port)."""
        if self.api_address is None:
            raise RuntimeError("this daemon was built without an API address")
        self._token.check_writable()
        self._token.claim()
        servers = Servers(self)
        servers.bind()  # bind errors surface here, in the caller's thread, as one line
        try:
            self._token.write(servers.api_bound)
        except BaseException:
            servers.close_sockets()
            raise
        self._servers = servers
        self.api_address = servers.api_bound
        self.metrics_address = servers.metrics_bound
        servers.start()
        return self.api_address

    def _start_services(self) -> None:
        if self._servers is not None:
            return
        if self.api_address is not None:
            self.start_api()
        elif self.metrics_address is not None:
            self._servers = Servers(self)
            self._servers.bind()
            self.metrics_address = self._servers.metrics_bound
            self._servers.start()

    def _stop_services(self) -> None:
        if self._servers is not None:
            self._servers.stop()
            self._servers = None
        self._token.remove()
