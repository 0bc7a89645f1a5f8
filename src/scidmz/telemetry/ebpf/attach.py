"""Attach the programs to a router's interfaces, keep a record of it, and undo exactly that.

``Attachments`` puts the tc programs on ``clsact`` hooks as cls_bpf
direct-action filters (libbpf's ``bpf_tc_*``, the netlink calls behind ``tc
filter add ... bpf da``) and the transmit program on its tracepoint (a BPF
link, which the kernel removes when the process ends however it ends).

What is made is written *before* it is made to a record,
``/run/scidmz/ebpf/<pid>.json`` (``$SCIDMZ_RUN_DIR``): each filter's network
namespace, interface, direction and program id, and each ``clsact`` qdisc
scidmz created (only when the interface had none). ``detach()`` and
``down_stale()`` (for a SIGKILLed owner, as ``testbed down`` does) remove
only filters whose program id is the recorded one, and a ``clsact`` qdisc
only if scidmz created it and no filter is left on it: filters, qdiscs and
programs scidmz did not make are never touched.

``claim()`` refuses a second instance on an interface a live instance holds
(records are checked under a lock), and refuses an interface that already
carries a ``scidmz_*`` program no live record accounts for.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...fileio import atomic_write_text
from ...records import BadRecord, RecordError, owner_alive, owner_fields, read_record, read_records
from .libbpf import BPF_TC_EGRESS, BPF_TC_INGRESS, Libbpf, LibbpfError, TcHook, TcOpts, get_libbpf

__all__ = ["Attachments", "EbpfRecord", "Iface", "claim", "down_stale", "in_netns", "resolve_iface", "run_dir",
           "list_filters"]

_CLONE_NEWNET = 0x40000000
_SIOCGIFHWADDR = 0x8927
_ARPHRD_ETHER = 1
_DIRECTIONS = {"ingress": BPF_TC_INGRESS, "egress": BPF_TC_EGRESS}


def run_dir() -> Path:
    return Path(os.environ.get("SCIDMZ_RUN_DIR", "/run/scidmz")) / "ebpf"


# -- network namespaces ---------------------------------------------------------------------------

def _netns_path(netns: str | None) -> str:
    """A path that names the namespace for as long as it exists (never this process's /proc entry)."""
    if netns is None:
        own = os.stat("/proc/thread-self/ns/net").st_ino
        try:
            init = os.stat("/proc/1/ns/net").st_ino
        except OSError:  # a service with only the capabilities it needs may not see pid 1 (or /proc/1 at all)
            return "/proc/thread-self/ns/net"
        return "/proc/1/ns/net" if init == own else "/proc/thread-self/ns/net"
    if "/" in netns:
        return netns
    return f"/run/netns/{netns}"


@contextlib.contextmanager
def in_netns(path: str | None) -> Iterator[None]:
    """Run the block with the *calling thread* in the namespace at ``path`` (setns is per thread)."""
    if path is None or path == "/proc/thread-self/ns/net":
        yield
        return
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        try:
            tgt = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            raise ValueError(f"network namespace {path} does not exist") from None
        try:
            if libc.setns(tgt, _CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"entering network namespace {path}: {os.strerror(err)}")
        finally:
            os.close(tgt)
        try:
            yield
        finally:
            libc.setns(own, _CLONE_NEWNET)
    finally:
        os.close(own)


class Iface:
    """One interface: its namespace (path and inode), name and index."""

    def __init__(self, netns_path: str, netns_ino: int, name: str, index: int) -> None:
        self.netns_path, self.netns_ino, self.name, self.index = netns_path, netns_ino, name, index

    @property
    def key(self) -> str:
        return f"{self.netns_ino}:{self.index}"

    def __repr__(self) -> str:
        return f"Iface({self.name!r}, index={self.index}, netns={self.netns_path})"


def resolve_iface(name: str, netns: str | None = None) -> Iface:
    """The interface ``name`` (in ``netns``), or a one-line ValueError: missing, or not Ethernet."""
    if not name or "/" in name or len(name) > 15:
        raise ValueError(f"not an interface name: {name!r}")
    path = _netns_path(netns)
    with in_netns(path):
        ino = os.stat("/proc/thread-self/ns/net").st_ino
        try:
            index = socket.if_nametoindex(name)
        except OSError:
            where = f" in network namespace {netns}" if netns else ""
            raise ValueError(f"interface {name} does not exist{where}") from None
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            ifr = fcntl.ioctl(s, _SIOCGIFHWADDR, struct.pack("256s", name.encode()))
        family = struct.unpack_from("H", ifr, 16)[0]
    if family != _ARPHRD_ETHER:
        raise ValueError(f"interface {name} is not an Ethernet interface (link type {family}); "
                         "the eBPF telemetry parses Ethernet frames")
    return Iface(path, ino, name, index)


def list_filters(ifname: str, direction: str) -> list[dict[str, Any]]:
    """``tc -j filter show dev IF ingress|egress`` in the calling thread's namespace (bpf entries)."""
    r = subprocess.run(["tc", "-j", "filter", "show", "dev", ifname, direction],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        return []
    try:
        rows = json.loads(r.stdout or "[]")
    except ValueError:
        return []
    out = []
    for row in rows:
        opt = row.get("options") or {}
        if row.get("kind") == "bpf" and "prog" in opt:
            out.append({"pref": int(row["pref"]), "handle": int(str(opt.get("handle", "0")), 0),
                        "id": int(opt["prog"].get("id", 0)), "name": str(opt["prog"].get("name", ""))})
    return out


def _has_filters(ifname: str, direction: str) -> bool:
    r = subprocess.run(["tc", "-j", "filter", "show", "dev", ifname, direction],
                       capture_output=True, text=True, timeout=30)
    try:
        return bool(json.loads(r.stdout or "[]"))
    except ValueError:
        return True  # unreadable: assume someone's filters are there


def _has_clsact(ifname: str) -> bool:
    r = subprocess.run(["tc", "-j", "qdisc", "show", "dev", ifname], capture_output=True, text=True, timeout=30)
    try:
        return any(q.get("kind") == "clsact" for q in json.loads(r.stdout or "[]"))
    except ValueError:
        return False


# -- the record ------------------------------------------------------------------------------------

#: An eBPF record's fields and their types (``records.read_record``).
_FIELDS: dict[str, type | tuple[type, ...]] = {"owner_pid": int, "owner_start": int, "interfaces": list,
                                               "filters": list, "clsact": list, "links": list}
#: What teardown reads of each entry, and its type.
_ENTRY: dict[str, dict[str, type]] = {
    "clsact": {"netns_path": str, "netns_ino": int, "ifindex": int},
    "filters": {"netns_path": str, "netns_ino": int, "ifindex": int, "direction": str, "prog_id": int},
}


def _check_entry(kind: str, entry: Any) -> None:
    ok = isinstance(entry, dict) and all(isinstance(entry.get(k), t) and not isinstance(entry.get(k), bool)
                                         for k, t in _ENTRY[kind].items())
    if not ok or (kind == "filters" and entry["direction"] not in _DIRECTIONS):
        raise RecordError(f"{kind} entry {str(entry)[:80]} is not one scidmz writes")


class EbpfRecord:
    """What one instance made, on disk (``run_dir()/<pid>.json``), written atomically on every change."""

    def __init__(self, data: dict[str, Any], path: Path) -> None:
        self.data, self.path = data, path

    @classmethod
    def new(cls, ifaces: list[Iface]) -> EbpfRecord:
        pid = os.getpid()
        data = {**owner_fields(pid), "created": time.time(),
                "interfaces": [i.key for i in ifaces], "filters": [], "clsact": [], "links": []}
        rec = cls(data, run_dir() / f"{pid}.json")
        rec.save()
        return rec

    @classmethod
    def load(cls, path: Path) -> EbpfRecord:
        """The record at ``path``, checked (``records.read_record``, then each entry teardown acts on);
        RecordError otherwise."""
        data = read_record(path, _FIELDS)
        for kind in ("filters", "clsact"):
            for entry in data[kind]:
                _check_entry(kind, entry)
        return cls(data, path)

    def owner_alive(self) -> bool:
        return owner_alive(self.data)

    def save(self) -> None:
        atomic_write_text(self.path, json.dumps(self.data, indent=1), parents=True)

    def add(self, kind: str, item: dict[str, Any]) -> None:
        self.data[kind].append(item)
        self.save()

    def drop(self, kind: str, item: dict[str, Any]) -> None:
        self.data[kind] = [x for x in self.data[kind] if x != item]
        self.save()

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    d = run_dir()
    d.mkdir(parents=True, exist_ok=True)
    with open(d / ".lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _records() -> tuple[list[EbpfRecord], list[BadRecord]]:
    """The records that can be used, and those that cannot (each named with why)."""
    return read_records(run_dir(), EbpfRecord.load)


def claim(ifaces: list[Iface]) -> EbpfRecord:
    """A fresh record for ``ifaces``; refuses interfaces a live instance (or a stray program) holds.

    Records of owners that are gone are cleaned up first (``down_stale``'s work).
    """
    want = {i.key: i for i in ifaces}
    with _lock():
        for rec in _records()[0]:  # a record that cannot be read holds nothing we could check or free
            if rec.owner_alive():
                busy = [want[k].name for k in rec.data.get("interfaces", []) if k in want]
                if busy:
                    # A refusal of what was asked (exit 2), as a held root qdisc or OVS port is refused.
                    raise ValueError(f"interface {busy[0]} is already used by the scidmz eBPF telemetry of "
                                       f"pid {rec.data['owner_pid']}; stop that one first")
            else:
                teardown(rec)
        for i in ifaces:
            with in_netns(i.netns_path):
                for d in _DIRECTIONS:
                    stray = [f for f in list_filters(i.name, d) if f["name"].startswith("scidmz_")]
                    if stray:
                        f = stray[0]
                        raise RuntimeError(
                            f"{i.name} {d} already carries {f['name']} (program id {f['id']}) that no running "
                            f"scidmz owns; remove it with: tc filter del dev {i.name} {d} pref {f['pref']} "
                            f"handle {f['handle']:#x} bpf")
        return EbpfRecord.new(ifaces)


def _hook(index: int, point: int) -> TcHook:
    return TcHook(sz=ctypes.sizeof(TcHook), ifindex=index, attach_point=point)


def _detach_filters(lib: Libbpf, entry: dict[str, Any]) -> int:
    """Remove the filters on entry's hook whose program is entry's (by id); how many went."""
    n = 0
    try:
        name = socket.if_indextoname(int(entry["ifindex"]))
    except OSError:
        return 0  # the interface is gone, and its filters with it
    for f in list_filters(name, entry["direction"]):
        if f["id"] != int(entry["prog_id"]):
            continue
        opts = TcOpts(sz=ctypes.sizeof(TcOpts), handle=f["handle"], priority=f["pref"])
        hook = _hook(int(entry["ifindex"]), _DIRECTIONS[entry["direction"]])
        ret = lib.bpf_tc_detach(ctypes.byref(hook), ctypes.byref(opts))
        if ret >= 0:
            n += 1
    return n


def _destroy_clsact_if_empty(lib: Libbpf, entry: dict[str, Any]) -> bool:
    try:
        name = socket.if_indextoname(int(entry["ifindex"]))
    except OSError:
        return False
    if not _has_clsact(name) or any(_has_filters(name, d) for d in _DIRECTIONS):
        return False
    hook = _hook(int(entry["ifindex"]), BPF_TC_INGRESS | BPF_TC_EGRESS)
    return lib.bpf_tc_hook_destroy(ctypes.byref(hook)) >= 0


def _same_netns(entry: dict[str, Any]) -> bool:
    try:
        return os.stat(entry["netns_path"]).st_ino == int(entry["netns_ino"])
    except OSError:
        return False  # the namespace is gone, and everything in it


def teardown(rec: EbpfRecord) -> dict[str, int]:
    """Remove what ``rec`` lists (filters by program id, clsact qdiscs scidmz made and left empty)."""
    lib = get_libbpf()
    done = {"filters": 0, "clsact": 0}
    for entry in list(rec.data.get("filters", [])):
        if _same_netns(entry):
            with in_netns(entry["netns_path"]):
                done["filters"] += _detach_filters(lib, entry)
        rec.drop("filters", entry)
    for entry in list(rec.data.get("clsact", [])):
        if _same_netns(entry):
            with in_netns(entry["netns_path"]):
                done["clsact"] += int(_destroy_clsact_if_empty(lib, entry))
        rec.drop("clsact", entry)
    rec.remove()
    return done


def down_stale() -> dict[str, Any]:
    """Clean up after every instance whose owner is gone (SIGKILL, power loss of a live run dir...).

    A record that cannot be used (not ours, malformed, a link, too large) is left in place and named
    under ``"skipped_records"``, one line each, and the rest is cleaned: this runs as the systemd
    unit's ``ExecStartPre``, where one bad file used to stop the whole cleanup with an internal error.
    """
    total: dict[str, Any] = {"records": 0, "filters": 0, "clsact": 0}
    with _lock():
        records, bad = _records()
        for rec in records:
            if rec.owner_alive():
                continue
            try:
                got = teardown(rec)
            except (OSError, RuntimeError, ValueError) as exc:  # the next record is still cleaned
                bad.append(BadRecord(rec.path, f"teardown failed: {' '.join(str(exc).split())[:200]}"))
                continue
            total["records"] += 1
            total["filters"] += got["filters"]
            total["clsact"] += got["clsact"]
    total["skipped_records"] = [b.line() for b in bad]
    return total


class Attachments:
    """The hooks one instance attached; ``detach()`` undoes them (also after an error half-way)."""

    def __init__(self, record: EbpfRecord) -> None:
        self.lib = get_libbpf()
        self.record = record
        self._links: list[int] = []

    def tc(self, iface: Iface, direction: str, prog_name: str, prog_fd: int, prog_id: int) -> None:
        """cls_bpf direct-action filter on ``iface``'s clsact ``direction`` (clsact made if absent)."""
        lib = self.lib
        point = _DIRECTIONS[direction]
        base = {"netns_path": iface.netns_path, "netns_ino": iface.netns_ino, "ifindex": iface.index,
                "ifname": iface.name}
        with in_netns(iface.netns_path):
            if not _has_clsact(iface.name) and not any(c["ifindex"] == iface.index
                                                       for c in self.record.data["clsact"]):
                self.record.add("clsact", base)
                hook = _hook(iface.index, point)
                ret = lib.bpf_tc_hook_create(ctypes.byref(hook))
                if ret == -17:  # EEXIST: someone made it just now; it is theirs
                    self.record.drop("clsact", base)
                else:
                    _check(lib, ret, f"creating a clsact qdisc on {iface.name}")
            entry = {**base, "direction": direction, "prog_id": prog_id, "prog_name": prog_name}
            self.record.add("filters", entry)
            hook = _hook(iface.index, point)
            opts = TcOpts(sz=ctypes.sizeof(TcOpts), prog_fd=prog_fd)
            _check(lib, lib.bpf_tc_attach(ctypes.byref(hook), ctypes.byref(opts)),
                   f"attaching {prog_name} to {iface.name} {direction}")

    def tracepoint(self, prog_ptr: int, prog_name: str) -> None:
        """Attach a tp_btf program (a BPF link: the kernel drops it with the process)."""
        self.record.add("links", {"prog_name": prog_name})
        link = self.lib.bpf_program__attach(prog_ptr)
        if not link:
            err = ctypes.get_errno() or 22
            raise RuntimeError(f"attaching {prog_name}: {os.strerror(err)}")
        self._links.append(link)

    def detach(self) -> dict[str, int]:
        """Remove every hook this instance made, then its record."""
        for link in self._links:
            self.lib.bpf_link__destroy(link)
        self._links.clear()
        return teardown(self.record)


def _check(lib: Libbpf, ret: int, what: str) -> None:
    try:
        lib.check(ret, what)
    except LibbpfError as exc:
        from .objects import load_error_hint

        if exc.errno in (errno.ENOENT, errno.EOPNOTSUPP):  # the kernel's answer to an unknown qdisc/filter kind
            raise RuntimeError(f"{what}: this kernel has no clsact qdisc or cls_bpf classifier "
                               "(CONFIG_NET_SCH_INGRESS, CONFIG_NET_CLS_BPF)") from None
        raise RuntimeError(f"{what}: {load_error_hint(exc)}") from None
