"""Fidelity of the fluid plant: against the literature, or point by point against the real kernel.

    python benchmarks/fidelity.py [--quick]                 # the literature checks (JSON)
    python benchmarks/fidelity.py --against reports/fidelity [--seeds 4]

The first form runs the experiments of ``scidmz.plant.fluid.fidelity`` (see
docs/fluid_model.md). The second reads the kernel measurements in the
directory (``kernel_*.json``, written by ``buffer_regime.py --plant netns``
and ``sim_vs_testbed.py``; their commands are in its README), runs the fluid
plant at every point they measured, with the same scenario and protocol, and
writes ``fidelity.json`` (a top-level ``rows`` list: one row per (cca, metric,
point) with ``cca``, ``metric``, ``point``, ``fluid``, ``kernel`` and ``gap`` =
fluid - kernel) and the README's tables, generated from it. Both print one
JSON object.

Metrics: ``fill`` (trivial TBF, R*_DTN = 0.5 B_max: mean R_DTN / R*_DTN, per
buffer in BDPs), ``queue_delay`` (the DTN's mean queuing delay there, s),
``static_map`` (R_DTN / B_max at u as a fraction of B_max), ``rtt_pair_share``
and ``cca_pair_share`` (the DTN flow's share of two unshaped flows). CCAs:
``cubic`` (DTN and campus CUBIC), ``bbr`` (BBR v1 DTN, CUBIC campus),
``bbr-all`` (BBR v1 DTN and campus); for the pairs ``cubic``, ``bbr`` and
``bbr-vs-cubic``. A kernel point whose run was refused as CPU-starved has
``kernel: null`` and its evidence; when a point was measured in more than one
run, the first unrefused run counts and all are listed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

FORMAT_VERSION = 1
# (dtn_cca, campus_cca) of a buffer/static-map run -> the cca label of its rows
_CCA_LABEL = {("cubic", "cubic"): "cubic", ("bbr", "cubic"): "bbr", ("bbr", "bbr"): "bbr-all"}
_GOALS = {  # ours: (metric, cca) -> (statistic of |gap|, limit)
    ("fill", "bbr"): ("max", 0.05),
    ("static_map", "bbr"): ("mean", 0.03),
    ("static_map", "cubic"): ("mean", 0.03),
    ("rtt_pair_share", "bbr"): ("max", 0.05),
}


def _literature(quick: bool) -> dict[str, Any]:
    from scidmz.plant.fluid.fidelity import run_all

    return run_all(quick=quick)


def _load(path: Path) -> dict[str, Any]:
    with open(path) as fh:
        return json.load(fh)


def _pick(values: list[tuple[str, float | None]]) -> tuple[float | None, list[dict[str, Any]]]:
    """The first unrefused figure of a point measured in one or more runs, and all of them."""
    runs = [{"file": f, "value": v} for f, v in values]
    good = [v for _, v in values if v is not None]
    return (good[0] if good else None), runs


# -- the kernel's points ----------------------------------------------------------------------
def kernel_points(d: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(cca, metric, point) -> {"kernel": value or None, "runs": [...], "spec": what the fluid must run}."""
    pts: dict[tuple[str, str, str], list] = {}
    specs: dict[tuple[str, str, str], dict[str, Any]] = {}

    def add(key: tuple[str, str, str], fname: str, val: float | None, spec: dict[str, Any]) -> None:
        pts.setdefault(key, []).append((fname, val))
        specs.setdefault(key, spec)

    for path in sorted(d.glob("kernel_buffer*.json")):
        res = _load(path)
        campus = res.get("campus_cca", "cubic")
        target = res.get("target_frac", 0.5)
        for dcca, rows in res.get("netns", {}).items():
            if not isinstance(rows, list):
                continue
            label = _CCA_LABEL[(dcca, campus)]
            for r in rows:
                b = float(r["buffer_bdp"])
                spec = {"kind": "buffer", "dtn": dcca, "campus": campus, "buffer_bdp": b, "target_frac": target,
                        "duration": res["netns"]["duration_s"], "warmup": res["netns"]["warmup_s"]}
                add((label, "fill", f"{b:g}"), path.name, r.get("fill"), spec)
                add((label, "queue_delay", f"{b:g}"), path.name, r.get("qdelay_dtn"), spec)
    for path in sorted(d.glob("kernel_static_map*.json")):
        res = _load(path)
        sc = res["scenario"]
        for m in res["static_map"].values():
            label = _CCA_LABEL[(m["dtn_cca"], m["campus_cca"])]
            for i, f in enumerate(m["u_frac"]):
                tb = (m.get("testbed") or [None] * len(m["u_frac"]))[i]
                spec = {"kind": "static_map", "dtn": m["dtn_cca"], "campus": m["campus_cca"],
                        "hold": sc["hold_periods"], "avg": sc["avg_periods"], "u_frac": f}
                val = None if tb is None else tb["rate_dtn"] / sc["capacity"]
                add((label, "static_map", f"{f:g}"), path.name, val, spec)
    for path in sorted(d.glob("kernel_pairs*.json")):
        res = _load(path)
        for spec_s, row in res["two_flows"].items():
            dcca, drtt, ccca, crtt = spec_s.split(":")
            metric = "rtt_pair_share" if dcca == ccca else "cca_pair_share"
            label = dcca if dcca == ccca else f"{dcca}-vs-{ccca}"
            tb = row.get("testbed")
            spec = {"kind": "pair", "pair": spec_s, "duration": res.get("two_flow_duration_s", 60.0),
                    "warmup": res.get("two_flow_warmup_s", 30.0)}
            add((label, metric, f"{drtt} vs {crtt} ms"), path.name, None if tb is None else tb["share_dtn"], spec)
    out = {}
    for key, vals in pts.items():
        val, runs = _pick(vals)
        out[key] = {"kernel": val, "runs": runs, "spec": specs[key]}
    return out


