"""The CLI's guard rails: one line for every refusal, checked destinations, strict JSON.

``scidmz.cli`` uses these so that whatever an admin (or an attacker) types, ``scidmz`` answers
with exit code 0, or 1/2 and exactly one line on stderr. One module per concern:

* :mod:`.parser` -- ``OneLineArgumentParser``: argparse's usage errors in one line.
* :mod:`.paths` -- the path policy: every path option of every command (``OUTPUTS``, ``INPUTS``),
  checked with :mod:`scidmz.fileio` before any work; ``--mkdir``.
* :mod:`.counts` -- every count option (``COUNTS``), checked against ``limits.BOUNDS``.
* :mod:`.options` -- options a command does not use in its mode are refused (``declare_option_rules``).
* :mod:`.check` -- ``check_args``: the unused options, the command's defaults, counts, inputs, outputs and aliases, in
  that order, before any work.
* :mod:`.exitcodes` -- ``guarded``: an exception becomes one line and an exit code (bad input 2,
  runtime failure 1, anything else 1 as an internal error).
* :mod:`.jsonout` -- ``json_line``: ``--json`` output as strict JSON (:mod:`scidmz.strictjson`).
* :mod:`.extras` -- a missing optional module named with the pyproject extra that installs it.

Bad input is :class:`scidmz.errors.BadInput` (a ``ValueError``).
"""
