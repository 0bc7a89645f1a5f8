"""The ABC and FFS papers' numbers our reports print beside ours."""

from __future__ import annotations

__all__ = ["PAPER_TABLE_III", "PAPER_RATE_FEEDBACK", "TABLE_II"]

#: FFS Table III as printed (F, U, L(2), L(50), J(2), J(50), in %).
PAPER_TABLE_III = {
    "fifo": (30.7, 80.4, 0.0, 7.1, 0.0, 7.1),
    "ffs100": (71.3, 93.9, 0.0, 36.9, 0.5, 89.3),
    "ffs85": (88.5, 79.3, 100.0, 100.0, 99.1, 100.0),
}

#: FFS section IX as printed: loss at the FFS-C85 node, % (MinLoss 1 stream, 2 streams; Cubic).
PAPER_RATE_FEEDBACK = {"minloss_1": (0.0, 0.0), "minloss_2": (0.05, 1.01), "cubic": (0.58, 3.32)}

#: FFS Table II (15 Gbit/s egress), Gbit/s per stream: as printed (FFS truncated: 4/3 and 32/3).
TABLE_II = {"ffs": [3, 1.3, 10.6], "hwfq": [3, 4, 8]}
