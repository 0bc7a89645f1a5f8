"""ABC and FFS on the netns testbed's BR1 WAN egress (NFQUEUE stage), driven by the runner."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scidmz.scenario import load_scenario

pytestmark = pytest.mark.root


def _run(name: str, prefix: str) -> tuple[np.ndarray, dict, list, dict]:
    from scidmz.plant.base import make_plant
    from scidmz.policies import make_policy
    from scidmz.runner import Episode

    sc = _scenario()
    plant = make_plant("netns", sc, prefix=prefix, telemetry="kernel")
    try:
        ep = Episode(plant, make_policy(name))
        ep.reset(1)
        us, infos = [], []
        for _ in range(14):
            _, u = ep.step(14e6)
            us.append(u[0])
            infos.append(plant.info)
        stats = plant.discipline_stats() if name != "none" else {}
        weights = json.loads(plant._stage.weights_path.read_text()) if name != "none" else None
        return np.asarray(ep.history.y)[:, 0, :], stats, us, {"infos": infos, "weights": weights}
    finally:
        plant.close()


def _scenario():
    return load_scenario("testbed").replace(campus={"hosts": 4}, link={"capacity": 20e6, "buffer_bdp": 1.0},
                                            dtn={"streams": 4, "rtt": 0.05}, duration=20.0)


def test_abc_and_ffs_run_on_br1_and_take_the_target_from_the_runner() -> None:
    sc = _scenario()
    for name in ("abc", "ffs"):
        y, stats, us, extra = _run(name, f"td{name[0]}")
        assert all(u == sc.u_max for u in us)  # no shaping: the bottleneck discipline serves the DTN
        assert stats["received"] > 5000 and stats["dropped"] > 0
        assert stats["queue_dropped"] == stats["user_dropped"] == 0
        assert extra["infos"][-1]["discipline_stage_drops"][0] == 0
        assert extra["weights"] == pytest.approx([14e6, 6e6])  # the target reached the stage
        assert (y[6:, 0] + y[6:, 1]).mean() > 0.8 * sc.capacity
        # the DTN's connections open at once and it keeps a real share (a stage that dropped its
        # 60 B SYNs behind a full virtual queue left it at 0 for 12 s). How much the disciplines
        # move it here is measured, not asserted: 4 DTN streams at 50 ms vs 4 campus flows at
        # 10 ms, target 14 of 20 Mbit/s -> DTN ~8-11 Mbit/s with ABC, ~8.6 with FFS, ~9 without.
        assert y[:3, 0].mean() > 2e6 and y[6:, 0].mean() > 4e6


def test_netns_plant_discipline_bad_input() -> None:
    from scidmz.disciplines.abc import ABCConfig
    from scidmz.plant.netns.plant import NetnsPlant

    plant = NetnsPlant(load_scenario("testbed"), prefix="tdx")
    with pytest.raises(ValueError, match="unknown bottleneck discipline"):
        plant.set_discipline("red")
    with pytest.raises(ValueError, match="no groups"):
        plant.set_discipline(ABCConfig(capacity_bps=1e8), groups=[0, 1])
    with pytest.raises(ValueError, match="runs no bottleneck discipline"):
        plant.set_discipline_weights([1e6, 1e6])
    plant.close()
