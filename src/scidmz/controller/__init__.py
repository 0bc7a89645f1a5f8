"""The live closed-loop controller (``scidmz control run``; the design card's ``controller/``),
split by concern:

* ``loop``: ``ControlLoop``, the real-time closed loop with its fallback rules (no HTTP);
* ``api``: the HTTP side (uvicorn + Starlette): token-protected JSON API, dashboard, metrics listener;
* ``serve``: ``ControlDaemon``, the composition: the loop, its API, metrics and token file;
* ``prometheus``: the Prometheus metrics (prometheus-client);
* ``tokenfile``: addresses and the 0600 token file;
* ``client``: ``ControlClient`` for ``control set-target|status``;
* ``build``: the daemon from a scenario, a policy object and a plant name (``run_daemon``);
* ``static/``: the dashboard page with a vendored uPlot (MIT), served locally (no CDN).

Names are loaded lazily so that importing the package stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ControlDaemon", "ControlLoop", "ControlClient", "run_daemon", "build_daemon", "default_token_file",
           "parse_api_address", "DEFAULT_API"]

_WHERE = {"ControlDaemon": "serve", "ControlLoop": "loop", "ControlClient": "client", "run_daemon": "build", "build_daemon": "build",
          "default_token_file": "tokenfile", "parse_api_address": "tokenfile", "DEFAULT_API": "tokenfile"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        from importlib import import_module

        return getattr(import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(name)
