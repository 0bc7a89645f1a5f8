"""Which way serves the DTN best? Every policy on the same paired trials (``scidmz leaderboard``).

- ``plan``: the sizes (trials, durations, the DTN transfer) and their bounds;
- ``ledger``: ``ledger.jsonl``, one fsynced line per finished trial, so a run resumes
  where it stopped, and refuses a ledger of another scenario, plant model, code or plan;
- ``trialunits``: the trials themselves: batched on the fluid plant, trial-major with a
  rotated policy order on a real-time plant (netns), one testbed for the whole run;
- ``stats``: means, bootstrap 95 % intervals, paired Wilcoxon tests vs trivial and vs
  the best policy, Holm-corrected per family (pure; tested against scipy/statsmodels);
- ``results``: the rows of ``results.json`` from the ledger, and the report
  (``templates/leaderboard_report.md.j2``) and ranking plot rendered from it;
- ``recheck``: a second run of the same trials (after a testbed fix) against the first, trial by trial;
- ``run``: the whole command (``commands/leaderboard.py`` parses, this runs).
"""
