"""Does the MLC's inverse ANN beat ``pi`` once its saturator gives it authority?

Within the default +-0.02 B_max band around the trivial rate, the ANN's u_hat is
clipped to almost where the trivial rate is, so ``mlc`` and ``pi`` (the same
anti-windup PI without the model, ``policies.rate.pi``) can hardly differ. This
benchmark gives the model room: for each saturator configuration — the band
reading (``limiter = band``, Delta_u in --bands) and the slew-rate reading of
Fig. 5's +-Delta_u(t) (``limiter = rate``, Delta_u in --rate-bands) — it GA-tunes
``mlc`` and ``pi`` separately (the same GA, ``scidmz tune``, at the sizes given),
then runs both and the trivial TBF on the same paired trials of the fluid plant
at paper scale: the stepping-target MRAE (MLC section 4.2) and the 10 GB FCT at
R* = 0.5 B_max with its utilisation (section 4.3).

Tuning apart from testing: every configuration is run on the *selection* trials
(``--select-seed``, ``--select-trials``), each policy's best (lowest mean MRAE there) is
chosen on them, and only the two bests and the trivial TBF are then judged on the
*evaluation* trials (``--seed``, ``--trials``): ``mlc`` vs ``pi`` paired there. The plan
refuses, in one line, selection or GA seeds that overlap the evaluation's
(``leaderboard.plan.check_tuning_apart``). Each best is tuned again with ``--ga-seeds``
GA seeds (default 5) and each run on the evaluation trials: the spread of its mean MRAE
across GA seeds is reported, and a mlc-pi difference smaller than that spread is never
called a finding (``verdict.saturator_verdict``). Results written before this rule (no
``plan.selection``) selected on their test trials; their report says so.

The inverse models are the paper-scale ones shipped in ``scidmz/datasets/models`` (made by a
full ``scidmz reproduce mlc``), or those of a finished reproduction given with ``--from DIR``
(``DIR/cubic/model``, ``DIR/bbr2/model``). Deterministic (seeded GA, seeded
trials): re-running it with the same models gives the same numbers. Prints one
JSON object (and writes it to --out).

The full study is hours of CPU (28 GA runs at paper scale for the selection, and 4 more GA seeds
for each policy's best per CCA: 44), so ``--work DIR`` keeps each
finished configuration (its tuned gains and its paired trial tables) in DIR, written
atomically as it finishes; a re-run with the same DIR reuses them and runs only the
rest. DIR records what it was made with (the plan, the package's sources, the models'
files) and a re-run that differs in any of them is refused with one line (ours: mixing
configurations from two versions of the fluid plant would not be a paired study).

With ``--out DIR/results.json`` it also writes ``DIR/report.md``, rendered from that file
(``evaluation/templates/saturator_report.md.j2``); ``--render-only DIR/results.json``
rewrites the report alone, without rerunning (Flent's model: plotting is a separate pass).

    python benchmarks/pi_vs_mlc_saturator.py [--from DIR] [--cca cubic,bbr2] [--trials 50] [--select-seed S]
        [--select-trials N] [--ga-seeds 5] [--work W] --out F.json
    python benchmarks/pi_vs_mlc_saturator.py --render-only F.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCENARIOS = {"cubic": "paper-cubic", "bbr2": "paper-bbr2"}
POLICIES = ("mlc", "pi")


def _paired(table: Any, col: str, a: str, b: str) -> dict[str, Any]:
    """``a`` vs ``b`` on the same trials: mean difference (a - b), trials where a is lower, Wilcoxon p."""
    from scidmz.evaluation.stats import wilcoxon_p

    w = table.pivot(index="trial", columns="policy", values=col)[[a, b]].dropna()
    d = (w[a] - w[b]).to_numpy()
    p = wilcoxon_p(w[a].to_numpy(), w[b].to_numpy()) if len(d) else 1.0
    return {"n": int(len(d)), "mean_diff": float(d.mean()) if len(d) else float("nan"),
            f"{a}_lower": int((d < 0).sum()), f"{b}_lower": int((d > 0).sum()), "wilcoxon_p": p}


def _means(table: Any, col: str) -> dict[str, float]:
    return {str(k): float(v) for k, v in table.groupby("policy")[col].mean().items()}


def _tune(cca: str, policy: str, model: Path, limiter: str, du: float, a: argparse.Namespace,
          work: Path, ga_seed: int | None = None, reuse: bool = False) -> tuple[Any, dict[str, Any]]:
    from scidmz.policies.rate.antiwindup import Gains
    from scidmz.tuning.run import tune_from_paths

    ga_seed = a.seed if ga_seed is None else ga_seed
    tail = "" if ga_seed == a.seed else f"-ga{ga_seed}"
    out = work / f"{cca}-{policy}-{limiter}-{du:g}{tail}.json"
    if reuse and out.is_file():  # tuned for the selection already: the same GA and seed, the same gains
        g = Gains.load(out)
        return g, {"gains": {"kp": g.kp, "ki": g.ki, "kw": g.kw}, "reused": str(out.name)}
    t0 = time.perf_counter()
    doc, _ = tune_from_paths(SCENARIOS[cca], str(model) if policy == "mlc" else None, str(out), policy=policy,
                             generations=a.generations, population=a.population, episode=_ga_episode(a),
                             parents=max(1, a.population // 2), seed=ga_seed, delta_u=du, limiter=limiter,
                             workers=a.workers, track=False)
    g = Gains.load(out)
    return g, {"gains": {"kp": g.kp, "ki": g.ki, "kw": g.kw}, "best_iae": doc["best_iae"],
               "ga_seconds": round(time.perf_counter() - t0, 2)}


def _ga_episode(a: argparse.Namespace) -> float:
    return 30.0 if a.quick else 120.0


def _trials(sc: Any, policies: dict[str, Any], a: argparse.Namespace, select: bool = False) -> tuple[Any, Any]:
    """(MRAE table, FCT table) of ``policies`` on the paired evaluation trials (seed ``a.seed``), or with
    ``select`` on the selection trials (seed ``a.select_seed``)."""
    from dataclasses import replace

    from scidmz.evaluation.mlc.experiments import ExperimentPlan, fct_experiment, mrae_experiment

    seed, n, nf = (a.select_seed, a.select_trials, a.select_trials) if select else (a.seed, a.trials, a.fct_trials)
    base = ExperimentPlan.quick(seed) if a.quick else ExperimentPlan(seed=seed)
    plan = replace(base, trials=n, fct_trials=nf)
    m = mrae_experiment(sc, policies, plan)
    f, _ = fct_experiment(sc, policies, plan)
    return m.table, f.table


def _targets(sc: Any, a: argparse.Namespace) -> dict[str, list[str]]:
    """The evaluation trials' target hashes, as a leaderboard's results record them (``trialunits.target_hashes``):
    what shows another run judged the same trials."""
    from dataclasses import replace

    from scidmz.evaluation.leaderboard.trialunits import target_hashes
    from scidmz.evaluation.mlc.experiments import ExperimentPlan

    base = ExperimentPlan.quick(a.seed) if a.quick else ExperimentPlan(seed=a.seed)
    return target_hashes(replace(base, trials=a.trials, fct_trials=a.fct_trials).core(("mrae", "fct")), sc)


def _cached(work: Path, name: str, compute: Any) -> Any:
    """``compute()``'s (payload, mrae table, fct table), kept in ``work/name.json`` once it finished (the
    resume of ``--work``); the tables round-trip as records."""
    import pandas as pd

    from scidmz.fileio import atomic_write_text, parse_json, read_member

    path = work / f"{name}.json"
    raw = read_member(path, "--work file")  # never through a link, only a regular file of its own
    if raw is not None:
        doc = parse_json(raw, f"--work file {path}")
        print(f"{name}: reused from {path}", file=sys.stderr, flush=True)
        return doc["payload"], pd.DataFrame.from_records(doc["mrae"]), pd.DataFrame.from_records(doc["fct"])
    payload, m, f = compute()
    doc = {"payload": payload, "mrae": m.to_dict(orient="records"), "fct": f.to_dict(orient="records")}
    atomic_write_text(path, json.dumps(doc, default=str) + "\n")
    return payload, m, f


def one_cca(cca: str, model: Path, configs: list[tuple[str, float]], a: argparse.Namespace,
            work: Path) -> dict[str, Any]:
    import pandas as pd

    from scidmz.models.predictor import load_predictor
    from scidmz.policies import TrivialPolicy
    from scidmz.policies.rate.mlc import MLCPolicy
    from scidmz.policies.rate.pi import PIPolicy
    from scidmz.scenario import load_scenario

    sc = load_scenario(SCENARIOS[cca])
    predictor = load_predictor(model)
    t0 = time.perf_counter()
    _, m_triv, f_triv = _cached(work, f"{cca}-trivial-select",
                                lambda: (None, *_trials(sc, {"trivial": TrivialPolicy()}, a, select=True)))
    rows: list[dict[str, Any]] = []
    for limiter, du in configs:
        def tuned_trials(limiter: str = limiter, du: float = du) -> tuple[dict[str, Any], Any, Any]:
            tuned: dict[str, Any] = {}
            pols = {}
            for name in POLICIES:
                g, tuned[name] = _tune(cca, name, model, limiter, du, a, work)
                pols[name] = MLCPolicy(predictor, g) if name == "mlc" else PIPolicy(g)
            return (tuned, *_trials(sc, pols, a, select=True))

        tuned, m, f = _cached(work, f"{cca}-{limiter}-{du:g}-select", tuned_trials)
        row: dict[str, Any] = {"limiter": limiter, "delta_u": du, **tuned}
        m, f = pd.concat([m, m_triv]), pd.concat([f, f_triv])
        mm, fm, um = _means(m, "mrae"), _means(f, "fct"), _means(f, "utilization")
        for name in POLICIES:
            row[name].update({"mrae": mm[name], "fct_s": fm[name], "utilization": um[name],
                              "mrae_vs_trivial": _paired(m, "mrae", name, "trivial"),
                              "fct_unfinished": int((~f[f["policy"] == name]["finished"]).sum())})
        row["mlc_vs_pi"] = {"mrae": _paired(m, "mrae", "mlc", "pi"), "fct": _paired(f, "fct", "mlc", "pi"),
                            "utilization": _paired(f, "utilization", "mlc", "pi")}
        rows.append(row)
        print(f"{cca} {limiter} {du:g}: MRAE mlc {mm['mlc']:.4f} pi {mm['pi']:.4f} trivial {mm['trivial']:.4f}; "
              f"FCT mlc {fm['mlc']:.1f} pi {fm['pi']:.1f} s", file=sys.stderr, flush=True)
    _, m_eval, f_eval = _cached(work, f"{cca}-trivial",
                                lambda: (None, *_trials(sc, {"trivial": TrivialPolicy()}, a)))
    best = _best(rows, lambda name, r: _judged(cca, name, r, model, predictor, sc, a, work), (m_eval, f_eval))
    return {"scenario": sc.name, "model": str(model), "model_meta": _model_meta(model),
            "targets": _targets(sc, a),
            "trivial": {"mrae": float(m_eval["mrae"].mean()), "fct_s": float(f_eval["fct"].mean()),
                        "utilization": float(f_eval["utilization"].mean())},
            "trivial_selection": {"mrae": float(m_triv["mrae"].mean())},
            "configs": rows, "best": best, "wall_s": round(time.perf_counter() - t0, 1)}


def _judged(cca: str, name: str, row: dict[str, Any], model: Path, predictor: Any, sc: Any, a: argparse.Namespace,
            work: Path) -> tuple[Any, Any, list[float]]:
    """A selected configuration on the evaluation trials: (MRAE table, FCT table) of its GA seed
    ``a.seed`` gains, and its mean MRAE there under each of the ``a.ga_seeds`` GA seeds."""
    from scidmz.policies.rate.mlc import MLCPolicy
    from scidmz.policies.rate.pi import PIPolicy

    lim, du = row["limiter"], row["delta_u"]
    tables, means = None, []
    for g in range(a.ga_seeds):
        def run(g: int = g) -> tuple[Any, Any, Any]:
            gains, info = _tune(cca, name, model, lim, du, a, work, ga_seed=a.seed + g, reuse=g == 0)
            pol = MLCPolicy(predictor, gains) if name == "mlc" else PIPolicy(gains)
            return (info, *_trials(sc, {name: pol}, a))

        _, m, f = _cached(work, f"{cca}-{name}-{lim}-{du:g}-ga{a.seed + g}-eval", run)
        means.append(float(m["mrae"].mean()))
        tables = (m, f) if tables is None else tables
    assert tables is not None  # a.ga_seeds >= 1 (_args)
    return (*tables, means)


def _best(rows: list[dict[str, Any]], judge: Any, trivial: tuple[Any, Any]) -> dict[str, Any]:
    """Each policy's configuration with the lowest mean MRAE on the selection trials, judged on the
    evaluation trials (``judge(name, row)``: its tables there and its MRAE per GA seed); the two
    bests paired against each other there, and each one's spread across GA seeds."""
    import pandas as pd

    out: dict[str, Any] = {}
    ms, fs = [trivial[0]], [trivial[1]]
    for name in POLICIES:
        r = min(rows, key=lambda r, n=name: r[n]["mrae"])
        m, f, per_seed = judge(name, r)
        out[name] = {"limiter": r["limiter"], "delta_u": r["delta_u"], "gains": r[name]["gains"],
                     "selection_mrae": r[name]["mrae"], "mrae": float(m["mrae"].mean()),
                     "fct_s": float(f["fct"].mean()), "utilization": float(f["utilization"].mean()),
                     "mrae_by_ga_seed": per_seed, "ga_spread": max(per_seed) - min(per_seed)}
        ms.append(m)
        fs.append(f)
    m, f = pd.concat(ms), pd.concat(fs)
    for name in POLICIES:
        out[name]["mrae_vs_trivial"] = _paired(m, "mrae", name, "trivial")
    out["ga_spread"] = max(out[n]["ga_spread"] for n in POLICIES)
    out["mlc_vs_pi"] = {"mrae": _paired(m, "mrae", "mlc", "pi"), "fct": _paired(f, "fct", "mlc", "pi"),
                        "utilization": _paired(f, "utilization", "mlc", "pi")}
    b, p = out["mlc"], out["pi"]
    out["trade_off"] = (
        f"best mlc ({b['limiter']} {b['delta_u']:g}): MRAE {b['mrae']:.4f}, FCT {b['fct_s']:.1f} s, "
        f"utilisation {b['utilization']:.4f}; best pi ({p['limiter']} {p['delta_u']:g}): MRAE {p['mrae']:.4f}, "
        f"FCT {p['fct_s']:.1f} s, utilisation {p['utilization']:.4f}; mlc lower MRAE in "
        f"{out['mlc_vs_pi']['mrae']['mlc_lower']}/{out['mlc_vs_pi']['mrae']['n']} paired trials "
        f"(Wilcoxon p = {out['mlc_vs_pi']['mrae']['wilcoxon_p']:.3g})"
    )
    return out


