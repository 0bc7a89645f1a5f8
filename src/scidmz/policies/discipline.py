"""Bottleneck disciplines as the third way to serve the DTN: ABC and FFS configured from the target.

The decision cores are :mod:`scidmz.disciplines.abc` (Menth et al. 2019) and
:mod:`scidmz.disciplines.ffs` (Wyss et al.); this module only says how an
admin's target R*_DTN becomes their configuration (ARCHITECTURE.md: "a
discipline is configured from the scenario and the target"). Two aggregates /
ingresses: the DTN's streams (0) and everything else on the campus (1).

Our choices (the papers do not treat a Science DMZ):

- **ABC**: per-aggregate reference rates (section 3.2: "Reference rates R_r
  specific to aggregates may be used to differentiate their achievable
  throughput") ``R_r = (target, B_max - target)``, so both aggregates have the
  same activity exactly when they send at their shares. The paper's queue
  parameters (Q_min 6, Q_base 20, gamma 16 of a 24-packet buffer at 50 Mbit/s)
  are scaled by ``buffer / 24`` to the scenario's bottleneck buffer, keeping
  their ratios; memories as in section 6.1.3 (M_AM 3 s, M_AA 0.3 s).
- **FFS**: the fairness-matrix column ``M = (target, C - target)`` with
  ``C = capacity_frac x B_max`` (1.0: FFS-C100, 0.85: FFS-C85 of Table III);
  labels initialised at the first node (f = r).
- Each share is kept at >= 1 % of the link so a target at an edge never gives an
  aggregate weight 0 (an FFS entry of 0 would starve it for good).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from ..scenario import Scenario

__all__ = ["ABCPolicy", "FFSPolicy"]

_MIN_SHARE = 0.01
_PAPER_BUFFER_PKTS = 24.0


def _shares(scenario: Scenario, target: np.ndarray, capacity: float) -> np.ndarray:
    t = np.clip(np.asarray(target, dtype=np.float64) / scenario.capacity, _MIN_SHARE, 1.0 - _MIN_SHARE)
    return np.column_stack([t * capacity, (1.0 - t) * capacity])


class _Discipline:
    kind: Literal["discipline"] = "discipline"
    name = "discipline"

    def __init__(self) -> None:
        self._batch = 1

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        self._batch = int(batch)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ABCPolicy(_Discipline):
    """ABC at the bottleneck, the DTN's reference rate = its target (module docstring)."""

    name = "abc"

    def __init__(self, memory_meter_s: float = 3.0, memory_avg_s: float = 0.3) -> None:
        super().__init__()
        self.memory_meter_s = memory_meter_s
        self.memory_avg_s = memory_avg_s

    def configure(self, scenario: Scenario) -> Any:
        from ..disciplines.abc import ABCConfig
        from ..plant.fluid.constants import MSS

        buf = max(float(np.floor(scenario.buffer_bytes / MSS)), 1.0)
        k = buf / _PAPER_BUFFER_PKTS
        half = scenario.capacity / 2.0
        return ABCConfig(capacity_bps=scenario.capacity, memory_meter_s=self.memory_meter_s,
                         memory_avg_s=self.memory_avg_s, q_min_pkts=max(6.0 * k, 1.0),
                         q_base_pkts=max(20.0 * k, 1.0), gamma_pkts=max(16.0 * k, 1.0), buffer_pkts=buf,
                         ref_rates_bps=(half, half))

    def weights(self, scenario: Scenario, target: np.ndarray) -> np.ndarray:
        return _shares(scenario, target, scenario.capacity)


class FFSPolicy(_Discipline):
    """FFS at the bottleneck, the DTN ingress's matrix entry = its target (module docstring)."""

    name = "ffs"

    def __init__(self, capacity_frac: float = 1.0, exact: bool = False) -> None:
        super().__init__()
        if not 0.0 < float(capacity_frac) <= 1.0:
            raise ValueError(f"policy ffs: capacity_frac must be in (0, 1], got {capacity_frac!r}")
        self.capacity_frac = float(capacity_frac)
        self.exact = bool(exact)

    def configure(self, scenario: Scenario) -> Any:
        from ..disciplines.ffs import FFSConfig

        c = self.capacity_frac * scenario.capacity
        return FFSConfig(capacity_bps=c, matrix_col_bps=(c / 2.0, c / 2.0))

    def weights(self, scenario: Scenario, target: np.ndarray) -> np.ndarray:
        return _shares(scenario, target, self.capacity_frac * scenario.capacity)
