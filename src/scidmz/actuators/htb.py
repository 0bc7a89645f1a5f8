"""``HtbQueueActuator``: a real multi-queue bottleneck (HTB + bfifo + u32) set through pyroute2.

What the Jenks RTT-separation papers configure on a non-programmable router
(ext section 3 steps 5-7: an ACL putting flows into queues, a buffer size
per queue), built from what this kernel has (MACHINE.md: htb, bfifo, u32):

* root qdisc HTB ``5c1e:`` (``default`` = the config's default queue), one
  inner class ``5c1e:fff`` at rate = ceil = C that every leaf borrows from;
* one leaf class ``5c1e:<qid>`` per queue with its rate, ceil (ceil = rate:
  no borrowing; ceil > rate: HTB lends spare bandwidth by quantum) and an
  explicit quantum (bytes; derived when the config gives none: rate / r2q
  clamped to [MTU, 200 kB], the kernel's own rule without its warnings);
* a bfifo ``<0x8000+qid>:`` under each leaf, ``limit`` = the queue's buffer
  in bytes;
* flow rules as u32 filters on the root: a 5-tuple rule matches src/dst
  address (IP header offsets 12/16), protocol (offset 9) and ports at
  offsets 20/22 — which assumes a 20-byte IP header (no IP options; packets
  with options fall through to the default queue), as u32 cannot follow the
  IHL without hash tables; an address-only rule is a plain /32 (or prefix)
  match.

``apply(config)`` validates first (nothing is touched on bad input), then
changes the kernel in an order that keeps traffic flowing: new and changed
classes (and their bfifos) first, then the rules, then the classes no longer
used. Rules that cannot overlap (each names the same fields, every address a
host: a Jenks epoch's 5-tuples) are changed by their difference
(``u32slots``): each keeps its own filter, a flow that moves queue has its
filter's class swapped in place, new flows are added and gone ones deleted,
so a steady epoch sends nothing and one that moves 1 % of 10,000 flows sends
~100 requests. Other rule sets (prefixes, mixed fields: their order decides)
are swapped whole: the new set added under a fresh u32 priority that is
evaluated before the old one, then the old set deleted in one message
(``tc filter del ... prio P``). Either way no packet meets an interface
without its rules or its qdisc. If the kernel refuses any step, the previous
configuration is rebuilt, so a failed batch leaves the previous configuration
in force (ActuatorError). Rules go as batches of hand-encoded requests, every
one acknowledged (``u32batch``: pyroute2's encoding alone took 0.76 s for
1,000 rules); ``benchmarks/jenks_speed.py`` measures 1,000 of them and
``benchmarks/jenks_epoch_htb.py`` a whole Jenks epoch of 10,000 flows.

``close`` deletes the root HTB (which removes every class, bfifo and filter
under it) only if it is still ours; a device whose root qdisc someone else
configured is refused at start, and one an admin puts in our place (or below
ours) while it runs is left alone: ``apply`` raises ``ForeignConfigError``
from then on (``rootqdisc.RootQdisc.check``).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from typing import Any

from ..queueconfig import MAX_QID, FlowMatch, FlowRule, QueueConfig, QueueConfigError, QueueSpec
from .base import ActuatorError
from .rootqdisc import TC_H_ROOT as _TC_H_ROOT
from .rootqdisc import RootQdisc
from .tbf import derive_burst
from .u32batch import Key, NetlinkBatch, u32_filter_request
from .u32slots import MAX_BLOCKS, SLOT_PRIO0, RuleSlots

__all__ = ["HtbQueueActuator", "HTB_HANDLE", "u32_keys", "u32_match", "derive_quantum"]

HTB_HANDLE = 0x5C1E0000
_INNER_MINOR = 0x0FFF
_ETH_P_IP = 0x0800
_FIFO_MAJOR0 = 0x8000
_PRIO_TOP = 0xFF00
#: The whole-set path's priorities cycle through [_PRIO_LOW, _PRIO_TOP], above every slot priority.
_PRIO_LOW = 0xF000
#: HTB's rate-to-quantum divisor (tc's default r2q).
R2Q = 10
_MAX_QUANTUM = 200_000

assert MAX_QID < _INNER_MINOR, "queue ids must not collide with the inner class"
assert SLOT_PRIO0 + MAX_BLOCKS <= _PRIO_LOW, "slot priorities must stay below the whole-set ones"


def _own_fifo(handle: int) -> bool:
    """Whether a qdisc below our HTB is one of our leaves' bfifos (by its handle)."""
    return _FIFO_MAJOR0 <= handle >> 16 <= _FIFO_MAJOR0 + MAX_QID


