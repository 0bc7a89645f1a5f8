"""The control plane of ``abc_bottleneck.p4``: its table names and what the controller writes in them.

ABC (Menth et al., Future Internet 2019, section 3.2): the aggregates' reference rates R_r are
the weights; the program takes them as activity offsets, A = log2(rate) - log2 R_r, i.e. the
constant of :mod:`.gen_tables` less log2 R_r, in Q8. The queue thresholds are the
configuration's, in bytes of the virtual FIFO's 1500 B packets (``config.QUEUE_PKT_BYTES``), and
the FIFO drains at the configuration's capacity (bytes per microsecond, Q16).
The plant's discipline place (``plant/hardware_discipline.py``) reads this module through the
discipline registry.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..config import QUEUE_PKT_BYTES, ABCConfig

PROGRAM = "abc_bottleneck.p4"
#: (table, match field, action, parameter) of the source -> aggregate entries
CLASS = ("agg_of", "h.ip.src", "set_agg", "agg")
#: (table, match field, action, parameter) of the per-aggregate weight entries
WEIGHT = ("agg_weight", "m.agg", "set_ref", "off")
#: rate (bit/s) -> log2 rate (Q8) for a byte sum in Q8 over a time in us (gen_tables' ABC_ACT_OFFSET_Q8 less log2 R_r)
_K = -8.0 + 3.0 + math.log2(1e6)


def check(config: ABCConfig) -> None:
    """The program's decay and log tables are generated for the default memories: refuse others (one line)."""
    ref = ABCConfig(capacity_bps=50e6)
    for f in ("memory_meter_s", "memory_avg_s"):
        if not math.isclose(float(getattr(config, f)), float(getattr(ref, f)), rel_tol=1e-9):
            raise ValueError(f"discipline abc: {f} = {getattr(config, f)!r}, but the P4 program's tables are "
                             f"generated for {getattr(ref, f)!r} (python -m scidmz.disciplines.abc.p4.gen_tables)")


def weight_values(config: ABCConfig, w: np.ndarray) -> list[int]:
    """The aggregates' activity offsets (Q8) for reference rates ``w`` (bit/s, > 0)."""
    return [round((_K - math.log2(x)) * 256) for x in w]


def initial_weights(config: ABCConfig) -> np.ndarray:
    refs = config.ref_rates_bps or (config.ref_rate_bps, config.ref_rate_bps)
    return np.asarray(refs, dtype=np.float64)


def params(config: ABCConfig) -> dict[str, Any]:
    """The ``params`` table's default action: the thresholds in bytes and the FIFO's drain rate."""
    return {"qmin_b": round(config.q_min_pkts * QUEUE_PKT_BYTES), "qbase_b": round(config.q_base_pkts * QUEUE_PKT_BYTES),
            "gamma_b": round(config.gamma_pkts * QUEUE_PKT_BYTES),
            "buffer_b": round(config.buffer_pkts * QUEUE_PKT_BYTES),
            "drain_q16": round(config.capacity_bps / 8.0 / 1e6 * 65536)}
