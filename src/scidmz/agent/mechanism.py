"""How a rate reaches a DTN socket: ``pidfd_getfd(2)`` + ``SO_MAX_PACING_RATE`` (chosen; see below).

``PidfdMechanism.set(owner, inode, value)`` opens a pidfd of the owning process
(cached per process), duplicates its descriptor into the agent, checks that the
duplicate is still the socket with that inode (a descriptor number can be
reused between the scan and now), sets the option on it (the option belongs
to the socket, which both descriptors share) and closes the duplicate at once,
so the transfer tool's own close still ends its connection. TCP paces
internally once the option is below ~0 (net/core/sock.c moves
``sk_pacing_status`` to ``SK_PACING_NEEDED``), with or without an fq qdisc.

The rights it needs (measured, tests/test_agent_rights.py, against a sender of
another user): CAP_SYS_PTRACE, because ``pidfd_getfd`` asks for ptrace access to
the owner (``PTRACE_MODE_ATTACH_REALCREDS``; EPERM without it), and
CAP_DAC_READ_SEARCH, because listing another user's ``/proc/PID/fd`` (mode 0500)
is a permission check on the directory before any ptrace check (EACCES without
it). Nothing else: setting the option on a socket one holds needs no
capability, and the sock_diag dump needs none. Root has both.

The default mechanism; the other is ``bpfiter.BpfIterMechanism`` (a BPF TCP
iterator calling ``bpf_setsockopt``). Both were measured (benchmarks/agent_period.py,
agent_bpf_iter.py): per period for 64 connections 2.3-2.4 ms here (mostly the
sock_diag dump's walk of the hash table, one walk since ``diag.py`` asks for both
families at once; 3.6 ms with a walk per family) against 1.3-1.6 ms, while
setting all 64 caps costs 0.35 ms here against 0.96 ms. This one is the default because it needs no
compiler on the DTN, has no per-connection rate ceiling and touches only the
sockets whose cap changes; docs/deployment.md, "The two mechanisms", has the rest.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import struct

from ..plant.netns.manage.registry import proc_start_time
from .owners import Owner

__all__ = ["PidfdMechanism", "RightsError", "SO_MAX_PACING_RATE", "has_capability", "CAP_SYS_PTRACE",
           "CAP_DAC_READ_SEARCH"]

SO_MAX_PACING_RATE = 47  # include/uapi/asm-generic/socket.h; Python's socket module lacks it
_SYS_PIDFD_GETFD = 438  # the same number on every architecture since Linux 5.6
CAP_DAC_READ_SEARCH = 2
CAP_SYS_PTRACE = 19

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class RightsError(PermissionError):
    """The agent lacks a right its mechanism needs (bad set-up: exit 2)."""


def has_capability(bit: int) -> bool:
    """Whether this process holds capability ``bit`` in its effective set (/proc/self/status)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> bit & 1)
    return False


class PidfdMechanism:
    """Set ``SO_MAX_PACING_RATE`` on another process's socket (module docstring)."""

    name = "pidfd"

    def __init__(self) -> None:
        self._pidfds: dict[tuple[int, int], int] = {}  # (pid, start) -> pidfd

    @staticmethod
    def check_rights() -> None:
        """One line naming the missing right, before anything is paced."""
        for bit, name, why in ((CAP_SYS_PTRACE, "CAP_SYS_PTRACE", "to take the transfer tools' sockets with "
                                                                   "pidfd_getfd"),
                               (CAP_DAC_READ_SEARCH, "CAP_DAC_READ_SEARCH", "to list the transfer tools' "
                                                                            "/proc/PID/fd")):
            if not has_capability(bit):
                raise RightsError(f"scidmz agent (pidfd mechanism) needs {name} {why}: run it as root or grant "
                                  f"CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (deploy/systemd/scidmz-agent.service)")

    def set(self, owner: Owner, inode: int, value: int) -> bool:
        """Set ``value`` (payload bytes/s; ~0 = no maximum) on the socket; False if it is gone."""
        pidfd = self._pidfd(owner)
        if pidfd is None:
            return False
        r = _libc.syscall(_SYS_PIDFD_GETFD, pidfd, owner.fd, 0)
        if r < 0:
            e = ctypes.get_errno()
            if e in (errno.EBADF, errno.ESRCH):  # closed meanwhile, or the process exited
                return False
            raise OSError(e, f"pidfd_getfd on pid {owner.pid}: {os.strerror(e)}")
        fd = int(r)
        try:
            if os.fstat(fd).st_ino != inode:  # the descriptor number now names another file
                return False
            with socket.socket(fileno=fd) as s:  # closes the duplicate, never the owner's descriptor
                fd = -1
                s.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, struct.pack("Q", value))
        finally:
            if fd >= 0:
                os.close(fd)
        return True

    def _pidfd(self, owner: Owner) -> int | None:
        key = (owner.pid, owner.start)
        fd = self._pidfds.get(key)
        if fd is None:
            try:
                fd = os.pidfd_open(owner.pid)
            except OSError:
                return None
            if proc_start_time(owner.pid) != owner.start:  # the pid was recycled since the scan
                os.close(fd)
                return None
            self._pidfds[key] = fd
        return fd

    def forget(self, live: set[tuple[int, int]]) -> None:
        """Close the pidfds of processes that hold no paced socket any more."""
        for key in [k for k in self._pidfds if k not in live]:
            os.close(self._pidfds.pop(key))

    def close(self) -> None:
        self.forget(set())
