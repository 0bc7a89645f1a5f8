"""Run records, read for cleanup: the one reader and the one owner check every record kind shares.

scidmz records what it makes before it makes it, in small JSON files in its run directory
(``/run/scidmz``, ``$SCIDMZ_RUN_DIR``): a testbed's ``<prefix>.json``, the eBPF telemetry's
``ebpf/<pid>.json``. A cleanup (``testbed down --all``, ``telemetry down``, the systemd unit's
``ExecStartPre``) reads them all, and one file it cannot use must not stop it: ``read_records``
returns the records it could read *and* the ones it could not, each named with its reason, so the
caller skips, counts and names the bad ones and cleans the rest.

A record is read only if it is a regular file of its own (opened with ``O_NOFOLLOW``: a planted
link must not make a root cleanup read, or act on, another file), at most ``MAX_RECORD_BYTES``,
a JSON object whose declared fields have their declared types. Fields a record has beyond
those are ignored (ours: a newer scidmz may record more; what we know is enough to clean).

A record that names a process names it by pid *and* start time (``/proc/PID/stat`` field 22,
clock ticks since boot): ``owner_alive`` is true only for the process that wrote it, never
for an unrelated one that was given the same pid later. This module sits at the bottom
layer (standard library only) so that every part that records an owner (testbeds, telemetry,
the actuators' owner records and OVS rows, the switch's record, the controller's token file)
uses the same check, ``recorded_owner_runs``.

Two choices of ours in that check, both on the side of leaving things alone: a record made on
another host names a process this host cannot see, so it counts as live (never reclaimed here);
a record from before scidmz wrote start times (an OVS row, a token file) is judged by its pid
alone, so a recycled pid keeps it -- refused with a message naming the by-hand removal, never
removed while its maker might run.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["MAX_RECORD_BYTES", "RecordError", "BadRecord", "proc_start_time", "owner_fields", "owner_alive",
           "process_alive", "recorded_owner_runs", "pid_exists", "read_record", "read_records"]

#: Bytes of one record (ours: a testbed's record is ~2 kB, an eBPF one ~1 kB; a record a thousand
#: times larger is not ours, and reading it whole would let one file exhaust a cleanup's memory).
MAX_RECORD_BYTES = 1 << 20


class RecordError(ValueError):
    """A record that cannot be used, with the reason."""


@dataclass(frozen=True)
class BadRecord:
    """A record a cleanup skipped: its path and why."""

    path: Path
    reason: str

    def line(self) -> str:
        return f"skipped record {self.path}: {self.reason}"


def proc_start_time(pid: int) -> int | None:
    """Start time of process ``pid`` in clock ticks since boot, or None if there is none."""
    try:
        text = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, ValueError, OverflowError):
        return None
    # comm may hold spaces and parentheses; the fields after the last ')' are fixed.
    return int(text[text.rindex(")") + 2:].split()[19])


def owner_fields(pid: int | None = None) -> dict[str, int | None]:
    """``{"owner_pid", "owner_start"}`` of ``pid`` (default this process), for a new record."""
    pid = os.getpid() if pid is None else pid
    return {"owner_pid": pid, "owner_start": proc_start_time(pid)}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def process_alive(pid: Any, start: Any) -> bool:
    """Whether the process recorded as (pid, start) still runs: that pid exists *and* started at that
    time. RecordError for values that are not a pid and a start time."""
    if not _is_int(pid) or not 0 < pid < 1 << 22:  # the kernel's pid_max is at most 2^22
        raise RecordError(f"pid {pid!r} is not a process id")
    if not _is_int(start) or start < 0:
        raise RecordError(f"start time {start!r} is not a start time (clock ticks since boot)")
    return proc_start_time(pid) == start


def pid_exists(pid: int) -> bool:
    """Whether some process has ``pid`` now (whoever owns it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recorded_owner_runs(pid: Any, start: Any, host: Any = None) -> bool:
    """The one owner check of every record that names a process: whether the process recorded as
    (``pid``, ``start``) on ``host`` (None: this host) may still run. Another host's process counts
    as running, and a record without a start time (``start`` None, an older scidmz) goes by the pid
    alone (module doc). RecordError for values that are not a pid, a start time and a host name."""
    if host is not None and not isinstance(host, str):
        raise RecordError(f"host {host!r} is not a host name")
    if host is not None and host != socket.gethostname():
        return True
    if start is None:
        process_alive(pid, 0)  # validates the pid the same way
        return pid_exists(pid)
    return process_alive(pid, start)


def owner_alive(data: Mapping[str, Any]) -> bool:
    """Whether a record's owner (``owner_pid`` and ``owner_start``) still runs; RecordError if the
    record names no owner it can be checked against (a recycled pid would look alive)."""
    return process_alive(data.get("owner_pid"), data.get("owner_start"))


def _read_bytes(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RecordError("is a symlink; records are never read through links") from None
        raise RecordError(exc.strerror or str(exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RecordError("is not a regular file")
        if st.st_size > MAX_RECORD_BYTES:
            raise RecordError(f"{st.st_size:,} bytes; a record has at most {MAX_RECORD_BYTES:,}")
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(MAX_RECORD_BYTES + 1)
    finally:
        os.close(fd)


def read_record(path: str | os.PathLike[str], fields: Mapping[str, type | tuple[type, ...]]) -> dict[str, Any]:
    """The record at ``path`` as a dict whose ``fields`` have their types; RecordError otherwise."""
    raw = _read_bytes(Path(path))
    if len(raw) > MAX_RECORD_BYTES:
        raise RecordError(f"more than {MAX_RECORD_BYTES:,} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RecordError(f"not JSON ({' '.join(str(exc).split())[:80]})") from None
    if not isinstance(data, dict):
        raise RecordError(f"a JSON {type(data).__name__}, not an object")
    for key, kind in fields.items():
        if key not in data:
            raise RecordError(f"no '{key}'")
        value = data[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise RecordError(f"'{key}' is a {type(value).__name__}")
    return data


def read_records(directory: str | os.PathLike[str], load: Callable[[Path], T],
                 pattern: str = "*.json") -> tuple[list[T], list[BadRecord]]:
    """Every record in ``directory`` matching ``pattern``, each read by ``load(path)`` (which raises
    RecordError for one it cannot use): those loaded, and those not, each named with its reason. A
    missing directory has no records."""
    good: list[T] = []
    bad: list[BadRecord] = []
    d = Path(directory)
    if not d.is_dir():
        return good, bad
    for p in sorted(d.glob(pattern)):
        try:
            good.append(load(p))
        except RecordError as exc:
            bad.append(BadRecord(p, str(exc)))
    return good, bad
