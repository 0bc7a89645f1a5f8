"""Vectorised pcap / pcapng reading (and a small writer for tests and tools).

The file is memory-mapped as one uint8 array; a numba kernel walks the
record (pcap) or block (pcapng) headers to find each frame's offset,
captured and wire length, timestamp (ns) and link type, then
``parse.parse_frames`` decodes the frames in one more pass. No per-packet
Python code runs. ``iter_capture`` does this a chunk of packets at a time
(the walk resumes where it stopped), so memory follows the chunk, not the
file; ``read_capture`` returns the whole file.

Bad files never raise past ``read_capture``'s header check, and one bad
record never ends the file: an impossible record header (captured length
beyond any snap length or the file, an absurd wire length) or a pcapng block
whose trailing length disagrees is skipped by scanning for the next plausible
header, as tolerant readers do, and counted (``corrupt_record``, with the
bytes skipped); records tshark reads through (a microsecond field of a second
or more, a captured length above the wire length) are read and counted
(``record_fixed``); a file ending inside a record is ``truncated_file``. A
file that is not pcap or pcapng at all is a one-line ``ValueError``.

Supported: pcap (us and ns magic, both byte orders), pcapng (SHB/IDB/EPB,
several sections and interfaces, ``if_tsresol`` decimal or binary and
``if_tsoffset``, exact to the ns, both byte orders; an option no clock can
have is a one-line ``CaptureInputError``; simple packet blocks carry no
timestamp and are counted as ``no_timestamp``). Link types: those of
``parse.LINKTYPES``. After parsing, GRE/ERSPAN packets fragmented by the
mirror's MTU are reassembled (``fragments``) and notes are counted (``notes``).
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

from ...fileio import atomic_write_bytes
from ..twin.parse import REASONS, parse_frames, reason_bytes, reason_counts
from .fragments import Reassembler
from .notes import SC_MAX_STEP, SC_REASONS, SC_STEPS, count_notes, scan

__all__ = ["Capture", "CaptureInputError", "CHUNK_PACKETS", "add_counts", "iter_capture", "iter_times", "read_capture", "write_pcap"]

MAX_CAPLEN = 262144
#: pcapng ``if_tsresol`` exponents read (ours): finer than 10^-18 s or 2^-63 s, a 64-bit timestamp
#: cannot hold even ten seconds, so such a value is a corrupt option, refused with one line.
MAX_TSRESOL_DEC = 18
MAX_TSRESOL_BIN = 63
#: ``if_tsoffset`` read (ours): beyond 2^32 s (136 years) it is no clock's offset; also keeps
#: timestamp + offset inside int64 nanoseconds.
MAX_TSOFFSET_S = 1 << 32
#: pcapng timestamps read (ours): up to 2^32 s after the epoch, pcap's 32-bit range.
MAX_TS_S = 1 << 32
# Largest wire length believed (ours): BIG TCP super-packets reach 512 KiB; a larger
# "original length" is a corrupt record header.
MAX_WIRE = 1 << 24
_R_CORRUPT = REASONS.index("corrupt_record")
_R_TRUNCFILE = REASONS.index("truncated_file")
_R_NOTS = REASONS.index("no_timestamp")
_R_FRAG = REASONS.index("fragment")


@dataclass
class Capture:
    """Packets of one capture (or chunk): ``packets`` (``parse.PACKET_DTYPE``) and what the
    reader and parser noticed: ``drops`` (records/packets per reason), ``drop_bytes`` (their
    wire bytes; for ``corrupt_record`` the bytes skipped), ``linktypes`` (records per link
    type), ``wire_bytes`` (all records' wire bytes). ``drops`` also holds what is read but
    named for a warning, not dropped (``notes``): no-L4 sub-counts, unsupported tunnels,
    and ``tunnel_fragment`` / ``fragment_lost`` (``fragments``)."""

    packets: np.ndarray
    drops: dict[str, int] = field(default_factory=dict)
    path: str = ""
    drop_bytes: dict[str, int] = field(default_factory=dict)
    linktypes: dict[int, int] = field(default_factory=dict)
    wire_bytes: int = 0
    clock_steps: int = 0  # times the capture's clock stepped back (``notes.scan``)
    clock_back_ns: int = 0  # the largest such step


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


def _pcap_head_ok(buf, o, le, nano, n, last_sec):
    """A plausible pcap record header at ``o`` (resynchronisation): lengths possible, the
    record inside the file, sub-second field in range, within a day of ``last_sec`` (if >= 0)."""
    if o + 16 > n:
        return False
    sec = _u32(buf, o, le)
    frac = _u32(buf, o + 4, le)
    incl = _u32(buf, o + 8, le)
    olen = _u32(buf, o + 12, le)
    if incl > MAX_CAPLEN or incl > olen or olen > MAX_WIRE or o + 16 + incl > n:
        return False
    if frac >= (1000000000 if nano else 1000000):
        return False
    if last_sec >= 0 and abs(sec - last_sec) > 86400:
        return False
    return True


def _walk_pcap_py(buf, le, nano, linktype, o, max_k, off, cap, orig, ts, lts, bad, last):
    """Walk pcap records from byte ``o`` (24 for the first) until ``max_k`` records or the end.

    A record header that cannot be right (captured length beyond any snap length or the
    file, wire length absurd) is skipped by scanning for the next plausible header whose
    successor is plausible too (or the end of the file), as tolerant readers do; each
    such jump counts one ``corrupt_record`` (``bad[0]``) and its bytes (``bad[3]``).
    Oddities tshark reads through are read too and counted in ``bad[4]``: a sub-second
    field of a second or more, a captured length above the wire length (then the wire
    length is the captured one). ``last`` carries the last good record's second.
    Returns (records, next byte offset, finished).
    """
    n = buf.shape[0]
    k = 0
    while o < n and k < max_k:
        if o + 16 > n:
            bad[1] += 1
            return k, n, True
        sec = _u32(buf, o, le)
        frac = _u32(buf, o + 4, le)
        incl = _u32(buf, o + 8, le)
        olen = _u32(buf, o + 12, le)
        if incl > MAX_CAPLEN or olen > MAX_WIRE or o + 16 + incl > n:
            if incl <= MAX_CAPLEN and incl <= olen and olen <= MAX_WIRE and o + 16 + incl > n:
                bad[1] += 1  # a plausible record cut by the end of the file
                return k, n, True
            # resynchronise: the next offset whose header, and its successor's, are plausible
            x = o + 1
            while x + 16 <= n:
                if _pcap_head_ok(buf, x, le, nano, n, last[0]):
                    nxt = x + 16 + _u32(buf, x + 8, le)
                    if nxt == n or _pcap_head_ok(buf, nxt, le, nano, n, last[0]):
                        break
                x += 1
            bad[0] += 1
            if x + 16 > n:
                bad[3] += n - o
                return k, n, True
            bad[3] += x - o
            o = x
            continue
        if frac >= (1000000000 if nano else 1000000) or incl > olen:
            bad[4] += 1
            if incl > olen:
                olen = incl
        off[k] = o + 16
        cap[k] = incl
        orig[k] = olen
        ts[k] = sec * 1000000000 + (frac if nano else frac * 1000)
        lts[k] = linktype
        last[0] = sec
        k += 1
        o += 16 + incl
    return k, o, o >= n


def _ts_to_ns(t, res_kind, res_exp, off_ns):
    """A pcapng timestamp of ``t`` units (10^-exp s, or 2^-exp s for kind 1) plus the
    interface's ``if_tsoffset`` as ns, floored to the ns, without overflow for any exponent
    the reader accepts (decimal <= MAX_TSRESOL_DEC, binary <= MAX_TSRESOL_BIN)."""
    if res_kind == 0:
        if res_exp <= 9:
            m = np.int64(1)
            for _ in range(9 - res_exp):
                m *= 10
            return t * m + off_ns
        d = np.int64(1)
        for _ in range(res_exp - 9):
            d *= 10
        return t // d + off_ns
    sec = t >> res_exp
    rem = t & ((np.int64(1) << res_exp) - 1)
    if res_exp <= 32:  # rem < 2^32: rem * 10^9 fits in 63 bits
        frac = (rem * 1000000000) >> res_exp
    else:  # rem * 10^9 as hi * 2^32 + lo, each below 2^62; floor((hi * 2^32 + lo) / 2^e)
        hi = (rem >> 32) * 1000000000
        lo = (rem & 0xFFFFFFFF) * 1000000000
        frac = (hi + (lo >> 32)) >> (res_exp - 32)
    return sec * 1000000000 + frac + off_ns


def _ts_fits(t, res_kind, res_exp):
    """A pcapng timestamp of at most 2^32 s (pcap's own range; with ``MAX_TSOFFSET_S`` the sum
    stays inside int64 ns); the 64-bit field read as negative (top bit set) is beyond it too."""
    if t < 0:
        return False
    if res_kind == 1:
        return (t >> res_exp) <= MAX_TS_S
    d = np.int64(1)
    for _ in range(res_exp):
        d *= 10
        if d > t:
            return True
    return t // d <= MAX_TS_S


def _block_ok(buf, o, n):
    """A plausible pcapng block at ``o`` in either byte order: a known type, a length that is a
    multiple of 4 and fits, and the same length repeated at its end (resynchronisation)."""
    if o + 12 > n:
        return False
    for le in (True, False):
        bt = _u32(buf, o, le)
        bl = _u32(buf, o + 4, le)
        if (bt in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0xBAD, 0x40000BAD, 0x0A0D0D0A) and bl >= 12
                and bl % 4 == 0 and o + bl <= n and _u32(buf, o + bl - 4, le) == bl):
            return True
    return False


def _walk_pcapng_py(buf, o, max_k, state, if_lt, if_kind, if_exp, if_off, off, cap, orig, ts, lts, bad):
    """Walk pcapng blocks from byte ``o`` until ``max_k`` enhanced packet blocks or the end.

    ``state`` ([little-endian, interfaces seen, refusal]) and the ``if_*`` arrays carry the
    section's byte order and interface descriptions (link type, ``if_tsresol``,
    ``if_tsoffset`` in ns) from one call to the next. An interface option no clock can
    have (``_refusal``) stops the walk with ``state[2:5]`` = (option code, interface,
    value) for the caller's one-line refusal. A block
    that cannot be right (length, trailing length, an unknown interface) is skipped by
    scanning 4-byte steps for the next plausible block (``_block_ok``), counted in
    ``bad[0]`` (and its bytes in ``bad[3]``). Returns (packets kept, next byte offset, finished).
    """
    n = buf.shape[0]
    k = 0
    le = state[0] == 1
    nif = state[1]
    while o < n and k < max_k:
        if o + 12 > n:
            bad[1] += 1
            return k, n, True
        corrupt = False
        if buf[o] == 0x0A and buf[o + 1] == 0x0D and buf[o + 2] == 0x0D and buf[o + 3] == 0x0A:
            bom = _u32(buf, o + 8, True)
            if bom == 0x1A2B3C4D:
                le = True
                nif = 0
            elif bom == 0x4D3C2B1A:
                le = False
                nif = 0
            else:
                corrupt = True
        btype = _u32(buf, o, le)
        blen = _u32(buf, o + 4, le)
        if not corrupt:
            if blen < 12 or blen % 4 != 0 or blen > 16 * MAX_CAPLEN:
                corrupt = True
            elif o + blen > n:
                bad[1] += 1
                return k, n, True
            elif _u32(buf, o + blen - 4, le) != blen:
                corrupt = True
        if not corrupt and btype == 1:  # interface description block
            if blen < 20 or nif >= 256:
                corrupt = True
            else:
                if_lt[nif] = _u16(buf, o + 8, le)
                if_kind[nif] = 0
                if_exp[nif] = 6
                if_off[nif] = 0
                p = o + 16
                end = o + blen - 4
                while p + 4 <= end:
                    code = _u16(buf, p, le)
                    olen = _u16(buf, p + 2, le)
                    if code == 0 or p + 4 + olen > end:
                        break
                    if code == 9 and olen >= 1:
                        v = np.int64(buf[p + 4])
                        if_kind[nif] = 1 if v & 0x80 else 0
                        if_exp[nif] = v & 0x7F
                        if (v & 0x7F) > (MAX_TSRESOL_BIN if v & 0x80 else MAX_TSRESOL_DEC):
                            state[2], state[3], state[4] = 9, nif, v
                            return k, o, True
                    elif code == 14 and olen >= 8:  # if_tsoffset: signed seconds
                        secs = (_u32(buf, p + 8, le) << 32) | _u32(buf, p + 4, le) if le else (
                            (_u32(buf, p + 4, le) << 32) | _u32(buf, p + 8, le))
                        if secs > MAX_TSOFFSET_S or secs < -MAX_TSOFFSET_S:
                            state[2], state[3], state[4] = 14, nif, secs
                            return k, o, True
                        if_off[nif] = secs * 1000000000
                    p += 4 + ((olen + 3) // 4) * 4
                nif += 1
        elif not corrupt and btype == 6:  # enhanced packet block
            iid = _u32(buf, o + 8, le)
            incl = _u32(buf, o + 20, le)
            olen = _u32(buf, o + 24, le)
            if blen < 32 or iid >= nif or incl > MAX_CAPLEN or 28 + incl > blen - 4:
                corrupt = True
            else:
                if incl > olen:  # read on, as tshark does; the wire length is at least the capture
                    bad[4] += 1
                    olen = incl
                t = (_u32(buf, o + 12, le) << 32) | _u32(buf, o + 16, le)
                if _ts_fits(t, if_kind[iid], if_exp[iid]):
                    off[k] = o + 28
                    cap[k] = incl
                    orig[k] = olen
                    ts[k] = _ts_to_ns(t, if_kind[iid], if_exp[iid], if_off[iid])
                    lts[k] = if_lt[iid]
                    k += 1
                else:  # a timestamp no int64 ns holds: the block is skipped whole, counted corrupt
                    bad[0] += 1
                    bad[3] += blen
        elif not corrupt and btype == 3:  # simple packet block: no timestamp, unusable for timing
            bad[2] += 1
        if corrupt:
            x = o + 4
            while x + 12 <= n and not _block_ok(buf, x, n):
                x += 4
            bad[0] += 1
            if x + 12 > n:
                bad[3] += n - o
                o = n
                break
            bad[3] += x - o
            o = x
            continue
        o += blen
    state[0] = 1 if le else 0
    state[1] = nif
    return k, o, o >= n


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
        g["_ts_fits"] = jit(_ts_fits)
        g["_pcap_head_ok"] = jit(_pcap_head_ok)
        g["_block_ok"] = jit(_block_ok)
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


def _drops(pk: np.ndarray, wire: np.ndarray, bad: np.ndarray, reason: np.ndarray | None,
           per_reason: np.ndarray) -> tuple[dict[str, int], dict[str, int]]:
    """Per-reason counts and wire bytes of the unusable packets, the reader's counters, and
    the L3-only notes (fragments, other protocols: counted in class bytes, not dropped).
    ``reason``: the packets' reasons (contiguous), ``per_reason``: their histogram; a chunk
    with nothing but readable packets costs no further pass."""
    drops: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    if reason is not None and per_reason[1:].any():
        gone = pk["kind"] == 0
        drops = reason_counts(reason[gone])
        nbytes = reason_bytes(reason[gone], wire[gone])
        for name in ("fragment", "other_protocol"):
            code = REASONS.index(name)
            if per_reason[code]:
                drops[name] = int(per_reason[code])
                nbytes[name] = int(wire[reason == code].sum())
    for code, count in ((_R_CORRUPT, bad[0]), (_R_TRUNCFILE, bad[1]), (_R_NOTS, bad[2])):
        if count:
            drops[REASONS[code]] = drops.get(REASONS[code], 0) + int(count)
    if bad[3]:
        nbytes[REASONS[_R_CORRUPT]] = nbytes.get(REASONS[_R_CORRUPT], 0) + int(bad[3])
    if bad[4]:
        drops["record_fixed"] = int(bad[4])
    return drops, nbytes


_NO_REASONS = np.zeros(len(REASONS), np.int64)


def _reasons(pk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The packets' reasons (one contiguous copy) and their histogram; only for a chunk where
    some packet has a reason (``notes.scan`` says so), so the common chunk pays neither."""
    reason = np.ascontiguousarray(pk["reason"])
    return reason, np.bincount(reason, minlength=len(REASONS))