def derive_quantum(rate_bps: float, mtu: int) -> int:
    """HTB's quantum for a class of ``rate_bps``: rate (bytes/s) / r2q, clamped to [MTU, 200 kB]."""
    return int(min(max(rate_bps / 8.0 / R2Q, mtu), _MAX_QUANTUM))


def u32_match(m: FlowMatch) -> list[Key]:
    """(value, mask, offset in the IPv4 header) keys of ``m``, network order.

    Ports are read at offset 20/22, i.e. a 20-byte IP header is assumed.
    """
    keys: list[Key] = []
    for addr, off in ((m.src, 12), (m.dst, 16)):
        if addr is None:
            continue
        net = ipaddress.IPv4Network(addr, strict=False)
        keys.append((int(net.network_address), int(net.netmask), off))
    if m.proto is not None:
        keys.append((m.proto << 16, 0x00FF0000, 8))
    if m.sport is not None or m.dport is not None:
        val = ((m.sport or 0) << 16) | (m.dport or 0)
        mask = (0xFFFF0000 if m.sport is not None else 0) | (0x0000FFFF if m.dport is not None else 0)
        keys.append((val, mask, 20))
    return keys


def u32_keys(m: FlowMatch) -> list[str]:
    """``u32_match`` in pyroute2's key syntax (``0xVALUE/0xMASK+OFFSET``)."""
    return [f"0x{v:08x}/0x{k:08x}+{o}" for v, k, o in u32_match(m)]


