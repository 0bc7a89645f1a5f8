"""One y on the testbed: each data-plane column against kernel truth, with standing queues.

Needs root (CI is root). The scenario keeps a standing queue at the bottleneck
(8 CUBIC DTN streams, a 0.5 BDP buffer) and another in the campus shaper on
S1's uplink (3 campus hosts want more than u), so RTTs that leave out the
bottleneck queue, or put the shaper's queue in, fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from scidmz.scenario import load_scenario

pytestmark = pytest.mark.root


def test_dataplane_columns_match_kernel_truth_with_a_standing_queue():
    from scidmz.plant.netns.plant import NetnsPlant

    sc = load_scenario("testbed").replace(
        campus={"hosts": 3}, link={"capacity": 20e6, "buffer_bdp": 0.5, "buffer": None}, duration=20.0,
    )
    u = 8e6

    with NetnsPlant(sc, prefix="trg", telemetry="dataplane") as plant:
        plant.reset(seed=3)
        ys, infos = [], []
        for _ in range(12):
            ys.append(plant.step(u).y[0])
            infos.append(plant.info)
    use = [k for k in range(5, 12) if infos[k]["telemetry"] == "dataplane"]
    assert len(use) >= 5, [i["telemetry"] for i in infos]
    y = np.array([ys[k] for k in use])
    kern = np.array([infos[k]["kernel_y"] for k in use])
    q_kernel = kern[:, 4].mean()
    assert q_kernel > 0.010, "the scenario must keep a standing bottleneck queue"
    # 1, 2: rates in frame bytes, two independent counters of the same packets (mirrored
    # frames' wire length vs S2's veth tx_bytes); both include the 14-byte Ethernet header.
    assert y[:, 0].mean() == pytest.approx(kern[:, 0].mean(), rel=0.05)
    assert y[:, 1].mean() == pytest.approx(kern[:, 1].mean(), rel=0.05)
    # The bottleneck is full: frame bytes add up to B_max (a payload count would be ~4 % short).
    assert (y[:, 0] + y[:, 1]).mean() == pytest.approx(sc.capacity, rel=0.03)
    # 5, 6: per-packet queuing delay at the bottleneck against the qdisc backlog / B_max.
    assert y[:, 4].mean() == pytest.approx(q_kernel, rel=0.25, abs=0.002)
    assert y[:, 5].mean() == pytest.approx(kern[:, 5].mean(), rel=0.25, abs=0.002)
    # 3: the DTN RTT includes the bottleneck queue: base RTT + queue, and the senders' own RTT.
    assert y[:, 2].mean() == pytest.approx(sc.dtn.rtt + y[:, 4].mean(), abs=0.004)
    assert y[:, 2].mean() == pytest.approx(kern[:, 2].mean(), rel=0.05, abs=0.004)
    # 4: the campus RTT at the border router: base + bottleneck queue, without the shaper's queue
    # (which the senders' tcp_info RTT contains and the kernel source takes off).
    shaper = np.mean([infos[k]["shaper_delay"][0] for k in use])
    # Algorithm 4's value is the flows' latest samples, smoothed, not a per-packet mean: it follows
    # the queue with a lag (measured 5 ms off the period means), so it is bracketed, far from 10 ms.
    q5 = y[:, 5]
    assert sc.campus.rtt + 0.5 * q5.mean() < y[:, 3].mean() < sc.campus.rtt + q5.max() + 0.004
    assert kern[:, 3].mean() == pytest.approx(y[:, 3].mean(), abs=0.008)
    assert shaper > 0.005, "the campus shaper must hold a queue in this scenario"
    # 7: active flows: 8 DTN streams + 3 campus flows on both sources.
    assert y[:, 6].mean() == pytest.approx(11, abs=0.5)
    assert kern[:, 6].mean() == pytest.approx(11, abs=0.5)
    # Every period says whether the machine limited it, with its evidence, as a (1,) bool array: the
    # runner keeps such entries as trace columns, so experiments can count starved periods per trial.
    assert all(i["starved"].shape == (1,) and i["starved"].dtype == bool and "reasons" in i["starvation"]
               for i in infos)
