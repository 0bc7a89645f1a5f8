"""The Jenks report: what ``templates/jenks_report.md.j2`` shows, computed from a results file.

Only derived numbers are computed here (Exp 5's per-phase utilisation, Exp 3's
"FCT rises with K" counts, the fluid-vs-kernel pairs); everything else is the
results file as written by ``jenks.reproduce``. Results files of any version
render (a field a newer run adds is optional in the template).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..render import render
from .paper import TEST1_PAPER, TEST6_PAPER, exp4_paper

__all__ = ["render_report"]


def _test3_pairs(rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Test 3 rows paired by (CCA, other RTT): ``{cca, other_ms, without, with}``."""
    pairs: dict[tuple[str, float], dict[str, Any]] = {}
    for r in rows:
        key = (r["cca"], r["rtts"][1])
        pairs.setdefault(key, {"cca": key[0], "other_ms": key[1] * 1e3})["with" if r["separated"] else "without"] = r
    return list(pairs.values())


def _exp4_rows(rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    # results written before "rebalance" was a field list without, with, without, with
    out = []
    for i, r in enumerate(rows):
        rb = bool(r.get("rebalance", i % 2 == 1))
        out.append({**r, "rebalance": rb, "paper": exp4_paper(r["cca"], rb)})
    return out


def _phase_means(util_series: list[float]) -> list[float]:
    """Mean utilisation per sixth of the run, each phase's first quarter left out (transients)."""
    return [float(p[len(p) // 4:].mean()) for p in np.array_split(np.asarray(util_series, dtype=np.float64), 6)]


def _fct_rises(rows: list[Mapping[str, Any]]) -> list[str]:
    """The CUBIC:BBR mixes whose mean FCT at the largest K is above the K = 1 value."""
    by_mix: dict[str, dict[int, float]] = {}
    for r in rows:
        by_mix.setdefault(r["cca"].split()[-1], {})[r["queues"]] = r["mean_fct_s"]
    return [m for m, d in by_mix.items() if d[max(d)] > d[min(d)]]


def _mixes(rows: list[Mapping[str, Any]]) -> int:
    return len({r["cca"].split()[-1] for r in rows})


def _comparison(res: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Fluid vs kernel on the tests both ran: ``{test, fluid, kernel, fmt}`` rows."""
    k = res["netns"]
    rows: list[dict[str, Any]] = []
    for cca in ("cubic", "bbr"):
        for sep in (False, True):
            f = [r for r in res["test1"] if r["cca"] == cca and r["separated"] == sep]
            n = [r for r in k["test1"] if r["cca"] == cca and r["separated"] == sep]
            if f and n:
                rows.append({"test": f"Test 1 Jain, {cca}, {'with' if sep else 'without'} separation",
                             "fluid": f[0]["jain"], "kernel": n[0]["jain"], "fmt": "{:.3f}"})
    for n in k["test3"]:
        f = [r for r in res["test3"] if r["cca"] == n["cca"] and r["separated"] == n["separated"]
             and abs(r["rtts"][1] - n["rtts"][1]) < 1e-9]
        if f:
            rows.append({"test": f"Test 3 10 ms share, {n['cca']} vs {n['rtts'][1] * 1e3:.0f} ms, "
                                 f"{'with' if n['separated'] else 'without'}",
                         "fluid": f[0]["shares"][0], "kernel": n["shares"][0], "fmt": "{:.2f}"})
    for n, f in zip(k["exp4"], [r for r in _exp4_rows(res["exp4"]) if r["cca"] == "cubic"], strict=False):
        rows.append({"test": f"Exp 4 utilisation, cubic, {'with' if n['rebalance'] else 'without'} rebalancing",
                     "fluid": f["utilisation"], "kernel": n["utilisation"], "fmt": "{:.2f}"})
    return rows


def _netns_context(k: Mapping[str, Any]) -> dict[str, Any]:
    return {**k, "test1": [{**r, "paper": TEST1_PAPER[(r["cca"], r["separated"])]} for r in k["test1"]],
            "test3_pairs": _test3_pairs(k["test3"]),
            "test6": [{**r, "paper": TEST6_PAPER[r["rule"]]} for r in k["test6"]],
            "exp3": k.get("exp3", []), "exp3_rises": _fct_rises(k.get("exp3", [])),
            "exp3_mixes": _mixes(k.get("exp3", []))}


def context(res: Mapping[str, Any], notes: str | None = None) -> dict[str, Any]:
    """The template's context from a results file's contents (``notes``: Markdown for "Analysis")."""
    meta = res.get("meta") or {}
    ctx: dict[str, Any] = {
        "res": res, "meta": meta, "notes": notes.strip() if notes else None, "command": meta.get("command", res.get("command", "scidmz reproduce jenks")),
        "rendered": meta.get("rendered"), "duration_s": res["duration_s"],
        "test1": [{**r, "paper": TEST1_PAPER[(r["cca"], r["separated"])]} for r in res["test1"]],
        "test3_pairs": _test3_pairs(res["test3"]), "exp4": _exp4_rows(res["exp4"]),
        "exp5": [{**r, "phases": _phase_means(r["util_series"])} for r in res["exp5"]],
        "test6": [{**r, "paper": TEST6_PAPER[r["rule"]]} for r in res["test6"]],
        "test5": res["test5"], "exp3": res["exp3"], "exp3_rises": _fct_rises(res["exp3"]),
        "exp3_mixes": _mixes(res["exp3"]), "netns": None,
    }
    if res.get("netns") is not None:  # the section the --netns run adds to the results
        ctx["netns"] = _netns_context(res["netns"])
        ctx["comparison"] = _comparison(res)
    return ctx


def render_report(res: Mapping[str, Any], out_dir: str | os.PathLike[str] = ".", notes: str | None = None) -> str:
    """The Markdown report of a Jenks results file."""
    return render("jenks_report.md.j2", out_dir, **context(res, notes))
