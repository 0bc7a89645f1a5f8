"""Fidelity numbers of the fluid plant against the papers and the literature; prints one JSON object.

    python benchmarks/fidelity.py [--quick]

See scidmz.plant.fluid.fidelity for the experiments and docs/fluid_model.md
for how the numbers compare with the literature.
"""

from __future__ import annotations

import argparse
import json
import time

from scidmz.plant.fluid.fidelity import run_all


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="half the simulated durations")
    a = ap.parse_args()
    t0 = time.perf_counter()
    result = run_all(quick=a.quick)
    result["wall_s"] = time.perf_counter() - t0
    print(json.dumps(result))


if __name__ == "__main__":
    main()
