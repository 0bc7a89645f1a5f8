"""Fluid plant per-queue ceilings (no borrowing), the queue model of the Jenks policy."""

from __future__ import annotations

import numpy as np
import pytest

from scidmz.plant.fluid.plant import FluidPlant
from scidmz.scenario import load_scenario


@pytest.fixture(scope="module")
def sc():
    return load_scenario("small-cubic").with_overrides(["dtn.streams=2", "campus.hosts=0", "duration=20s"])


def _run(sc, ceilings):
    with FluidPlant(sc) as p:
        p.reset(0)
        p.set_queues([2e5, 2e5], [1.0, 1.0], [0, 1], ceilings)
        rates = np.array([p.snapshot()["rate"][0, :2] for _ in range(20) if p.step(sc.u_max) is not None])
    return rates[10:].mean(axis=0)


def test_ceiling_holds_a_queue_below_its_lendable_share(sc):
    free = _run(sc, None)
    capped = _run(sc, [20e6, 80e6])
    assert capped[0] <= 20e6 * 1.02
    assert capped[1] > 60e6
    assert free[0] > 30e6  # without ceilings the queues split ~50/50


def test_bad_ceilings(sc):
    with FluidPlant(sc) as p, pytest.raises(ValueError, match="ceilings must be > 0"):
        p.set_queues([2e5, 2e5], None, [0, 1], [0.0, 1e6])