def _add_lost(drops: dict[str, int], nbytes: dict[str, int], lost: tuple[int, int]) -> None:
    """Tunnel fragments whose packet could not be reassembled (``fragments``): their rows were
    ``tunnel_fragment`` when read (maybe in an earlier chunk); they are counted lost here, a drop."""
    if lost[0]:
        drops["fragment_lost"] = drops.get("fragment_lost", 0) + int(lost[0])
        nbytes["fragment_lost"] = nbytes.get("fragment_lost", 0) + int(lost[1])


def _linktypes(lts: np.ndarray) -> dict[int, int]:
    if lts.size == 0:
        return {}
    if lts[0] == lts[-1] and bool(np.all(lts == lts[0])):
        return {int(lts[0]): int(lts.size)}
    vals, counts = np.unique(lts, return_counts=True)
    return {int(v): int(c) for v, c in zip(vals, counts, strict=True)}


def iter_capture(path: str | os.PathLike[str], tap: int = 0, chunk: int = CHUNK_PACKETS) -> Iterator[Capture]:
    """Read a pcap or pcapng file as ``Capture`` chunks of at most ``chunk`` packets, in file order.

    Memory is bounded by the chunk, not the file (the file is memory-mapped). The
    header is checked before the first chunk: a file that is not a capture raises here.
    """
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1 packet, got {chunk}")
    p = Path(path)
    buf, kind, le, nano, linktype = _open(p)
    chunks = _chunks(p, buf, kind, le, nano, linktype, tap, int(chunk))
    return _ahead(chunks) if (os.cpu_count() or 1) > 1 else chunks


