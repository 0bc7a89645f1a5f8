"""What a testbed created, on disk, so a crashed run can be cleaned up and nothing else.

Every namespace, root-namespace link, OVS bridge and process a testbed makes
is recorded in ``/run/scidmz/<prefix>.json`` *before* it is created (a crash
between the two leaves a record of something that does not exist, which
teardown skips, never the reverse). ``teardown_record`` removes exactly what
a record lists (and the testbed's log folder); ``down_all`` applies it to every
record on disk whose owner process is gone.

Processes are identified by pid *and* start time (``/proc/PID/stat`` field
22), so a recycled pid belonging to someone else is never signalled.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from ....fileio import atomic_write_text
from ....records import (
    BadRecord,
    RecordError,
    owner_alive,
    proc_start_time,
    read_record,
    read_records,
)

__all__ = [
    "RUN_DIR",
    "NETNS_DIR",
    "PREFIX_RE",
    "Record",
    "check_prefix",
    "list_records",
    "scan_records",
    "teardown_record",
    "down_all",
    "live_prefixes",
    "proc_start_time",
    "pids_in_netns",
]

RUN_DIR = Path(os.environ.get("SCIDMZ_RUN_DIR", "/run/scidmz"))
NETNS_DIR = Path("/run/netns")
PREFIX_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")


def check_prefix(prefix: str) -> str:
    """Namespace names are ``<prefix>-<role>``; keep the prefix short and unambiguous."""
    if not isinstance(prefix, str) or not PREFIX_RE.match(prefix):
        raise ValueError(
            f"testbed prefix {prefix!r} must be 1-8 lowercase letters/digits starting with a letter"
        )
    return prefix


def pids_in_netns(ns_name: str) -> list[int]:
    """Every process whose network namespace is the named one (by inode)."""
    try:
        st = os.stat(NETNS_DIR / ns_name)
    except FileNotFoundError:
        return []
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            s = os.stat(f"/proc/{d}/ns/net")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if s.st_ino == st.st_ino and s.st_dev == st.st_dev:
            out.append(int(d))
    return out


#: A testbed record's fields and their types (``records.read_record``); its items are checked by
#: ``_check_items``, as teardown acts on each.
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "prefix": str, "owner_pid": int, "owner_start": int, "namespaces": list, "root_links": list,
    "processes": list, "ovs": list}


def _check_items(data: dict[str, Any]) -> None:
    """What teardown acts on, checked before it acts: namespaces named ``<prefix>-ROLE`` (a record
    naming another namespace is not a testbed's, and removing it could take down anyone's), links
    by name, processes by pid and start time, OVS bridges by name."""
    own = data["prefix"] + "-"
    for ns in data["namespaces"]:
        if not isinstance(ns, str) or not ns.startswith(own) or "/" in ns:
            raise RecordError(f"namespace {str(ns)[:40]!r} is not one of testbed {data['prefix']}'s")
    if not all(isinstance(n, str) and n and "/" not in n for n in data["root_links"]):
        raise RecordError("a root link is not an interface name")
    for p in data["processes"]:
        if not (isinstance(p, dict) and isinstance(p.get("pid"), int) and not isinstance(p.get("pid"), bool)
                and (p.get("start") is None or isinstance(p.get("start"), int))):
            raise RecordError(f"process {str(p)[:60]} is not a pid and a start time")
    for b in data["ovs"]:
        if not (isinstance(b, dict) and isinstance(b.get("bridge"), str)
                and (b.get("db") is None or isinstance(b.get("db"), str))):
            raise RecordError(f"OVS bridge {str(b)[:60]} is not a bridge name")


class Record:
    """The on-disk list of one testbed's objects; every mutation is written atomically."""

    def __init__(self, prefix: str, data: dict[str, Any] | None = None) -> None:
        self.prefix = check_prefix(prefix)
        self.path = RUN_DIR / f"{prefix}.json"
        self.data: dict[str, Any] = data or {
            "prefix": prefix,
            "owner_pid": os.getpid(),
            "owner_start": proc_start_time(os.getpid()),
            "created": time.time(),
            "namespaces": [],
            "root_links": [],
            "processes": [],
            "ovs": [],
            "info": {},
        }

    @classmethod
    def load(cls, path: Path) -> Record:
        """The record at ``path``, checked (``records.read_record``, then ``_check_items``); RecordError."""
        data = read_record(path, _FIELDS)
        if not PREFIX_RE.match(data["prefix"]) or path.name != f"{data['prefix']}.json":
            raise RecordError(f"prefix {data['prefix'][:40]!r} is not the record's own ({path.name})")
        _check_items(data)
        return cls(data["prefix"], data)

    @classmethod
    def create(cls, prefix: str) -> Record:
        """A fresh record; refuses if a live testbed already uses the prefix."""
        rec = cls(prefix)
        if rec.path.exists():
            try:
                old = cls.load(rec.path)
            except (ValueError, KeyError, OSError):
                old = None
            if old is not None and old.owner_alive():
                raise RuntimeError(
                    f"testbed prefix '{prefix}' is in use by pid {old.data['owner_pid']} "
                    f"(choose another --prefix, or run `scidmz testbed down --prefix {prefix}`)"
                )
            if old is not None:
                teardown_record(old)
        rec.save()
        return rec

    def owner_alive(self) -> bool:
        return owner_alive(self.data)

    def save(self) -> None:
        atomic_write_text(self.path, json.dumps(self.data, indent=1), parents=True)

    def add(self, kind: str, item: Any) -> None:
        self.data[kind].append(item)
        self.save()

    def add_process(self, pid: int, argv: list[str]) -> None:
        self.add("processes", {"pid": pid, "start": proc_start_time(pid), "argv": argv[:6]})

    @property
    def logdir(self) -> Path:
        """The testbed's log folder (``Testbed.logdir``): process logs, delay-stage counters, OVS state."""
        return RUN_DIR / self.prefix

    def remove(self) -> None:
        """Delete the record and the testbed's log folder (nothing of a removed testbed stays in RUN_DIR)."""
        d = self.logdir
        # The prefix is checked ([a-z][a-z0-9]{0,7}), so d is a direct child of RUN_DIR; never follow a link.
        if d.is_dir() and not d.is_symlink():
            shutil.rmtree(d, ignore_errors=True)
        self.path.unlink(missing_ok=True)


