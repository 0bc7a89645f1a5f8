"""Drop-tail at packet level: a FIFO drained at the link rate that drops arrivals finding it full.

The baseline of the ABC paper's Fig. 4 (Menth et al. 2019, section 6.2.1:
"without ABC"), replayed by ``scidmz reproduce abc`` on the same packet
sequences as ABC's core.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def droptail_run(ts: np.ndarray, sizes: np.ndarray, link_bps: float, buf_pkts: float, accept: np.ndarray) -> None:
    """Decide a packet sequence (arrival times ``ts``, bytes ``sizes``) in front of a FIFO drained at
    ``link_bps`` holding ``buf_pkts`` packets; ``accept[k]`` is packet k's verdict.

    The backlog is counted in packets of the arriving packet's size (the
    sequences it is used on have one packet size).
    """
    q = 0.0
    tp = ts[0]
    for k in range(ts.shape[0]):
        q = max(0.0, q - (ts[k] - tp) * link_bps / 8.0)
        tp = ts[k]
        ok = q / sizes[k] < buf_pkts
        accept[k] = ok
        if ok:
            q += sizes[k]
