"""The MLC paper (Vega et al.): its section 4 experiments and the whole chain's reproduction.

- ``plan``: ``ExperimentPlan``, the experiments' sizes (the paper's by default);
- ``experiments``: MRAE, FCT/utilisation, the N_s sweep and short flows as a registry;
- ``evaluate``: ``scidmz evaluate`` (any policies against the trivial TBF, paired trials);
- ``reproduce``: ``scidmz reproduce mlc`` (identify -> train -> tune -> evaluate -> report);
- ``report``: the paper's numbers (``PAPER``) and the report beside them
  (``templates/mlc_report.md.j2``);
- ``tracking``: the mlflow runs of both.
"""
