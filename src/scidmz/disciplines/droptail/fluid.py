"""Drop-tail in the fluid plant: the FIFO's own drop rule, applied by the kernel to every bottleneck queue.

A drop-tail FIFO admits everything; what does not fit its buffer after the
sub-step's service is dropped (:func:`overflow`, docs/fluid_model.md
"Bottleneck queue discipline"). So nothing sits in front of the FIFO: the
kernel skips the admission step for this id, and every other discipline's
``admit`` runs in front of this same FIFO.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from ..base import FluidLayout, no_option
from ..registry import fluid_id

FLUID_ID = fluid_id("droptail")
#: The FIFO's noise is the one measured on the testbed (constants.ARRIVAL_IDC) and checked there, under
#: the trivial TBF and in a queue policy's HTB leaves (reports/leaderboard/noise.json).
NOISE_FOOTING = True
#: The Science DMZ's two aggregates (DTN, campus): the runner's weights have one entry each.
N_AGGREGATES = 2


@njit(cache=True, inline="always")
def overflow(backlog: float, buffer: float) -> float:
    """Bytes a drop-tail queue must drop to stay within its buffer."""
    return backlog - buffer if backlog > buffer else 0.0


@njit(cache=True, inline="always")
def noise_edge(dp, dw, buffer):
    """The packet noise meets a drop-tail queue at its buffer (``plant/fluid/kernel.py``, ``_packet_noise``)."""
    return buffer


@njit(cache=True, inline="always")
def noise_drop(dw, grp, ain, rej, extra, pkt):
    """A full FIFO drops whichever packet arrives: the noise's overflow is shared by arrivals (returns 0)."""
    return 0.0


def layout(config: Any, n_flows: int, labels: bool, exact: bool) -> FluidLayout:
    no_option("drop-tail", labels, exact)
    return FluidLayout(n_params=1, n_aggregates=N_AGGREGATES, state=(1, 1), flow_rows=1, work=(1, 1))


def init(config: Any, dp: np.ndarray, dm: np.ndarray, ds: np.ndarray, df: np.ndarray, groups: np.ndarray,
         labels: np.ndarray, exact: bool, buffer_bytes: float, pkt_bytes: float) -> None:
    """Nothing to set up: the FIFO is the plant's own queue."""


def set_weights(config: Any, dm: np.ndarray, ds: np.ndarray, w: np.ndarray) -> None:
    """A FIFO serves in arrival order: the weights are kept (``state()["weights"]``) and change nothing."""
    dm[:] = w


def state(config: Any, dm: np.ndarray, ds: np.ndarray) -> dict[str, np.ndarray]:
    return {"weights": dm.copy()}
