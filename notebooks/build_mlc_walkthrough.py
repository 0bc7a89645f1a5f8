"""Write ``mlc_walkthrough.ipynb``, executed (run: ``python notebooks/build_mlc_walkthrough.py [--no-execute]``).

The notebook is generated so its cells stay small, reviewed Python; CI executes
the .ipynb with ``pytest --nbmake notebooks/``. Sizes are tiny on purpose (the
small-cubic scenario, seconds of GA) so it runs in well under two minutes.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

CELLS: list[tuple[str, str]] = [
    ("md", """# The MLC, end to end, in a notebook

This walks through the machine-learning controller (MLC) of Vega et al.
(*Machine Learning Controller for Data Rate Management in Science DMZ Networks*)
on scidmz's fluid plant:

1. load an identification dataset (section 3.5: pseudo-random steps of the campus rate u),
2. train the inverse neural network of Fig. 8 and check it,
3. tune the anti-windup PI gains (Kp, Ki, Kw) with the genetic algorithm of Table 2,
4. evaluate MLC vs the trivial token bucket (section 4: MRAE and DTN flow completion time),
5. plot.

Every size here is tiny so the notebook runs in CI; `scidmz reproduce mlc` runs the
paper's sizes. Units are SI throughout (bit/s, s, bytes)."""),
    ("code", """import time

import matplotlib.pyplot as plt
import numpy as np

from scidmz.scenario import load_scenario

t_start = time.perf_counter()
scenario = load_scenario("small-cubic")  # 100 Mbit/s bottleneck, 10 campus hosts, 8 DTN streams at 100 ms
print(scenario.name, "| B_max =", scenario.capacity / 1e6, "Mbit/s | T =", scenario.period, "s")"""),
    ("md", """## 1. The identification dataset

A dataset is a `Trace` saved as Parquet: one row per control period T with the seven
network variables of Table 3 (`rate_dtn`, `rate_campus`, `rtt_dtn`, `rtt_campus`,
`qdelay_dtn`, `qdelay_campus`, `active_flows`), the campus rate `u` and the `episode`
it belongs to. scidmz ships a small one inside the package (`scidmz.datasets`); if it is missing
we record a short one on the fluid plant (`scidmz identify` does the same from a shell)."""),
    ("code", """from scidmz.datasets import dataset_names, dataset_path
from scidmz.identification.excitation import identify, load_dataset

if "small-cubic-400s" in dataset_names():
    dataset = load_dataset(dataset_path("small-cubic-400s"))
    print("loaded the shipped small-cubic-400s dataset:", len(dataset), "rows")
else:
    dataset = identify(scenario, duration=1200, seed=0, batch=8)
    print("recorded", len(dataset), "rows on the fluid plant")
dataset.df.head()"""),
    ("code", """ep = dataset.df[dataset.df["episode"] == dataset.df["episode"].iloc[0]].head(120)
fig, ax = plt.subplots(figsize=(8, 3))
ax.step(ep["t"], ep["u"] / 1e6, where="pre", label="u (campus TBF rate)")
ax.plot(ep["t"], ep["rate_dtn"] / 1e6, label="R_DTN")
ax.plot(ep["t"], ep["rate_campus"] / 1e6, label="R_campus")
ax.set_xlabel("t [s]")
ax.set_ylabel("Mbit/s")
ax.legend(fontsize=8)
ax.set_title("excitation (cf. Fig. 7)")
plt.show()"""),
    ("md", """## 2. The inverse model

Predictors I = {y(t), y(t-T), y(t-2T), u(t-T)} (22 features), target u(t).
The network: 22 inputs, a hidden layer of 64 x 22 units, a pre-output layer of 22, one output.
`cross_validate` gives the relative validation error the paper quotes (about 1 % on its testbed)."""),
    ("code", """from scidmz.identification.regressors import FEATURE_NAMES, build_regressors
from scidmz.models.inverse import InverseModel

X, y = build_regressors(dataset)
print(X.shape, y.shape, FEATURE_NAMES[:3], "...", FEATURE_NAMES[-1])
cv = InverseModel(epochs=8, seed=0).cross_validate(X, y, k=2)
print(f"2-fold relative validation error: {cv['relative_error']:.1%}")
model = InverseModel(epochs=8, seed=0).fit(X, y)
fast = model.numpy_predictor()  # what the control loop uses: NumPy only, no TensorFlow
print("NumPy path == Keras path:", np.allclose(fast(X[:256]), model.predict(X[:256]), rtol=1e-4, atol=1e-3 * scenario.capacity))"""),
    ("md", """## 3. GA tuning of (Kp, Ki, Kw)

PyGAD with the paper's operators (steady-state selection, crossover 0.9, mutation 0.1);
fitness = -IAE (eq. 2) of a closed-loop episode with a pseudo-random R*_DTN(t).
A whole generation runs as one batched plant call. Table 2 uses 100 generations x 30
individuals x 120 s; here 3 x 6 x 30 s."""),
    ("code", """from scidmz.tuning.ga import tune

result = tune(scenario, model, generations=3, population=6, parents=3, episode=30.0, seed=0)
print(result.gains, f"best IAE = {result.best_iae:.3g} bit")
plt.figure(figsize=(5, 3))
plt.plot(np.arange(1, len(result.curve) + 1), np.asarray(result.curve) / 1e9, marker="o")
plt.xlabel("generation")
plt.ylabel("best IAE [Gbit]")
plt.title("convergence (cf. Fig. 9)")
plt.show()"""),
    ("md", """## 4. MLC vs the trivial TBF

The trivial solution sets the campus rate to B_max - R*_DTN (section 3.7). Both
policies run the same seeded trials, all trials of one policy in one batched plant:
MRAE (eq. 3, Fig. 10) with a pseudo-random target per trial, and the flow completion
time of a DTN transfer (Fig. 11) plus the bottleneck utilisation (eq. 4, Fig. 12)."""),
    ("code", """from scidmz.evaluation.mlc.experiments import ExperimentPlan, run_experiments
from scidmz.policies import TrivialPolicy
from scidmz.policies.rate.mlc import MLCPolicy

plan = ExperimentPlan(trials=4, duration=30.0, target_hold=15.0, transfer=100e6, fct_max_time=90.0)
policies = {"mlc": MLCPolicy(model, result.gains), "trivial": TrivialPolicy()}
results = run_experiments(scenario, policies, plan, ["mrae", "fct", "utilization"])
for name, res in results.items():
    for pol in ("mlc", "trivial"):
        s = res.summary[pol]
        print(f"{name:12s} {pol:8s} mean {s['mean']:.4g} (n={s['n']})")
print(f"MLC MRAE change vs trivial: {results['mrae'].summary['mlc']['reduction_pct']:+.1f} %")
results["mrae"].table.head()"""),
    ("md", """## 5. Plots

CDFs over trials, as in the paper's Figs. 10-12, and one closed-loop trace of the MLC.
With these toy sizes (minutes of data, a 3-generation GA) the MLC is not expected to
beat the trivial TBF; `scidmz reproduce mlc` and `reports/mlc/report.md` show the
full-size comparison."""),
    ("code", """fig, axes = plt.subplots(1, 3, figsize=(12, 3))
for ax, (exp, col, label) in zip(axes, [("mrae", "mrae", "MRAE"), ("fct", "fct", "DTN FCT [s]"),
                                        ("utilization", "utilization", "utilisation rho")], strict=True):
    t = results[exp].table
    for pol, g in t.groupby("policy", sort=False):
        v = np.sort(g[col].dropna().to_numpy())
        ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=pol)
    ax.set_xlabel(label)
    ax.set_ylabel("CDF")
    ax.legend()
plt.tight_layout()
plt.show()

tr = results["mrae"].traces["mlc"][0].df
plt.figure(figsize=(8, 3))
plt.plot(tr["t"], tr["rate_dtn"] / 1e6, label="R_DTN")
plt.plot(tr["t"], tr["target"] / 1e6, "k--", label="R*_DTN")
plt.step(tr["t"], tr["u"] / 1e6, where="pre", label="u (MLC)")
plt.xlabel("t [s]")
plt.ylabel("Mbit/s")
plt.legend(fontsize=8)
plt.show()
print(f"notebook ran in {time.perf_counter() - t_start:.0f} s")"""),
]


def build() -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in CELLS]
    return nb


if __name__ == "__main__":
    import os
    import sys

    out = Path(__file__).with_name("mlc_walkthrough.ipynb")
    nb = build()
    if "--no-execute" not in sys.argv:
        # Committed executed, so a reader sees the figures on GitHub without running anything;
        # CI executes it again (pytest --nbmake).
        from nbclient import NotebookClient

        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(out.parent)}}).execute()
    nbformat.write(nb, out)
    print(f"wrote {out}")
