"""Library side of ``scidmz testbed up|down|status|check``."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from ....scenario import Scenario
from .registry import (
    NETNS_DIR,
    RUN_DIR,
    Record,
    check_prefix,
    down_all,
    live_prefixes,
    scan_records,
    teardown_record,
)

__all__ = ["testbed_up", "testbed_down", "testbed_status", "testbed_check"]


def _require_root() -> None:
    if os.geteuid() != 0:
        raise PermissionError("the netns testbed needs root (network namespaces, tc, AF_PACKET)")


def testbed_up(sc: Scenario, switch: str = "bridge", prefix: str = "sdz", servers: bool = True,
               ready: Any = None, progress: bool = False) -> dict[str, Any]:
    """Build the testbed and keep it up until SIGINT/SIGTERM; teardown on every exit path."""
    from ..testbed import Testbed
    from ..traffic.episode import Traffic

    _require_root()
    with Testbed(sc, prefix=prefix, switch=switch, progress=progress) as tb:
        if servers:
            Traffic(tb, sc.seed).start_servers()
        summary = tb.summary()
        if ready is not None:
            ready(summary)
        try:
            while True:
                signal.pause() if hasattr(signal, "pause") else time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return {"prefix": prefix, "down": True}


def testbed_down(prefix: str | None = None, all_: bool = False) -> dict[str, Any]:
    """Remove one recorded testbed (asking a live owner to stop first), or with ``all_`` every leftover.

    ``all_`` removes only testbeds whose owner process is gone (see ``registry.down_all``).
    """
    _require_root()
    if all_:
        # Only leftovers: a testbed whose owner (pid + start time) still runs is in use.
        return {**down_all(), "skipped_live": live_prefixes()}
    if prefix is None:
        raise ValueError("give --prefix P or --all")
    check_prefix(prefix)
    path = RUN_DIR / f"{prefix}.json"
    if not path.exists():
        raise ValueError(f"no testbed with prefix '{prefix}' is recorded in {RUN_DIR}")
    rec = Record.load(path)
    if rec.owner_alive() and rec.data["owner_pid"] != os.getpid():
        os.kill(int(rec.data["owner_pid"]), signal.SIGTERM)
        deadline = time.monotonic() + 15
        while path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not path.exists():
            return {"removed": {prefix: {"stopped_owner": True}}}
    return {"removed": {prefix: teardown_record(rec)}}


def testbed_status() -> dict[str, Any]:
    records, bad = scan_records()
    out = []
    for rec in records:
        ns = rec.data["namespaces"]
        info = rec.data.get("info") if isinstance(rec.data.get("info"), dict) else {}
        created = rec.data.get("created")
        created = created if isinstance(created, (int, float)) and not isinstance(created, bool) else None
        out.append({
            "prefix": rec.prefix,
            "owner_pid": rec.data.get("owner_pid"),
            "owner_alive": rec.owner_alive(),
            "namespaces": len(ns),
            "namespaces_present": sum((NETNS_DIR / n).exists() for n in ns),
            "scenario": info.get("scenario"),
            "switch": info.get("switch"),
            "age_s": None if created is None else time.time() - created,
        })
    return {"testbeds": out, "skipped_records": [b.line() for b in bad]}


def human_status(res: dict[str, Any]) -> str:
    lines = list(res.get("skipped_records", []))
    if not res["testbeds"]:
        return "\n".join([*lines, "no testbeds recorded"])
    for t in res["testbeds"]:
        state = "running" if t["owner_alive"] else "LEFTOVER (owner gone; `scidmz testbed down --all`)"
        lines.append(f"{t['prefix']}: {state}, scenario {t['scenario']}, switch {t['switch']}, "
                     f"{t['namespaces_present']}/{t['namespaces']} namespaces, up "
                     + ("?" if t["age_s"] is None else f"{t['age_s']:.0f} s"))
    return "\n".join(lines)


def testbed_check(sc: Scenario, switch: str = "bridge", prefix: str | None = None,
                  rate_seconds: float = 4.0, progress: bool = False) -> dict[str, Any]:
    """Build a testbed, measure RTTs, delay-stage accuracy and bottleneck rate, tear it down."""
    from ..testbed import Testbed
    from .check import check_testbed

    _require_root()
    with Testbed(sc, prefix=prefix or f"chk{os.getpid() % 10000}", switch=switch, progress=progress) as tb:
        return check_testbed(tb, rate_seconds=rate_seconds, progress=progress)


if __name__ == "__main__":  # pragma: no cover
    print(human_status(testbed_status()), file=sys.stderr)
