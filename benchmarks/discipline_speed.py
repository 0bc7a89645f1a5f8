"""Decisions per second of the ABC and FFS numba cores; prints one JSON object.

    python benchmarks/discipline_speed.py [--packets 2000000] [--repeat 3]

Each core decides the same kind of packet sequence a bottleneck sees (Poisson
arrivals, 1500 B, several aggregates/ingresses, congested so every branch
runs). Goal: >= 5 M decisions/s per core (issue 12). ``*_per_s`` uses the best
wall time of ``--repeat`` runs; ``*_cpu_per_s`` the process CPU time of that
run, which estimates an idle machine when others share the cores.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def _timed(fn, repeat: int) -> tuple[float, float]:
    best_w, best_c = float("inf"), float("inf")
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        w, c = time.perf_counter() - w0, time.process_time() - c0
        if w < best_w:
            best_w, best_c = w, c
    return best_w, best_c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    from scidmz.disciplines import abc, ffs

    n = a.packets
    rng = np.random.default_rng(a.seed)
    ts = np.cumsum(rng.exponential(1500 * 8 / 100e6, n))  # 100 Mbit/s offered
    sizes = np.full(n, 1500.0)
    aggs = rng.integers(0, 4, n)
    out: dict[str, float | int] = {"packets": n}

    acfg = abc.ABCConfig(capacity_bps=50e6)
    acc = np.zeros(n, np.bool_)

    def run_abc() -> None:
        meter, avg = abc.new_state(4)
        abc.abc_run_fifo(meter, avg, acfg.params(), aggs, ts, sizes, 50e6, acc)

    run_abc()  # compile / load cache
    w, c = _timed(run_abc, a.repeat)
    out.update(abc_wall_s=w, abc_per_s=n / w, abc_cpu_per_s=n / max(c, 1e-9), abc_accepted=int(acc.sum()))

    fcfg = ffs.FFSConfig(capacity_bps=50e6, matrix_col_bps=(25e6, 25e6))
    ing = (aggs % 2).astype(np.int64)
    r0 = rng.uniform(5e6, 60e6, n)
    f0 = rng.uniform(5e6, 60e6, n)
    u = rng.random(n)
    tau = np.zeros(n)

    def run_ffs() -> None:
        st, ist = fcfg.new_state()
        ffs.ffs_run(st, ist, fcfg.params(), fcfg.matrix, ing, ts, sizes, r0.copy(), f0.copy(),
                    np.full(n, np.inf), u, acc, tau)

    run_ffs()
    w, c = _timed(run_ffs, a.repeat)
    out.update(ffs_wall_s=w, ffs_per_s=n / w, ffs_cpu_per_s=n / max(c, 1e-9), ffs_accepted=int(acc.sum()))

    rfc = np.array([ffs.log_encode(x, 1e-3, 1e3, 8) for x in (r0[:1000] / f0[:1000])], np.int64)
    rf_code = np.resize(rfc, n)
    rri = np.full(n, ffs.log_encode(1.0, 1e-3, 1e3, 8), np.int64)

    def run_compact() -> None:
        st, ist = fcfg.new_state()
        ffs.ffs_compact_run_encoded(st, ist, fcfg.params(), fcfg.matrix, ing, ts, sizes, rf_code.copy(),
                                    rri.copy(), u, 1e-3, 1e3, 8, acc)

    run_compact()
    w, c = _timed(run_compact, a.repeat)
    out.update(ffs_compact_wall_s=w, ffs_compact_per_s=n / w, ffs_compact_cpu_per_s=n / max(c, 1e-9))
    out["goal_per_s"] = 5e6
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
