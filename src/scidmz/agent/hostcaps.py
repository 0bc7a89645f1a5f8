"""What the DTN host already caps: its egress qdiscs, read, never changed.

Many DTNs run ESnet's ``fq`` with a ``maxrate`` (a cap per flow) or a TBF/HTB
at the root of their WAN interface (a cap on the aggregate). Both apply on top
of a socket's pacing rate, and the lower wins. The agent never removes or
changes a qdisc: it reads, with iproute2's JSON output (``ip -j route get``,
``tc -j qdisc show``), the root qdisc of the interface each peer prefix is
routed through, and reports a cap when it is below what the agent grants
(``binding``): then the host's own tuning, not the agent, sets the DTN's rate.
Rates in iproute2's JSON are bytes/s; here bit/s. The qdiscs this reads with
a cap: ``fq`` (``maxrate``, per flow; absent from this project's test kernel, so
only its parsing is tested), ``tbf`` (``rate``, aggregate).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from typing import Any

__all__ = ["read_host_caps", "binding_caps"]


def _run_json(argv: list[str]) -> Any:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout or "null")
    except ValueError:
        return None


def _route_dev(addr: str) -> str | None:
    routes = _run_json(["ip", "-j", "route", "get", addr])
    return routes[0].get("dev") if routes else None


def caps_of_qdiscs(dev: str, qdiscs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The caps in ``tc -j qdisc show dev DEV``'s answer (root qdisc and its children)."""
    out = []
    for q in qdiscs or ():
        kind, opts = q.get("kind"), q.get("options") or {}
        if kind == "fq" and opts.get("maxrate"):
            out.append({"dev": dev, "qdisc": "fq", "scope": "per_flow", "rate": 8.0 * float(opts["maxrate"])})
        elif kind == "tbf" and opts.get("rate"):
            out.append({"dev": dev, "qdisc": "tbf", "scope": "aggregate", "rate": 8.0 * float(opts["rate"])})
    return out


def read_host_caps(prefixes: Sequence[Any]) -> dict[str, Any]:
    """``{"devices": {dev: root qdisc kind}, "caps": [...]}`` for the interfaces the prefixes use."""
    devs: dict[str, str | None] = {}
    caps: list[dict[str, Any]] = []
    for net in prefixes:
        dev = _route_dev(str(next(iter(net.hosts()), net.network_address)))
        if dev is None or dev in devs:
            continue
        qdiscs = _run_json(["tc", "-j", "qdisc", "show", "dev", dev]) or []
        root = next((q for q in qdiscs if q.get("root")), None)
        devs[dev] = root.get("kind") if root else None
        caps.extend(caps_of_qdiscs(dev, qdiscs))
    return {"devices": devs, "caps": caps}


def binding_caps(caps: Sequence[dict[str, Any]], aggregate: float | None, shares: Sequence[float]) -> list[str]:
    """One sentence per host cap that is below what the agent grants (so it, not the agent, binds)."""
    out = []
    if aggregate is None:
        return out
    top = max(shares, default=0.0)
    for c in caps:
        if c["scope"] == "aggregate" and c["rate"] < aggregate:
            out.append(f"{c['qdisc']} on {c['dev']} caps the host at {c['rate'] / 1e6:.1f} Mbit/s, below the "
                       f"agent's {aggregate / 1e6:.1f} Mbit/s")
        elif c["scope"] == "per_flow" and shares and c["rate"] < top:
            out.append(f"{c['qdisc']} maxrate on {c['dev']} caps each flow at {c['rate'] / 1e6:.1f} Mbit/s, below "
                       f"the agent's share of {top / 1e6:.1f} Mbit/s")
    return out
