"""Slot rules (``actuators.u32slots``): an HTB's u32 rule set changed by its difference.

* Plans without a kernel: what is new, moved and gone; which sets cannot go by slots.
* Root, on a veth in a private namespace: 5,000 rules (two slot priorities), then epochs that move,
  add and remove flows; the kernel's filters are read back with ``tc`` after each, a steady epoch
  sends no request at all, a move sends one per moved flow, and a set with a prefix rule goes whole
  (and back to slots after).
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from scidmz.actuators.u32slots import NODES, SLOT_PRIO0, RuleSlots, shape
from scidmz.queueconfig import FlowMatch, FlowRule, QueueConfig, QueueSpec

NS = f"jkslot{os.getpid() % 100000}"
PARENT = 0x5C1E0000


def _match(i: int, sport: bool = True) -> FlowMatch:
    return FlowMatch(f"10.{(i >> 8) & 255}.{i & 255}.1", "10.200.0.1", 10000 + i if sport else None, 5201, 6)


def test_shape_and_plan() -> None:
    assert shape(_match(1)) == (True, True, True, True, True)
    assert shape(FlowMatch("10.0.0.0/24", proto=6)) is None
    assert shape(FlowMatch("10.0.0.1/32", proto=6)) == (True, False, False, False, True)
    slots = RuleSlots(1, PARENT, 0x0800)
    rules = [FlowRule(_match(i), 10 + i % 2) for i in range(4)]
    new, moved, gone = slots.plan(rules, PARENT)
    assert (len(new), moved, gone) == (4, [], [])
    # what sync would record, without a kernel
    slots.held = {r.match: (i, PARENT | r.queue) for i, r in enumerate(rules)}
    after = [rules[0], FlowRule(_match(1), 12), rules[3], FlowRule(_match(9), 10)]
    new, moved, gone = slots.plan(after, PARENT)
    assert [r.match for r in new] == [_match(9)] and moved == [after[1]] and gone == [_match(2)]
    assert slots.plan(rules, PARENT) == ([], [], [])
    # another shape, or a prefix, overlaps what is held: not by slots
    assert slots.plan([*rules, FlowRule(_match(7, sport=False), 10)], PARENT) is None
    assert slots.plan([*rules, FlowRule(FlowMatch("10.9.0.0/16", proto=6), 10)], PARENT) is None


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60).stdout


@pytest.fixture
def dev() -> str:
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    sh("ip", "netns", "add", NS)
    try:
        sh("ip", "-n", NS, "link", "add", "s0", "type", "veth", "peer", "name", "s1")
        sh("ip", "-n", NS, "link", "set", "s0", "up")
        yield "s0"
    finally:
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)


def _config(rules: list[FlowRule]) -> QueueConfig:
    queues = tuple(QueueSpec(q, 1e8, 1e8, 100_000) for q in (1, 10, 11, 12))
    return QueueConfig(1e9, queues, 1, tuple(rules))


def _kernel(dev: str) -> dict[tuple[int, int], set[int]]:
    """(priority, source address as tc prints it) -> the classes u32 filters send it to."""
    out = sh("tc", "-n", NS, "filter", "show", "dev", dev)
    found: dict[tuple[int, int], set[int]] = {}
    for block in out.split("filter parent 5c1e: protocol ip pref ")[1:]:
        cls = re.search(r"flowid 5c1e:(\w+)", block)
        src = re.search(r"match (\w{8})/ffffffff at 12", block)
        if cls and src:
            found.setdefault((int(block.split()[0]), int(src.group(1), 16)), set()).add(int(cls.group(1), 16))
    return found


def _src(m: FlowMatch) -> int:
    a, b, c, d = (int(x) for x in m.src.split("/")[0].split("."))
    return a << 24 | b << 16 | c << 8 | d


def _expect(rules: list[FlowRule]) -> dict[int, set[int]]:
    return {_src(r.match): {r.queue} for r in rules}


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_epochs_send_only_the_difference(dev: str) -> None:
    from scidmz.actuators.htb import HtbQueueActuator

    n = 5000  # more than one priority's 4,095 nodes
    rules = [FlowRule(_match(i), 10 + i % 3) for i in range(n)]
    act = HtbQueueActuator(dev, netns=NS)
    sent: list[int] = []
    real = act._nlb.send

    def counting(requests):
        sent.append(len(requests))
        return real(requests)

    act._nlb.send = counting
    try:
        act.apply(_config(rules))
        k = _kernel(dev)
        assert {p for p, _ in k} == {SLOT_PRIO0, SLOT_PRIO0 + 1} and len(k) == n
        assert sum(1 for p, _ in k if p == SLOT_PRIO0) == NODES
        assert {a: c for (_, a), c in k.items()} == _expect(rules)
        # steady: the same rules (new objects): nothing sent
        sent.clear()
        act.apply(_config([FlowRule(_match(i), 10 + i % 3) for i in range(n)]))
        assert sent == []
        # 1 % move queue, 10 leave, 10 arrive: one request each
        moved = [FlowRule(r.match, 10 + (r.queue - 9) % 3) if i % 100 == 0 else r for i, r in enumerate(rules)]
        moved = moved[10:] + [FlowRule(_match(n + i), 12) for i in range(10)]
        act.apply(_config(moved))
        assert sum(sent) == 49 + 10 + 10, sent  # flow 0 moved but left: a delete
        k = _kernel(dev)
        assert {a: c for (_, a), c in k.items()} == _expect(moved) and len(k) == n
        # the freed slots are reused by the next new flows (lowest first)
        sent.clear()
        nxt = moved + [FlowRule(_match(n + 100 + i), 10) for i in range(3)]
        act.apply(_config(nxt))
        assert sent == [3] and {p for p, a in _kernel(dev) if a == _src(_match(n + 100))} == {SLOT_PRIO0}
        # a prefix rule: the whole set goes under one priority, the slots are deleted
        whole = [*nxt[:100], FlowRule(FlowMatch("10.250.0.0/16", proto=6), 11)]
        act.apply(_config(whole))
        k = _kernel(dev)
        assert len({p for p, _ in k}) == 1 and {p for p, _ in k} != {SLOT_PRIO0} and len(k) == 100
        assert act.current() is not None
        # and back to slots
        act.apply(_config(nxt[:200]))
        k = _kernel(dev)
        assert {p for p, _ in k} == {SLOT_PRIO0} and {a: c for (_, a), c in k.items()} == _expect(nxt[:200])
        assert len(act.current().rules) == 200
        # everything gone
        act.apply(_config([]))
        assert _kernel(dev) == {}
    finally:
        act.close()
    assert "5c1e" not in sh("tc", "-n", NS, "qdisc", "show", "dev", dev)