def _ahead(items: Iterator[Capture], depth: int = 1) -> Iterator[Capture]:
    """``items``, produced one chunk ahead by a thread: the walk and parse kernels release the
    GIL, so the next chunk is read while the caller's data plane runs on this one (ours: on
    two cores a replay's time is then about the slower of the two, not their sum)."""
    import queue
    import threading

    q: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put(("item", item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(("end", None))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            q.put(("error", exc))

    t = threading.Thread(target=produce, name="capture-reader", daemon=True)
    t.start()
    try:
        while True:
            what, item = q.get()
            if what == "end":
                return
            if what == "error":
                raise item
            yield item
    finally:
        stop.set()
        while t.is_alive():
            try:
                q.get(timeout=0.05)
            except queue.Empty:
                pass


def iter_times(path: str | os.PathLike[str], chunk: int = CHUNK_PACKETS) -> Iterator[np.ndarray]:
    """The records' timestamps (ns), a chunk at a time, from the record headers alone."""
    for ts, _n in _walk(*_open(Path(path)), chunk):
        yield ts


def _walk(buf: np.ndarray, kind: str, le: bool, nano: bool, linktype: int,
          chunk: int) -> Iterator[tuple[np.ndarray, int]]:
    k = _kernels()
    off, cap, orig, ts, lts = (np.empty(chunk, np.int64) for _ in range(5))
    bad = np.zeros(5, np.int64)
    last = np.array([-1], np.int64)
    o = 24 if kind == "pcap" else 0
    state = np.array([1, 0, 0, 0, 0], np.int64)
    if_lt, if_kind, if_exp, if_off = (np.zeros(256, np.int64) for _ in range(4))
    done = False
    while not done:
        if kind == "pcap":
            n, o, done = k["pcap"](buf, le, nano, linktype, o, chunk, off, cap, orig, ts, lts, bad, last)
        else:
            n, o, done = k["pcapng"](buf, o, chunk, state, if_lt, if_kind, if_exp, if_off, off, cap, orig, ts,
                                     lts, bad)
            _refusal(buf, state)
        _release(buf, o)
        yield ts[:n].copy(), n


def _chunks(p: Path, buf: np.ndarray, kind: str, le: bool, nano: bool, linktype: int, tap: int,
            chunk: int) -> Iterator[Capture]:
    k = _kernels()
    off, cap, orig, ts, lts = (np.empty(chunk, np.int64) for _ in range(5))
    bad = np.zeros(5, np.int64)
    last = np.array([-1], np.int64)  # pcap: the last good record's second
    o = 24 if kind == "pcap" else 0
    state = np.array([1, 0, 0, 0, 0], np.int64)  # pcapng: little-endian, no interface yet, no refusal
    if_lt, if_kind, if_exp, if_off = (np.zeros(256, np.int64) for _ in range(4))
    frags = Reassembler()
    latest: int | None = None  # the previous chunk's last timestamp
    done = False
    while not done:
        bad[:] = 0
        if kind == "pcap":
            n, o, done = k["pcap"](buf, le, nano, linktype, o, chunk, off, cap, orig, ts, lts, bad, last)
        else:
            n, o, done = k["pcapng"](buf, o, chunk, state, if_lt, if_kind, if_exp, if_off, off, cap, orig, ts,
                                     lts, bad)
            _refusal(buf, state, p)
        pk = parse_frames(buf, off[:n], cap[:n], orig[:n], lts[:n], ts[:n], tap=tap)
        seen = scan(pk, orig[:n], ts[:n], latest)
        reason, per_reason = _reasons(pk) if seen[SC_REASONS] else (None, _NO_REASONS)
        lost = frags.feed(buf, off[:n], cap[:n], orig[:n], lts[:n], ts[:n], pk, int(per_reason[_R_FRAG]))
        if per_reason[_R_FRAG]:  # reassembly rewrote rows
            reason, per_reason = _reasons(pk)
            seen = scan(pk, orig[:n], ts[:n], latest)
        if done:
            end = frags.flush()
            lost = (lost[0] + end[0], lost[1] + end[1])
        drops, nbytes = _drops(pk, orig[:n], bad, reason, per_reason)
        _add_lost(drops, nbytes, lost)
        count_notes(buf, off[:n], cap[:n], orig[:n], lts[:n], pk, per_reason, seen, drops, nbytes)
        _release(buf, o)
        latest = int(ts[n - 1]) if n else latest
        yield Capture(packets=pk, drops=drops, path=str(p), drop_bytes=nbytes, linktypes=_linktypes(lts[:n]),
                      wire_bytes=int(orig[:n].sum()), clock_steps=int(seen[SC_STEPS]),
                      clock_back_ns=int(seen[SC_MAX_STEP]))


class CaptureInputError(RuntimeError):
    """The capture says something no capture can mean (a pcapng interface option, a span of
    timestamps): refused with one line, exit 1, as the other refusals of a capture's content."""


def _refusal(buf: np.ndarray, state: np.ndarray, p: Path | str = "") -> None:
    code, iface, value = (int(v) for v in state[2:5])
    if not code:
        return
    name = p or getattr(buf, "filename", "") or "capture"
    if code == 9:
        what = (f"2^-{value & 0x7F}" if value & 0x80 else f"10^-{value}") + " s"
        raise CaptureInputError(f"{name}: pcapng interface {iface} has if_tsresol {what} (byte 0x{value:02x}), "
                                f"finer than any clock (at most 10^-{MAX_TSRESOL_DEC} or 2^-{MAX_TSRESOL_BIN} "
                                "s are read): a corrupt interface description")
    raise CaptureInputError(f"{name}: pcapng interface {iface} has if_tsoffset {value} s, beyond "
                            f"+-{MAX_TSOFFSET_S} s (136 years): a corrupt interface description")


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
    out = Capture(packets=parts[0].packets if len(parts) == 1 else np.concatenate([c.packets for c in parts]),
                  path=str(Path(path)))
    for c in parts:
        add_counts(out, c)
    return out


def add_counts(total: Capture, part: Capture) -> None:
    """Add ``part``'s counters (drops, drop bytes, link types, wire bytes) into ``total``."""
    for mine, theirs in ((total.drops, part.drops), (total.drop_bytes, part.drop_bytes),
                         (total.linktypes, part.linktypes)):
        for key, v in theirs.items():
            mine[key] = mine.get(key, 0) + int(v)  # type: ignore[index]
    total.wire_bytes += part.wire_bytes
    total.clock_steps += part.clock_steps
    total.clock_back_ns = max(total.clock_back_ns, part.clock_back_ns)


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
