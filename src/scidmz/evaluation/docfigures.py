"""Figures in README.md and docs/*.md, rendered from committed results files (``scripts/render_results.py``).

No number in the project's documentation is typed by hand: each one sits in a
marked region ::

    <!-- render:NAME -->
    ... generated text ...
    <!-- /render:NAME -->

whose text is the Jinja2 template ``templates/docs/NAME.md.j2`` rendered
(``evaluation.render``, the reports' machinery) with the context that
``FIGURES[NAME]`` reads from the repository's results files. ``check`` names the
first region whose text differs from what its source gives (the test in
``tests/test_docs_figures.py`` runs it); ``write`` rewrites the stale ones.

A figure whose results file is absent is skipped with a message naming the
file, and its region is left as it stands: a figure is never invented (the
leaderboard's verdict waits for ``reports/leaderboard/results.json``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .render import render
from .stats import WITHOUT_ANN

__all__ = ["FIGURES", "Missing", "Region", "regions", "render_figure", "refresh", "doc_files", "check", "write",
           "plot_figures", "TRADEOFF_DIR"]

_OPEN = re.compile(r"<!-- render:(?P<name>[a-z0-9-]+) -->\n")
_CLOSE = "<!-- /render:{name} -->"


class Missing(Exception):
    """A figure's results file is absent: the figure is skipped, never invented."""


@dataclass(frozen=True)
class Region:
    """One marked region of a document: its figure's name and the text between the markers."""

    name: str
    start: int  # offset of the first character after the opening marker's newline
    end: int  # offset of the closing marker

    def text(self, doc: str) -> str:
        return doc[self.start:self.end]


def regions(doc: str, where: str = "document") -> list[Region]:
    """The marked regions of ``doc`` in order; an unclosed or unknown region is a ``ValueError``."""
    out = []
    for m in _OPEN.finditer(doc):
        name = m["name"]
        close = doc.find(_CLOSE.format(name=name), m.end())
        if close < 0:
            raise ValueError(f"{where}: region {name!r} has no closing marker {_CLOSE.format(name=name)}")
        if name not in FIGURES:
            raise ValueError(f"{where}: region {name!r} names no figure (known: {', '.join(sorted(FIGURES))})")
        out.append(Region(name, m.end(), close))
    return out


def _load(root: Path, rel: str) -> dict[str, Any]:
    path = root / rel
    if not path.is_file():
        raise Missing(f"{rel} not found")
    return json.loads(path.read_text())


def render_figure(name: str, root: Path) -> str:
    """The text of figure ``name`` from the results files under ``root`` (raises :class:`Missing`)."""
    return render(f"docs/{name}.md.j2", root, **FIGURES[name](root))


def refresh(doc: str, root: Path, where: str = "document") -> tuple[str, list[str], list[str]]:
    """``doc`` with every region re-rendered, the names of the regions that changed, and skip messages."""
    parts, pos, stale, skipped = [], 0, [], []
    for r in regions(doc, where):
        try:
            new = render_figure(r.name, root)
        except Missing as exc:
            skipped.append(f"{where}: skipped region {r.name!r}: {exc}")
            continue
        if new != r.text(doc):
            stale.append(r.name)
        parts += [doc[pos:r.start], new]
        pos = r.end
    parts.append(doc[pos:])
    return "".join(parts), stale, skipped


