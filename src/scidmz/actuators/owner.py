"""Owner records: who holds a shaper or a switch's entries, so a dead controller's leftovers are reclaimed.

A controller killed with SIGKILL cannot remove what it installed: the TBF or
HTB tree (with its u32 filters) on a device, the telemetry entries on a P4
switch. Each such place gets a record on disk, ``<run dir>/claims/<key>.json``
(``$SCIDMZ_RUN_DIR``, default ``/run/scidmz``, the directory the eBPF records
and the testbed records use), written *before* the place is changed and
removed when it is released. A process is named by pid *and* start time
(``/proc/PID/stat`` field 22) and read and judged by ``scidmz.records``, the one
reader and owner check the testbed's and the eBPF records use, so a recycled pid
is never taken for a live owner and a malformed record is skipped and named.

``claim(key, what)`` returns whether a dead owner's leftover is to be
reclaimed (True) or the place is fresh (False), and refuses with one
``ValueError`` line a place whose record names another live process. The
caller decides what a leftover *without* a record is (a foreign one): it is
refused, since nothing says it is scidmz's to remove.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import time
from pathlib import Path
from typing import Any

from ..fileio import atomic_write_text
from ..records import RecordError, owner_fields, read_record, recorded_owner_runs

__all__ = ["OwnerClaim", "claim", "owners_dir"]

log = logging.getLogger("scidmz.owner")

#: What a claim record must hold to be used (``records.read_record`` checks types; a bad one is skipped).
_FIELDS: dict[str, type | tuple[type, ...]] = {"owner_pid": int, "owner_start": (int, type(None))}


def owners_dir() -> Path:
    return Path(os.environ.get("SCIDMZ_RUN_DIR", "/run/scidmz")) / "claims"


def _file(key: str) -> Path:
    return owners_dir() / (re.sub(r"[^A-Za-z0-9_.-]", "_", key) + ".json")


class OwnerClaim:
    """This process's record for ``key``; ``release()`` removes it (only if it is still ours)."""

    def __init__(self, key: str, what: str, reclaimed: dict[str, Any] | None, skipped: str | None = None) -> None:
        self.key, self.what, self.path = key, what, _file(key)
        #: The dead owner's record whose leftover the caller is to remove (None: the place was fresh).
        self.reclaimed = reclaimed
        #: Why the record found at ``path`` was not used (malformed: skipped, named), else None.
        self.skipped = skipped
        self.data = {"key": key, "what": what, **owner_fields(), "host": socket.gethostname(),
                     "created": time.time()}

    def save(self) -> None:
        try:
            atomic_write_text(self.path, json.dumps(self.data, indent=1), parents=True)
        except OSError as exc:
            raise RuntimeError(f"cannot write the owner record {self.path} for {self.what}: {exc}") from None

    def release(self) -> None:
        try:
            data = read_record(self.path, _FIELDS)
        except RecordError:
            return  # not a record this process wrote (gone, or replaced by something else): left alone
        if (data["owner_pid"], data["owner_start"]) == (self.data["owner_pid"], self.data["owner_start"]):
            try:
                self.path.unlink(missing_ok=True)
            except OSError:
                pass


def _read(path: Path) -> tuple[dict[str, Any], str | None]:
    """(record, None), ({}, None) when there is none, or ({}, reason) for one that cannot be used."""
    if not os.path.lexists(path):
        return {}, None
    try:
        return read_record(path, _FIELDS), None
    except RecordError as exc:
        return {}, str(exc)


def claim(key: str, what: str) -> OwnerClaim:
    """Take ``key`` for this process (record written at once). ``ValueError`` if another live process
    (``records.recorded_owner_runs``: pid and start time, on this host) holds it; ``.reclaimed`` is the
    dead owner's record, if any. A malformed record is skipped and named (log and ``.skipped``): it
    accounts for nothing, so a leftover under our mark is then refused by the caller, never removed."""
    path = _file(key)
    old, bad = _read(path)
    if bad is not None:
        log.warning("skipped record %s: %s", path, bad)
    me = owner_fields()
    mine = bool(old) and (old["owner_pid"], old["owner_start"]) == (me["owner_pid"], me["owner_start"])
    try:
        alive = bool(old) and not mine and recorded_owner_runs(old["owner_pid"], old["owner_start"], old.get("host"))
    except RecordError as exc:
        old, bad, alive = {}, str(exc), False
        log.warning("skipped record %s: %s", path, bad)
    if alive:
        raise ValueError(f"{what} is held by a running scidmz (pid {old['owner_pid']}, record {path}); "
                         "stop it first")
    c = OwnerClaim(key, what, old if old and not mine else None, bad)
    c.save()
    return c
