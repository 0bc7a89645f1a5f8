"""Vectorised pcap / pcapng reading (and a small writer for tests and tools).

The file is memory-mapped as one uint8 array; a numba kernel walks the
record (pcap) or block (pcapng) headers to find each frame's offset,
captured and wire length, timestamp (ns) and link type, then
``parse.parse_frames`` decodes the frames in one more pass. No per-packet
Python code runs. ``iter_capture`` does this a chunk of packets at a time
(the walk resumes where it stopped), so memory follows the chunk, not the
file; ``read_capture`` returns the whole file.

Bad files never raise past ``read_capture``'s header check: an impossible
record length, a block whose trailing length disagrees, or a file ending
inside a record stops the walk and is counted (``corrupt_record``,
``truncated_file``); everything before it is kept. A file that is not pcap or
pcapng at all is a one-line ``ValueError``.

Supported: pcap (us and ns magic, both byte orders), pcapng (SHB/IDB/EPB,
several sections and interfaces, ``if_tsresol`` decimal or binary, both byte
orders; simple packet blocks carry no timestamp and are counted as
``no_timestamp``). Link types: Ethernet, raw IPv4, Linux cooked (SLL).
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..fileio import atomic_write_bytes
from .parse import REASONS, parse_frames, reason_counts

__all__ = ["Capture", "CHUNK_PACKETS", "iter_capture", "read_capture", "write_pcap"]

MAX_CAPLEN = 262144
_R_CORRUPT = REASONS.index("corrupt_record")
_R_TRUNCFILE = REASONS.index("truncated_file")
_R_NOTS = REASONS.index("no_timestamp")


@dataclass
class Capture:
    """Packets of one capture: ``packets`` (``parse.PACKET_DTYPE``) and drop counters."""

    packets: np.ndarray
    drops: dict[str, int] = field(default_factory=dict)
    path: str = ""


def _u32(buf, o, le):
    if le:
        return (np.int64(buf[o]) | (np.int64(buf[o + 1]) << 8) | (np.int64(buf[o + 2]) << 16)
                | (np.int64(buf[o + 3]) << 24))
    return ((np.int64(buf[o]) << 24) | (np.int64(buf[o + 1]) << 16) | (np.int64(buf[o + 2]) << 8)
            | np.int64(buf[o + 3]))


def _u16(buf, o, le):
    if le:
        return np.int64(buf[o]) | (np.int64(buf[o + 1]) << 8)
    return (np.int64(buf[o]) << 8) | np.int64(buf[o + 1])


def _walk_pcap_py(buf, le, nano, linktype, o, max_k, off, cap, orig, ts, lts, bad):
    """Walk pcap records from byte ``o`` (24 for the first) until ``max_k`` records or the end.

    Returns (records, next byte offset, finished); a bad or cut record finishes the walk.
    """
    n = buf.shape[0]
    k = 0
    while o < n and k < max_k:
        if o + 16 > n:
            bad[1] += 1
            return k, o, True
        sec = _u32(buf, o, le)
        frac = _u32(buf, o + 4, le)
        incl = _u32(buf, o + 8, le)
        olen = _u32(buf, o + 12, le)
        if incl > MAX_CAPLEN or incl > olen or olen > 0x7FFFFFFF or ((not nano) and frac >= 1000000) or (
                nano and frac >= 1000000000):
            bad[0] += 1
            return k, o, True
        if o + 16 + incl > n:
            bad[1] += 1
            return k, o, True
        off[k] = o + 16
        cap[k] = incl
        orig[k] = olen
        ts[k] = sec * 1000000000 + (frac if nano else frac * 1000)
        lts[k] = linktype
        k += 1
        o += 16 + incl
    return k, o, o >= n


def _ts_to_ns(t, res_kind, res_exp):
    # res_kind 0: 10^-exp seconds; 1: 2^-exp seconds
    if res_kind == 0:
        if res_exp <= 9:
            m = np.int64(1)
            for _ in range(9 - res_exp):
                m *= 10
            return t * m
        d = np.int64(1)
        for _ in range(res_exp - 9):
            d *= 10
        return t // d
    sec = t >> res_exp
    rem = t & ((np.int64(1) << res_exp) - 1)
    return sec * 1000000000 + ((rem * 1000000000) >> res_exp)


def _walk_pcapng_py(buf, o, max_k, state, if_lt, if_kind, if_exp, off, cap, orig, ts, lts, bad):
    """Walk pcapng blocks from byte ``o`` until ``max_k`` enhanced packet blocks or the end.

    ``state`` ([little-endian, interfaces seen]) and the ``if_*`` arrays carry the
    section's byte order and interface descriptions from one call to the next.
    Returns (packets kept, next byte offset, finished).
    """
    n = buf.shape[0]
    k = 0
    le = state[0] == 1
    nif = state[1]
    done = False
    while o < n and k < max_k:
        if o + 12 > n:
            bad[1] += 1
            done = True
            break
        if buf[o] == 0x0A and buf[o + 1] == 0x0D and buf[o + 2] == 0x0D and buf[o + 3] == 0x0A:
            if o + 12 > n:
                bad[1] += 1
                done = True
                break
            bom = _u32(buf, o + 8, True)
            if bom == 0x1A2B3C4D:
                le = True
            elif bom == 0x4D3C2B1A:
                le = False
            else:
                bad[0] += 1
                done = True
                break
            nif = 0
        btype = _u32(buf, o, le)
        blen = _u32(buf, o + 4, le)
        if blen < 12 or blen % 4 != 0 or blen > 16 * MAX_CAPLEN:
            bad[0] += 1
            done = True
            break
        if o + blen > n:
            bad[1] += 1
            done = True
            break
        if _u32(buf, o + blen - 4, le) != blen:
            bad[0] += 1
            done = True
            break
        if btype == 1:  # interface description block
            if blen < 20 or nif >= 256:
                bad[0] += 1
                done = True
                break
            if_lt[nif] = _u16(buf, o + 8, le)
            if_kind[nif] = 0
            if_exp[nif] = 6
            p = o + 16
            end = o + blen - 4
            while p + 4 <= end:
                code = _u16(buf, p, le)
                olen = _u16(buf, p + 2, le)
                if code == 0:
                    break
                if p + 4 + olen > end:
                    break
                if code == 9 and olen >= 1:
                    v = np.int64(buf[p + 4])
                    if v & 0x80:
                        if_kind[nif] = 1
                        if_exp[nif] = min(v & 0x7F, 62)
                    else:
                        if_kind[nif] = 0
                        if_exp[nif] = min(v, 18)
                p += 4 + ((olen + 3) // 4) * 4
            nif += 1
        elif btype == 6:  # enhanced packet block
            if blen < 32:
                bad[0] += 1
                done = True
                break
            iid = _u32(buf, o + 8, le)
            incl = _u32(buf, o + 20, le)
            olen = _u32(buf, o + 24, le)
            if iid >= nif or incl > olen or incl > MAX_CAPLEN or 28 + incl > blen - 4:
                bad[0] += 1
                done = True
                break
            t = (_u32(buf, o + 12, le) << 32) | _u32(buf, o + 16, le)
            off[k] = o + 28
            cap[k] = incl
            orig[k] = olen
            ts[k] = _ts_to_ns(t, if_kind[iid], if_exp[iid])
            lts[k] = if_lt[iid]
            k += 1
        elif btype == 3:  # simple packet block: no timestamp, unusable for timing
            bad[2] += 1
        o += blen
    state[0] = 1 if le else 0
    state[1] = nif
    return k, o, done or o >= n


_KERNELS: dict[str, Any] = {}


def _kernels() -> dict[str, Any]:
    if not _KERNELS:
        import numba

        g = globals()
        jit = numba.njit(cache=True, nogil=True)
        # The walkers call these helpers, so they are compiled first and rebound.
        g["_u32"] = jit(_u32)
        g["_u16"] = jit(_u16)
        g["_ts_to_ns"] = jit(_ts_to_ns)
        _KERNELS["pcap"] = jit(_walk_pcap_py)
        _KERNELS["pcapng"] = jit(_walk_pcapng_py)
    return _KERNELS


#: Packets per chunk of a streamed capture (ours): ~25 MB of index and parsed columns, far
#: above any per-call overhead, far below a large capture.
CHUNK_PACKETS = 1 << 18


def _open(p: Path) -> tuple[np.ndarray, str, bool, bool, int]:
    if not p.exists():
        raise FileNotFoundError(f"capture file not found: {p}")
    if p.is_dir():
        raise ValueError(f"{p}: is a directory, not a pcap or pcapng file")
    size = p.stat().st_size
    if size < 24:
        raise ValueError(f"{p}: too short to be a pcap or pcapng file ({size} bytes)")
    buf = np.memmap(p, dtype=np.uint8, mode="r")
    head = bytes(buf[:24])
    magic_le = struct.unpack("<I", head[:4])[0]
    le, nano, linktype = True, False, 1
    if magic_le in (0xA1B2C3D4, 0xA1B23C4D):
        kind, le, nano = "pcap", True, magic_le == 0xA1B23C4D
    elif magic_le in (0xD4C3B2A1, 0x4D3CB2A1):
        kind, le, nano = "pcap", False, magic_le == 0x4D3CB2A1
    elif head[:4] == b"\x0a\x0d\x0d\x0a":
        kind = "pcapng"
    else:
        raise ValueError(f"{p}: not a pcap or pcapng file (magic 0x{magic_le:08x})")
    if kind == "pcap":
        linktype = struct.unpack("<I" if le else ">I", head[20:24])[0] & 0xFFFF
    return buf, kind, le, nano, linktype


def _drops(pk: np.ndarray, bad: np.ndarray) -> dict[str, int]:
    drops = reason_counts(pk["reason"][pk["kind"] == 0])
    for code, count in ((_R_CORRUPT, bad[0]), (_R_TRUNCFILE, bad[1]), (_R_NOTS, bad[2])):
        if count:
            drops[REASONS[code]] = drops.get(REASONS[code], 0) + int(count)
    for name, code in (("fragment", 8), ("other_protocol", 9)):
        c = int(np.count_nonzero(pk["reason"] == code))
        if c:
            drops[name] = c
    return drops


def iter_capture(path: str | os.PathLike[str], tap: int = 0, chunk: int = CHUNK_PACKETS) -> Iterator[Capture]:
    """Read a pcap or pcapng file as ``Capture`` chunks of at most ``chunk`` packets, in file order.

    Memory is bounded by the chunk, not the file (the file is memory-mapped). The
    header is checked before the first chunk: a file that is not a capture raises here.
    """
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1 packet, got {chunk}")
    p = Path(path)
    buf, kind, le, nano, linktype = _open(p)
    return _chunks(p, buf, kind, le, nano, linktype, tap, int(chunk))


def _chunks(p: Path, buf: np.ndarray, kind: str, le: bool, nano: bool, linktype: int, tap: int,
            chunk: int) -> Iterator[Capture]:
    k = _kernels()
    off, cap, orig, ts, lts = (np.empty(chunk, np.int64) for _ in range(5))
    bad = np.zeros(3, np.int64)
    o = 24 if kind == "pcap" else 0
    state = np.array([1, 0], np.int64)  # pcapng: little-endian, no interface yet
    if_lt, if_kind, if_exp = (np.zeros(256, np.int64) for _ in range(3))
    done = False
    while not done:
        bad[:] = 0
        if kind == "pcap":
            n, o, done = k["pcap"](buf, le, nano, linktype, o, chunk, off, cap, orig, ts, lts, bad)
        else:
            n, o, done = k["pcapng"](buf, o, chunk, state, if_lt, if_kind, if_exp, off, cap, orig, ts, lts, bad)
        pk = parse_frames(buf, off[:n], cap[:n], orig[:n], lts[:n], ts[:n], tap=tap)
        _release(buf, o)
        yield Capture(packets=pk, drops=_drops(pk, bad), path=str(p))


def _release(buf: np.ndarray, upto: int) -> None:
    """Drop the mapped file pages before byte ``upto`` from this process's memory: the parsed
    packets hold all that is needed, and the pages would otherwise count in the resident
    size until the end, making a replay's memory follow the file after all."""
    mm = getattr(buf, "_mmap", None)
    upto -= upto % mmap.PAGESIZE
    if mm is None or upto <= 0 or not hasattr(mm, "madvise"):
        return
    try:
        mm.madvise(mmap.MADV_DONTNEED, 0, upto)
    except (OSError, ValueError):
        pass  # only a memory figure is at stake, never the result


