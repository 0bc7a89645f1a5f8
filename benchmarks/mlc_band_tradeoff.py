"""The MLC's saturator band against FCT, MRAE and utilisation: the trade-off behind Delta_u's default.

The MLC moves the campus rate u within +-Delta_u x B_max of the trivial rate (MLC Fig. 5). A
wider band lets it lower u further, so the DTN can finish sooner, but a campus held lower than
the DTN can fill leaves the link idle. For each band this re-runs the GA (same model, same
sizes) and then paired MLC-vs-trivial trials: the 10 GB FCT at a 50 % target (with the
utilisation of those trials, MLC section 4.3) and the stepping-target MRAE (section 4.2), on the
fluid plant. Uses the inverse models of a finished reproduction (``scidmz reproduce mlc --out
DIR``: DIR/cubic/model, DIR/bbr2/model). Prints one JSON object.

    python benchmarks/mlc_band_tradeoff.py --from reports/mlc [--bands 0.02,0.05,0.1,0.2] [--trials 40]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCENARIOS = {"cubic": "paper-cubic", "bbr2": "paper-bbr2"}


def one_band(cca: str, model: Path, band: float, trials: int, generations: int, population: int,
             seed: int, work: Path) -> dict[str, Any]:
    from scidmz.evaluation.mlc.experiments import ExperimentPlan, fct_experiment, mrae_experiment
    from scidmz.models.predictor import load_predictor
    from scidmz.policies import TrivialPolicy
    from scidmz.policies.rate.mlc import Gains, MLCPolicy
    from scidmz.scenario import load_scenario
    from scidmz.tuning.run import tune_from_paths

    sc = load_scenario(SCENARIOS[cca])
    out = work / f"{cca}-{band:g}"
    t0 = time.time()
    tu, _ = tune_from_paths(sc, str(model), str(out), generations=generations, population=population,
                            parents=max(2, population // 2), seed=seed, delta_u=band, track=False)
    gains = Gains.load(out / "gains.json")
    policies = {"mlc": MLCPolicy(load_predictor(model), gains), "trivial": TrivialPolicy()}
    plan = ExperimentPlan(trials=trials, seed=seed)
    fct, util = fct_experiment(sc, policies, plan)
    mrae = mrae_experiment(sc, policies, plan)
    f, u, m = fct.summary, util.summary, mrae.summary
    return {
        "cca": cca, "delta_u": band,
        "gains": {"kp": gains.kp, "ki": gains.ki, "kw": gains.kw},
        "fct_mlc_s": f["mlc"]["mean"], "fct_trivial_s": f["trivial"]["mean"], "fct_ideal_s": f["ideal_s"],
        "fct_reduction_pct": f["mlc"]["reduction_pct"], "fct_paired_p": f["mlc"]["paired_p"],
        "fct_paired_wins": f["mlc"]["paired_wins"],
        "utilization_mlc": u["mlc"]["mean"], "utilization_trivial": u["trivial"]["mean"],
        "utilization_decrease_pct": u["mlc"]["decrease_pct"],
        "mrae_mlc": m["mlc"]["mean"], "mrae_trivial": m["trivial"]["mean"],
        "mrae_reduction_pct": m["mlc"]["reduction_pct"], "mrae_paired_p": m["mlc"]["paired_p"],
        "wall_s": time.time() - t0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="src", required=True, help="a `scidmz reproduce mlc` output directory")
    ap.add_argument("--bands", default="0.02,0.05,0.1,0.2", help="Delta_u values, fractions of B_max")
    ap.add_argument("--cca", default="cubic,bbr2")
    ap.add_argument("--trials", type=int, default=40, help="paired trials per experiment and band")
    ap.add_argument("--generations", type=int, default=100)
    ap.add_argument("--population", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    try:
        bands = [float(b) for b in a.bands.split(",")]
    except ValueError:
        print(f"mlc_band_tradeoff: --bands must be comma-separated numbers, got {a.bands!r}", file=sys.stderr)
        return 2
    ccas = a.cca.split(",")
    for cca in ccas:
        if cca not in SCENARIOS:
            print(f"mlc_band_tradeoff: --cca must be among {', '.join(SCENARIOS)}, got {cca!r}", file=sys.stderr)
            return 2
        if not (Path(a.src) / cca / "model").is_dir():
            print(f"mlc_band_tradeoff: no inverse model at {Path(a.src) / cca / 'model'}", file=sys.stderr)
            return 2
    if not all(0 < b <= 1 for b in bands):
        print("mlc_band_tradeoff: every band must be in (0, 1]", file=sys.stderr)
        return 2
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="scidmz-band-") as tmp:
        rows = [one_band(cca, Path(a.src) / cca / "model", b, a.trials, a.generations, a.population, a.seed,
                         Path(tmp)) for cca in ccas for b in bands]
    print(json.dumps({"benchmark": "mlc_band_tradeoff", "from": a.src, "trials": a.trials,
                      "ga": [a.generations, a.population], "results": rows, "wall_s": time.time() - t0}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
