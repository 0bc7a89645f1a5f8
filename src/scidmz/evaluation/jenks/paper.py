"""The Jenks papers' figures the report prints beside ours (Gomez et al., short and ext versions)."""

from __future__ import annotations

__all__ = ["TEST1_PAPER", "TEST6_PAPER", "exp4_paper"]

# Ext. paper section 4.1, Fig. 5: Jain's index per CCA with and without separation.
TEST1_PAPER = {("cubic", True): "≈ 0.98", ("bbr", True): "≈ 0.98",
               ("cubic", False): "fluctuating, short RTTs win (Fig. 5a)",
               ("bbr", False): "60 ms flow dominates (Fig. 5c)"}

# Ext. paper section 4.6: Jain's index per phase, without and with the UDP rule.
TEST6_PAPER = {False: "- / 0.50 / 0.33 / 0.25", True: "1 / fair / fair / fair"}


def exp4_paper(cca: str, rebalance: bool) -> str:
    """Short section IV-D: utilisation without and with rebalancing (the 5 ms BBR flow's share with it)."""
    if not rebalance:
        return "~0.70"
    return "~1.0" if cca == "cubic" else "~0.9 (5 ms flow ~0.7 of C)"
