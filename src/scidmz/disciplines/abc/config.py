"""ABC's configuration and the layout of the arrays its decision core reads (no numba here).

Menth et al., "Implementation and Evaluation of Activity-Based Congestion
Management Using P4 (P4-ABC)", Future Internet 11(7) 159, 2019: section 3.2
(activity meter, per-aggregate reference rates), 3.3 (activity AQM) and 6.1.3
(the defaults below). The algorithm and our choices are in :mod:`.core`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..base import BottleneckDiscipline, check_at_least, check_positive

# Layout of the parameter vector the core reads (one float64 array: numba-friendly).
P_MEM_METER, P_REF_RATE, P_MEM_AVG, P_QMIN, P_QBASE, P_GAMMA, P_BUFFER, P_T0 = range(8)
N_PARAMS = 8
# Meter state per aggregate: decayed byte sum, time of its last packet, and the
# aggregate's own reference rate (0: the configuration's R_r). Section 3.2:
# "Reference rates R_r specific to aggregates may be used to differentiate
# their achievable throughput in case of congestion."
M_S, M_TLAST, M_REF = 0, 1, 2
# Averager state: decayed activity sum, decayed count, time of last accepted packet.
A_S, A_N, A_TLAST = 0, 1, 2


@dataclass(frozen=True)
class ABCConfig(BottleneckDiscipline):
    """ABC parameters (SI units; queue quantities in packets as in the paper)."""

    kind: ClassVar[str] = "abc"
    memory_meter_s: float = 3.0
    ref_rate_bps: float = 10e3
    memory_avg_s: float = 0.3
    q_min_pkts: float = 6.0
    q_base_pkts: float = 20.0
    gamma_pkts: float = 16.0
    buffer_pkts: float = 24.0
    ref_rates_bps: tuple[float, ...] = ()  # per aggregate (section 3.2); empty: R_r for all

    def __post_init__(self) -> None:
        super().__post_init__()
        refs = tuple(check_positive(f"ref_rates_bps[{i}] (R_r)", r) for i, r in enumerate(self.ref_rates_bps))
        object.__setattr__(self, "ref_rates_bps", refs)
        object.__setattr__(self, "memory_meter_s", check_positive("memory_meter_s", self.memory_meter_s))
        object.__setattr__(self, "memory_avg_s", check_positive("memory_avg_s", self.memory_avg_s))
        object.__setattr__(self, "ref_rate_bps", check_positive("ref_rate_bps (R_r)", self.ref_rate_bps))
        for name in ("q_min_pkts", "q_base_pkts", "gamma_pkts", "buffer_pkts"):
            object.__setattr__(self, name, check_at_least(name, getattr(self, name), 1.0, "packet"))

    def params(self, t0: float = 0.0) -> np.ndarray:
        """The core's parameter vector; ``t0`` is the meter start time (s)."""
        p = np.empty(N_PARAMS)
        p[P_MEM_METER] = self.memory_meter_s
        p[P_REF_RATE] = self.ref_rate_bps
        p[P_MEM_AVG] = self.memory_avg_s
        p[P_QMIN] = self.q_min_pkts
        p[P_QBASE] = self.q_base_pkts
        p[P_GAMMA] = self.gamma_pkts
        p[P_BUFFER] = self.buffer_pkts
        p[P_T0] = float(t0)
        return p


def new_state(
    n_aggregates: int, t0: float = 0.0, ref_rates_bps: tuple[float, ...] | np.ndarray = ()
) -> tuple[np.ndarray, np.ndarray]:
    """Fresh (meter, averager) state for ``n_aggregates`` aggregates (optional per-aggregate R_r)."""
    if n_aggregates < 1:
        raise ValueError(f"n_aggregates must be >= 1, got {n_aggregates}")
    meter = np.zeros((n_aggregates, 3))
    meter[:, M_TLAST] = t0
    refs = np.asarray(ref_rates_bps, dtype=np.float64)
    if refs.size:
        if refs.shape != (n_aggregates,):
            raise ValueError(f"ref_rates_bps needs one rate per aggregate ({n_aggregates}), got {refs.size}")
        meter[:, M_REF] = refs
    avg = np.zeros(3)
    avg[A_TLAST] = t0
    return meter, avg


# Virtual FIFO state: backlog (bytes), time of the last packet.
V_Q, V_T = 0, 1
QUEUE_PKT_BYTES = 1500.0  # the virtual FIFO counts its backlog in packets of this size


def new_fifo(t0: float = 0.0) -> np.ndarray:
    """Fresh virtual-FIFO state (empty at ``t0``)."""
    return np.array([0.0, t0])
