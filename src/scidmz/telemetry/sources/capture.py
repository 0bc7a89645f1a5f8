"""Live capture from a mirror interface: an AF_PACKET TPACKET_V3 ring read in blocks.

The kernel fills blocks of a memory-mapped ring with frames and kernel
timestamps; ``RingCapture.poll`` waits for retired blocks, walks each
block's packet headers with a numba kernel (offsets, lengths, timestamps),
parses all its frames in place with ``parse.parse_frames``, reassembles
mirror-tunnel fragments (``fragments.Reassembler``, as the file reader does)
and hands the block back to the kernel. No per-packet Python runs, and no frame is copied
before parsing.

``drops()`` reports the socket's ``PACKET_STATISTICS`` (packets the kernel
saw, packets it dropped because the ring was full, freeze count) added up
since the socket opened, together with the parser's per-reason drops.

Needs root (CAP_NET_RAW). The interface is typically the far end of a veth
that receives ``tc filter ... action mirred egress mirror dev TAP`` copies.
"""

from __future__ import annotations

import mmap
import select
import socket
import struct
from typing import Any

import numpy as np

from ..twin.parse import KIND_DROP, LINKTYPE_ETHERNET, PACKET_DTYPE, parse_frames, reason_counts
from .fragments import Reassembler

__all__ = ["RingCapture"]

SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_STATISTICS = 6
PACKET_VERSION = 10
PACKET_IGNORE_OUTGOING = 23
TPACKET_V3 = 2
ETH_P_ALL = 0x0003
TP_STATUS_KERNEL = 0
TP_STATUS_USER = 1


def _walk_block_py(ring, boff, num, first, off, cap, wlen, ts):
    """Packet headers of one TPACKET_V3 block -> frame offsets, lengths, ns timestamps."""
    p = boff + first
    k = 0
    end = ring.shape[0]
    for _ in range(num):
        if p + 48 > end:
            break
        nxt = (np.int64(ring[p]) | (np.int64(ring[p + 1]) << 8) | (np.int64(ring[p + 2]) << 16)
               | (np.int64(ring[p + 3]) << 24))
        sec = (np.int64(ring[p + 4]) | (np.int64(ring[p + 5]) << 8) | (np.int64(ring[p + 6]) << 16)
               | (np.int64(ring[p + 7]) << 24))
        nsec = (np.int64(ring[p + 8]) | (np.int64(ring[p + 9]) << 8) | (np.int64(ring[p + 10]) << 16)
                | (np.int64(ring[p + 11]) << 24))
        snap = (np.int64(ring[p + 12]) | (np.int64(ring[p + 13]) << 8) | (np.int64(ring[p + 14]) << 16)
                | (np.int64(ring[p + 15]) << 24))
        ln = (np.int64(ring[p + 16]) | (np.int64(ring[p + 17]) << 8) | (np.int64(ring[p + 18]) << 16)
              | (np.int64(ring[p + 19]) << 24))
        mac = np.int64(ring[p + 24]) | (np.int64(ring[p + 25]) << 8)
        if p + mac + snap > end:
            break
        off[k] = p + mac
        cap[k] = snap
        wlen[k] = ln
        ts[k] = sec * 1000000000 + nsec
        k += 1
        if nxt == 0:
            break
        p += nxt
    return k


_WALK: Any = None


def _walker() -> Any:
    global _WALK
    if _WALK is None:
        import numba

        _WALK = numba.njit(cache=True, nogil=True)(_walk_block_py)
    return _WALK


