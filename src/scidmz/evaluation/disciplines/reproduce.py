"""``scidmz reproduce abc|ffs``: the ABC and FFS papers' numbers, run, written to results.json, rendered.

Packet-level parts run the numba decision cores directly (``disciplines.packet``);
the congestion-controlled parts (ABC Fig. 5/6, FFS Table III and section IX) run
on the fluid plant through the runner (``disciplines.fluid``) and, with
``netns``, on the kernel (``disciplines.netns``, root). The report is a
separate pass over the results file (``disciplines.report``), so ``render_only``
rewrites it without running anything; ``keep_netns`` re-runs everything but the
kernel parts, which it keeps from the earlier results file.

results.json (``evaluation.results`` format, plus) -- ABC: ``duration_s``,
``seed``, ``rows`` (Fig. 4: per R_0 the FIFO's and ABC's goodput of both
clients, bit/s), ``fluid_tcp_rows`` (Fig. 5, per N), ``fluid_cbr_tcp_rows``
(Fig. 6, per R_0), ``fluid_duration_s``; with the kernel: ``netns_rows``,
``netns_tcp_rows``, ``netns_cbr_tcp_rows`` (+ stage drops), ``netns_seconds``.
FFS: Table II's ``exact_ffs_bps``, ``exact_tau``, ``hwfq_bps``, ``packet_core_bps``,
``packet_core_tau_mean`` (with the inputs ``rates_bps``, ``fair_bps``),
``fluid_table3`` / ``netns_table3`` (per scheme F, U, L2, L50, J2, J50 in % and
per pair), ``fluid_rate_feedback`` (loss % and FCT per sender, streams, size).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..render import write_report
from ..results import provenance, read_results, write_json
from . import fluid

__all__ = ["run_abc", "run_ffs", "reproduce_discipline", "NETNS_KEYS"]

#: The kernel parts of each paper's results file (what ``--keep-netns`` keeps).
NETNS_KEYS = {"abc": ("netns_rows", "netns_seconds", "netns_tcp_rows", "netns_cbr_tcp_rows"),
              "ffs": ("netns_table3",)}


def _prefix(tag: str) -> str:
    return f"{tag}{os.getpid() % 10000}"


def run_abc(quick: bool, seed: int, netns: bool) -> dict[str, Any]:
    """ABC Figs. 4-6: the packet core (Fig. 4), the fluid plant (Figs. 5, 6), with ``netns`` the kernel."""
    from .packet import abc_cbr_netns, abc_cbr_rows

    duration = 30.0 if quick else 300.0
    rates = [10e6, 20e6, 30e6, 40e6, 50e6, 60e6, 80e6, 100e6]
    res: dict[str, Any] = {
        "experiment": "ABC Fig. 4, CBR vs CBR (client 1 at 40 Mbit/s)", "duration_s": duration, "seed": seed,
        "plant": "packet-level numba core in front of a 50 Mbit/s FIFO (no transport)",
        "rows": abc_cbr_rows(rates, duration, seed)}
    fl_dur = 60.0 if quick else 300.0
    res["fluid_tcp_rows"] = fluid.abc_tcp_flows([1, 4] if quick else [1, 2, 4, 8, 16], fl_dur, seed)
    res["fluid_cbr_tcp_rows"] = fluid.abc_cbr_vs_tcp(
        [20e6, 60e6] if quick else [10e6, 20e6, 30e6, 40e6, 50e6, 60e6, 80e6, 100e6, 200e6], fl_dur, seed)
    res["fluid_duration_s"] = fl_dur
    if netns:
        from . import netns as testbed

        res["netns_rows"] = abc_cbr_netns([20e6, 60e6] if quick else [20e6, 40e6, 60e6, 100e6],
                                          8.0 if quick else 20.0, _prefix("dqr"))
        ksec = 20.0 if quick else 60.0
        res["netns_seconds"] = ksec
        res["netns_tcp_rows"] = testbed.abc_tcp_flows([4] if quick else [1, 2, 4, 8], ksec, _prefix("dqk"))
        res["netns_cbr_tcp_rows"] = testbed.abc_cbr_vs_tcp([60e6] if quick else [20e6, 40e6, 60e6, 100e6], ksec,
                                                          _prefix("dqc"))
    return res


def run_ffs(quick: bool, seed: int, netns: bool) -> dict[str, Any]:
    """FFS Table II (packet core), Table III and section IX (fluid plant), with ``netns`` Table III on the kernel."""
    from .packet import ffs_table2
    from .paper import TABLE_II

    res: dict[str, Any] = {"experiment": "FFS Table II", "paper_ffs_gbps": TABLE_II["ffs"],
                           "paper_hwfq_gbps": TABLE_II["hwfq"], **ffs_table2(0.2 if quick else 1.0, seed),
                           "seed": seed}
    res["fluid_table3"] = fluid.ffs_table3(fluid.FLUID_CCAS, 30.0 if quick else 60.0, seed)
    if netns:
        from . import netns as testbed

        res["netns_table3"] = testbed.ffs_table3(testbed.KERNEL_CCAS, 20.0 if quick else 60.0, _prefix("dqf"))
    res["fluid_rate_feedback"] = fluid.ffs_rate_feedback(sizes=(1e6, 10e6), seed=seed)
    return res


def _plots_abc(res: dict[str, Any], out: Path) -> None:
    from ...plots import plot_goodput_pairs, save_figure

    save_figure(plot_goodput_pairs(res["rows"], "r0_bps", "R_0 (Mbit/s)", ("client 0 (R_0)", "client 1 (40 Mbit/s)"),
                                   scale=1e-6), out / "cbr_vs_cbr.png")
    save_figure(plot_goodput_pairs(res["fluid_tcp_rows"], "n_flows", "client 0's TCP connections",
                                   ("client 0 (N connections)", "client 1 (1 connection)")), out / "tcp_flows.png")
    save_figure(plot_goodput_pairs(res["fluid_cbr_tcp_rows"], "r0_bps", "R_0 (Mbit/s)",
                                   ("client 0 (CBR R_0)", "client 1 (1 TCP connection)"), scale=1e-6),
                out / "cbr_vs_tcp.png")


_RUN: dict[str, Callable[[bool, int, bool], dict[str, Any]]] = {"abc": run_abc, "ffs": run_ffs}
_PLOTS: dict[str, Callable[[dict[str, Any], Path], None]] = {"abc": _plots_abc, "ffs": lambda res, out: None}


def _render(paper: str, res: dict[str, Any], out: Path, notes: str | None) -> Path:
    from .report import render_abc, render_ffs

    text = (render_abc if paper == "abc" else render_ffs)(res, out, notes)
    return write_report(text, out)


def _kept_netns(paper: str, out: Path) -> dict[str, Any]:
    """The kernel parts of an earlier run's results file, and a note saying where they came from."""
    old = read_results(out / "results.json", f"scidmz reproduce {paper} --netns --out {out}")
    kept = {k: old[k] for k in NETNS_KEYS[paper] if k in old}
    if not kept:
        raise ValueError(f"--keep-netns: {out}/results.json has no kernel part (run with --netns once)")
    meta = old.get("meta") or {}
    when = (f"commit {meta['git_commit']}, {meta['generated']}" if meta.get("git_commit")
            else "a run before results files recorded their commit")
    kept["netns_note"] = old.get("netns_note") or (
        f"The kernel rows are kept from an earlier run ({when}); the packet-level and fluid parts "
        "were re-run (`--keep-netns`).")
    return kept


