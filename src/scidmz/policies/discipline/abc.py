"""ABC at the bottleneck, the DTN aggregate's reference rate = its target (``abc``).

Activity-based congestion management (Menth et al. 2019; the decision core is
``scidmz.disciplines.abc``). Our configuration (the paper does not treat a
Science DMZ): per-aggregate reference rates (section 3.2: "Reference rates R_r
specific to aggregates may be used to differentiate their achievable
throughput") ``R_r = (target, B_max - target)``, so both aggregates have the
same activity exactly when they send at their shares. The paper's queue
parameters (Q_min 6, Q_base 20, gamma 16 of a 24-packet buffer at 50 Mbit/s)
are scaled by ``buffer / 24`` to the scenario's bottleneck buffer, keeping
their ratios; memories as in section 6.1.3 (M_AM 3 s, M_AA 0.3 s).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...scenario import Scenario
from ..registry import register_policy
from .common import DisciplineShell, shares

__all__ = ["ABCPolicy"]

_PAPER_BUFFER_PKTS = 24.0


class ABCPolicy(DisciplineShell):
    """ABC at the bottleneck, the DTN's reference rate = its target (module docstring)."""

    name = "abc"

    def __init__(self, memory_meter_s: float = 3.0, memory_avg_s: float = 0.3) -> None:
        super().__init__()
        self.memory_meter_s = memory_meter_s
        self.memory_avg_s = memory_avg_s

    def configure(self, scenario: Scenario) -> Any:
        from ...disciplines.abc import ABCConfig
        from ...units import MSS

        buf = max(float(np.floor(scenario.buffer_bytes / MSS)), 1.0)
        k = buf / _PAPER_BUFFER_PKTS
        half = scenario.capacity / 2.0
        return ABCConfig(capacity_bps=scenario.capacity, memory_meter_s=self.memory_meter_s,
                         memory_avg_s=self.memory_avg_s, q_min_pkts=max(6.0 * k, 1.0),
                         q_base_pkts=max(20.0 * k, 1.0), gamma_pkts=max(16.0 * k, 1.0), buffer_pkts=buf,
                         ref_rates_bps=(half, half))

    def weights(self, scenario: Scenario, target: np.ndarray) -> np.ndarray:
        return shares(scenario, target, scenario.capacity)


register_policy("abc", "discipline", ABCPolicy)
