"""Drop-tail -- the plain FIFO every other discipline sits in front of (the papers' baseline).

- ``config.py``  :class:`DropTailConfig` (the FIFO is the bottleneck's own: capacity and buffer)
- ``core.py``    the per-packet numba core: a FIFO drained at the link rate, tail drop
- ``fluid.py``   the fluid FIFO's drop rule (:func:`~.fluid.overflow`), which the fluid kernel
  applies to every bottleneck queue; nothing sits in front of the FIFO
- ``stage.py``   the NFQUEUE stage's decider: accept every packet (the qdisc behind the stage
  is the drop-tail FIFO; ``--discipline pass`` measures the stage's own cost)
"""

from .config import DropTailConfig
from .core import droptail_run

__all__ = ["DropTailConfig", "droptail_run"]