class RingCapture:
    """One AF_PACKET TPACKET_V3 ring on ``iface``; ``poll()`` returns parsed packets."""

    # 256 blocks of 256 KiB: a block is handed over when full or after
    # ``retire_ms``, so at low packet rates the block count, not the bytes,
    # bounds how long the reader may stall without kernel drops (~5 s here).
    def __init__(self, iface: str, tap: int = 0, block_size: int = 1 << 18, block_nr: int = 256,
                 frame_size: int = 2048, retire_ms: int = 20, ignore_outgoing: bool = False) -> None:
        if block_size % mmap.PAGESIZE or block_size & (block_size - 1):
            raise ValueError(f"block_size must be a power-of-two multiple of the page size, got {block_size}")
        self.iface, self.tap = iface, tap
        self.block_size, self.block_nr = block_size, block_nr
        try:
            # Protocol 0: the socket receives nothing until bind() names the interface,
            # so no frame of another interface lands in it before the ring exists.
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        except PermissionError:
            raise PermissionError("live capture needs root (CAP_NET_RAW) for AF_PACKET sockets") from None
        self.sock = s
        self._mm: mmap.mmap | None = None
        try:
            s.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V3)
            if ignore_outgoing:  # e.g. on loopback, where every packet is seen leaving and arriving
                s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            req = struct.pack("7I", block_size, block_nr, frame_size, block_size * block_nr // frame_size,
                              retire_ms, 0, 0)
            s.setsockopt(SOL_PACKET, PACKET_RX_RING, req)
            self._mm = mmap.mmap(s.fileno(), block_size * block_nr, mmap.MAP_SHARED,
                                 mmap.PROT_READ | mmap.PROT_WRITE)
            try:
                s.bind((iface, ETH_P_ALL))
            except OSError as exc:
                raise ValueError(f"cannot capture on interface {iface!r}: {exc.strerror}") from None
        except BaseException:
            self.close()
            raise
        self.ring = np.frombuffer(self._mm, dtype=np.uint8)
        self._status = np.frombuffer(self._mm, dtype=np.uint32)
        self._hdr = np.frombuffer(self._mm, dtype=np.uint32)
        self._next = 0
        self._poller = select.poll()
        self._poller.register(s.fileno(), select.POLLIN | select.POLLERR)
        self._kernel = {"kernel_packets": 0, "kernel_drops": 0, "kernel_freeze": 0}
        self._parse: dict[str, int] = {}
        self.packets = 0
        self._off, self._cap, self._len, self._ts = (np.zeros(block_size // 48 + 1, np.int64) for _ in range(4))
        self._lts = np.full(block_size // 48 + 1, LINKTYPE_ETHERNET, np.int64)
        self._frags = Reassembler()

    def poll(self, timeout: float = 0.05) -> np.ndarray:
        """Parsed packets of every block the kernel has retired (waits up to ``timeout`` s)."""
        out: list[np.ndarray] = []
        if not self._ready():
            self._poller.poll(int(timeout * 1000))
        walk = _walker()
        while self._ready():
            b = self._next * self.block_size
            w = b // 4
            num, first = int(self._hdr[w + 3]), int(self._hdr[w + 4])
            k = walk(self.ring, b, num, first, self._off, self._cap, self._len, self._ts)
            pk = parse_frames(self.ring, self._off[:k], self._cap[:k], self._len[:k], LINKTYPE_ETHERNET,
                              self._ts[:k], tap=self.tap)
            # mirror copies fragmented by the mirror's MTU: rebuilt before the block goes back (the
            # reassembler copies what it keeps)
            lost = self._frags.feed(self.ring, self._off[:k], self._cap[:k], self._len[:k], self._lts[:k],
                                    self._ts[:k], pk)
            if lost[0]:
                self._parse["fragment_lost"] = self._parse.get("fragment_lost", 0) + lost[0]
            self._status[w + 2] = TP_STATUS_KERNEL  # hand the block back
            self._next = (self._next + 1) % self.block_nr
            if k:
                for name, c in reason_counts(pk["reason"][pk["kind"] == KIND_DROP]).items():
                    self._parse[name] = self._parse.get(name, 0) + c
                self.packets += k
                out.append(pk)
        if not out:
            return np.zeros(0, dtype=PACKET_DTYPE)
        pk = np.concatenate(out) if len(out) > 1 else out[0]
        return pk[np.argsort(pk["ts_ns"], kind="stable")]

    def _ready(self) -> bool:
        return bool(self._status[self._next * self.block_size // 4 + 2] & TP_STATUS_USER)

    def drops(self) -> dict[str, int]:
        """Kernel PACKET_STATISTICS (cumulative) and parser drops since the socket opened."""
        if self.sock.fileno() >= 0:
            raw = self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 12)
            pk, dr, fr = struct.unpack("3I", raw)  # the kernel resets them on every read
            self._kernel["kernel_packets"] += pk
            self._kernel["kernel_drops"] += dr
            self._kernel["kernel_freeze"] += fr
        return {**self._kernel, **self._parse}

    def close(self) -> None:
        if self._mm is not None:
            for name in ("ring", "_status", "_hdr"):
                self.__dict__.pop(name, None)  # views must go before the map closes
            try:
                self._mm.close()
            except BufferError:
                pass  # a caller still holds a view; the map is freed with it
            self._mm = None
        self.sock.close()

    def __enter__(self) -> RingCapture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
