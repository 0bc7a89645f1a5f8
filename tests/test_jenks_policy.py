"""Jenks RTT separation policy and QueueConfig validation (no root, no kernel)."""

from __future__ import annotations

import numpy as np
import pytest

from scidmz.policies.queue.jenks import (
    BLOAT_QID,
    CLASS_QID0,
    DEFAULT_QID,
    UDP_QID,
    JenksParams,
    JenksPolicy,
    JenksSeparator,
    jenks_groups,
    stanford_buffer,
    weighted_maxmin,
)
from scidmz.queueconfig import FlowMatch, FlowRule, QueueConfig, QueueConfigError, QueueSpec

C = 1e9


def table(rtts, rates=None, proto=None, longf=None, start=1):
    n = len(rtts)
    return {
        "src": [f"10.0.0.{start + i}" for i in range(n)],
        "dst": ["10.1.0.1"] * n,
        "sport": [40000 + start + i for i in range(n)],
        "dport": [5201] * n,
        "proto": proto or [6] * n,
        "rtt": list(rtts),
        "rate": rates or [C / max(n, 1)] * n,
        "long_flow": longf or [True] * n,
    }


def queue_of(cfg: QueueConfig) -> dict[str, int]:
    return {r.match.src: r.queue for r in cfg.rules}


# -- grouping ------------------------------------------------------------------------------


def test_jenks_groups_hand_checked():
    # Three obvious clusters: 1-3 ms, 10-12 ms, 50-51 ms.
    x = np.array([1, 2, 3, 10, 11, 12, 50, 51]) * 1e-3
    cls, breaks = jenks_groups(x, 3)
    assert cls.tolist() == [0, 0, 0, 1, 1, 1, 2, 2]
    assert breaks.tolist() == pytest.approx([0.001, 0.003, 0.012, 0.051])
    # Unsorted input keeps its order.
    cls2, _ = jenks_groups(x[::-1], 3)
    assert cls2.tolist() == [2, 2, 1, 1, 1, 0, 0, 0]


