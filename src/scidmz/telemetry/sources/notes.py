"""What a capture's reader noticed beyond the parser's reasons: packets read without a
TCP/UDP header for a reason worth naming, tunnels the parser does not open (counted per
chunk into ``Capture.drops`` / ``drop_bytes``, packets and wire bytes, for ``run.outcome``
to warn with; none of them is a drop), and records whose clock stepped back.

* no L4 (sub-counts of ``other_protocol``): IPsec AH (51) and ESP (50); an IPv6
  extension-header chain longer than the 16 headers the parser follows
  (``ipv6_ext_chain``);
* unsupported tunnels (``UNSUPPORTED_TUNNELS``, counted as ``tunnel_<key>``):
  Geneve, GRE in UDP, VXLAN-GPE by their UDP ports, WCCP (GRE protocol 0x883E)
  and any other GRE payload by the GRE header's protocol;
* clock steps (``scan``, into ``Capture.clock_steps`` / ``clock_back_ns``, not
  into ``drops``): records more than ``CLOCK_STEP_NS`` (ours) earlier than the record
  before them, and the largest such step.
"""

from __future__ import annotations

import numpy as np

from ..twin import parse as P
from .fragments import O_COLS, O_HDR_END, O_OK, outer

__all__ = ["UNSUPPORTED_TUNNELS", "CLOCK_STEP_NS", "count_notes", "scan", "SC_REASONS", "SC_STEPS", "SC_MAX_STEP"]

#: Tunnels named, not opened: key -> how the messages call them.
UNSUPPORTED_TUNNELS: dict[str, str] = {
    "geneve": "Geneve (UDP port 6081)",
    "gre_udp": "GRE in UDP (UDP port 4754)",
    "vxlan_gpe": "VXLAN-GPE (UDP port 4790)",
    "wccp": "WCCP redirection in GRE (protocol 0x883E)",
    "gre_other": "GRE carrying a protocol other than IP, Ethernet or ERSPAN",
}
_UDP_PORTS = {6081: "geneve", 4754: "gre_udp", 4790: "vxlan_gpe"}
#: Ours: a multi-queue NIC or two capture threads reorder records by microseconds; a step back
#: of more than 10 ms is the clock itself (NTP stepping it, a VM resumed).
CLOCK_STEP_NS = 10_000_000
_R_OTHER = P.REASONS.index("other_protocol")


def count_notes(buf: np.ndarray, off: np.ndarray, cap: np.ndarray, orig: np.ndarray, lts: np.ndarray,
                pk: np.ndarray, per_reason: np.ndarray, seen: np.ndarray, drops: dict[str, int],
                nbytes: dict[str, int]) -> None:
    """Add this chunk's no-L4 sub-counts and unsupported tunnels to ``drops`` / ``nbytes``
    (``per_reason``: the chunk's reason histogram; ``seen``: its ``scan``)."""
    if per_reason[_R_OTHER]:
        rows = np.flatnonzero(pk["reason"] == _R_OTHER)
        proto = pk["proto"][rows]
        for name, mask in (("ipsec_ah", proto == 51), ("ipsec_esp", proto == 50),
                           ("ipv6_ext_chain", (proto == 0) | (proto == 43) | (proto == 60))):
            _put(drops, nbytes, name, rows[mask], orig)
        gre = rows[proto == 47]
        if gre.size:
            _gre_kinds(buf, off, cap, orig, lts, gre, drops, nbytes)
    for j, key in enumerate(_UDP_PORTS.values()):
        if seen[SC_UDP + 2 * j]:
            name = f"tunnel_{key}"
            drops[name] = drops.get(name, 0) + int(seen[SC_UDP + 2 * j])
            nbytes[name] = nbytes.get(name, 0) + int(seen[SC_UDP + 2 * j + 1])


#: ``scan`` output: packets with a reason, clock steps back, the largest step (ns), then
#: (packets, wire bytes) per port of ``_UDP_PORTS``.
SC_REASONS, SC_STEPS, SC_MAX_STEP, SC_UDP = 0, 1, 2, 3
_PORTS = np.array(list(_UDP_PORTS), np.int64)


def _scan_py(reason, kind, dport, orig, ts, has_prev, prev, step_ns, ports, out):
    """One pass over a chunk (no allocation): the ``scan`` counters into ``out``."""
    last = prev
    for i in range(ts.shape[0]):
        if reason[i] != 0:
            out[SC_REASONS] += 1
        t = ts[i]
        if (i > 0 or has_prev) and last - t > step_ns:
            out[SC_STEPS] += 1
            if last - t > out[SC_MAX_STEP]:
                out[SC_MAX_STEP] = last - t
        last = t
        if kind[i] == 3:
            d = dport[i]
            for j in range(ports.shape[0]):
                if d == ports[j]:
                    out[SC_UDP + 2 * j] += 1
                    out[SC_UDP + 2 * j + 1] += orig[i]


_SCAN: list = []


def scan(pk: np.ndarray, orig: np.ndarray, ts: np.ndarray, prev: int | None) -> np.ndarray:
    """A chunk's counters in one compiled pass (``SC_*``): whether any packet has a reason (so a
    clean chunk skips the rest), the clock's steps back (``prev``: the previous chunk's last
    timestamp) and the UDP ports of unsupported tunnels."""
    if not _SCAN:
        import numba

        _SCAN.append(numba.njit(cache=True, nogil=True)(_scan_py))
    out = np.zeros(SC_UDP + 2 * len(_PORTS), np.int64)
    _SCAN[0](pk["reason"], pk["kind"], pk["dport"], orig, ts, prev is not None, 0 if prev is None else prev,
             CLOCK_STEP_NS, _PORTS, out)
    return out


def _gre_kinds(buf, off, cap, orig, lts, rows, drops, nbytes) -> None:
    out = np.zeros((rows.size, O_COLS), np.int64)
    outer()(buf, off, cap, orig, np.ascontiguousarray(lts, dtype=np.int64), rows, 0, out)
    wccp = np.zeros(rows.size, bool)
    for j, i in enumerate(rows.tolist()):
        at = int(off[i]) + int(out[j, O_HDR_END])
        if out[j, O_OK] and int(cap[i]) >= int(out[j, O_HDR_END]) + 4:
            wccp[j] = (int(buf[at + 2]) << 8 | int(buf[at + 3])) == 0x883E
    _put(drops, nbytes, "tunnel_wccp", rows[wccp], orig)
    _put(drops, nbytes, "tunnel_gre_other", rows[~wccp], orig)


def _put(drops: dict[str, int], nbytes: dict[str, int], name: str, rows: np.ndarray, orig: np.ndarray) -> None:
    if rows.size:
        drops[name] = drops.get(name, 0) + int(rows.size)
        nbytes[name] = nbytes.get(name, 0) + int(orig[rows].sum())