def render_report(results: Path) -> Path:
    """``report.md`` beside ``results`` (this benchmark's JSON), rendered from it alone."""
    from scidmz.evaluation.render import render, write_report
    from scidmz.evaluation.verdict import saturator_verdict

    doc = json.loads(results.read_text())
    if doc.get("benchmark") != "pi_vs_mlc_saturator":
        raise ValueError(f"{results} is not a pi_vs_mlc_saturator results file")
    verdicts = {cca: saturator_verdict(res["best"]) for cca, res in doc["results"].items()}
    return write_report(render("saturator_report.md.j2", results.parent, doc=doc, verdicts=verdicts),
                        results.parent)


def _model_meta(model: Path) -> dict[str, Any]:
    from scidmz.tracking import file_sha256

    meta = json.loads((model / "meta.json").read_text())
    return {"weights_sha256": file_sha256(model / "weights.npz"), "dataset_sha256": meta.get("dataset_sha256"),
            "scenario_fingerprint": meta.get("scenario_fingerprint")}


def _provenance() -> dict[str, Any]:
    import scidmz

    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--", "../src"],
                                    capture_output=True, text=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = None, None
    return {"scidmz_version": getattr(scidmz, "__version__", None), "git_commit": commit, "src_dirty": dirty,
            "machine": {"cpus": os.cpu_count(), "arch": platform.machine(), "kernel": platform.release()},
            "load_start": list(os.getloadavg())}