def doc_files(root: Path) -> list[Path]:
    """README.md and docs/*.md: every document whose figures are rendered."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _each(root: Path) -> Iterator[tuple[Path, str, str, list[str], list[str]]]:
    for path in doc_files(root):
        old = path.read_text()
        new, stale, skipped = refresh(old, root, str(path.relative_to(root)))
        yield path, old, new, stale, skipped


def check(root: Path, say: Callable[[str], None] = print) -> str | None:
    """The first stale region as ``"FILE: region NAME"``, or None when every figure matches its source."""
    for path, _old, _new, stale, skipped in _each(root):
        for s in skipped:
            say(s)
        if stale:
            return f"{path.relative_to(root)}: region {stale[0]!r}"
    return None


def write(root: Path, say: Callable[[str], None] = print) -> list[str]:
    """Re-render every stale region in place (atomically per file); the ``"FILE: NAME"`` rewritten."""
    from ..fileio import atomic_write_text

    done = []
    for path, old, new, stale, skipped in _each(root):
        for s in skipped:
            say(s)
        if new != old:
            atomic_write_text(path, new)
            done += [f"{path.relative_to(root)}: {n}" for n in stale]
    return done


# ---------------------------------------------------------------- the figures' contexts


def _mlc_rows(sections: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The MLC report's verdict rows; each p is the report's, Holm-corrected over the report's tests
    (``tests``: how many), so the page and the report it copies say the same."""
    from .mlc.report import PAPER, page_verdicts

    page, tests = page_verdicts(sections)
    rows = []
    for cca, sec in sections.items():
        s = sec.get("summaries", {})
        paper = PAPER.get(cca, {})
        p = {v["exp"]: v["p"] for v in page[cca]}
        for exp, key, label, ppaper in (("mrae", "reduction_pct", "MRAE", "mrae_reduction_pct"),
                                        ("fct", "reduction_pct", "DTN FCT", "fct_reduction_pct"),
                                        ("utilization", "decrease_pct", "utilisation", "util_decrease_pct")):
            v = s.get(exp)
            if not v:
                continue
            m, t = v.get("mlc", {}), v.get("trivial", {})
            sign = -1.0 if exp == "utilization" else 1.0
            rows.append({"cca": paper.get("label", cca), "exp": exp, "label": label, "mlc": m.get("mean"),
                         "trivial": t.get("mean"), "pct": None if m.get(key) is None else sign * m[key],
                         "wins": m.get("paired_wins"), "n": m.get("paired_n"), "p": p.get(exp), "tests": tests,
                         "paper": None if paper.get(ppaper) is None else sign * paper[ppaper],
                         "fill_mlc": _fill(m), "fill_trivial": _fill(t), "transfer": v.get("transfer"),
                         "target": v.get("target"), "ideal_s": v.get("ideal_s")})
    return rows


def _fill(v: Mapping[str, Any]) -> float | None:
    r, t = v.get("mean_rate_dtn"), v.get("mean_target")
    return r / t if r and t else None


def _mlc(rel: str) -> Callable[[Path], dict[str, Any]]:
    def ctx(root: Path) -> dict[str, Any]:
        doc = _load(root, rel)
        sec = doc["sections"]
        return {"src": rel, "meta": doc.get("meta", {}), "rows": _mlc_rows(sec),
                "train": {c: s.get("train") for c, s in sec.items()},
                "fine_tune": {c: s.get("fine_tune") for c, s in sec.items()}}
    return ctx


def _by(rows: list[dict[str, Any]], cca: str, exp: str) -> dict[str, Any]:
    return next((r for r in rows if r["cca"] == cca and r["exp"] == exp), {})


def _readme(root: Path) -> dict[str, Any]:
    doc = _load(root, "reports/mlc-netns/results.json")
    rows = _mlc_rows(doc["sections"])
    # Laid out from a kernel leaderboard run (`reproduce mlc --evaluation-from`), or the chain's own
    # evaluation: the README says which, since only the first keeps tuning apart from testing.
    source = (doc["sections"].get("cubic") or {}).get("evaluation_from")
    return {"mrae": _by(rows, "CUBIC", "mrae"), "fct": _by(rows, "CUBIC", "fct"),
            "util": _by(rows, "CUBIC", "utilization"), "source": source}


def _band(root: Path) -> dict[str, Any]:
    rel = "reports/mlc/band/mlc_band_tradeoff.json"
    doc = _load(root, rel)
    bands = sorted({r["delta_u"] for r in doc["results"]})
    by = {(r["cca"], r["delta_u"]): r for r in doc["results"]}
    ccas = list(dict.fromkeys(r["cca"] for r in doc["results"]))
    return {"src": rel, "trials": doc.get("trials"), "bands": bands, "ccas": ccas, "by": by}


def _jenks(root: Path) -> dict[str, Any]:
    from .jenks.report import context

    rel = "reports/jenks/results.json"
    ctx = context(_load(root, rel))
    return {"src": rel, "comparison": ctx.get("comparison", []), "test6": ctx["test6"],
            "netns": ctx["netns"], "exp5": ctx["exp5"]}