def reproduce_discipline(paper: str, out: str | os.PathLike[str] | None, quick: bool, seed: int, netns: bool,
                         render_only: bool = False, keep_netns: bool = False, notes: str | None = None,
                         command: str | None = None) -> dict[str, Any]:
    """``scidmz reproduce abc|ffs``: run (or, ``render_only``, read) the results, write the report;
    returns a JSON-able summary."""
    if paper not in _RUN:
        raise ValueError(f"unknown discipline paper {paper!r} (choose from {', '.join(_RUN)})")
    d = Path(out or (f"reports/{paper}-quick" if quick else f"reports/{paper}"))
    if render_only:
        res = read_results(d / "results.json", f"scidmz reproduce {paper} --out {d}")
        res.setdefault("meta", {})["rendered"] = command or f"scidmz reproduce {paper} --render-only"
    else:
        kept = _kept_netns(paper, d) if keep_netns else {}
        cmd = command or f"scidmz reproduce {paper}{' --quick' if quick else ''}{' --netns' if netns else ''}"
        with provenance(cmd) as prov:
            res = {**_RUN[paper](quick, seed, netns), **kept}
        res["meta"] = prov.meta()
        d.mkdir(parents=True, exist_ok=True)
        write_json(res, d / "results.json", indent=1)
        _PLOTS[paper](res, d)
    report = _render(paper, res, d, notes)
    if paper == "abc":
        summary: dict[str, Any] = {"points": len(res["rows"]), "netns": "netns_rows" in res}
    else:
        summary = {"exact_tau": res["exact_tau"], "packet_core_tau": res["packet_core_tau_mean"],
                   "table3": {k: {m: v[m] for m in ("F", "U", "L2", "L50", "J2", "J50")}
                              for k, v in res["fluid_table3"]["schemes"].items()}}
    return {"paper": paper, "out": str(d), "report": str(report), **summary}