def read_capture(path: str | os.PathLike[str], tap: int = 0) -> Capture:
    """Read a whole pcap or pcapng file into parsed packets plus per-reason drop counts."""
    parts = list(iter_capture(path, tap))
    drops: dict[str, int] = {}
    for c in parts:
        for key, v in c.drops.items():
            drops[key] = drops.get(key, 0) + v
    pk = parts[0].packets if len(parts) == 1 else np.concatenate([c.packets for c in parts])
    return Capture(packets=pk, drops=drops, path=str(Path(path)))


def write_pcap(path: str | os.PathLike[str], frames: list[bytes], ts_ns: np.ndarray | list[int],
               linktype: int = 1, nano: bool = True, orig_len: list[int] | None = None) -> Path:
    """Write frames as a (nanosecond by default) pcap, atomically (temp file + rename)."""
    p = Path(path)
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    parts = [struct.pack("<IHHiIII", magic, 2, 4, 0, 0, MAX_CAPLEN, linktype)]
    for i, fr in enumerate(frames):
        t = int(ts_ns[i])
        sec, frac = divmod(t, 1_000_000_000)
        if not nano:
            frac //= 1000
        ol = len(fr) if orig_len is None else int(orig_len[i])
        parts.append(struct.pack("<IIII", sec, frac, len(fr), ol))
        parts.append(fr)
    return atomic_write_bytes(p, b"".join(parts))