def _within_ss(x: np.ndarray, cls: np.ndarray) -> float:
    return float(sum(((x[cls == j] - x[cls == j].mean()) ** 2).sum() for j in np.unique(cls)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_large_tables_use_a_faster_exact_backend(seed, monkeypatch):
    """Above JENKSPY_MAX_FLOWS the breaks come from kmeans1d: the same Fisher-Jenks optimum."""
    import jenkspy

    import scidmz.policies.queue.jenks as J

    rng = np.random.default_rng(seed)
    # continuous RTTs, and RTTs on a 0.1 ms grid (ties, as a data plane's timer gives)
    for x in (rng.uniform(0.001, 0.1, 3000), np.round(rng.gamma(2.0, 0.01, 3000), 4) + 1e-4):
        for k in (2, 4, 8):
            monkeypatch.setattr(J, "JENKSPY_MAX_FLOWS", 10**9)
            cls_ref, br_ref = J.jenks_groups(x, k)
            monkeypatch.setattr(J, "JENKSPY_MAX_FLOWS", 10)
            cls, br = J.jenks_groups(x, k)
            assert np.asarray(jenkspy.jenks_breaks(x, n_classes=k)) == pytest.approx(br_ref)
            # the same optimum; with ties an equally good partition may differ, never a worse one
            assert _within_ss(x, cls) == pytest.approx(_within_ss(x, cls_ref), rel=1e-9)
            if np.unique(x).size == x.size:
                assert br == pytest.approx(br_ref) and (cls == cls_ref).all()


def test_jenks_k_clamped_to_distinct_rtts():
    cls, breaks = jenks_groups(np.array([0.005, 0.005, 0.005, 0.020]), 4)
    assert len(breaks) == 3 and cls.tolist() == [0, 0, 0, 1]
    cls, breaks = jenks_groups(np.array([0.01, 0.01]), 8)
    assert cls.tolist() == [0, 0]
    with pytest.raises(QueueConfigError, match="K must be >= 1"):
        jenks_groups(np.array([0.01]), 0)


def test_paper_test1_four_flows_four_queues():
    s = JenksSeparator(JenksParams(queues=4))
    cfg = s.decide(table([0.002, 0.020, 0.040, 0.060]), C)
    q = queue_of(cfg)
    assert sorted(q.values()) == [CLASS_QID0, CLASS_QID0 + 1, CLASS_QID0 + 2, CLASS_QID0 + 3]
    assert q["10.0.0.1"] == CLASS_QID0 and q["10.0.0.4"] == CLASS_QID0 + 3
    rates = [x.rate for x in cfg.queues if x.qid >= CLASS_QID0]
    assert max(rates) == pytest.approx(min(rates))  # N_i = 1 each: equal shares
    assert sum(x.rate for x in cfg.queues) <= C * (1 + 1e-9)
    assert all(x.ceil == x.rate for x in cfg.queues)  # no borrowing, as in the papers
    # Stanford rule, one flow per queue: buffer = r_i * RTT / 8.
    q60 = cfg.queue(CLASS_QID0 + 3)
    assert q60.buffer == stanford_buffer(q60.rate, 0.060, 1)
    assert q60.buffer == pytest.approx(q60.rate * 0.060 / 8, rel=1e-6)


def test_rates_follow_flow_counts_and_short_flows_stay_default():
    s = JenksSeparator(JenksParams(queues=2))
    cfg = s.decide(table([0.002, 0.003, 0.050, 0.060, 0.004], longf=[True, True, True, True, False]), C)
    q = queue_of(cfg)
    assert "10.0.0.5" not in q  # short flow: no rule, default queue
    assert q["10.0.0.1"] == q["10.0.0.2"] != q["10.0.0.3"] == q["10.0.0.4"]
    a, b = cfg.queue(CLASS_QID0), cfg.queue(CLASS_QID0 + 1)
    d = cfg.queue(DEFAULT_QID)
    assert a.rate == pytest.approx(b.rate)
    assert a.rate == pytest.approx(2 * d.rate, rel=0.05)  # 2 flows vs 1 flow
    # Stanford: N = 2 flows in the queue, mean RTT 55 ms.
    assert b.buffer == stanford_buffer(b.rate, 0.055, 2)


def test_rebalancing_moves_unused_share_and_gives_it_back():
    # Exp 4: 5 ms and 70 ms flows with equal allocations; the 70 ms flow uses 2 of its ~5 Gbit/s.
    cap = 10e9
    s = JenksSeparator(JenksParams(queues=2, rebalance=True))
    s.decide(table([0.005, 0.070], rates=[5e9, 5e9]), cap)
    # One under-used epoch is not enough (shrink_hold = 2): the share stays.
    cfg = s.decide(table([0.005, 0.070], rates=[4.9e9, 2e9]), cap)
    assert cfg.queue(CLASS_QID0 + 1).rate == pytest.approx(cfg.queue(CLASS_QID0).rate)
    cfg = s.decide(table([0.005, 0.070], rates=[4.9e9, 2e9]), cap)
    fast, slow = cfg.queue(CLASS_QID0), cfg.queue(CLASS_QID0 + 1)
    assert slow.rate == pytest.approx(2e9 * 1.1)
    assert fast.rate > 7e9
    assert sum(q.rate for q in cfg.queues) <= cap * (1 + 1e-9)
    # The slow flow recovers and fills its allocation: it reclaims its fair share by at most
    # 2 x headroom per epoch (a noisy reading near the allocation must not snap the split back).
    got = []
    for _ in range(6):
        slow_rate = cfg.queue(CLASS_QID0 + 1).rate
        cfg = s.decide(table([0.005, 0.070], rates=[cap - slow_rate, slow_rate]), cap)
        got.append(cfg.queue(CLASS_QID0 + 1).rate)
    assert got[0] == pytest.approx(2e9 * 1.1 * 1.2)
    assert got[-1] == pytest.approx(cfg.queue(CLASS_QID0).rate)  # fair again after five epochs
    # Without rebalancing the allocation never moves.
    s = JenksSeparator(JenksParams(queues=2, rebalance=False))
    s.decide(table([0.005, 0.070]), cap)
    cfg = s.decide(table([0.005, 0.070], rates=[4.9e9, 2e9]), cap)
    assert cfg.queue(CLASS_QID0).rate == pytest.approx(cfg.queue(CLASS_QID0 + 1).rate)


def test_rebalancing_never_squeezes_the_default_queue_while_it_holds_flows():
    """The default queue holds the flows not classified yet: shrunk to what they use, they could
    never grow to the 10 MB mark (the netns testbed's DTN stuck at 1 % of C)."""
    cap = 100e6
    s = JenksSeparator(JenksParams(queues=2, rebalance=True))
    rtts = [0.010, 0.010, 0.050, 0.050]
    longf = [True, True, False, False]  # the two 50 ms flows are still below the long-flow mark
    for _ in range(5):
        cfg = s.decide(table(rtts, rates=[45e6, 45e6, 1e6, 1e6], longf=longf), cap)
    default = cfg.queue(DEFAULT_QID)
    assert default.rate == pytest.approx(cap * 2 / 4, rel=0.02)  # its flow-count share, not 2 x 1.1 Mbit/s
    # an empty default queue still keeps only the floor
    for _ in range(3):
        cfg = s.decide(table(rtts[:2], rates=[45e6, 45e6]), cap)
    assert cfg.queue(DEFAULT_QID).rate == pytest.approx(0.01 * cap)


def test_hysteresis_holds_a_flow_before_moving_it():
    p = JenksParams(queues=2, hold=2, margin=0.10, rtt_window=1)
    s = JenksSeparator(p)
    q = queue_of(s.decide(table([0.010, 0.011, 0.100]), C))
    assert q["10.0.0.2"] == CLASS_QID0
    # Flow 2's RTT jumps next to flow 3's: the new class must be seen twice.
    q = queue_of(s.decide(table([0.010, 0.095, 0.100]), C))
    assert q["10.0.0.2"] == CLASS_QID0
    q = queue_of(s.decide(table([0.010, 0.095, 0.100]), C))
    assert q["10.0.0.2"] == CLASS_QID0 + 1
    # A small wobble within the margin of its queue's range does not move it back.
    s2 = JenksSeparator(p)
    s2.decide(table([0.010, 0.050, 0.052]), C)
    for _ in range(3):
        q = queue_of(s2.decide(table([0.010, 0.046, 0.052]), C))
    assert q["10.0.0.2"] == CLASS_QID0 + 1


def test_flows_split_before_the_others_turned_long_regroup():
    """Seen on the netns testbed: the campus flows (10 ms) pass the 10 MB long-flow mark first and
    Jenks splits them by microseconds; once the DTN's flows (50 ms) are long too, the campus flows
    in the upper class must join the lower one (the margin is around the class's flows, not its
    lower break, which is the top of the class below)."""
    s = JenksSeparator(JenksParams(queues=2, hold=2, margin=0.10, rtt_window=1))
    rtts = [0.0096, 0.0097, 0.0496, 0.0497]
    q = queue_of(s.decide(table(rtts, longf=[True, True, False, False]), C))
    assert {q["10.0.0.1"], q["10.0.0.2"]} == {CLASS_QID0, CLASS_QID0 + 1}
    for _ in range(3):
        q = queue_of(s.decide(table(rtts), C))
    assert q["10.0.0.1"] == q["10.0.0.2"] == CLASS_QID0
    assert q["10.0.0.3"] == q["10.0.0.4"] == CLASS_QID0 + 1


def test_windowed_min_rtt_ignores_queueing_spikes():
    s = JenksSeparator(JenksParams(queues=2, rtt_window=5))
    s.decide(table([0.010, 0.100]), C)
    # Flow 1's current RTT spikes (queueing) but its windowed minimum stays 10 ms.
    q = queue_of(s.decide(table([0.300, 0.100]), C))
    assert q["10.0.0.1"] == CLASS_QID0


def test_udp_isolation_only_once_tcp_is_present():
    s = JenksSeparator(JenksParams(queues=2))
    cfg = s.decide(table([0.010], proto=[17], longf=[True], rates=[C]), C)
    assert queue_of(cfg) == {}  # UDP alone: default queue, whole link
    t = table([0.010, 0.020, 0.030], proto=[17, 6, 6], rates=[8e8, 1e8, 1e8])
    cfg = s.decide(t, C)
    q = queue_of(cfg)
    assert q["10.0.0.1"] == UDP_QID
    assert cfg.queue(UDP_QID).rate == pytest.approx(cfg.queue(UDP_QID).ceil)
    assert cfg.queue(UDP_QID).rate < 0.4 * C  # one flow of three
    s = JenksSeparator(JenksParams(queues=2, udp_isolation=False))
    assert "10.0.0.1" not in queue_of(s.decide(t, C))


def test_bufferbloat_rule_isolates_the_heaviest_flow():
    s = JenksSeparator(JenksParams(queues=1, bloat_threshold=0.030, rtt_window=10))
    s.decide(table([0.010, 0.011], rates=[5e8, 5e8]), C)
    # Flow 2 floods the shared queue: both current RTTs rise above 30 ms.
    q = queue_of(s.decide(table([0.060, 0.061], rates=[2e8, 8e8]), C))
    assert q["10.0.0.2"] == BLOAT_QID and q["10.0.0.1"] == CLASS_QID0
    # Below the threshold nothing moves.
    s = JenksSeparator(JenksParams(queues=1, bloat_threshold=0.030))
    q = queue_of(s.decide(table([0.020, 0.021], rates=[2e8, 8e8]), C))
    assert set(q.values()) == {CLASS_QID0}


def test_empty_table_gives_default_queue_only():
    cfg = JenksSeparator().decide(table([]), C)
    assert [q.qid for q in cfg.queues] == [DEFAULT_QID] and cfg.rules == ()


def test_batched_policy():
    pol = JenksPolicy(JenksParams(queues=2))
    pol.reset(None, batch=2)
    out = pol.decide_queues([table([0.01, 0.1]), table([0.01])], [C, C / 2])
    assert len(out) == 2 and out[1].capacity == C / 2
    with pytest.raises(ValueError, match="batch of 2"):
        pol.decide_queues([table([0.01])], C)


def test_weighted_maxmin():
    out = weighted_maxmin(10.0, np.array([1.0, 1.0, 2.0]), np.array([1.0, np.inf, np.inf]))
    assert out.tolist() == pytest.approx([1.0, 3.0, 6.0])


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"queues": 0}, "policy.queues"),
        ({"saturation": 0.5}, "policy.saturation"),
        ({"bloat_threshold": -1.0}, "bloat_threshold"),
    ],
)
def test_bad_params(kw, msg):
    with pytest.raises(QueueConfigError, match=msg):
        JenksParams(**kw).check()