# -- the fluid at the same points ----------------------------------------------------------------
def fluid_values(points: dict[tuple[str, str, str], dict[str, Any]], seeds: int) -> dict[tuple, float]:
    """The fluid plant's value at every kernel point (batched per run kind; ``seeds`` instances each)."""
    from buffer_regime import fluid_sweep
    from sim_vs_testbed import STATIC_FRACS, pair_fluid, static_map_fluid, static_scenario

    out: dict[tuple, float] = {}
    sweeps: dict[tuple, list[float]] = {}
    for (_, _, _), p in points.items():
        s = p["spec"]
        if s["kind"] == "buffer":
            sweeps.setdefault((s["dtn"], s["campus"], s["target_frac"], s["duration"], s["warmup"]), [])
            if s["buffer_bdp"] not in sweeps[(s["dtn"], s["campus"], s["target_frac"], s["duration"], s["warmup"])]:
                sweeps[(s["dtn"], s["campus"], s["target_frac"], s["duration"], s["warmup"])].append(s["buffer_bdp"])
    for (dcca, ccca, target, dur, warm), bufs in sweeps.items():
        bufs = sorted(bufs)
        rows = fluid_sweep(dcca, bufs, seeds, dur, warm, target, base="testbed", cca_override=dcca, campus_cca=ccca)
        label = _CCA_LABEL[(dcca, ccca)]
        for r in rows:
            out[(label, "fill", f"{r['buffer_bdp']:g}")] = r["fill"]
            out[(label, "queue_delay", f"{r['buffer_bdp']:g}")] = r["qdelay_dtn"]
    maps = {(p["spec"]["dtn"], p["spec"]["campus"], p["spec"]["hold"], p["spec"]["avg"])
            for p in points.values() if p["spec"]["kind"] == "static_map"}
    for dcca, ccca, hold, avg in sorted(maps):
        sc = static_scenario(f"{dcca}:{ccca}")
        cols = static_map_fluid(sc, list(STATIC_FRACS), hold, avg, seeds)
        for f, c in zip(STATIC_FRACS, cols, strict=True):
            out[(_CCA_LABEL[(dcca, ccca)], "static_map", f"{f:g}")] = c["rate_dtn"] / sc.capacity
    for key, p in points.items():
        s = p["spec"]
        if s["kind"] == "pair":
            out[key] = pair_fluid(s["pair"], s["duration"], s["warmup"], seeds)["share_dtn"]
    return out


def build_rows(points: dict, fluid: dict) -> list[dict[str, Any]]:
    rows = []
    for key in sorted(points, key=lambda k: (k[1], k[0], _point_order(k[2]))):
        cca, metric, point = key
        k = points[key]["kernel"]
        fl = fluid.get(key)
        rows.append({"cca": cca, "metric": metric, "point": point, "fluid": fl, "kernel": k,
                     "gap": None if k is None or fl is None else fl - k, "kernel_runs": points[key]["runs"]})
    return rows


def _point_order(p: str) -> float:
    try:
        return float(p.split()[0])
    except ValueError:
        return 0.0


def goals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for (metric, cca), (stat, limit) in _GOALS.items():
        gaps = [abs(r["gap"]) for r in rows if r["metric"] == metric and r["cca"] == cca and r["gap"] is not None]
        if not gaps:
            continue
        v = float(np.max(gaps) if stat == "max" else np.mean(gaps))
        out.append({"metric": metric, "cca": cca, "statistic": f"{stat} abs gap", "value": v, "limit": limit,
                    "met": v <= limit, "points": len(gaps)})
    return out


