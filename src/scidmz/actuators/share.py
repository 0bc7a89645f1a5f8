"""How an aggregate rate R is shared: among a DTN's live connections by its agent, and among DTNs by the
controller's host actuator (``host_agent.split_on_demand``). The rule is ours.

**Max-min fair water-filling on measured demand.** Each period every matching
connection gets a demand estimate from what it delivered over the last period
(``bytes_acked`` difference from sock_diag, as Ethernet frame bit/s):

* a new connection (no period measured yet), or one that delivered something and
  at least ``SATURATED`` of its cap, is *unbounded*: it would take more if allowed
  (an idle one granted nothing is paced at ``actuators.base.MIN_RATE``; once it
  sends, it delivers that much and is unbounded the next period);
* any other connection is held back by something else (its application, the
  receiver's window, its disk); its demand is ``HEADROOM`` x what it delivered,
  so it can grow by a quarter per period and, once it fills that, is unbounded
  again the next period.

R is then water-filled: the smallest demands are granted in full, the rest of R
is split evenly among the unbounded ones (Bertsekas & Gallager's max-min
fairness). If every demand is granted and R is not used up, the remainder is
spread evenly over all connections, so the caps always sum to R: the DTN can
never exceed R, and a connection sending less than its share leaves the rest
to the others instead of wasting it.

Why this rule: an even split R/n (what ``actuators.pacing.SocketPacer`` does for
the testbed's identical streams) wastes the share of a connection that sends
less, which real transfer tools' connections often do (a GridFTP stripe waiting
on disk, an xrootd stream at the end of its file); proportional-to-delivery
sharing would lock a connection that started slow at its low rate. Max-min
grows a held-back connection back within a few periods and gives new
connections a full share at once, which is what "paced within one period"
needs. ``SATURATED`` (0.9) and ``HEADROOM`` (1.25) are ours: 0.9 tolerates the
period-to-period noise of a paced TCP sender's delivered bytes, 1.25 lets a
recovering connection reach its share in a few periods without handing it a
share it cannot use.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["SATURATED", "HEADROOM", "demand", "water_fill"]

SATURATED = 0.9
HEADROOM = 1.25


def demand(delivered_bps: float | None, cap_bps: float | None) -> float:
    """A connection's demand (bit/s, ``inf`` = unbounded) from its last period (module docstring)."""
    if delivered_bps is None or cap_bps is None or not math.isfinite(cap_bps):
        return math.inf
    if delivered_bps > 0 and delivered_bps >= SATURATED * cap_bps:
        return math.inf  # (an idle connection granted nothing delivered 0 >= 0.9 x 0: not saturated)
    return HEADROOM * max(delivered_bps, 0.0)


def water_fill(total: float, demands: Sequence[float]) -> list[float]:
    """Max-min fair shares of ``total`` for ``demands``; they sum to ``total`` (module docstring)."""
    n = len(demands)
    if n == 0:
        return []
    alloc = [0.0] * n
    remaining = float(total)
    order = sorted(range(n), key=lambda i: demands[i])
    for rank, i in enumerate(order):
        fair = remaining / (n - rank)
        alloc[i] = min(demands[i], fair)
        remaining -= alloc[i]
    if remaining > 0:
        extra = remaining / n
        alloc = [a + extra for a in alloc]
    return alloc
