"""Which process and descriptor hold a socket: ``/proc/PID/fd/N -> socket:[INODE]``.

sock_diag names a socket by its inode; ``pidfd_getfd`` needs a (pid, fd). The
scan reads ``/proc/*/fd`` only when a matching socket's owner is not known yet,
and looks first at the processes that already own paced sockets (a transfer
tool opens its next connection in the same process), so a steady period
reads nothing here. Processes are named by pid *and* start time (``/proc/PID/stat``
field 22) so a recycled pid is never mistaken for the owner we recorded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from ..plant.netns.manage.registry import proc_start_time

__all__ = ["Owner", "OwnerIndex", "comm_of"]


@dataclass(frozen=True, slots=True)
class Owner:
    """A socket's holder: process ``pid`` (started at ``start`` clock ticks) has it as descriptor ``fd``."""

    pid: int
    start: int
    fd: int


def comm_of(pid: int) -> str | None:
    """The process's name (``/proc/PID/comm``), None if it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().rstrip("\n")
    except OSError:
        return None


def _socket_fds(pid: int) -> dict[int, int]:
    """inode -> fd of every socket process ``pid`` holds (empty if it is gone or hidden from us)."""
    d = f"/proc/{pid}/fd"
    out: dict[int, int] = {}
    try:
        names = os.listdir(d)
    except OSError:
        return out
    for name in names:
        try:
            link = os.readlink(f"{d}/{name}")
        except OSError:
            continue
        if link.startswith("socket:["):
            out[int(link[8:-1])] = int(name)
    return out


class OwnerIndex:
    """Finds owners of socket inodes; remembers the processes that had some."""

    def __init__(self) -> None:
        self._hot: dict[int, int | None] = {}  # pid -> start time, processes that owned matches
        self._me = os.getpid()

    def find(self, inodes: Iterable[int]) -> dict[int, Owner]:
        """Owner of each inode found (the first process holding it; a socket shared after fork is
        reachable through any of its holders)."""
        want = set(inodes)
        found: dict[int, Owner] = {}
        if not want:
            return found
        self._scan(list(self._hot), want, found)
        if want:
            pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
            self._scan([p for p in pids if p not in self._hot], want, found)
        return found

    def _scan(self, pids: list[int], want: set[int], found: dict[int, Owner]) -> None:
        for pid in pids:
            if not want:
                return
            if pid == self._me:
                continue
            fds = _socket_fds(pid)
            hits = want.intersection(fds)
            if not hits:
                continue
            start = proc_start_time(pid)
            if start is None:
                continue
            self._hot[pid] = start
            for ino in hits:
                found[ino] = Owner(pid, start, fds[ino])
                want.discard(ino)

    def forget_dead(self, live_pids: set[int]) -> None:
        """Drop remembered processes that own no live paced socket any more."""
        for pid in [p for p in self._hot if p not in live_pids]:
            del self._hot[pid]