def _ffs(root: Path) -> dict[str, Any]:
    rel = "reports/ffs/results.json"
    doc = _load(root, rel)
    return {"src": rel, "fluid": doc["fluid_table3"], "netns": doc.get("netns_table3"),
            "rf": doc.get("fluid_rate_feedback", [])}


def _abc(root: Path) -> dict[str, Any]:
    rel = "reports/abc/results.json"
    doc = _load(root, rel)
    return {"src": rel, "fluid": doc["fluid_tcp_rows"], "netns": doc.get("netns_tcp_rows", []),
            "fluid_cbr": doc.get("fluid_cbr_tcp_rows", []), "netns_cbr": doc.get("netns_cbr_tcp_rows", [])}


def _dmz(root: Path) -> dict[str, Any]:
    out = []
    for scen in ("paper-cubic", "paper-bbr2"):
        rel = f"reports/disciplines-dmz/{scen}/results.json"
        doc = _load(root, rel)
        summ = {exp: r["summary"] for exp, r in doc["results"].items()}
        out.append({"scenario": scen, "src": rel, "summaries": summ, "trials": doc.get("plan", {}).get("trials")})
    return {"runs": out}


def _regime(root: Path) -> dict[str, Any]:
    base = "reports/mlc/regime/"
    fluid = _load(root, base + "buffer_regime_fluid.json")
    kern = _load(root, base + "buffer_regime_netns_cubic_run3.json")
    rows = [("fluid, 100 Mbit/s, CUBIC", fluid["fluid_testbed"]["cubic"]),
            ("real kernel, 100 Mbit/s, CUBIC (run 3, quiet machine)", kern["netns"]["cubic"]),
            ("fluid, 1 Gbit/s, CUBIC", fluid["fluid"]["cubic"]), ("fluid, 1 Gbit/s, BBRv2", fluid["fluid"]["bbr2"])]
    buffers = [r["buffer_bdp"] for r in fluid["fluid_testbed"]["cubic"]]
    table = [{"label": lab, "fill": {r["buffer_bdp"]: r.get("fill") for r in rs}} for lab, rs in rows]
    gap = max(abs((a.get("fill") or 0) - (b.get("fill") or 0))
              for a, b in zip(fluid["fluid_testbed"]["cubic"], kern["netns"]["cubic"], strict=False))
    return {"src": [base + "buffer_regime_fluid.json", base + "buffer_regime_netns_cubic_run3.json"],
            "buffers": buffers, "table": table, "gap": gap}


def _sim_vs_testbed(root: Path) -> dict[str, Any]:
    rel = "reports/mlc/regime/sim_vs_testbed.json"
    return {"src": rel, "d": _load(root, rel)}


def _arrival_idc(root: Path) -> dict[str, Any]:
    rels = [f"reports/mlc/regime/arrival_idc_{c}.json" for c in ("cubic", "bbr")]
    return {"src": rels, "runs": [_load(root, r) for r in rels], "window": "2ms"}


def _literature(root: Path) -> dict[str, Any]:
    rel = "reports/fidelity/literature.json"
    return {"src": rel, "d": _load(root, rel)}


def _ebpf(root: Path) -> dict[str, Any]:
    rel = "reports/ebpf/benchmark.json"
    return {"src": rel, "b": _load(root, rel)}


def _agent(root: Path) -> dict[str, Any]:
    """Per mechanism: the runs' per-period medians (steady and with every cap re-set), the empty
    listing's, and the new-connection and RSS figures; ``met`` when every run's median is within the goal."""
    rel = "reports/agent/benchmark.json"
    b = _load(root, rel)
    mech = {}
    for m in b["mechanisms"]:
        runs = [r for r in b["period"] if r["mechanism"] == m]
        nc = next(r for r in b["newconn"] if r["mechanism"] == m)
        step = [r["step"]["median_ms"] for r in runs]
        mech[m] = {"step": step, "resetting": [r["step_resetting_all"]["median_ms"] for r in runs],
                   "dump_empty": [r["dump_empty"]["median_ms"] for r in runs], "met": max(step) <= runs[0]["goal_ms"],
                   "newconn": nc,
                   "dump": [r["dump"]["median_ms"] for r in runs],
                   "dump_two_walks": [r["dump_two_walks"]["median_ms"] for r in runs],
                   "pyroute2": [r["pyroute2_dump"]["median_ms"] for r in runs if r.get("pyroute2_dump")]}
    return {"src": rel, "b": b, "mech": mech, "goal_ms": b["period"][0]["goal_ms"],
            "ehash": b["period"][0]["tcp_ehash_entries"], "connections": b["period"][0]["connections"]}


