"""The fluid plant in ARCHITECTURE.md's units and the built-in buffer regime."""

from __future__ import annotations

import numpy as np
import pytest

from scidmz.plant.fluid import constants as c
from scidmz.scenario import load_scenario


def test_a_transfer_moves_its_payload_in_frame_bytes():
    """A lone DTN on an otherwise empty link finishes at payload x 1514/1448 x 8 / B_max (plus start-up)."""
    from scidmz.plant.fluid import FluidPlant

    size = 50e6
    sc = load_scenario("small-bbr2").replace(campus={"hosts": 0}, dtn={"transfer": size, "cca": "bbr"},
                                             link={"buffer_bdp": 1.0, "buffer": None}, duration=30.0)
    plant = FluidPlant(sc)
    delivered, fct = 0.0, np.nan
    for _ in range(30):
        plant.step(sc.u_max)
        delivered += float(plant.info["dtn_bytes"][0])
        f = float(plant.info["dtn_fct"][0])
        if np.isfinite(f):
            fct = f
            break
    wire = size * c.FRAME_BYTES / c.MSS_PAYLOAD
    assert delivered == pytest.approx(wire, rel=0.01)  # rates and bytes count frames
    ideal = wire * 8 / sc.capacity
    assert ideal < fct < ideal + 2.0  # slow start and the RTT on top, never faster than the wire


def test_builtins_are_shallow_and_the_deep_variants_are_one_word_away():
    for name in ("paper-cubic", "paper-bbr", "paper-bbr2", "testbed", "small-cubic", "small-bbr2"):
        sc, deep = load_scenario(name), load_scenario(f"{name}-deep")
        assert sc.link.buffer_bdp == 0.05, name
        assert deep.link.buffer_bdp == 1.0, name
        assert deep.replace(link={"buffer_bdp": 0.05}).to_dict() | {"name": None, "description": None} == (
            sc.to_dict() | {"name": None, "description": None}), name


def test_trivial_tbf_underfills_in_the_shallow_regime_only():
    """The point of the regime: the trivial TBF leaves the DTN below its target at 0.05 BDP, not at 1 BDP."""
    from scidmz.plant.fluid import FluidPlant

    fills = {}
    for name in ("paper-cubic", "paper-cubic-deep"):
        sc = load_scenario(name)
        target = 0.5 * sc.capacity
        plant = FluidPlant(sc, scenarios=[sc.replace(seed=s) for s in range(3)])
        ys = np.array([plant.step(np.full(3, sc.trivial_rate(target))).y for _ in range(40)])[10:]
        fills[name] = float(ys[:, :, 0].mean() / target)
    assert fills["paper-cubic"] < 0.975 < 0.99 < fills["paper-cubic-deep"], fills
