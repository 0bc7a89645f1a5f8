"""Evaluation: each paper's experiments and reports, one subpackage per study.

Studies:

- ``mlc/``: the MLC paper (Vega et al.): section 4's experiments (``scidmz evaluate``)
  and the whole chain's reproduction (``scidmz reproduce mlc``);
- ``jenks/``: the Jenks RTT-separation papers' tests on the fluid plant and the netns
  testbed (``scidmz reproduce jenks``);
- ``disciplines/``: the ABC and FFS papers at the bottleneck (``scidmz reproduce abc|ffs``)
  and the Science DMZ comparison of the disciplines (``scidmz reproduce disciplines-dmz``);
- ``leaderboard/``: every policy of every kind on the same paired trials, resumable from a
  ledger, ranked with paired tests (``scidmz leaderboard``).

What every study shares (a new study, e.g. a leaderboard, builds on these):

- ``trials``: paired trials through ``runner.run_episode`` (batching, chunks on an
  executor, seed + i per trial) and single runs that read the plant every period;
- ``stats``: Student-t intervals, reductions vs the baseline, paired Wilcoxon tests;
- ``results``: self-describing ``results.json`` (format version, scidmz version,
  commit, machine, scenario and plant-model fingerprints);
- ``render``: Markdown reports from results files by Jinja templates (``templates/``).

``simulate`` is ``scidmz simulate``'s library side. Plots live in ``scidmz.plots``.
"""
