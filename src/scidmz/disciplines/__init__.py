"""Bottleneck disciplines: per-packet acceptance at the bottleneck itself.

Not rate decisions (``Policy.decide -> u``) but the third way an admin can serve
the DTN: weight the bottleneck. One package per discipline holds everything it
is -- configuration, the numba decision core every realisation calls (so they
cannot drift), the fluid plant's hook, the NFQUEUE stage's decider, the P4
program and its check:

- :mod:`scidmz.disciplines.droptail` -- the plain FIFO (the papers' baseline).
- :mod:`scidmz.disciplines.abc` -- activity-based congestion management (P4-ABC,
  Menth et al., Future Internet 2019, section 3).
- :mod:`scidmz.disciplines.ffs` -- Fractional Fair Shares (Wyss et al.,
  Algorithms 1-4, Appendix A and D; the exact tau of equation (2) and HWFQ in
  ``ffs.waterfill``).

:mod:`scidmz.disciplines.registry` maps names to packages (one line each) and
says what a package holds; :mod:`scidmz.disciplines.base` the configuration
base and the fluid hook's contract; :mod:`scidmz.disciplines.p4check` the
BMv2 replay the P4 checks share.
"""

from scidmz.disciplines.base import BottleneckDiscipline, DisciplineConfigError

__all__ = ["BottleneckDiscipline", "DisciplineConfigError"]