def _floats(text: str, what: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{what} must be comma-separated numbers, got {text!r}") from None
    if not all(0 < v <= 1 for v in vals):
        raise ValueError(f"{what}: every Delta_u must be a fraction of B_max in (0, 1]")
    return vals


def _model(src: str | None, cca: str) -> Path:
    """The inverse model for ``cca``: ``src/cca/model``, else the one shipped for its paper scenario."""
    if src is not None:
        return Path(src) / cca / "model"
    from scidmz.datasets import shipped_model
    from scidmz.scenario import load_scenario

    found = shipped_model(load_scenario(SCENARIOS[cca]))
    return found[0] if found else Path(f"<no model shipped for {SCENARIOS[cca]}>")


def _args(argv: list[str] | None) -> tuple[argparse.Namespace, list[tuple[str, float]], list[str]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="src", default=None,
                    help="a `scidmz reproduce mlc --out DIR` directory (default: the shipped paper-scale models)")
    ap.add_argument("--cca", default="cubic,bbr2", help="comma list of cubic, bbr2 (default both)")
    ap.add_argument("--bands", default="0.02,0.05,0.1,0.2", help="Delta_u of the band reading (fractions of B_max)")
    ap.add_argument("--rate-bands", default="0.02,0.05,0.1", help="Delta_u of the slew-rate reading ('' for none)")
    ap.add_argument("--trials", type=int, default=50, help="paired MRAE trials per policy (default 50)")
    ap.add_argument("--fct-trials", type=int, default=None, help="paired FCT trials (default: --trials)")
    ap.add_argument("--generations", type=int, default=100, help="GA generations (default 100, Table 2)")
    ap.add_argument("--population", type=int, default=30, help="GA population (default 30)")
    ap.add_argument("--seed", type=int, default=0, help="the evaluation trials' seed (trial i: seed + i)")
    ap.add_argument("--select-seed", type=int, default=None,
                    help="the selection trials' seed (default: just past the evaluation trials' seeds)")
    ap.add_argument("--select-trials", type=int, default=None, help="selection trials (default: --trials)")
    ap.add_argument("--ga-seeds", type=int, default=5,
                    help="GA seeds each selected configuration is tuned with, for its spread (default 5)")
    ap.add_argument("--workers", type=int, default=0,
                    help="GA fitness over N processes (the same gains as one; not part of the plan)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke-test sizes: 30 s trials and GA episodes, a 150 MB transfer (not for conclusions)")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    ap.add_argument("--work", default=None, metavar="DIR",
                    help="keep finished configurations in DIR and reuse them on a re-run (resume); default: none kept")
    ap.add_argument("--render-only", default=None, metavar="F.json",
                    help="rewrite report.md beside F.json from it alone, no run")
    a = ap.parse_args(argv)
    if a.render_only:
        return a, [], []
    ccas = [c.strip() for c in a.cca.split(",") if c.strip()]
    bad = [c for c in ccas if c not in SCENARIOS]
    if bad or not ccas:
        raise ValueError(f"--cca must be among {', '.join(SCENARIOS)}, got {a.cca!r}")
    for c in ccas:
        if not (_model(a.src, c) / "meta.json").is_file():
            raise ValueError(f"no inverse model at {_model(a.src, c)} (make it: scidmz reproduce mlc --out DIR)")
    if a.trials < 2 or (a.fct_trials is not None and a.fct_trials < 2):
        raise ValueError("--trials and --fct-trials must be >= 2 (paired tests)")
    a.fct_trials = a.fct_trials or a.trials
    a.select_trials = a.select_trials or a.trials
    a.select_seed = a.seed + max(a.trials, a.fct_trials) if a.select_seed is None else a.select_seed
    if a.ga_seeds < 1 or a.select_trials < 1:
        raise ValueError("--ga-seeds and --select-trials must be >= 1")
    _apart(a)
    if a.workers < 0:
        raise ValueError("--workers must be >= 0")
    if a.generations < 1 or a.population < 2:
        raise ValueError("the GA needs --generations >= 1 and --population >= 2")
    configs = [("band", v) for v in _floats(a.bands, "--bands")]
    configs += [("rate", v) for v in (_floats(a.rate_bands, "--rate-bands") if a.rate_bands.strip() else [])]
    if not configs:
        raise ValueError("no saturator configuration given (--bands, --rate-bands)")
    return a, configs, ccas


def _apart(a: argparse.Namespace) -> None:
    """Selection trials and GA fitness episodes on seeds apart from the evaluation trials (one line)."""
    from scidmz.evaluation.leaderboard.plan import check_tuning_apart, seed_block
    from scidmz.tuning.ga import _SEED_OFFSET

    # the GA's fitness episodes run on plant seeds GA seed + _SEED_OFFSET (+ episode)
    check_tuning_apart(seed_block(a.seed, max(a.trials, a.fct_trials)),
                       selection=seed_block(a.select_seed, a.select_trials),
                       GA=seed_block(a.seed + _SEED_OFFSET, a.ga_seeds))


def _identity(doc: dict[str, Any], a: argparse.Namespace, ccas: list[str]) -> dict[str, Any]:
    """What a ``--work`` directory's results depend on: the plan, the package's sources, the models."""
    from scidmz.evaluation.leaderboard.ledger import code_identity, files_sha256

    return {"plan": doc["plan"], "code": code_identity()["sha256"],
            "models": {c: files_sha256(_model(a.src, c)) for c in ccas}}


def _open_work(work: Path, ident: dict[str, Any]) -> None:
    """Record ``ident`` in a new ``work``, or check an existing one holds the same (ValueError: one line)."""
    from scidmz.fileio import atomic_write_text, parse_json, read_member

    path = work / "identity.json"
    raw = read_member(path, "--work file")  # never through a link, only a regular file of its own
    if raw is not None:
        have = parse_json(raw, f"--work file {path}")
        diff = next((k for k in ("plan", "code") if have.get(k) != ident[k]), None)
        models = have.get("models", {})
        diff = diff or next((f"model for {c}" for c in ident["models"] if c in models
                             and models[c] != ident["models"][c]), None)
        if diff is not None:
            raise ValueError(f"--work {work} holds a run with another {diff}; use a new directory")
        if set(ident["models"]) - set(models):  # a CCA run later (--cca) joins the same study
            atomic_write_text(path, json.dumps({**have, "models": {**models, **ident["models"]}}, indent=2,
                                               default=str) + "\n")
        return
    atomic_write_text(path, json.dumps(ident, indent=2, default=str) + "\n")


def main(argv: list[str] | None = None) -> int:
    try:
        a, configs, ccas = _args(argv)
    except ValueError as exc:
        print(f"pi_vs_mlc_saturator: {exc}", file=sys.stderr)
        return 2
    if a.render_only:
        return _render_only(Path(a.render_only))
    t0 = time.perf_counter()
    doc: dict[str, Any] = {"benchmark": "pi_vs_mlc_saturator", "format_version": 1,
                           "command": "python benchmarks/pi_vs_mlc_saturator.py " + " ".join(argv or sys.argv[1:]),
                           **_provenance(), "from": a.src or "shipped",
                           "plan": {"trials": a.trials, "fct_trials": a.fct_trials,
                                    "selection": {"seed": a.select_seed, "trials": a.select_trials},
                                    "ga_seeds": a.ga_seeds, "ga": [a.generations,
                                    a.population, max(1, a.population // 2)], "ga_episode_s": _ga_episode(a),
                                    "quick": bool(a.quick), "seed": a.seed,
                                    "configs": [list(c) for c in configs], "plant": "fluid"},
                           "results": {}}
    with contextlib.ExitStack() as hold:
        try:
            work = _own_folders(hold, a, doc, ccas)
        except (ValueError, OSError) as exc:
            print(f"pi_vs_mlc_saturator: {exc}", file=sys.stderr)
            return 2
        for cca in ccas:
            doc["results"][cca] = one_cca(cca, _model(a.src, cca), configs, a, work)
        doc["load_end"] = list(os.getloadavg())
        doc["wall_s"] = round(time.perf_counter() - t0, 1)
        text = json.dumps(doc, default=str)
        if a.out:
            from scidmz.fileio import atomic_write_text

            atomic_write_text(a.out, json.dumps(doc, indent=2, default=str) + "\n")
            print(f"report: {render_report(Path(a.out))}", file=sys.stderr)
    print(text)
    return 0


def _own_folders(hold: contextlib.ExitStack, a: argparse.Namespace, doc: dict[str, Any],
                 ccas: list[str]) -> Path:
    """The study's work folder (``--work``, else a temporary one), owned for the whole run
    (``fileio.own_folder``: a second study on it is refused with one line). ``--out`` is a file
    (replaced atomically, as every result file) whose folder is the user's, not the run's: owning
    it would put every file below it, the models given with --from included, under the run's rules."""
    from scidmz.fileio import check_output_file, ensure_dir, own_folder

    if a.out:  # refused now, not after hours of work (a study once finished into a missing folder)
        check_output_file(a.out, "--out")
    if not a.work:
        return Path(hold.enter_context(tempfile.TemporaryDirectory(prefix="scidmz-saturator-")))
    work = ensure_dir(a.work, "--work", parents=True)
    hold.enter_context(own_folder(work, "--work", ["identity.json"]))
    _open_work(work, _identity(doc, a, ccas))
    return work


def _render_only(results: Path) -> int:
    try:
        print(f"report: {render_report(results)}", file=sys.stderr)
    except (OSError, ValueError, KeyError) as exc:
        what = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
        print(f"pi_vs_mlc_saturator: --render-only {results}: {what}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
