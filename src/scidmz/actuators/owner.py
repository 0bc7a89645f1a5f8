"""Owner records: who holds a shaper or a switch's entries, so a dead controller's leftovers are reclaimed.

A controller killed with SIGKILL cannot remove what it installed: the TBF or
HTB tree (with its u32 filters) on a device, the telemetry entries on a P4
switch. Each such place gets a record on disk, ``<run dir>/claims/<key>.json``
(``$SCIDMZ_RUN_DIR``, default ``/run/scidmz``, the directory the eBPF records
and the testbed records use), written *before* the place is changed and
removed when it is released. A process is named by pid *and* start time
(``/proc/PID/stat`` field 22), as the testbed's and the eBPF records do, so a
recycled pid is never taken for a live owner.

``claim(key, what)`` returns whether a dead owner's leftover is to be
reclaimed (True) or the place is fresh (False), and refuses with one
``ValueError`` line a place whose record names another live process. The
caller decides what a leftover *without* a record is (a foreign one): it is
refused, since nothing says it is scidmz's to remove.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from pathlib import Path
from typing import Any

from ..fileio import atomic_write_text

__all__ = ["OwnerClaim", "claim", "owners_dir", "proc_start"]


def owners_dir() -> Path:
    return Path(os.environ.get("SCIDMZ_RUN_DIR", "/run/scidmz")) / "claims"


def proc_start(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot, None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[19])


def _file(key: str) -> Path:
    return owners_dir() / (re.sub(r"[^A-Za-z0-9_.-]", "_", key) + ".json")


class OwnerClaim:
    """This process's record for ``key``; ``release()`` removes it (only if it is still ours)."""

    def __init__(self, key: str, what: str, reclaimed: dict[str, Any] | None) -> None:
        self.key, self.what, self.path = key, what, _file(key)
        #: The dead owner's record whose leftover the caller is to remove (None: the place was fresh).
        self.reclaimed = reclaimed
        self.data = {"key": key, "what": what, "owner_pid": os.getpid(), "owner_start": proc_start(os.getpid()),
                     "host": socket.gethostname(), "created": time.time()}

    def save(self) -> None:
        try:
            atomic_write_text(self.path, json.dumps(self.data, indent=1), parents=True)
        except OSError as exc:
            raise RuntimeError(f"cannot write the owner record {self.path} for {self.what}: {exc}") from None

    def release(self) -> None:
        try:
            if _read(self.path).get("owner_pid") == os.getpid():
                self.path.unlink(missing_ok=True)
        except OSError:
            pass


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _alive(data: dict[str, Any]) -> bool:
    pid = int(data.get("owner_pid") or 0)
    return pid > 0 and data.get("host", socket.gethostname()) == socket.gethostname() \
        and proc_start(pid) == data.get("owner_start")


def claim(key: str, what: str) -> OwnerClaim:
    """Take ``key`` for this process (record written at once). ``ValueError`` if another live process
    (by pid and start time, on this host) holds it; ``.reclaimed`` is the dead owner's record, if any."""
    old = _read(_file(key))
    mine = old.get("owner_pid") == os.getpid() and old.get("owner_start") == proc_start(os.getpid())
    if old and not mine and _alive(old):
        raise ValueError(f"{what} is held by a running scidmz (pid {old['owner_pid']}, record {_file(key)}); "
                         "stop it first")
    c = OwnerClaim(key, what, old if old and not mine else None)
    c.save()
    return c
