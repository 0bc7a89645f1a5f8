"""Pacing a DTN's own TCP streams: ``SO_MAX_PACING_RATE`` on the live sockets of a running sender.

The ``pacing`` host policy (``policies.host.pacing``; ESnet's host tuning caps a
DTN's streams with ``fq maxrate`` or this socket option) needs every DTN stream
capped at R*/streams, changed live when the target moves. This kernel has no fq
qdisc, but TCP paces internally once a socket has a maximum pacing rate
(net/core/sock.c: setting ``SO_MAX_PACING_RATE`` to anything but ~0 moves
``sk_pacing_status`` to ``SK_PACING_NEEDED``; net/ipv4/tcp_output.c paces in
``tcp_update_skb_after_send``), and the option may be changed on a live socket.

Mechanism (ours): ``pidfd_getfd(2)`` (Linux >= 5.6, syscall 438). ``SocketPacer``
opens a pidfd of the running sender, duplicates each of its TCP sockets
connected to the DTN's receiver into this process, sets the option on the
duplicate (the option belongs to the socket, which both descriptors share) and
closes the duplicate at once, so the sender's own close still ends its
connection. This works with an unmodified iperf3, GridFTP or any transfer tool,
as a host agent on a real DTN would; the alternative, a control channel into a
sender of our own, would pace only our sender. What it needs: the right to
ptrace the sender (root or CAP_SYS_PTRACE on the DTN host) — i.e. control of the
DTN host, which the campus border alone does not give.

Units: TCP's internal pacing charges the *headerless* segment
(``tcp_update_skb_after_send`` is called with the original skb, "completely
headerless" per ``__tcp_transmit_skb``; ``skb->len`` is the TCP payload), so the
option is payload bytes/s. scidmz's rates are Ethernet frame bytes
(``scidmz.units``); for full-size segments the frame rate is the payload rate x
``WIRE_PER_PAYLOAD`` (1514/1448), so a stream whose frames should leave at r
bit/s gets ``r / 8 / WIRE_PER_PAYLOAD`` bytes/s (``payload_bytes_per_s``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import struct
import threading
from pathlib import Path

from ..units import WIRE_PER_PAYLOAD
from .base import MIN_RATE, ActuatorError

__all__ = ["SocketPacer", "payload_bytes_per_s", "SO_MAX_PACING_RATE", "UNLIMITED"]

#: ``SO_MAX_PACING_RATE`` (include/uapi/asm-generic/socket.h); Python's socket module lacks it.
SO_MAX_PACING_RATE = 47
#: ``pidfd_getfd`` (one number on every architecture since Linux 5.6).
_SYS_PIDFD_GETFD = 438
#: ~0UL: the kernel's "no maximum" (what a socket starts with, and what ``lift`` sets).
UNLIMITED = 2**64 - 1
_NOT_OURS = -1

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def payload_bytes_per_s(frame_bps: float) -> int:
    """The ``SO_MAX_PACING_RATE`` (payload bytes/s) that makes full-size frames leave at ``frame_bps``.

    A rate of 0 would mean "no pacing" to the kernel (``tcp_update_skb_after_send``
    skips a zero rate), so anything below ``MIN_RATE`` is paced at ``MIN_RATE``.
    """
    return max(1, int(max(float(frame_bps), MIN_RATE) / 8.0 / WIRE_PER_PAYLOAD))


def _pidfd_getfd(pidfd: int, fd: int) -> int:
    r = _libc.syscall(_SYS_PIDFD_GETFD, pidfd, fd, 0)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return int(r)


class SocketPacer:
    """``SO_MAX_PACING_RATE`` on a sender process's TCP sockets to ``peer`` (see the module docstring).

    ``streams``: the sender's data streams; the aggregate rate is shared evenly
    among them. ``attach(pid)`` names the sender (a new one each episode),
    ``set_rate(bps)`` sets the aggregate frame rate (bit/s), ``refresh()`` paces the
    sockets that appeared since (call it often: a sender opens its streams
    after it starts), ``lift()`` removes the cap. Sockets to other addresses, and
    listening or unconnected ones, are left alone.
    """

    def __init__(self, peer: str, streams: int) -> None:
        if streams < 1:
            raise ValueError(f"a paced sender needs at least one stream, got {streams}")
        self.peer = str(peer)
        self.streams = int(streams)
        self._pid: int | None = None
        self._pidfd: int | None = None
        self._rate: float | None = None  # aggregate frame bit/s; None: not paced by us
        self._done: dict[int, int] = {}  # socket inode -> the option value we set on it (0: not ours)
        self._lock = threading.Lock()

    # -- the sender -------------------------------------------------------------------
    def attach(self, pid: int) -> None:
        """Pace process ``pid`` from now on (the current rate, if any, at the next ``refresh``)."""
        with self._lock:
            self._close_pidfd()
            try:
                self._pidfd = os.pidfd_open(int(pid))
            except OSError as exc:
                raise ActuatorError(f"cannot open the DTN sender (pid {pid}) to pace it: {exc.strerror}") from None
            self._pid = int(pid)
            self._done = {}

    def detach(self) -> None:
        """Forget the sender (its sockets die with it) and any rate; nothing is changed on the host."""
        with self._lock:
            self._close_pidfd()
            self._pid = None
            self._rate = None
            self._done = {}

    # -- the rate ---------------------------------------------------------------------
    def set_rate(self, bps: float) -> int:
        """Cap the sender's aggregate frame rate at ``bps`` bit/s (each stream ``bps / streams``);
        applied now to the sockets already open. Returns how many sockets were set."""
        v = float(bps)
        if not v >= 0 or v == float("inf"):
            raise ValueError(f"pacing rate must be a finite number >= 0 bit/s, got {bps!r}")
        with self._lock:
            if v != self._rate:
                self._rate = v
                self._done = {}
        return self.refresh()

    def lift(self) -> int:
        """Remove the cap from the sender's sockets (the kernel's ~0: no maximum)."""
        with self._lock:
            self._rate = None
            self._done = {}
        return self.refresh()

    @property
    def rate(self) -> float | None:
        """The aggregate frame rate we pace at (bit/s), None when not pacing."""
        return self._rate

    @property
    def paced_sockets(self) -> int:
        """How many of the sender's streams carry the current pacing (0 when not pacing)."""
        if self._rate is None:
            return 0
        want = self.per_socket_option()
        return sum(1 for v in self._done.values() if v == want)

    def per_socket_option(self) -> int:
        """The ``SO_MAX_PACING_RATE`` value each stream gets now (payload bytes/s; ``UNLIMITED`` if none)."""
        r = self._rate
        return UNLIMITED if r is None else payload_bytes_per_s(r / self.streams)

    def refresh(self) -> int:
        """Set the current option on every matching socket not yet set; returns how many were set now."""
        with self._lock:
            if self._pidfd is None:
                return 0
            want = self.per_socket_option()
            n = 0
            for fd, ino in self._socket_fds():
                if self._done.get(ino) in (want, _NOT_OURS):
                    continue
                verdict = self._apply(fd, want)
                if verdict:
                    n += 1
                    self._done[ino] = want
                elif verdict is False:
                    self._done[ino] = _NOT_OURS  # another peer or kind: never looked at again
            return n

    def socket_rates(self) -> list[int]:
        """The ``SO_MAX_PACING_RATE`` read back from each of the sender's sockets to ``peer`` (bytes/s)."""
        out: list[int] = []
        with self._lock:
            if self._pidfd is None:
                return out
            for fd, _ in self._socket_fds():
                with self._borrow(fd) as s:
                    if s is not None and self._is_stream(s) is True:
                        raw = s.getsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, 8)
                        out.append(struct.unpack("Q", raw.ljust(8, b"\0"))[0])
        return out

    def close(self) -> None:
        """Release the pidfd (the sockets keep what was set; they end with their episode)."""
        self.detach()

    # -- mechanics --------------------------------------------------------------------
    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def _socket_fds(self) -> list[tuple[int, int]]:
        """(fd in the sender, socket inode) of each of its open sockets."""
        out = []
        d = Path(f"/proc/{self._pid}/fd")
        try:
            names = os.listdir(d)
        except OSError:  # the sender has exited
            return out
        for name in names:
            try:
                link = os.readlink(d / name)
            except OSError:
                continue
            if link.startswith("socket:["):
                out.append((int(name), int(link[8:-1])))
        return out

    def _borrow(self, fd: int) -> _Borrowed:
        return _Borrowed(self._pidfd, fd)

    def _is_stream(self, s: socket.socket) -> bool | None:
        """True: a TCP socket connected to ``peer``; False: never one; None: not connected (yet)."""
        if s.family not in (socket.AF_INET, socket.AF_INET6) or s.type != socket.SOCK_STREAM:
            return False
        try:
            return s.getpeername()[0].removeprefix("::ffff:") == self.peer
        except OSError:  # a connect in progress, or a listening socket: look again next time
            return None

    def _apply(self, fd: int, value: int) -> bool | None:
        """Set ``value`` on the sender's ``fd`` if it is a stream to ``peer`` (``_is_stream``'s verdict)."""
        with self._borrow(fd) as s:
            if s is None:
                return None
            verdict = self._is_stream(s)
            if verdict:
                s.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, struct.pack("Q", value))
            return verdict


class _Borrowed:
    """A duplicate of another process's descriptor as a ``socket``, closed on exit (None if gone)."""

    def __init__(self, pidfd: int | None, fd: int) -> None:
        self.pidfd, self.fd = pidfd, fd
        self.sock: socket.socket | None = None

    def __enter__(self) -> socket.socket | None:
        if self.pidfd is None:
            return None
        try:
            dup = _pidfd_getfd(self.pidfd, self.fd)
        except OSError as exc:
            if exc.errno in (errno.EBADF, errno.ESRCH):  # closed meanwhile, or the sender exited
                return None
            raise ActuatorError(f"cannot reach the DTN sender's socket (pidfd_getfd: {exc.strerror}); "
                                "pacing needs root or CAP_SYS_PTRACE on the DTN host") from None
        try:
            self.sock = socket.socket(fileno=dup)
        except OSError:
            os.close(dup)
            return None
        return self.sock

    def __exit__(self, *exc: object) -> None:
        if self.sock is not None:
            self.sock.close()
