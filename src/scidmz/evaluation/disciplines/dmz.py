"""``scidmz reproduce disciplines-dmz``: ABC and FFS at the bottleneck vs the trivial TBF in the Science DMZ.

The third way to serve the DTN (ARCHITECTURE.md's discipline kind): the MLC
paper's section 4 experiments (MRAE, FCT, utilisation; ``evaluation.mlc``) with
the ``abc`` and ``ffs`` policies (``policies.discipline``: configured from the
admin's target) beside the trivial TBF, on the same paired trials, for a CUBIC
and a BBRv2 DTN (``paper-cubic``, ``paper-bbr2``). Each scenario is one
``scidmz evaluate`` run whose results file lands in ``OUT/<scenario>/``; the
report (``templates/dmz_report.md.j2``) is rendered from those files, so
``render_only`` rewrites it without running anything.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..render import render, write_report
from ..results import read_results
from ..stats import holm

__all__ = ["SCENARIOS", "reproduce_dmz", "render_dmz"]

SCENARIOS = ("paper-cubic", "paper-bbr2")
POLICIES = ("abc", "ffs")
EXPERIMENTS = ("mrae", "fct", "utilization")
_LABELS = {"abc": "ABC", "ffs": "FFS-C100", "trivial": "trivial TBF"}


def _load(out: Path) -> dict[str, dict[str, Any]]:
    """``{scenario: results file}`` of every scenario run into ``out`` (the built-ins first, in order)."""
    found = {d.name: d / "results.json" for d in sorted(out.iterdir()) if (d / "results.json").is_file()} \
        if out.is_dir() else {}
    if not found:
        raise FileNotFoundError(f"no OUT/<scenario>/results.json in {out}: run `scidmz reproduce disciplines-dmz "
                                f"--out {out}` first")
    order = [s for s in SCENARIOS if s in found] + [s for s in found if s not in SCENARIOS]
    return {s: read_results(found[s], "scidmz reproduce disciplines-dmz") for s in order}


def _summ(doc: Mapping[str, Any], exp: str) -> Mapping[str, Any]:
    return ((doc.get("results") or {}).get(exp) or {}).get("summary") or {}


def _versus(scenario: str, doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per discipline and metric: its mean, the trivial TBF's, the change and the pairs it won."""
    out = []
    for pol in POLICIES:
        for exp, what, fmt in (("fct", "DTN FCT (s)", "{:.1f}"), ("mrae", "MRAE", "{:.4f}"),
                               ("utilization", "utilisation", "{:.4f}")):
            s = _summ(doc, exp)
            mine, base = s.get(pol) or {}, s.get("trivial") or {}
            if not mine or not base:
                continue
            out.append({"scenario": scenario, "policy": _LABELS[pol], "metric": what, "exp": exp, "fmt": fmt,
                        "mean": mine.get("mean"), "trivial": base.get("mean"),
                        "change_pct": -mine["reduction_pct" if exp != "utilization" else "decrease_pct"]
                        if ("reduction_pct" in mine or "decrease_pct" in mine) else None,
                        "lower": mine.get("paired_wins"), "pairs": mine.get("paired_n"), "p": mine.get("paired_p")})
    return out


def context(docs: Mapping[str, Mapping[str, Any]], notes: str | None = None,
            rendered: str | None = None) -> dict[str, Any]:
    """The template's context from the scenarios' results files."""
    rows, versus, ps = [], [], []
    for name, doc in docs.items():
        m, fct, util = (_summ(doc, e) for e in EXPERIMENTS)
        rows.append({"scenario": name, "mrae": m, "fct": fct, "util": util, "cca": (doc.get("scenario") or {})
                     .get("dtn", {}).get("cca", "?")})
        versus += _versus(name, doc)
        ps += [v["p"] for v in versus if v["scenario"] == name and v["p"] is not None]
    first = next(iter(docs.values()))
    trivial = _summ(first, "mrae").get("trivial") or {}
    metas = [doc.get("meta") or {} for doc in docs.values()]
    adjusted = [p for p in holm(ps) if math.isfinite(p)]
    return {"rows": rows, "versus": versus, "max_p": max(adjusted, default=None), "tests": len(adjusted),
            "pairs": trivial.get("n"), "seed": (first.get("plan") or {}).get("seed", 0),
            "commands": [_one_code_span(m["command"]) for m in metas if m.get("command")], "metas": metas,
            "rendered": rendered, "notes": notes.strip() if notes else None, "labels": _LABELS}


def render_dmz(docs: Mapping[str, Mapping[str, Any]], out_dir: str | os.PathLike[str], notes: str | None = None,
               rendered: str | None = None) -> str:
    """The comparison report of the scenarios' results files."""
    return render("dmz_report.md.j2", out_dir, **context(docs, notes, rendered))


def reproduce_dmz(out: str | os.PathLike[str] = "reports/disciplines-dmz", quick: bool = False, seed: int = 0,
                  trials: int | None = None, render_only: bool = False, notes: str | None = None,
                  command: str | None = None, tracking_uri: str | None = None,
                  progress: bool = False) -> tuple[dict[str, Any], str]:
    """Run ``scidmz evaluate`` per scenario (ABC, FFS and the trivial TBF, paired trials; 30 by default,
    the ``--quick`` plan's sizes with ``quick``) into ``out/<scenario>/``, then render ``out/report.md``."""
    from ...scenario import resolve_scenario
    from ..evaluate import evaluate, make_policies

    out_dir = Path(out)
    n = int(trials) if trials is not None else (4 if quick else 30)
    if not render_only:
        for sc in SCENARIOS:
            cmd = (f"scidmz evaluate {sc} --policies {','.join(POLICIES)} --experiments {','.join(EXPERIMENTS)} "
                   f"--trials {n}{' --quick' if quick else ''} --seed {seed} --out {out_dir / sc}")
            evaluate(resolve_scenario(sc), make_policies(POLICIES), trials=n, experiments=EXPERIMENTS,
                     out=str(out_dir / sc), seed=seed, quick=quick, progress=progress, tracking_uri=tracking_uri,
                     command=f"{cmd}  # by {command or 'scidmz reproduce disciplines-dmz'}")
    docs = _load(out_dir)
    rendered = (command or "scidmz reproduce disciplines-dmz --render-only") if render_only else None
    report = write_report(render_dmz(docs, out_dir, notes, rendered), out_dir)
    summary = {name: {e: {p: (v.get(p) or {}).get("mean") for p in (*POLICIES, "trivial")}
                      for e, v in ((e, _summ(doc, e)) for e in EXPERIMENTS)} for name, doc in docs.items()}
    return {"out": str(out_dir), "report": str(report), "summaries": summary}, f"report written to {report}"


def _one_code_span(command: str) -> str:
    """A recorded command as one Markdown code span: runs before 2026-11-26 wrote the driving
    command as ``(by `...`)``, whose backticks broke the report's code span."""
    head, sep, by = command.partition(" (by `")
    return f"{head}  # by {by.rstrip(')').rstrip('`')}" if sep else command