class HtbQueueActuator:
    """HTB multi-queue bottleneck on ``dev`` (optionally in namespace ``netns``); see the module doc.

    ``scope``: IPv4 prefixes the rules may name (the scenario's networks);
    a rule outside them is refused before anything is applied.
    """

    def __init__(self, dev: str, netns: str | None = None, scope: list[str] | None = None) -> None:
        self.dev, self.netns, self.scope = dev, netns, scope
        self._lock = threading.Lock()
        self._cfg: QueueConfig | None = None
        self._prio: int | None = None  # u32 priority of the rule set in force
        self._closed = False
        self._root = RootQdisc(dev, netns, HTB_HANDLE, "htb", "HtbQueueActuator", own_child=_own_fifo,
                               own_filter=self._owns_prio)
        from pyroute2.netlink.rtnl.tcmsg import plugins, sched_pfifo

        # pyroute2 knows pfifo but not bfifo; both carry the same tc_fifo_qopt
        # (limit: packets for pfifo, bytes for bfifo). Unregistered kinds are
        # silently attached at the root, which would replace our HTB.
        plugins.setdefault("bfifo", sched_pfifo)
        self._ipr = self._root.ipr
        self.index = self._root.index
        try:
            self._nlb = NetlinkBatch(netns)
        except OSError as exc:
            self._root.close()
            raise RuntimeError(f"cannot open netlink for namespace {netns!r}: {exc}") from None
        except BaseException:
            self._root.close()
            raise
        # the owner check runs every period and lists up to one filter per flow: read only their priorities
        self._root.filter_prios = lambda: self._nlb.filter_prios(self.index, HTB_HANDLE)
        self._slots = RuleSlots(self.index, HTB_HANDLE, _ETH_P_IP)

    # -- kernel helpers -------------------------------------------------------------------
    def _owns_prio(self, prio: int) -> bool:
        """Whether filters at u32 priority ``prio`` on our root are ours: the whole set's priority in
        force, or the slot blocks' range. The range as a whole (ours): the kernel may keep an emptied
        slot priority's hash table, so "holds our rules now" would call our own leftover foreign; a
        filter someone puts inside the slot range is not told apart."""
        return prio == self._prio or SLOT_PRIO0 <= prio < SLOT_PRIO0 + MAX_BLOCKS

    def _ours(self) -> bool:
        return self._root.ours() is not None

    def _tc(self, *args: Any, **kw: Any) -> None:
        self._ipr.tc(*args, **kw)

    def _set_class(self, q: QueueSpec, mtu: int, cmd: str) -> None:
        quantum = q.quantum if q.quantum is not None else derive_quantum(q.rate, mtu)
        self._tc(
            f"{cmd}-class", "htb", self.index, HTB_HANDLE | q.qid, parent=HTB_HANDLE | _INNER_MINOR,
            rate=f"{int(round(q.rate))}bit", ceil=f"{int(round(q.ceil))}bit", quantum=quantum, mtu=mtu + 14,
            burst=derive_burst(q.rate, mtu), cburst=derive_burst(q.ceil, mtu),
        )
        self._tc(
            "replace", "bfifo", self.index, (_FIFO_MAJOR0 + q.qid) << 16, parent=HTB_HANDLE | q.qid,
            limit=int(q.buffer),
        )

    def _add_rules(self, rules: tuple[FlowRule, ...], prio: int) -> None:
        nlb = self._nlb
        nlb.send([u32_filter_request(nlb.next_seq(), self.index, HTB_HANDLE, prio, _ETH_P_IP,
                                     HTB_HANDLE | r.queue, u32_match(r.match)) for r in rules])

    def _del_rules(self, prio: int) -> None:
        from pyroute2.netlink.exceptions import NetlinkError

        try:
            # Without a kind pyroute2 does not fold prio/protocol into tcm_info,
            # and an info of 0 would delete every filter on the qdisc.
            self._tc("del-filter", index=self.index, parent=HTB_HANDLE,
                     info=socket.htons(_ETH_P_IP) | (prio << 16))
        except NetlinkError as exc:
            if exc.code not in (2, 22):  # nothing at that priority
                raise

    def _swap_rules(self, rules: tuple[FlowRule, ...]) -> None:
        """The whole set under a fresh priority, then the previous set (whole-set or slot rules) deleted."""
        old_prio = self._prio
        # A lower number is matched first, so the new set wins over an older whole set as soon as it is
        # in; slot rules (lower numbers still) win until they are deleted just after.
        prio = _PRIO_TOP if old_prio is None or old_prio <= _PRIO_LOW else old_prio - 1
        try:
            self._add_rules(rules, prio)
        except BaseException:
            self._del_rules(prio)
            raise
        self._prio = prio
        if old_prio is not None and old_prio != prio:
            self._del_rules(old_prio)
        for p in self._slots.prios():
            self._del_rules(p)
        self._slots.clear()

    def _build(self, cfg: QueueConfig) -> None:
        """Make the kernel hold ``cfg`` from whatever of ours is there (see module doc for the order)."""
        prev = self._cfg if self._ours() else None
        if prev is None or (prev.capacity, prev.mtu, prev.default) != (cfg.capacity, cfg.mtu, cfg.default):
            # HTB refuses to change its default class in place: rebuild the tree.
            if self._ours():
                self._tc("del", index=self.index, handle=HTB_HANDLE, parent=_TC_H_ROOT)
            self._prio = None
            self._slots.clear()
            self._tc("add", "htb", self.index, HTB_HANDLE, parent=_TC_H_ROOT, default=cfg.default, r2q=R2Q)
            burst = derive_burst(cfg.capacity, cfg.mtu)
            self._tc(
                "add-class", "htb", self.index, HTB_HANDLE | _INNER_MINOR, parent=HTB_HANDLE,
                rate=f"{int(round(cfg.capacity))}bit", ceil=f"{int(round(cfg.capacity))}bit",
                burst=burst, cburst=burst, mtu=cfg.mtu + 14,
            )
            prev = None
        old = {} if prev is None else {q.qid: q for q in prev.queues}
        for q in cfg.queues:
            if old.get(q.qid) != q:
                self._set_class(q, cfg.mtu, "change" if q.qid in old else "add")
        if prev is None or prev.rules != cfg.rules:
            plan = self._slots.plan(cfg.rules, HTB_HANDLE)
            if plan is not None:
                self._slots.sync(self._nlb, plan, HTB_HANDLE, u32_match)
                if self._prio is not None:
                    self._del_rules(self._prio)
                    self._prio = None
            else:
                self._swap_rules(cfg.rules)
        new_ids = {q.qid for q in cfg.queues}
        for qid in old:
            if qid not in new_ids:
                self._tc("del-class", index=self.index, handle=HTB_HANDLE | qid, parent=HTB_HANDLE | _INNER_MINOR)

    # -- QueueActuator ----------------------------------------------------------------------
    def apply(self, config: QueueConfig) -> None:
        """Validate ``config`` and make it the configuration in force, all or nothing."""
        config.validate(self.scope)
        for q in config.queues:
            if q.qid > MAX_QID:
                raise QueueConfigError(f"queue id {q.qid} is above {MAX_QID}")
            if q.rate < 8 or q.ceil >= 2**64:
                raise QueueConfigError(f"queue {q.qid} rate {q.rate!r} bit/s cannot be held by HTB")
        with self._lock:
            if self._closed:
                raise RuntimeError(f"HtbQueueActuator on '{self.dev}' is closed")
            prev, prev_prio = self._cfg, self._prio
            self._root.check(prev is not None)  # an admin's qdisc in our place: left alone (ForeignConfigError)
            try:
                self._build(config)
            except Exception as exc:  # netlink refusal, or pyroute2 failing to encode
                self._restore(prev, prev_prio)
                raise ActuatorError(f"kernel refused the queue configuration on '{self.dev}': {exc}") from None
            self._cfg = config

    def _restore(self, prev: QueueConfig | None, prev_prio: int | None) -> None:
        """Rebuild ``prev`` from scratch after a failed batch (or remove everything if there was none)."""
        from pyroute2.netlink.exceptions import NetlinkError

        self._cfg, self._prio = None, None
        self._slots.clear()
        try:
            if self._ours():
                self._tc("del", index=self.index, handle=HTB_HANDLE, parent=_TC_H_ROOT)
            if prev is not None:
                self._build(prev)
                self._cfg = prev
        except (NetlinkError, OSError) as exc:
            raise ActuatorError(
                f"queue configuration on '{self.dev}' failed and the previous one could not be restored: {exc}"
            ) from None
        del prev_prio

    def current(self) -> QueueConfig | None:
        """The configuration in force, queues read back from the kernel (rate, ceil, quantum, bfifo limit).

        Rules are the applied ones, after checking the kernel holds as many
        u32 filters at their priority (u32 reports keys, not our FlowMatch).
        """
        with self._lock:
            if self._cfg is None or self._closed:
                return None
            if not self._ours():
                raise ActuatorError(f"the scidmz HTB on '{self.dev}' is gone")
            root = self._root.root()
            default = int(root.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_INIT")["defcls"])
            limits = {}
            for q in self._ipr.get_qdiscs(index=self.index):
                if q.get_attr("TCA_KIND") == "bfifo" and (q["parent"] >> 16) == (HTB_HANDLE >> 16):
                    limits[q["parent"] & 0xFFFF] = int(q.get_attr("TCA_OPTIONS")["limit"])
            queues = []
            for c in self._ipr.get_classes(index=self.index):
                minor = c["handle"] & 0xFFFF
                if (c["handle"] >> 16) != (HTB_HANDLE >> 16) or minor == _INNER_MINOR:
                    continue
                opts = c.get_attr("TCA_OPTIONS")
                parms = opts.get_attr("TCA_HTB_PARMS")
                rate = opts.get_attr("TCA_HTB_RATE64") or parms["rate"]
                ceil = opts.get_attr("TCA_HTB_CEIL64") or parms["ceil"]
                label = next((q.label for q in self._cfg.queues if q.qid == minor), "")
                queues.append(QueueSpec(minor, float(rate) * 8, float(ceil) * 8, limits.get(minor, 0),
                                        int(parms["quantum"]), label))
            prios = {self._prio, *self._slots.prios()}
            nfilt = sum(
                1 for f in self._ipr.get_filters(index=self.index, parent=HTB_HANDLE)
                if f.get_attr("TCA_KIND") == "u32" and (f["info"] >> 16) in prios
                and f.get_attr("TCA_OPTIONS") is not None and f.get_attr("TCA_OPTIONS").get_attr("TCA_U32_SEL") is not None
            )
            if nfilt != len(self._cfg.rules):
                raise ActuatorError(f"'{self.dev}' holds {nfilt} of our u32 rules, expected {len(self._cfg.rules)}")
            queues.sort(key=lambda q: q.qid)
            return QueueConfig(self._cfg.capacity, tuple(queues), default, self._cfg.rules, self._cfg.mtu)

    def close(self) -> None:
        """Delete the root HTB if it is still ours (removes its classes, bfifos and filters)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._root.delete_ours()
            finally:
                self._root.close()
                self._nlb.close()

    def __enter__(self) -> HtbQueueActuator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"HtbQueueActuator(dev={self.dev!r}" + (f", netns={self.netns!r})" if self.netns else ")")

