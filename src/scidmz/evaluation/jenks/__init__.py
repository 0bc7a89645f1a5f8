"""The Jenks RTT-separation papers (Gomez et al., short and extended versions): their tests.

- ``flows``: a test as a ``[[flows]]`` scenario and its run through the runner, on either plant;
- ``fluid``: the tests on the fluid plant; ``netns``: on the netns testbed (root);
- ``paper``: the papers' figures; ``report``: the report (``templates/jenks_report.md.j2``);
- ``reproduce``: ``scidmz reproduce jenks`` (run, write results.json, render).
"""
