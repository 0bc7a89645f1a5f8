"""The bottleneck-discipline papers (ABC, Menth et al. 2019; FFS, Wyss et al.) and the Science DMZ comparison.

- ``packet``: the packet-level experiments on the numba cores (ABC Fig. 4, FFS Table II);
- ``fluid``: the congestion-controlled ones on the fluid plant through the runner (ABC Figs. 5/6,
  FFS Table III and section IX); ``kernel``: the same on the netns lab (root);
- ``paper``: the papers' numbers; ``report``: the reports (``templates/{abc,ffs}_report.md.j2``);
- ``reproduce``: ``scidmz reproduce abc|ffs``;
- ``dmz``: ``scidmz reproduce disciplines-dmz``, ABC and FFS vs the trivial TBF on paired trials.
"""
