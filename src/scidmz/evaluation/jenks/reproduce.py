"""``scidmz reproduce jenks``: the Jenks papers' tests, run, written to results.json, then rendered.

Fluid plant always (``jenks.fluid``, seconds); with ``netns`` also the netns
testbed (``jenks.netns``, root, ~30 min). The report is a separate pass over
the results file (``jenks.report``, ``templates/jenks_report.md.j2``), so
``render_only`` rewrites it without running anything; ``keep_netns`` re-runs
the fluid part and keeps the testbed part of an earlier ``--netns`` run.

results.json (``evaluation.results`` format, plus): ``duration_s``; ``test1``,
``test3``, ``exp4`` (Jain's index, rate shares and utilisation over the second
half per run), ``exp5`` (``util_series`` per period), ``test6`` (Jain per
phase), ``exp3`` (FCTs per K and CUBIC:BBR mix), ``test5`` (RTTs around the
join); ``netns``: the same on the testbed with ``starved_periods``/``periods``
per row and its own ``meta`` when kept from an earlier run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..render import write_report
from ..results import provenance, read_results, write_json

__all__ = ["reproduce_jenks"]


def _kept_netns(out_dir: Path) -> dict[str, Any]:
    """The netns part of an earlier run's results.json, stamped with where it came from."""
    old = read_results(out_dir / "results.json", f"scidmz reproduce jenks --netns --out {out_dir}")
    if old.get("netns") is None:  # the section a --netns run adds
        raise ValueError(f"--keep-netns: {out_dir}/results.json has no netns part (run with --netns once)")
    k = dict(old["netns"])
    meta = old.get("meta") or {}
    when = (f"commit {meta['git_commit']}, {meta['generated']}" if meta.get("git_commit")
            else "a run before results files recorded their commit")
    k.setdefault("carried_over", f"This testbed part is kept from an earlier run ({when}; "
                                 f"`{meta.get('command', old.get('command', 'scidmz reproduce jenks --netns'))}`); "
                                 "the fluid part above was re-run (`--keep-netns`).")
    return k


def reproduce_jenks(out: str | os.PathLike[str] = "reports/jenks", quick: bool = False,
                    command: str | None = None, netns: bool = False, render_only: bool = False,
                    keep_netns: bool = False, notes: str | None = None) -> tuple[dict[str, Any], str]:
    """Run the reproduction, write ``out/results.json``, ``out/exp5.png`` (and ``exp5_netns.png``) and
    ``out/report.md``; ``render_only``: only the report, from ``out/results.json``. ``notes``:
    Markdown appended as "Analysis". Returns (results, human line)."""
    from ...plots import plot_rate_series, save_figure
    from .report import render_report

    out_dir = Path(out)
    if render_only:
        res = read_results(out_dir / "results.json", f"scidmz reproduce jenks --out {out_dir}")
        res.setdefault("meta", {})["rendered"] = command or "scidmz reproduce jenks --render-only"
    else:
        kept = _kept_netns(out_dir) if keep_netns else None
        cmd = command or ("scidmz reproduce jenks" + (" --quick" if quick else "") + (" --netns" if netns else ""))
        with provenance(cmd) as prov:
            from .fluid import reproduce_fluid

            res = reproduce_fluid(quick)
            if netns:
                from .netns import reproduce_netns

                res["netns"] = reproduce_netns(quick)
            elif kept is not None:
                res["netns"] = kept
        res["meta"] = prov.meta()
        out_dir.mkdir(parents=True, exist_ok=True)
        save_figure(plot_rate_series(res["exp5"], "Exp 5, {cca} (with rebalancing)"), out_dir / "exp5.png")
        if netns:
            save_figure(plot_rate_series(res["netns"]["exp5"], "Exp 5 on the netns testbed, {cca}"),
                        out_dir / "exp5_netns.png")
        for r in res["exp5"] + res.get("netns", {}).get("exp5", []):
            r.pop("rate_series", None)
        write_json(res, out_dir / "results.json", indent=1)
    report = write_report(render_report(res, out_dir, notes), out_dir)
    return {**res, "out": str(out_dir), "report": str(report)}, f"report written to {report}"
