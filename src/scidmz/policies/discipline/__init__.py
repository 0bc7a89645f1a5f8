"""Discipline policies: a per-packet discipline inside the bottleneck, configured from the target.

The third way to serve the DTN (``kind = "discipline"``). The decision cores are
``scidmz.disciplines`` (ABC: Menth et al. 2019; FFS: Wyss et al.); these policies
only say how an admin's target R*_DTN becomes their configuration and their
per-period weights (ARCHITECTURE.md: "a discipline is configured from the
scenario and the target"). Two aggregates / ingresses: the DTN's streams (0)
and everything else on the campus (1).

- ``abc``: ``abc.py``; ``ffs``: ``ffs.py``; what both share: ``common.py``.

The plant runs the discipline (``plant.base.DisciplinePlant``): the fluid
kernel, the netns data-path stage, a P4 program.
"""