def _jenks_epoch(root: Path) -> dict[str, Any]:
    rel = "reports/jenks/epoch_htb.json"
    return {"src": rel, "b": _load(root, rel)}


def _p4disc_share(root: Path) -> dict[str, Any]:
    """The rehearsal's lines per discipline, in the order they ran, and the ranges over the runs."""
    rel = "reports/p4disc/share.json"
    b = _load(root, rel)
    by: dict[str, list[dict[str, Any]]] = {}
    for row in b["rows"]:
        if row.get("measured", True):
            by.setdefault(row["policy"], []).append(row)
    lost = [row for row in b["rows"] if not row.get("measured", True)]
    if not by:
        raise Missing(f"{rel} holds no measured run")
    span = {p: {k: (min(r[k] for r in rows), max(r[k] for r in rows)) for k in ("goodput_bmv2_bps", "goodput_stage_bps")}
            for p, rows in by.items()}
    first = next(iter(by.values()))[0]
    return {"src": rel, "b": b, "by": by, "span": span, "first": first, "lost": lost}


def _p4disc_speed(root: Path) -> dict[str, Any]:
    rel = "reports/p4disc/speed.json"
    return {"src": rel, "b": _load(root, rel)}


#: The ledgers whose units carry the validity rule's signals (the quiet reading, the real-time runs).
VALIDITY_LEDGERS = ("reports/validity-quiet/ledger.jsonl", "reports/leaderboard/*/ledger.jsonl")
SIGNALS = ("cpu_pressure", "stage_late_mean_s", "probe_service", "probe_wall_s")


def _spread(xs: list[float]) -> dict[str, float] | None:
    from statistics import median

    return {"min": min(xs), "median": median(xs), "max": max(xs)} if xs else None


def _signals_of(rel: str, data: bytes) -> dict[str, Any] | None:
    """One ledger's signals over every unit line it holds (re-runs included), or None when it has none."""
    from .leaderboard.ledger import parse_ledger_lines
    from .leaderboard.validity import ValidityRule, rule_of, unit_breaks

    head, lines, _ = parse_ledger_lines(data, rel)
    rule = rule_of(head, 1.0)
    lines = [r for r in lines if isinstance(r.get("validity"), Mapping)]
    if not isinstance(rule, ValidityRule) or not lines:
        return None
    col = {k: [float(r["validity"][k]) for r in lines if isinstance(r["validity"].get(k), int | float)] for k in SIGNALS}
    share = [r["validity"]["probe_wall_s"] / r["wall_s"] for r in lines
             if isinstance(r["validity"].get("probe_wall_s"), int | float) and r.get("wall_s")]
    by_policy: dict[str, list[float]] = {}
    for r in lines:
        if isinstance(r["validity"].get("cpu_pressure"), int | float):
            by_policy.setdefault(r["policy"], []).append(float(r["validity"]["cpu_pressure"]))
    med = {p: _spread(v)["median"] for p, v in by_policy.items()}  # type: ignore[index]
    busiest = max(med, key=med.__getitem__) if med else None
    days = sorted(str(r.get("finished_at", ""))[:10] for r in lines if r.get("finished_at"))
    return {"src": rel, "run": Path(rel).parent.name, "units": len(lines), "rule": rule.to_dict(),
            "reruns": sum(1 for r in lines if r.get("rerun")), "broke": sum(1 for r in lines if unit_breaks(r, rule)),
            "first": days[0] if days else None, "last": days[-1] if days else None,
            "signals": {k: _spread(v) for k, v in col.items()}, "probe_share": _spread(share),
            "busiest": busiest, "busiest_cpu": med.get(busiest)}


