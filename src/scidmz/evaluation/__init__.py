"""Evaluation: each paper's experiments and reports, one subpackage per study.

Studies:

- ``mlc/``: the MLC paper (Vega et al.): section 4's experiments laid out as the paper's
  figures and the whole chain's reproduction (``scidmz reproduce mlc``); its trials are the
  core's (``leaderboard/``);
- ``jenks/``: the Jenks RTT-separation papers' tests on the fluid plant and the netns
  testbed (``scidmz reproduce jenks``);
- ``disciplines/``: the ABC and FFS papers at the bottleneck (``scidmz reproduce abc|ffs``)
  and the Science DMZ comparison of the disciplines (``scidmz reproduce disciplines-dmz``);
- ``leaderboard/``: the evaluation core: one trial plan (seeds, target signals, the FCT
  bound, the validity rule), the ledger and the unit runner that every study's paired trials
  go through, and ``scidmz leaderboard`` (every policy of every kind, ranked with paired tests).

What every study shares (a new study, e.g. a leaderboard, builds on these):

- ``trials``: paired trials through ``runner.run_episode`` (batching, chunks on an
  executor, seed + i per trial) and single runs that read the plant every period;
- ``stats``: Student-t intervals, reductions vs the baseline, paired Wilcoxon tests;
- ``results``: self-describing ``results.json`` (format version, scidmz version,
  commit, machine, scenario and plant-model fingerprints);
- ``render``: Markdown reports from results files by Jinja templates (``templates/``).

``simulate`` and ``evaluate`` are ``scidmz simulate``'s and ``scidmz evaluate``'s library sides
(``evaluate``: any policies against the trivial TBF on the MLC paper's experiments). Plots live in ``scidmz.plots``.
"""
