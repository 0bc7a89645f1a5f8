"""The ABC and FFS reports: what ``templates/{abc,ffs}_report.md.j2`` show, from a results file.

Only derived values are computed here (Fig. 6's fastest-CBR points, Table II's
rows beside the paper's); the rest is the results file as ``disciplines.reproduce``
writes it. Files written before the results format (no ``meta``) render too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..render import render
from .paper import PAPER_RATE_FEEDBACK, PAPER_TABLE_III, TABLE_II

__all__ = ["render_abc", "render_ffs"]

_LABELS = {"fifo": "FIFO", "ffs100": "FFS-C100", "ffs85": "FFS-C85"}
_ABC_LINK = 50e6


def _common(res: Mapping[str, Any], paper: str, notes: str | None) -> dict[str, Any]:
    meta = res.get("meta") or {}
    return {"res": res, "meta": meta, "command": meta.get("command", f"scidmz reproduce {paper}"),
            "rendered": meta.get("rendered"), "netns_note": res.get("netns_note"),
            "notes": notes.strip() if notes else None}


def render_abc(res: Mapping[str, Any], out_dir: str | os.PathLike[str] = ".", notes: str | None = None) -> str:
    """The ABC report (Figs. 4-6) of a results file."""
    top = max(res["fluid_cbr_tcp_rows"], key=lambda r: r["r0_bps"])
    # the kernel's CBR above the link rate: where the paper has it levelling off near 32 Mbit/s
    over = [r for r in res.get("netns_cbr_tcp_rows") or [] if r["r0_bps"] > _ABC_LINK]
    kernel = {"goodputs": [r["abc_goodput0_bps"] / 1e6 for r in over], "r0": [r["r0_bps"] / 1e6 for r in over]}
    return render("abc_report.md.j2", out_dir, **_common(res, "abc", notes), fig6_top=top,
                  fig6_kernel=kernel if over else None)


def render_ffs(res: Mapping[str, Any], out_dir: str | os.PathLike[str] = ".", notes: str | None = None) -> str:
    """The FFS report (Tables II and III, section IX) of a results file."""
    g = 1e9
    rates = res.get("rates_bps") or [3 * g, 4 * g, 16 * g]  # Table II's inputs (older files lack them)
    fair = res.get("fair_bps") or [6 * g, 1 * g, 8 * g]
    names = ["s1 (i1)", "s2 (i1)", "s3 (i2)"]
    table2 = [{"name": names[s], "rate": rates[s] / g, "fair": fair[s] / g,
               "paper_hwfq": res.get("paper_hwfq_gbps", TABLE_II["hwfq"])[s], "hwfq": res["hwfq_bps"][s] / g,
               "paper_ffs": res.get("paper_ffs_gbps", TABLE_II["ffs"])[s], "exact": res["exact_ffs_bps"][s] / g,
               "packet": res["packet_core_bps"][s] / g} for s in range(3)]
    return render("ffs_report.md.j2", out_dir, **_common(res, "ffs", notes), table2=table2, labels=_LABELS,
                  metrics=("F", "U", "L2", "L50", "J2", "J50"), paper=PAPER_TABLE_III, rf_paper=PAPER_RATE_FEEDBACK)
