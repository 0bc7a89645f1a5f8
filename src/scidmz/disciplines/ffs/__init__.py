"""FFS -- Fractional Fair Shares (Wyss et al., Algorithms 1-4, Appendix A and D).

Everything FFS is in this folder:

- ``config.py``     :class:`FFSConfig` and the layout of the core's arrays
- ``core.py``       the per-packet numba decision core (Algorithms 1-4, Appendix A tau)
- ``waterfill.py``  the exact tau of equation (2) by water-filling, and the HWFQ baseline (Table II)
- ``fluid.py``      the fluid plant's hook: the estimators per sub-step, or equation (2) exactly
- ``stage.py``      the NFQUEUE data-path stage's decider (a stream's first node)
- ``p4/``           the P4 program (v1model), its table generator; ``p4check.py`` runs it on BMv2

This namespace re-exports the configuration and the packet core.
"""

from .config import S_TAU, FFSConfig
from .core import (
    ewma_rate,
    ffs_compact_packet,
    ffs_compact_run_encoded,
    ffs_first_node_packet,
    ffs_packet,
    ffs_run,
    log_decode,
    log_encode,
    run_sequence,
)

__all__ = [
    "S_TAU",
    "FFSConfig",
    "ewma_rate",
    "ffs_compact_packet",
    "ffs_compact_run_encoded",
    "ffs_first_node_packet",
    "ffs_packet",
    "ffs_run",
    "log_decode",
    "log_encode",
    "run_sequence",
]