def _validity(root: Path) -> dict[str, Any]:
    """The validity signals as the committed real-time ledgers read them (docs/leaderboard.md, "Validity")."""
    runs = []
    for pattern in VALIDITY_LEDGERS:
        for path in sorted(root.glob(pattern)):
            got = _signals_of(path.relative_to(root).as_posix(), path.read_bytes())
            if got is not None:
                runs.append(got)
    if not runs:
        raise Missing("no committed ledger holds validity signals (" + ", ".join(VALIDITY_LEDGERS) + ")")
    return {"src": [r["src"] for r in runs], "runs": runs}


def _leaderboard(root: Path) -> dict[str, Any]:
    from .verdict import leaderboard_context

    rel = "reports/leaderboard/results.json"
    return {"src": rel, **leaderboard_context(_load(root, rel))}


def _saturator(root: Path) -> dict[str, Any]:
    """Does the inverse ANN pay for itself once its saturator gives it authority (wider bands, the slew-rate
    reading), each policy tuned per configuration?"""
    from .verdict import saturator_verdict

    rel = "reports/saturator/results.json"
    doc = _load(root, rel)
    plan = doc.get("plan") or {}
    ccas = []
    for cca, res in doc["results"].items():
        pair = _ga_pair(root, plan, res)
        spread = res["best"].get("ga_spread", pair["spread"] if pair else None)
        ccas.append({"cca": cca, "trivial": res["trivial"], "mlc": res["best"]["mlc"], "pi": res["best"]["pi"],
                     "verdict": saturator_verdict(res["best"], spread=spread), "ga_pair": pair,
                     "by_limiter": _best_by_limiter(res["configs"])})
    return {"src": rel, "quick": bool(plan.get("quick")), "old_rule": "selection" not in plan, "ccas": ccas}


def _ga_pair(root: Path, plan: Mapping[str, Any], res: Mapping[str, Any]) -> dict[str, Any] | None:
    """Two GA runs of one nominal configuration on the same trials, where the committed files hold them
    (ours, for results written before the study tuned each best with several GA seeds): the
    leaderboard's fluid ``pi`` (its gains in ``reports/leaderboard/pi-gains/SCENARIO``) and the
    study's ``pi`` at the same saturator and GA sizes, both with ``plan.trials`` trials from
    ``plan.seed``. None where they are not both there, differ in plan or in their trials' targets (the
    study records its per-trial target hashes, ``targets``, as the leaderboard does; a study without
    them cannot show it ran the leaderboard's trials), or found the same gains (then the pair says
    nothing of the spread)."""
    scen = res.get("scenario")
    try:
        gains = _load(root, f"reports/leaderboard/pi-gains/{scen}/gains.json")
        lb = _load(root, f"reports/leaderboard/fluid-{scen}/results.json")
    except Missing:
        return None
    info, lplan = gains.get("info") or {}, lb.get("plan") or {}
    row = next((r for r in lb.get("rows") or [] if r["policy"] == WITHOUT_ANN and r["experiment"] == "mrae"), None)
    cfg = next((c for c in res.get("configs") or [] if c["limiter"] == gains.get("limiter")
                and c["delta_u"] == gains.get("delta_u")), None)
    same_plan = (list(plan.get("ga") or [])[:2] == [info.get("generations"), info.get("population")]
                 and plan.get("ga_episode_s") == info.get("episode") and lplan.get("seed") == plan.get("seed")
                 and row is not None and row.get("trials") == plan.get("trials")
                 and _same_targets(res.get("targets"), lb.get("targets")))
    if cfg is None or not same_plan or all(abs(cfg["pi"]["gains"][k] - gains[k]) < 1e-12 for k in ("kp", "ki", "kw")):
        return None
    mraes = [float(row["mean"]), float(cfg["pi"]["mrae"])]  # type: ignore[index]
    fct = next((r for r in lb.get("rows") or [] if r["policy"] == WITHOUT_ANN and r["experiment"] == "fct"), None)
    fcts = [float(fct["mean"]), float(cfg["pi"]["fct_s"])] if fct is not None and "fct_s" in cfg["pi"] else None
    return {"config": f"pi {cfg['limiter']} {cfg['delta_u']:g}", "mraes": mraes, "spread": abs(mraes[0] - mraes[1]),
            "fcts": fcts, "fct_spread_pct": 100 * abs(fcts[0] - fcts[1]) / fcts[0] if fcts else None}


