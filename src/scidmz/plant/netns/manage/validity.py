"""The netns plant's validity signals: how disturbed the machine was around an episode, whatever the policy.

``MachineSignals`` is the plant's ``validity_signals`` (``plant.base.ValiditySource``); a
leaderboard records its numbers in every unit's ledger line and judges each trial by them
(``evaluation.leaderboard.validity``):

- ``cpu_pressure``: the share of the episode's wall time in which a runnable task waited for
  a CPU, from the delta of /proc/pressure/cpu's ``some`` total. A kernel without PSI has no
  such file; then the CPU-busy share over all CPUs from /proc/stat (1 - (idle + iowait) /
  total, steal counted as busy) stands in, and ``cpu_pressure_source`` says ``"stat"``: it is
  a coarser signal (a busy machine need not make anyone wait), so a reader can tell.
- ``stage_late_mean_s``: the delay stage's mean lateness per released frame over the
  episode (its own cumulative ``late_sum_s`` and ``tx`` counters); None if the stage was
  restarted meanwhile (its counters went back).
- ``probe_service`` (``NetnsPlant.calibration_probe``, between episodes): the testbed in its
  default configuration, a fixed, unpaced sender (a campus host, four TCP streams, no policy)
  saturates the bottleneck, and the bottleneck TBF's own byte counter over a 1 s window,
  over B_max x the window, says whether the machine can still serve the emulated link.

Each is a number or None (never guessed). No policy acts on them: the probe runs with no
policy at all, and the CPU pressure and the stage's lateness are the whole machine's. A
caveat we have not measured away: a policy's own computation (the MLC's ANN inference, the
NFQUEUE stage of ABC and FFS) runs on the same two cores, and counts in the CPU pressure as
far as it makes other tasks wait. It cannot bias a comparison (a trial it invalidates is
invalid for every policy and re-run), but a policy heavy enough to cross the threshold
alone would make every trial re-run; the recorded ``cpu_pressure`` per policy shows it.
"""

from __future__ import annotations

import time
from typing import Any

from .starvation import _cpu_jiffies, _psi_some_us

__all__ = ["MachineSignals", "PROBE_WARMUP", "PROBE_WINDOW", "PROBE_STREAMS"]

#: The probe's shape (ours, kept cheap: about 2 s per unit against 30-120 s units). Four streams fill
#: the link whatever the buffer (one CUBIC flow under a 0.05-BDP buffer does not), and 0.5 s is past
#: their slow start on the campus path's 10-20 ms RTT.
PROBE_WARMUP = 0.5
PROBE_WINDOW = 1.0
PROBE_STREAMS = 4


class MachineSignals:
    """CPU pressure and delay-stage lateness over an episode, and the bottleneck probe between episodes.

    ``stage_stats()``: the delay stage's cumulative counters; ``probe()``: the plant's calibration
    probe (``NetnsPlant.calibration_probe``). Composed by the plant, so a test can give its own.
    """

    def __init__(self, stage_stats: Any, probe: Any) -> None:
        self._stage_stats = stage_stats
        self._probe = probe
        self._t0 = time.monotonic()
        self._psi0: float | None = None
        self._cpu0: tuple[float, float, float] | None = None
        self._stage0: dict[str, Any] = {}

    def probe(self) -> dict[str, Any]:
        return dict(self._probe())

    def begin(self) -> None:
        self._t0 = time.monotonic()
        self._psi0 = _psi_some_us()
        self._cpu0 = _cpu_jiffies()
        self._stage0 = self._read_stage()

    def end(self) -> dict[str, Any]:
        dt = max(time.monotonic() - self._t0, 1e-6)
        return {**self._cpu(dt), **self._lateness(), "measured_s": dt}

    def _read_stage(self) -> dict[str, Any]:
        try:
            st = self._stage_stats()
        except (OSError, ValueError):
            return {}
        return st if isinstance(st, dict) else {}

    def _cpu(self, dt: float) -> dict[str, Any]:
        psi = _psi_some_us()
        if psi is not None and self._psi0 is not None:
            return {"cpu_pressure": min(max((psi - self._psi0) / (dt * 1e6), 0.0), 1.0), "cpu_pressure_source": "psi"}
        cpu = _cpu_jiffies()
        if cpu is not None and self._cpu0 is not None and cpu[0] > self._cpu0[0]:
            busy = 1.0 - (cpu[1] - self._cpu0[1]) / (cpu[0] - self._cpu0[0])
            return {"cpu_pressure": min(max(busy, 0.0), 1.0), "cpu_pressure_source": "stat"}
        return {"cpu_pressure": None, "cpu_pressure_source": None}

    def _lateness(self) -> dict[str, Any]:
        st, st0 = self._read_stage(), self._stage0
        d_tx = float(st.get("tx", 0) or 0) - float(st0.get("tx", 0) or 0)
        d_late = float(st.get("late_sum_s", 0.0) or 0.0) - float(st0.get("late_sum_s", 0.0) or 0.0)
        if not st or not st0 or d_tx <= 0 or d_late < 0:
            return {"stage_late_mean_s": None, "stage_frames": max(d_tx, 0.0)}
        return {"stage_late_mean_s": d_late / d_tx, "stage_frames": d_tx}
