"""The MLC paper (Vega et al.): its section 4 experiments and the whole chain's reproduction.

The trials are the evaluation core's (``evaluation.leaderboard``: trial plan, ledger, unit
runner, per-trial metrics) and the statistics ``evaluation.stats``'; what is here is the MLC's own:

- ``plan``: ``ExperimentPlan``, the experiments' sizes (the paper's by default) and the N_s
  sweep's, turned into the core's trial plan;
- ``experiments``: MRAE, FCT/utilisation, the N_s sweep and short flows as a registry, each
  the core's trials laid out as the paper's figure or table;
- ``reproduce``: ``scidmz reproduce mlc`` (identify -> train -> tune -> evaluate -> report);
- ``report``: the paper's numbers (``PAPER``) and the report beside them
  (``templates/mlc_report.md.j2``);
- ``tracking``: the mlflow runs of ``scidmz evaluate`` (``evaluation.evaluate``) and of the chain.
"""