# -- the README's tables -----------------------------------------------------------------------
_TITLES = {
    "fill": "Trivial TBF fill (R_DTN / R*_DTN, R*_DTN = 0.5 B_max), per bottleneck buffer (BDP of 100 ms)",
    "queue_delay": "The queue each builds: mean DTN queuing delay (ms) in those runs",
    "static_map": "Static map R_DTN(u) / B_max, u as a fraction of B_max (testbed: 8 DTN streams, 10 campus hosts)",
    "rtt_pair_share": "Two unshaped flows, same CCA: the DTN flow's share (its RTT vs the campus flow's)",
    "cca_pair_share": "Two unshaped flows at equal RTT: the BBR flow's share against CUBIC",
}


def _fmt(v: float | None, metric: str) -> str:
    if v is None:
        return "refused"
    return f"{v * 1e3:.1f}" if metric == "queue_delay" else f"{v:.3f}"


def render_tables(rows: list[dict[str, Any]], gl: list[dict[str, Any]]) -> str:
    lines = []
    for metric, title in _TITLES.items():
        mrows = [r for r in rows if r["metric"] == metric]
        if not mrows:
            continue
        points = sorted({r["point"] for r in mrows}, key=_point_order)
        lines += [f"### {title}", "", "| cca | | " + " | ".join(points) + " |",
                  "|---|---|" + "---|" * len(points)]
        for cca in sorted({r["cca"] for r in mrows}):
            by = {r["point"]: r for r in mrows if r["cca"] == cca}
            for what in ("kernel", "fluid", "gap"):
                cells = []
                for p in points:
                    r = by.get(p)
                    if r is None:
                        cells.append("")
                    elif what == "gap":
                        cells.append("" if r["gap"] is None else (f"{r['gap'] * 1e3:+.1f}" if metric == "queue_delay"
                                                                  else f"{r['gap']:+.3f}"))
                    else:
                        cells.append(_fmt(r[what], metric))
                lines.append(f"| {cca} | {what} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["### Goals", "", "| metric | cca | statistic | value | limit | met |", "|---|---|---|---|---|---|"]
    lines += [f"| {g['metric']} | {g['cca']} | {g['statistic']} over {g['points']} points | {g['value']:.3f} | "
              f"{g['limit']} | {'yes' if g['met'] else 'no'} |" for g in gl]
    return "\n".join(lines) + "\n"


_BEGIN, _END = "<!-- fidelity tables: generated by benchmarks/fidelity.py --against -->", "<!-- end of tables -->"


def write_report(d: Path, rows: list[dict[str, Any]], gl: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    """fidelity.json, and the README's generated tables between its two markers (the rest is prose)."""
    tmp = d / "fidelity.json.tmp"
    tmp.write_text(json.dumps({"format_version": FORMAT_VERSION, **meta, "goals": gl, "rows": rows}, indent=1) + "\n")
    tmp.replace(d / "fidelity.json")
    readme = d / "README.md"
    text = readme.read_text() if readme.exists() else f"# Fidelity\n\n{_BEGIN}\n{_END}\n"
    if _BEGIN not in text or _END not in text:
        text += f"\n{_BEGIN}\n{_END}\n"
    head, rest = text.split(_BEGIN, 1)
    tail = rest.split(_END, 1)[1]
    readme.write_text(f"{head}{_BEGIN}\n{render_tables(rows, gl)}{_END}{tail}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="literature checks: half the simulated durations")
    ap.add_argument("--against", type=Path, default=None, help="a directory of kernel_*.json measurements")
    ap.add_argument("--seeds", type=int, default=4, help="fluid instances per kernel point (their mean)")
    a = ap.parse_args()
    t0 = time.perf_counter()
    if a.against is None:
        result = _literature(a.quick)
        result["wall_s"] = time.perf_counter() - t0
        print(json.dumps(result))
        return 0
    if not a.against.is_dir() or not list(a.against.glob("kernel_*.json")):
        print(f"fidelity: {a.against} holds no kernel_*.json measurements", file=sys.stderr)
        return 2
    if a.seeds < 1:
        print("fidelity: --seeds must be >= 1", file=sys.stderr)
        return 2
    from scidmz import __version__

    points = kernel_points(a.against)
    rows = build_rows(points, fluid_values(points, a.seeds))
    gl = goals(rows)
    meta = {"scidmz_version": __version__, "fluid_seeds": a.seeds,
            "gap": "fluid - kernel; static_map values are fractions of B_max",
            "kernel_files": sorted(p.name for p in a.against.glob("kernel_*.json"))}
    write_report(a.against, rows, gl, meta)
    print(json.dumps({"benchmark": "fidelity", "rows": len(rows), "goals": gl,
                      "wall_s": time.perf_counter() - t0}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
