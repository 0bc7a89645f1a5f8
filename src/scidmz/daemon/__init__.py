"""The live controller daemon (``scidmz control run``), split by concern (issue 8):

* ``loop``: ``ControlDaemon``, the real-time closed loop with its fallback rules;
* ``api``: the HTTP side (uvicorn + Starlette): token-protected JSON API, dashboard, metrics listener;
* ``metrics``: the Prometheus metrics (prometheus-client);
* ``tokenfile``: addresses and the 0600 token file;
* ``client``: ``ControlClient`` for ``control set-target|status``;
* ``build``: construction from CLI-style strings (``run_daemon``);
* ``static/``: the dashboard page with a vendored uPlot (MIT), served locally (no CDN).

Names are loaded lazily so that importing the package stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ControlDaemon", "ControlClient", "run_daemon", "build_daemon", "default_token_file",
           "parse_api_address", "DEFAULT_API"]

_WHERE = {"ControlDaemon": "loop", "ControlClient": "client", "run_daemon": "build", "build_daemon": "build",
          "default_token_file": "tokenfile", "parse_api_address": "tokenfile", "DEFAULT_API": "tokenfile"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        from importlib import import_module

        return getattr(import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(name)
