"""The discipline registry (one line per discipline, one package each) and drop-tail, its simplest entry."""

from __future__ import annotations

import numpy as np
import pytest

from scidmz.disciplines import registry
from scidmz.disciplines.base import BottleneckDiscipline
from scidmz.disciplines.droptail import DropTailConfig, droptail_run


def test_every_entry_is_a_complete_package() -> None:
    ids = [registry.get(n).fluid_id for n in registry.names()]
    assert len(set(ids)) == len(ids) and registry.fluid_id("droptail") == 0
    for name in registry.names():
        e = registry.get(name)
        cls = e.config_class()
        assert issubclass(cls, BottleneckDiscipline) and cls.kind == name
        hooks = e.fluid()
        assert hooks.FLUID_ID == e.fluid_id
        # drop-tail has nothing in front of its FIFO: its fluid form is the FIFO's own drop rule
        for fn in ("layout", "init", "set_weights", "state", "overflow" if name == "droptail" else "admit"):
            assert callable(getattr(hooks, fn, None)), f"{name}.fluid has no {fn}"
        assert callable(e.decider().decide)
    assert all(f.exists() for f in registry.fluid_sources())


def test_unknown_discipline_is_one_line() -> None:
    with pytest.raises(ValueError, match="unknown bottleneck discipline 'red' \\(choose from droptail, abc, ffs\\)"):
        registry.get("red")
    with pytest.raises(ValueError, match="give one of DropTailConfig, ABCConfig, FFSConfig"):
        registry.for_config("red")
    assert registry.for_config(DropTailConfig(capacity_bps=1e6)).name == "droptail"


def test_droptail_core_by_hand() -> None:
    # 1500 B packets every 1/1024 s into a link that drains 750 B meanwhile, 2-packet buffer: the
    # backlog grows by half a packet per arrival, so the 5th packet (q = 2 packets) is dropped
    ts = np.arange(8) / 1024
    acc = np.zeros(8, np.bool_)
    droptail_run(ts, np.full(8, 1500.0), 750 * 8 * 1024.0, 2.0, acc)
    assert acc.tolist() == [True, True, True, True, False, True, False, True]


def test_droptail_discipline_is_the_unshaped_fifo() -> None:
    from scidmz.plant.fluid.plant import FluidPlant
    from scidmz.scenario import load_scenario

    sc = load_scenario("small-cubic").replace(duration=10.0)
    out = []
    for disc in (False, True):
        p = FluidPlant(sc)
        if disc:
            p.set_discipline(DropTailConfig(capacity_bps=sc.capacity))
        else:
            p.set_shaper(False)
        p.reset(3)
        out.append(np.array([p.step(5e6).y for _ in range(10)]))
        if disc:
            p.set_discipline_weights([3e6, 7e6])  # a FIFO keeps them and serves in arrival order
            assert p.discipline_state()["weights"][0].tolist() == [3e6, 7e6]
    assert np.array_equal(out[0], out[1])
    with pytest.raises(ValueError, match="drop-tail has none"):
        FluidPlant(sc).set_discipline(DropTailConfig(capacity_bps=sc.capacity), exact=True)


def test_droptail_and_pass_stage_accept_everything() -> None:
    from scidmz.plant.netns.stages.nfq import Stage

    for name in ("droptail", "pass"):
        st = Stage(name, {}, 1e6, {}, seed=0, clock=lambda: 0.0)
        assert all(st.decide(0x0A000001, 1500) for _ in range(100))