def _same_targets(mine: Any, theirs: Any) -> bool:
    """Whether every trial kind ``mine`` records has the same per-trial target hashes in ``theirs``."""
    return isinstance(mine, Mapping) and isinstance(theirs, Mapping) and bool(mine) and all(
        theirs.get(u) == h for u, h in mine.items())


def _best_by_limiter(configs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """The lowest mean MRAE of each policy under each saturator reading (``band``, ``rate``)."""
    out: dict[str, dict[str, float]] = {}
    for c in configs:
        best = out.setdefault(c["limiter"], {})
        for name in ("mlc", "pi"):
            best[name] = min(best.get(name, float("inf")), c[name]["mrae"])
    return out


def _decision(root: Path) -> dict[str, Any]:
    from .decision import (
        configuration_answers,
        decision_table,
        floors,
        mlc_standing,
        provisional_runs,
    )

    rel = "reports/leaderboard/results.json"
    doc = _load(root, rel)
    from .decision import tradeoff_points

    figs = [{"label": g["label"], "png": f"{TRADEOFF_DIR}/{_tradeoff_name(g)}"} for g in tradeoff_points(doc)]
    return {"src": rel, "table": decision_table(doc), "mlc": mlc_standing(doc), "figures": figs,
            "holm": doc.get("holm") or {"tests": "the"}, "pending": doc.get("incomplete_runs") or [],
            "floors": floors(doc), "configurations": configuration_answers(doc),
            "provisional": provisional_runs(doc)}


#: Where the plots pass draws the trade-off figures (under the repository root; docs/results.md links them).
TRADEOFF_DIR = "docs/figures"


def _tradeoff_name(g: Mapping[str, Any]) -> str:
    return f"tradeoff-{g['plant']}-{g['cca']}.png"


def _tradeoff(root: Path) -> dict[str, Any]:
    from .decision import tradeoff_points

    rel = "reports/leaderboard/results.json"
    regimes = tradeoff_points(_load(root, rel))
    # links relative to docs/results.md, where the figure is embedded
    return {"src": rel, "regimes": [{**g, "png": f"figures/{_tradeoff_name(g)}"} for g in regimes]}


def plot_figures(root: Path, check_only: bool = False) -> list[str]:
    """The plots pass (apart from the text: Flent's model): one trade-off figure per regime of the
    merged leaderboard (``plots.plot_tradeoff``) under ``TRADEOFF_DIR``; the paths written, or with
    ``check_only`` the paths missing (images are not compared byte for byte: matplotlib's output
    differs across versions and fonts). Nothing without the results file."""
    from ..plots import plot_tradeoff, save_figure
    from .decision import tradeoff_points

    try:
        regimes = tradeoff_points(_load(root, "reports/leaderboard/results.json"))
    except Missing:
        return []
    out = []
    for g in regimes:
        path = root / TRADEOFF_DIR / _tradeoff_name(g)
        if check_only:
            out += [] if path.is_file() else [str(path.relative_to(root))]
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        save_figure(plot_tradeoff(g), path)
        out.append(str(path.relative_to(root)))
    return out


FIGURES: dict[str, Callable[[Path], dict[str, Any]]] = {
    "readme-decision": _decision,
    "tradeoff": _tradeoff,
    "readme-mlc-netns": _readme,
    "mlc-fluid": _mlc("reports/mlc/results.json"),
    "mlc-netns": _mlc("reports/mlc-netns/results.json"),
    "mlc-band": _band,
    "jenks": _jenks,
    "ffs-table3": _ffs,
    "abc": _abc,
    "disciplines-dmz": _dmz,
    "buffer-regime": _regime,
    "sim-vs-testbed": _sim_vs_testbed,
    "arrival-idc": _arrival_idc,
    "fluid-literature": _literature,
    "ebpf-cost": _ebpf,
    "agent-cost": _agent,
    "jenks-epoch": _jenks_epoch,
    "p4disc-share": _p4disc_share,
    "p4disc-speed": _p4disc_speed,
    "validity-signals": _validity,
    "leaderboard": _leaderboard,
    "saturator": _saturator,
}
