"""The Jenks papers' Test 1 figures and the Test 1 table both plants' reports print.

Kept apart from ``jenks_repro`` (fluid runs, the report) and ``jenks_netns``
(kernel runs) so the two import it, not each other.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TEST1_PAPER", "table_test1"]

# Ext. paper section 4.1, Fig. 5: Jain's index per CCA with and without separation.
TEST1_PAPER = {("cubic", True): "≈ 0.98", ("bbr", True): "≈ 0.98",
                ("cubic", False): "fluctuating, short RTTs win (Fig. 5a)",
                ("bbr", False): "60 ms flow dominates (Fig. 5c)"}


def table_test1(rows: list[dict[str, Any]], starved: bool = False) -> list[str]:
    """The Test 1 table (Markdown lines), each row beside the paper's; ``starved``: a column of the
    periods the netns starvation check left out."""
    extra = " starved |" if starved else ""
    lines = ["| CCA | separation | Jain (ours) | Jain (paper) | shares 2/20/40/60 ms | utilisation |" + extra,
             "|---|---|---|---|---|---|" + ("---|" if starved else "")]
    for r in rows:
        sh = " / ".join(f"{x:.2f}" for x in r["shares"])
        cell = f" {r['starved_periods']}/{r['periods']} |" if starved else ""
        lines.append(f"| {r['cca']} | {'with' if r['separated'] else 'without'} | {r['jain']:.3f} | "
                     f"{TEST1_PAPER[(r['cca'], r['separated'])]} | {sh} | {r['utilisation']:.2f} |" + cell)
    return lines
