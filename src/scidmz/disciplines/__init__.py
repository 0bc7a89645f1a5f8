"""Bottleneck disciplines: per-packet acceptance at the bottleneck itself.

Not rate decisions (``Policy.decide -> u``) but the third way an admin can serve
the DTN: weight the bottleneck. Each scheme has ONE numba decision core that
every realisation (fluid plant, NFQUEUE data-path stage, P4 cross-check) calls,
so they cannot drift:

- :mod:`scidmz.disciplines.abc` -- activity-based congestion management (P4-ABC,
  Menth et al., Future Internet 2019, section 3).
- :mod:`scidmz.disciplines.ffs` -- Fractional Fair Shares (Wyss et al.,
  Algorithms 1-4, Appendix A and D).
- :mod:`scidmz.disciplines.waterfill` -- the exact (water-filling) tau of
  equation (2) and the HWFQ baseline of Table II.
"""

from scidmz.disciplines.base import BottleneckDiscipline, DisciplineConfigError

__all__ = ["BottleneckDiscipline", "DisciplineConfigError"]