def _cfg(**over):
    q = [QueueSpec(1, 4e8, 4e8, 30000), QueueSpec(2, 5e8, 5e8, 30000)]
    base = {"capacity": 1e9, "queues": tuple(q), "default": 1, "rules": ()}
    base.update(over)
    return QueueConfig(**base)


@pytest.mark.parametrize(
    ("cfg", "msg"),
    [
        (_cfg(queues=(QueueSpec(1, 6e8, 6e8, 30000), QueueSpec(2, 5e8, 5e8, 30000))), "sum to .* above the link capacity"),
        (_cfg(queues=(QueueSpec(1, 4e8, 4e8, 1000),)), "below one MTU"),
        (_cfg(default=7), "default queue 7"),
        (_cfg(queues=(QueueSpec(1, 4e8, 3e8, 30000),)), "below its rate"),
        (_cfg(queues=(QueueSpec(1, 4e8, 2e9, 30000),)), "above the link capacity"),
        (_cfg(rules=(FlowRule(FlowMatch(src="10.0.0.1"), 9),)), "queue 9, which does not exist"),
        (_cfg(rules=(FlowRule(FlowMatch(src="10.0.0.1", sport=80), 2),)), "needs proto 6"),
        (_cfg(rules=(FlowRule(FlowMatch(src="bogus"), 2),)), "not an IPv4"),
    ],
)
def test_queueconfig_rejects(cfg, msg):
    with pytest.raises(QueueConfigError, match=msg):
        cfg.validate()


