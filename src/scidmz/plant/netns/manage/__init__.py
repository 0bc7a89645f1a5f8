"""Managing testbeds: ``scidmz testbed up|down|status|check``, the on-disk registry, the checks.

* ``commands.py``: the library side of the CLI commands;
* ``registry.py``: what a testbed made, on disk, so a crashed run can be
  cleaned up and nothing else;
* ``check.py``: measurements of a built testbed (idle RTTs, delay-stage
  accuracy, bottleneck rate, tap health);
* ``starvation.py``: per period, whether the machine rather than TCP set the
  result.
"""

from __future__ import annotations

from .commands import human_status, testbed_check, testbed_down, testbed_status, testbed_up

__all__ = ["testbed_up", "testbed_down", "testbed_status", "testbed_check", "human_status"]
