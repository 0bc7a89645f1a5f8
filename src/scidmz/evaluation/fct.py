"""The ideal DTN flow completion time, one formula for every study (the MLC study and the leaderboard).

A DTN held exactly at its target R*_DTN finishes a transfer of S payload bytes in
8 S x ``units.WIRE_PER_PAYLOAD`` / R*_DTN seconds: the transfer is counted in payload
bytes, every rate in Ethernet frame bytes (ARCHITECTURE.md), so each payload byte
takes WIRE_PER_PAYLOAD bytes of the target's rate (10 GB at 500 Mbit/s: 167.3 s, not
160 s). It is the FCT a perfect tracking controller gets, slow start aside; a shorter
FCT means the DTN ran above its target, taking the difference from campus traffic.
"""

from __future__ import annotations

from ..units import WIRE_PER_PAYLOAD

__all__ = ["ideal_fct"]


def ideal_fct(transfer: float, target: float) -> float:
    """Seconds a ``transfer`` of payload bytes takes at exactly ``target`` bit/s of frames."""
    return 8.0 * transfer * WIRE_PER_PAYLOAD / target