def test_queueconfig_scope():
    cfg = _cfg(rules=(FlowRule(FlowMatch(src="192.168.9.9", proto=6), 2),))
    with pytest.raises(QueueConfigError, match="outside the scenario's networks"):
        cfg.validate(scope=["10.0.0.0/8"])
    cfg.validate(scope=["192.168.0.0/16"])


def test_accepts_the_collectors_dataframe():
    import pandas as pd

    # The columns telemetry.Collector.flows() produces (no min_rtt: the policy keeps its own window).
    df = pd.DataFrame({
        "src": ["10.0.0.1", "10.0.0.2"], "dst": ["10.1.0.1"] * 2, "sport": [1, 2], "dport": [5201] * 2,
        "proto": [6, 6], "cls": ["dtn", "campus"], "slot": [0, 1], "rtt": [0.01, 0.1],
        "rate": [1e8, 1e8], "bytes": [1e8, 1e8], "long_flow": [True, True],
    })
    q = queue_of(JenksSeparator(JenksParams(queues=2)).decide(df, C))
    assert q == {"10.0.0.1": CLASS_QID0, "10.0.0.2": CLASS_QID0 + 1}


def test_an_unused_share_nobody_takes_stays_with_the_flows():
    """A lone CUBIC flow dips below 95 % of its queue after every loss; shrunk to its use with no other
    queue to take the share, its queue (and Stanford buffer) spiralled down (netns Exp 5: 0.99 -> 0.17)."""
    cap = 100e6
    s = JenksSeparator(JenksParams(queues=2, rebalance=True))
    cfg = s.decide(table([0.020], rates=[90e6]), cap)
    for _ in range(10):
        q = cfg.queue(CLASS_QID0)
        cfg = s.decide(table([0.020], rates=[0.8 * q.rate]), cap)
    assert cfg.queue(CLASS_QID0).rate == pytest.approx(cap * 0.99)
    # With a second queue demanding, the share does move (the lender keeps its use + headroom).
    for _ in range(4):
        cfg = s.decide(table([0.020, 0.080], rates=[20e6, cfg.queue(CLASS_QID0 + 1).rate if len(cfg.queues) > 2
                                                    else 50e6]), cap)
    assert cfg.queue(CLASS_QID0).rate == pytest.approx(20e6 * 1.1, rel=0.02)
    assert sum(q.rate for q in cfg.queues) == pytest.approx(cap)
