"""ABC -- activity-based congestion management (Menth et al., Future Internet 2019, section 3).

Everything ABC is in this folder:

- ``config.py``  :class:`ABCConfig` and the layout of the core's arrays
- ``core.py``    the per-packet numba decision core (meter, threshold test, averager)
- ``fluid.py``   the fluid plant's hook: the threshold test solved over one sub-step
- ``stage.py``   the NFQUEUE data-path stage's decider
- ``p4/``        the P4 program (v1model), its table generator; ``p4check.py`` runs it on BMv2

This namespace re-exports the configuration and the packet core.
"""

from .config import (
    A_N,
    A_S,
    M_REF,
    N_PARAMS,
    P_BUFFER,
    ABCConfig,
    new_fifo,
    new_state,
)
from .core import (
    abc_fifo_packet,
    abc_packet,
    abc_run,
    abc_run_fifo,
    average_accepted,
    average_activity,
    drop_threshold,
    meter_activity,
)

__all__ = [
    "A_N",
    "A_S",
    "M_REF",
    "N_PARAMS",
    "P_BUFFER",
    "ABCConfig",
    "abc_fifo_packet",
    "abc_packet",
    "abc_run",
    "abc_run_fifo",
    "average_accepted",
    "average_activity",
    "drop_threshold",
    "meter_activity",
    "new_fifo",
    "new_state",
]
