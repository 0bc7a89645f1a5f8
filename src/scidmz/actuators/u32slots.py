"""Per-flow u32 rule slots: ``HtbQueueActuator`` changes a rule set by its difference, not wholesale.

A Jenks epoch moves a few flows between queues; swapping the whole rule set
(10,000 rules) for that took 1.4 s (benchmarks/jenks_epoch_htb.py). Here each
rule holds a fixed place, chosen when it first appears and kept while it
stays: slot ``s`` is u32 priority ``SLOT_PRIO0 + s // NODES``, node
``s % NODES + 1`` of that priority's root hash table (u32 node ids are 12
bits, so one priority holds 4,095 rules). A new slot is the lowest free one
(ours: deterministic for the same sequence of configurations, and it keeps the
priorities few). An epoch then sends only:

* a flow that moves queue: one ``replace`` of its filter, which keeps its
  selector and swaps the class in one RCU step (the kernel's u32 change path):
  the flow's packets go to the old queue until then and to the new one after,
  none goes unclassified;
* a new flow: one add at its slot; a flow gone: one delete of its slot.

A steady epoch sends nothing. The kernel numbers each priority's root hash
table itself, so the first add at a priority asks for an echo and the table id
is read from it (a change or delete names the full handle).

Only rule sets whose rules cannot overlap go by slots: every rule names the
same fields, each address a single host (two different such rules differ in a
field both match exactly). Overlapping rules depend on their order (the first
match wins), which a slot cannot keep; the actuator swaps those sets whole.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from ..queueconfig import FlowMatch, FlowRule
from .u32batch import Key, NetlinkBatch, u32_delete_request, u32_filter_request

__all__ = ["RuleSlots", "SLOT_PRIO0", "NODES", "shape"]

#: Priority of the first slot block; the whole-set path uses priorities above every slot block.
SLOT_PRIO0 = 0x0100
#: u32 node ids per hash bucket (12 bits, 0 reserved for the table itself).
NODES = 0x0FFF
#: Slot blocks at most (1,048,320 rules), below the whole-set path's priorities.
MAX_BLOCKS = 0x0E00
_HTID_MASK = 0xFFF00000
_FIELDS = ("src", "dst", "sport", "dport", "proto")


def _host(addr: str) -> bool:
    return "/" not in addr or addr.endswith("/32")


def shape(m: FlowMatch) -> tuple[bool, ...] | None:
    """Which fields ``m`` matches, or None when an address is a prefix (it may overlap others)."""
    if (m.src is not None and not _host(m.src)) or (m.dst is not None and not _host(m.dst)):
        return None
    return (m.src is not None, m.dst is not None, m.sport is not None, m.dport is not None, m.proto is not None)


class RuleSlots:
    """The slot rules in force on one HTB (``parent``) of device ``ifindex``, and the requests that change them.

    ``held`` maps each rule's match to (slot, class id). ``sync`` makes the kernel hold a new rule set.
    """

    def __init__(self, ifindex: int, parent: int, protocol: int) -> None:
        self.ifindex, self.parent, self.protocol = ifindex, parent, protocol
        self.clear()

    def clear(self) -> None:
        """Forget every slot (the kernel's were deleted with their priorities or the tree)."""
        self.held: dict[FlowMatch, tuple[int, int]] = {}
        self._free: list[int] = []
        self._top = 0
        self._htid: dict[int, int] = {}
        self._live: dict[int, int] = {}
        self._shape: tuple[bool, ...] | None = None

    def prios(self) -> list[int]:
        """The u32 priorities holding slot rules now."""
        return sorted(p for p, n in self._live.items() if n)

    def plan(self, rules: Sequence[FlowRule], classid: int) -> tuple[list, list, list] | None:
        """(new rules, moved rules, gone matches) that turn ``held`` into ``rules`` (queue q is class
        ``classid | q``), or None when the set cannot go by slots (see the module doc)."""
        held, want = self.held, self._shape
        new, moved, seen = [], [], set()
        for r in rules:
            m = r.match
            seen.add(m)
            h = held.get(m)
            if h is None:
                s = shape(m)
                if s is None or (want is not None and s != want):
                    return None
                want = s
                new.append(r)
            elif h[1] != classid | r.queue:
                moved.append(r)
        gone = [m for m in held if m not in seen] if len(seen) - len(new) != len(held) else []
        if gone and len(gone) == len(held) and not new:
            want = None
        self._shape = want
        return new, moved, gone

    def _slot(self) -> int:
        if self._free:
            return heapq.heappop(self._free)
        if self._top >= MAX_BLOCKS * NODES:
            raise OverflowError(f"more than {MAX_BLOCKS * NODES} u32 rules")
        self._top += 1
        return self._top - 1

    @staticmethod
    def _place(slot: int) -> tuple[int, int]:
        return SLOT_PRIO0 + slot // NODES, slot % NODES + 1

    def sync(self, nlb: NetlinkBatch, plan: tuple[list, list, list], classid: int,
             keys_of: object) -> None:
        """Send ``plan`` (from ``plan``): moves and adds in one batch, then the deletes (a class may be
        deleted only once no filter points at it). ``keys_of(match)`` gives a rule's u32 keys.
        On an exception the kernel may hold part of the plan: the caller rebuilds from scratch."""
        new, moved, gone = plan
        reqs: list[bytes] = []
        placed: list[tuple[FlowMatch, int, int, int]] = []  # match, slot, class, seq of an echo
        for r in moved:
            slot = self.held[r.match][0]
            prio, node = self._place(slot)
            reqs.append(self._req(nlb, prio, classid | r.queue, keys_of(r.match), self._htid[prio] | node))
            placed.append((r.match, slot, classid | r.queue, 0))
        asked: set[int] = set()
        for r in new:
            slot = self._slot()
            prio, node = self._place(slot)
            echo = prio not in self._htid and prio not in asked
            asked.add(prio)
            seq = nlb.next_seq()
            reqs.append(u32_filter_request(seq, self.ifindex, self.parent, prio, self.protocol, classid | r.queue,
                                           keys_of(r.match), handle=self._htid.get(prio, 0) | node, echo=echo))
            placed.append((r.match, slot, classid | r.queue, seq if echo else 0))
        echoed = nlb.send(reqs) if reqs else {}
        for m, slot, cls, seq in placed:
            prio = self._place(slot)[0]
            if seq:
                if seq not in echoed:
                    raise OSError(f"the kernel did not echo the u32 filter added at priority {prio:#x}")
                self._htid[prio] = echoed[seq] & _HTID_MASK
            if m not in self.held:
                self._live[prio] = self._live.get(prio, 0) + 1
            self.held[m] = (slot, cls)
        self._delete(nlb, gone)

    def _req(self, nlb: NetlinkBatch, prio: int, cls: int, keys: list[Key], handle: int) -> bytes:
        return u32_filter_request(nlb.next_seq(), self.ifindex, self.parent, prio, self.protocol, cls, keys,
                                  handle=handle, replace=True)

    def _delete(self, nlb: NetlinkBatch, gone: list[FlowMatch]) -> None:
        reqs = []
        for m in gone:
            prio, node = self._place(self.held[m][0])
            reqs.append(u32_delete_request(nlb.next_seq(), self.ifindex, self.parent, prio, self.protocol,
                                           self._htid[prio] | node))
        if reqs:
            nlb.send(reqs)
        for m in gone:
            slot = self.held.pop(m)[0]
            heapq.heappush(self._free, slot)
            prio = self._place(slot)[0]
            self._live[prio] -= 1
            if not self._live[prio]:
                # The kernel may destroy an empty priority and number its next table afresh.
                del self._live[prio], self._htid[prio]
