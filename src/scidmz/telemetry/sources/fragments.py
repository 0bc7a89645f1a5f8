"""Reassembly of mirror-tunnel packets that the mirror's MTU split into IP fragments.

A remote mirror session (GRE, ERSPAN, VXLAN) adds its headers to a full-size
copied frame, so on a 1500-byte path the outer IPv4/IPv6 packet is often
fragmented. Only the first fragment holds the tunnel header and the start
of the inner frame; without reassembly the inner frames were lost silently
(their outer fragments counted as L3 bytes of the mirror's own addresses).

``Reassembler.feed`` runs on each parsed chunk, after ``parse.parse_frames``:
a numba kernel reads the outermost IP header of every packet the parser
marked ``fragment`` (the same link, VLAN and MPLS helpers the parser uses);
fragments of GRE (protocol 47: GRE, ERSPAN) are grouped by (addresses,
identification, protocol) as RFC 791 / RFC 8200 define. A complete group is rebuilt as one frame (the
first fragment's link and IP headers, lengths fixed, flags cleared, the IPv6
fragment header removed) and parsed like any record; it takes the row of the
fragment that completed it (its timestamp, as tshark shows a reassembled
packet at its last fragment). The other fragments' rows become
``tunnel_fragment`` (not a drop: their bytes are in the reassembled packet).
Fragments of other traffic (a host's own fragmented UDP) stay ``fragment``,
as before: L3 bytes of their class. An IPv6 atomic fragment (a fragment header
with offset 0 and no more fragments, RFC 6946) of any protocol is read as the
unfragmented packet it is.

Bounds (ours, labelled as such): a group that is not complete within
``FRAG_TIMEOUT_NS`` of its first fragment (capture time) is lost, as the
Linux stack's ``ipfrag_time`` (30 s) does; the buffered payload is held under
``FRAG_MAX_BYTES`` by losing the oldest groups first; a group may hold at most
``FRAG_MAX_PIECES`` fragments. A lost group's fragments are counted, packets
and wire bytes, as ``fragment_lost`` (a drop: the inner frames are gone).
The file reader (``pcap``) and the live ring (``capture.RingCapture``) both
run it. Not reassembled: VXLAN (a UDP fragment cannot be told from a host's
own fragmented UDP before its first fragment arrives, and mirrors use GRE),
a tunnel inside a tunnel, and the eBPF telemetry (in the kernel, one packet at
a time).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..twin import parse as P

__all__ = ["Reassembler", "outer", "O_COLS", "O_OK", "O_HDR_END", "O_PROTO", "FRAG_TIMEOUT_NS", "FRAG_MAX_BYTES", "FRAG_MAX_PIECES"]

#: Ours: Linux's default ``net.ipv4.ipfrag_time``; a mirror's fragments arrive microseconds apart.
FRAG_TIMEOUT_NS = 30 * 1_000_000_000
#: Ours: payload bytes buffered for incomplete groups (a few thousand jumbo copies in flight).
FRAG_MAX_BYTES = 64 << 20
#: Ours: a 64 KiB IPv4 packet in 1280-byte pieces needs 52; more is not a mirror's doing.
FRAG_MAX_PIECES = 64
_R_FRAG = P.REASONS.index("fragment")

# kernel output columns
(O_OK, O_IP, O_HDR_END, O_NH_POS, O_PROTO, O_OFF, O_MORE, O_IDENT, O_WIRE, O_CAPT) = range(10)
O_COLS = 10


def _outer_py(buf, off, cap, orig, lt, idx, frag_only, out):
    """The outermost IP header of each row ``idx[j]``: whether it is a fragment, and its fields
    (with ``frag_only`` 0, also of an unfragmented packet: its L4 offset in ``O_HDR_END``)."""
    for j in range(idx.shape[0]):
        i = idx[j]
        o = off[i]
        cl = cap[i]
        wl = orig[i]
        out[j, O_OK] = 0
        reason, et, p, eth = P._link(buf, o, cl, lt[i])
        if reason:
            continue
        reason, et, p = P._vlan_tags(buf, o, cl, et, p)
        if reason:
            continue
        if et == 0x8847 or et == 0x8848:
            reason, et, p, pw_eth = P._mpls(buf, o, cl, p, 1)  # 1: no pseudowire (no tunnel in a tunnel)
            if reason:
                continue
        if et == 0:
            reason, et = P._ip_version(buf, o, cl, p)
            if reason:
                continue
        if et == 0x0800:
            if cl < p + 20 or (buf[o + p] >> 4) != 4:
                continue
            ihl = np.int64(buf[o + p] & 0x0F) * 4
            tot = P._be16(buf, o + p + 2)
            fo = P._be16(buf, o + p + 6)
            if ihl < 20 or tot < ihl or tot > wl - p or ((fo & 0x3FFF) == 0 and frag_only):
                continue
            out[j, O_IP] = p
            out[j, O_HDR_END] = p + ihl
            out[j, O_NH_POS] = -1
            out[j, O_PROTO] = buf[o + p + 9]
            out[j, O_OFF] = (fo & 0x1FFF) * 8
            out[j, O_MORE] = (fo >> 13) & 1
            out[j, O_IDENT] = P._be16(buf, o + p + 4)
            out[j, O_WIRE] = tot - ihl
        elif et == 0x86DD:
            if cl < p + 40 or (buf[o + p] >> 4) != 6:
                continue
            plen = P._be16(buf, o + p + 4)
            if 40 + plen > wl - p:
                continue
            nh = np.int64(buf[o + p + 6])
            nh_pos = p + 6
            q = p + 40
            n_ext = 0
            while (nh == 0 or nh == 43 or nh == 60) and n_ext < 16 and cl >= q + 2:
                nh_pos = q
                nh = np.int64(buf[o + q])
                q += (np.int64(buf[o + q + 1]) + 1) * 8
                n_ext += 1
            if nh != 44 and not frag_only:
                out[j, O_IP] = p
                out[j, O_HDR_END] = q
                out[j, O_NH_POS] = nh_pos
                out[j, O_PROTO] = nh
                out[j, O_OFF] = 0
                out[j, O_MORE] = 0
                out[j, O_WIRE] = p + 40 + plen - q
                out[j, O_CAPT] = max(0, min(out[j, O_WIRE], cl - q))
                out[j, O_OK] = 1
                continue
            if nh != 44 or cl < q + 8 or q + 8 > p + 40 + plen:
                continue
            fo = P._be16(buf, o + q + 2)
            out[j, O_IP] = p
            out[j, O_HDR_END] = q + 8
            out[j, O_NH_POS] = nh_pos
            out[j, O_PROTO] = buf[o + q]
            out[j, O_OFF] = fo & 0xFFF8
            out[j, O_MORE] = fo & 1
            out[j, O_IDENT] = P._be32(buf, o + q + 4)
            out[j, O_WIRE] = p + 40 + plen - (q + 8)
        else:
            continue
        h = out[j, O_HDR_END]
        out[j, O_CAPT] = max(0, min(out[j, O_WIRE], cl - h))
        out[j, O_OK] = 1


_OUTER: Any = None


def outer() -> Any:
    """The compiled ``_outer_py`` (also read by ``notes`` for the tunnels it names)."""
    global _OUTER
    if _OUTER is None:
        import numba

        P._kernel()  # the parser's helpers, compiled, are what this kernel calls
        _OUTER = numba.njit(cache=True, nogil=True)(_outer_py)
    return _OUTER


class _Group:
    __slots__ = ("first_ts", "pieces", "head", "head_meta", "total", "nbytes", "rows_wire")

    def __init__(self, ts: int) -> None:
        self.first_ts = ts
        self.pieces: list[tuple[int, int, bytes]] = []  # (offset, wire length, captured bytes)
        self.head: bytes | None = None  # link + IP headers of the offset-0 fragment
        self.head_meta: tuple[int, int, int, int] = (0, 0, 0, 0)  # ip, hdr_end, nh_pos, linktype
        self.total = -1  # payload length, known from the last fragment
        self.nbytes = 0
        self.rows_wire = 0  # wire bytes of the fragments' records


class Reassembler:
    """Tunnel-fragment reassembly across the chunks of one capture (module docstring)."""

    def __init__(self, timeout_ns: int = FRAG_TIMEOUT_NS, max_bytes: int = FRAG_MAX_BYTES) -> None:
        self.timeout_ns = int(timeout_ns)
        self.max_bytes = int(max_bytes)
        self.groups: dict[tuple[int, ...], _Group] = {}
        self.buffered = 0
        self.reassembled = 0

    def feed(self, buf: np.ndarray, off: np.ndarray, cap: np.ndarray, orig: np.ndarray, lts: np.ndarray,
             ts: np.ndarray, pk: np.ndarray, n_frag: int = -1) -> tuple[int, int]:
        """Reassemble this chunk's tunnel fragments into ``pk`` in place; returns (packets, wire bytes)
        of fragments lost so far in groups that expired or were evicted. ``n_frag``: the chunk's
        ``fragment`` rows if the caller counted them (0 skips the search)."""
        cand = np.flatnonzero(pk["reason"] == _R_FRAG) if n_frag else np.zeros(0, np.int64)
        lost = (0, 0)
        if cand.size:
            out = np.zeros((cand.size, O_COLS), np.int64)
            outer()(buf, off, cap, orig, np.ascontiguousarray(lts, dtype=np.int64), cand, 1, out)
            lost = self._groups_of(buf, off, cap, orig, lts, ts, pk, cand, out)
        if ts.size and self.groups:
            lost = _plus(lost, self._expire(int(ts[-1])))
        return lost

    def flush(self) -> tuple[int, int]:
        """The end of the capture: every group still open is lost."""
        return self._drop(list(self.groups))

    def _groups_of(self, buf, off, cap, orig, lts, ts, pk, cand, out) -> tuple[int, int]:
        lost = (0, 0)
        done: list[tuple[int, bytes, int, int]] = []  # (row, frame, captured, wire)
        for j, i in enumerate(cand.tolist()):
            row = out[j]
            atomic = row[O_OFF] == 0 and not row[O_MORE]  # RFC 6946: read as if unfragmented
            if not row[O_OK] or (row[O_PROTO] != 47 and not atomic):
                continue
            r = pk[i]
            key = (int(r["fam"]), int(r["src_hi"]), int(r["src_lo"]), int(r["dst_hi"]), int(r["dst_lo"]),
                   int(row[O_IDENT]), int(row[O_PROTO]))
            g, gone = self._group(key, int(ts[i]))
            lost = _plus(lost, gone)
            self._add(g, buf, int(off[i]), row, int(orig[i]), int(lts[i]))
            pk["kind"][i] = P.KIND_DROP
            pk["reason"][i] = _R_TUNFRAG
            built = self._complete(g)
            if built is not None:
                del self.groups[key]
                self.buffered -= g.nbytes
                done.append((i, *built))
            elif len(g.pieces) > FRAG_MAX_PIECES:
                lost = _plus(lost, self._drop([key]))
        if self.buffered > self.max_bytes:
            lost = _plus(lost, self._drop(sorted(self.groups, key=lambda k: self.groups[k].first_ts),
                                          until=self.max_bytes // 2))
        if done:
            self._parse_into(done, lts, ts, pk)
        return lost

    def _group(self, key: tuple[int, ...], t: int) -> tuple[_Group, tuple[int, int]]:
        """The open group of ``key``, or a new one (an expired one with the key is lost first)."""
        g = self.groups.get(key)
        lost = (0, 0)
        if g is None or t - g.first_ts > self.timeout_ns:
            if g is not None:
                lost = self._drop([key])
            g = self.groups[key] = _Group(t)
        return g, lost

    def _add(self, g: _Group, buf: np.ndarray, o: int, row: np.ndarray, wire: int, lt: int) -> None:
        """One fragment's captured payload (copied: the caller's buffer moves on) into ``g``."""
        h = int(row[O_HDR_END])
        data = bytes(buf[o + h:o + h + int(row[O_CAPT])])
        g.pieces.append((int(row[O_OFF]), int(row[O_WIRE]), data))
        g.nbytes += len(data)
        g.rows_wire += wire
        self.buffered += len(data)
        if row[O_OFF] == 0:
            g.head = bytes(buf[o:o + h])
            g.head_meta = (int(row[O_IP]), h, int(row[O_NH_POS]), lt)
        if not row[O_MORE]:
            g.total = int(row[O_OFF]) + int(row[O_WIRE])

    @staticmethod
    def _complete(g: _Group) -> tuple[bytes, int, int] | None:
        """(frame, captured length, wire length) of a complete group, or None."""
        if g.total < 0 or g.head is None:
            return None
        covered, have, parts = 0, 0, []
        for start, wire, data in sorted(g.pieces, key=lambda x: x[0]):
            if start > covered:
                return None
            if start + wire > covered:
                if have == covered and start + len(data) > have:  # captured bytes still contiguous
                    parts.append(data[have - start:])
                    have = start + len(data)
                covered = start + wire
        if covered < g.total:
            return None
        ip, hdr_end, nh_pos, _lt = g.head_meta
        head = bytearray(g.head)
        if nh_pos < 0:  # IPv4: total length, flags and offset
            tot = hdr_end - ip + g.total
            if tot > 0xFFFF:
                return None
            head[ip + 2:ip + 4] = tot.to_bytes(2, "big")
            head[ip + 6:ip + 8] = b"\0\0"
        else:  # IPv6: the fragment header goes, its next header takes its place
            nh = head[hdr_end - 8]
            head = head[:hdr_end - 8]
            head[nh_pos] = nh
            plen = len(head) - ip - 40 + g.total
            if plen > 0xFFFF:
                return None
            head[ip + 4:ip + 6] = plen.to_bytes(2, "big")
        payload = b"".join(parts)[:g.total]
        return bytes(head) + payload, len(head) + len(payload), len(head) + g.total

    def _parse_into(self, done: list[tuple[int, bytes, int, int]], lts: np.ndarray, ts: np.ndarray,
                    pk: np.ndarray) -> None:
        rows = np.array([d[0] for d in done], np.int64)
        blob = np.frombuffer(b"".join(d[1] for d in done), np.uint8)
        lens = np.array([len(d[1]) for d in done], np.int64)
        offs = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
        capl = np.array([d[2] for d in done], np.int64)
        wire = np.array([d[3] for d in done], np.int64)
        tap = int(pk["tap"][rows[0]])
        pk[rows] = P.parse_frames(blob, offs, capl, wire, np.asarray(lts)[rows], np.asarray(ts)[rows], tap=tap)
        self.reassembled += len(done)

    def _expire(self, now_ns: int) -> tuple[int, int]:
        old = [k for k, g in self.groups.items() if now_ns - g.first_ts > self.timeout_ns]
        return self._drop(old) if old else (0, 0)

    def _drop(self, keys: list[tuple[int, ...]], until: int = -1) -> tuple[int, int]:
        n = b = 0
        for k in keys:
            if until >= 0 and self.buffered <= until:
                break
            g = self.groups.pop(k)
            self.buffered -= g.nbytes
            n += len(g.pieces)
            b += g.rows_wire
        return n, b


def _plus(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], a[1] + b[1]


_R_TUNFRAG = P.REASONS.index("tunnel_fragment")
