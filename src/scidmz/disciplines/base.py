"""What every discipline shares: the configuration base and the fluid hook's contract.

A discipline decides per packet, at the bottleneck egress, whether the packet
enters the queue. Configurations are frozen dataclasses validated on
construction; every problem is one line naming the field (the CLI turns
:class:`DisciplineConfigError` into exit 2).

The fluid hook (``scidmz.disciplines.<name>.fluid``) is how the fluid plant
runs a discipline. The plant owns the arrays and hands the hook one
instance's slices; the hook alone knows what is in them:

- ``FLUID_ID``: its id in :mod:`scidmz.disciplines.registry`;
- ``layout(config, n_flows, labels, exact) -> FluidLayout``: the sizes of its
  arrays; a one-line ``ValueError`` for an option it does not have (``labels``:
  per-flow labels were given; ``exact``: the exact mode was asked for);
- ``init(config, dp, dm, ds, df, groups, labels, exact, buffer_bytes, pkt_bytes)``:
  fill one instance's zeroed arrays (``groups``: each flow's aggregate;
  ``buffer_bytes``: the FIFO behind it; ``pkt_bytes``: the fluid model's packet);
- ``set_weights(config, dm, ds, w)``: the admin's per-aggregate weights now,
  ``w`` of shape (B, A) in bit/s (finite and > 0);
- ``state(config, dm, ds) -> dict``: what it reports, (B, ...) arrays;
- ``admit(dp, dm, ds, df, dw, grp, on, ain, t, dt, cap_rate, q0, buffer, pkt, rej, fb)``:
  numba, ``inline="always"`` (so it compiles with the kernel's float flags):
  flow ``f`` offers ``ain[f]`` bytes over the sub-step ``[t, t + dt)`` (``on[f]``
  > 0 while it is active, ``grp[f]`` its aggregate) to a FIFO holding ``q0``
  bytes of ``buffer``, drained at ``cap_rate`` bytes/s; write the fraction of
  each flow's bytes the discipline rejects to ``rej[f]``, optionally a rate
  feedback for the flow's sender to ``fb[f]`` (bytes/s; FFS's rate indicator),
  and return the bytes rejected. Drop-tail has nothing in front of its FIFO:
  the kernel never calls its ``admit``. ``admit`` and everything it calls must
  not allocate (no ``np.zeros``/``np.empty``/``argsort``...): the kernel is
  compiled without numba's reference counting, for speed, so an allocation is
  a compile error -- one a warm numba cache hides until a fresh clone compiles
  it. Scratch goes in the ``work`` rows the ``layout`` declares (``dw``);
- ``noise_edge(dp, dw, buffer) -> float`` and ``noise_drop(dw, grp, ain, rej,
  extra, pkt) -> float``: numba, ``inline="always"``, allocation-free, called
  after ``admit`` in the same sub-step: where the FIFO's packet-level noise
  (``plant/fluid/kernel.py``, ``_packet_noise``) meets the discipline. The
  first returns the queue length (bytes, at most ``buffer``) at which the
  discipline starts dropping -- the noise's upper barrier; the second books
  ``extra`` bytes of the noise's overflow as the discipline's own drops (it
  raises ``rej`` of the flows it drops) and returns the bytes booked; the
  FIFO drops the rest by arrivals. A discipline without them gets no noise;
- ``NOISE_FOOTING``: bool, whether the fluid discipline with the noise was
  checked against the kernel's and agreed (``benchmarks/noise_footing.py``,
  ``reports/leaderboard/noise.json``). Without the hooks or without it, the
  plant does not count the discipline's policy as on equal footing with the
  trivial TBF (``FluidPlant.noise_covers``), and a comparison across kinds
  marks its fluid rows "not comparable".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np


class DisciplineConfigError(ValueError):
    """A discipline parameter is out of range (message: one line)."""


def check_positive(name: str, value: float) -> float:
    """Return ``value`` as float if finite and > 0, else raise a one-line error."""
    v = float(value)
    if not math.isfinite(v) or v <= 0.0:
        raise DisciplineConfigError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def check_at_least(name: str, value: float, low: float, unit: str) -> float:
    """Return ``value`` as float if finite and >= ``low``, else a one-line error."""
    v = float(value)
    if not math.isfinite(v) or v < low:
        raise DisciplineConfigError(f"{name} must be >= {low:g} {unit}, got {value!r}")
    return v


def check_labels(name: str, values: np.ndarray) -> np.ndarray:
    """FFS packet labels are rates: finite and > 0 (0 or NaN is a one-line error)."""
    a = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(a) | (a <= 0.0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DisciplineConfigError(
            f"label {name} must be a finite rate > 0; packet {i} has {a.flat[i]!r}"
        )
    return a


@dataclass(frozen=True)
class FluidLayout:
    """Sizes of one instance's arrays for a discipline's fluid hook (the plant allocates them).

    ``n_params``: ``dp``, its parameter vector; ``n_aggregates``: ``dm``, one
    weight per aggregate (flows' groups index it); ``state``: ``ds`` (rows,
    cols), kept across sub-steps; ``flow_rows``: ``df`` (rows, F), per-flow
    parameters and state; ``work``: ``dw`` (rows, cols), scratch it may
    overwrite every sub-step.
    """

    n_params: int
    n_aggregates: int
    state: tuple[int, int]
    flow_rows: int
    work: tuple[int, int]


def no_option(name: str, labels: bool, exact: bool) -> None:
    """One-line errors for the FFS-only options of ``FluidPlant.set_discipline`` (labels, exact mode)."""
    if exact:
        raise ValueError(f"exact=True is FFS's water-filling mode; {name} has none")
    if labels:
        raise ValueError(f"labels are FFS's fair-share labels; {name} takes none")


@dataclass(frozen=True)
class BottleneckDiscipline:
    """Base of every discipline configuration.

    ``capacity_bps`` is the egress capacity the discipline enforces (SI: bit/s).
    Subclasses set ``kind`` and validate their own fields in ``__post_init__``
    after calling this one.
    """

    kind: ClassVar[str] = "base"
    capacity_bps: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "capacity_bps", check_positive("capacity_bps", self.capacity_bps))


class SourceSlots:
    """The NFQUEUE stage's per-source state slots: source IPv4 (int) -> slot in [0, max_sources).

    A stage decider (``scidmz.disciplines.<name>.stage.Decider``) is built as
    ``Decider(config, link_bps, ingress_of, seed, max_sources)`` and answers
    ``decide(src, t, nbytes) -> bool`` and ``set_weights(w)``; deciders that
    keep per-source state (a stream, an aggregate) number sources with this.
    Ours: beyond ``max_sources``, new sources share the last slot (bounded state).
    """

    def __init__(self, max_sources: int) -> None:
        self.max_sources = int(max_sources)
        self._slots: dict[int, int] = {}

    def __call__(self, src: int) -> int:
        s = self._slots.get(src)
        if s is None:
            s = min(len(self._slots), self.max_sources - 1)
            self._slots[src] = s
        return s
