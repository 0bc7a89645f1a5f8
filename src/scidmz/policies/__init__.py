"""Policies by kind (ARCHITECTURE.md "Four places to act"), each kind in its own folder:

- ``rate/``: the campus uplink rate u every T (``trivial``, ``none``, ``pi``, ``mlc``);
- ``host/``: the DTN streams' pacing rate every T (``pacing``);
- ``queue/``: K queues and flow -> queue rules every epoch (``jenks``);
- ``discipline/``: a per-packet discipline inside the bottleneck, configured
  from the target (``abc``, ``ffs``).

``base`` holds one ``Protocol`` per kind; ``registry`` builds any policy by name
(``make_policy``). Names are loaded lazily so that importing the package (and
``scidmz --help``) imports no policy module.
"""

from __future__ import annotations

from typing import Any

__all__ = ["make_policy", "register_policy", "policy_names", "policy_kind", "policy_options",
           "split_policy_overrides", "Policy", "RatePolicy", "HostPolicy", "QueuePolicy", "DisciplinePolicy",
           "TrivialPolicy", "NoShapingPolicy"]

_WHERE = {
    **{n: "registry" for n in ("make_policy", "register_policy", "policy_names", "policy_kind", "policy_options",
                               "split_policy_overrides")},
    **{n: "base" for n in ("Policy", "RatePolicy", "HostPolicy", "QueuePolicy", "DisciplinePolicy")},
    "TrivialPolicy": "rate.trivial",
    "NoShapingPolicy": "rate.trivial",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        from importlib import import_module

        return getattr(import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