def _kill(pid: int, start: int | None, sig: int) -> bool:
    if start is None or proc_start_time(pid) != start:
        return False
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def _wait_gone(pids: list[tuple[int, int | None]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(proc_start_time(p) != s for p, s in pids):
            return
        time.sleep(0.02)


def teardown_record(rec: Record, keep_owner: bool = True) -> dict[str, int]:
    """Remove what ``rec`` lists: processes, OVS bridges, root links, namespaces, the file.

    Only objects named in the record are touched. Processes still running
    inside the record's namespaces were started there by the testbed (nobody
    else can enter a namespace it just made) and are killed too.
    """
    from pyroute2 import IPRoute, netns

    counts = {"processes": 0, "namespaces": 0, "root_links": 0, "ovs": 0}
    procs = [(int(p["pid"]), p.get("start")) for p in rec.data.get("processes", [])]
    for ns in rec.data.get("namespaces", []):
        for pid in pids_in_netns(ns):
            if keep_owner and pid == os.getpid():
                continue
            procs.append((pid, proc_start_time(pid)))
    for pid, start in procs:
        if _kill(pid, start, signal.SIGTERM):
            counts["processes"] += 1
    _wait_gone(procs, 2.0)
    for pid, start in procs:
        _kill(pid, start, signal.SIGKILL)
    _wait_gone(procs, 2.0)
    for pid, _ in procs:  # reap our own children so none stays a zombie
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
    for br in rec.data.get("ovs", []):
        if _del_ovs_bridge(br):
            counts["ovs"] += 1
    if rec.data.get("root_links"):
        with IPRoute() as ipr:
            for name in rec.data["root_links"]:
                idx = ipr.link_lookup(ifname=name)
                if idx:
                    try:
                        ipr.link("del", index=idx[0])
                        counts["root_links"] += 1
                    except Exception:  # noqa: BLE001 - peer deletion may have removed it already
                        pass
    existing = set(netns.listnetns())
    for ns in rec.data.get("namespaces", []):
        if ns in existing:
            netns.remove(ns)
            counts["namespaces"] += 1
    rec.remove()
    return counts


def _del_ovs_bridge(spec: dict[str, Any]) -> bool:
    """Delete an OVS bridge recorded as {"bridge": name, "db": unix socket path}."""
    import shutil
    import subprocess

    exe = shutil.which("ovs-vsctl")
    if exe is None:
        return False
    cmd = [exe, "--timeout=5"]
    if spec.get("db"):
        if not Path(spec["db"]).exists():
            return False
        cmd.append(f"--db=unix:{spec['db']}")
    r = subprocess.run([*cmd, "--if-exists", "del-br", spec["bridge"]], capture_output=True, text=True)
    return r.returncode == 0


def scan_records() -> tuple[list[Record], list[BadRecord]]:
    """Every testbed record in RUN_DIR: those that can be used, and those that cannot (each named with
    why: a cleanup skips, counts and names them, and cleans the rest)."""
    return read_records(RUN_DIR, Record.load)


def list_records() -> list[Record]:
    """The testbed records that can be used (``scan_records`` also names the others)."""
    return scan_records()[0]


def down_all(bad: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """Tear down every recorded testbed whose owner process is gone; live ones are left alone.

    Ownership is the record's ``owner_pid`` *and* ``owner_start`` (start time
    in clock ticks since boot, ``/proc/PID/stat`` field 22): the owner is
    alive only if a process with that pid exists and started at that time,
    so a pid recycled by an unrelated process does not keep a leftover
    alive, and a running ``testbed up``/plant is never torn down under its
    owner. To stop a live one, ``scidmz testbed down --prefix P`` (asks its
    owner to stop) or stop the owner. Returns {prefix: counts} of what was
    removed, and under ``"skipped_records"`` one line per record that could not
    be used (left in place, untouched: one bad file must not stop the cleanup of the rest);
    live testbeds are listed under ``"skipped_live"`` by the caller.
    """
    done: dict[str, Any] = {}
    records, bad = scan_records()
    for rec in records:
        if rec.owner_alive():
            continue
        try:
            done[rec.prefix] = teardown_record(rec)
        except (OSError, RuntimeError, ValueError) as exc:  # the next testbed is still cleaned
            bad.append(BadRecord(rec.path, f"teardown failed: {' '.join(str(exc).split())[:200]}"))
    return {"removed": done, "skipped_records": [b.line() for b in bad]}


def live_prefixes() -> dict[str, int]:
    """{prefix: owner pid} of recorded testbeds whose owner still runs."""
    return {rec.prefix: rec.data["owner_pid"] for rec in list_records() if rec.owner_alive()}
