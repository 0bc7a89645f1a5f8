"""Write ``leaderboard_tradeoff.ipynb``, executed (run: ``python notebooks/build_leaderboard_tradeoff.py [--no-execute]``).

A data scientist's own scenario on the leaderboard: a small fluid leaderboard (every policy on the
same paired trials) on a scenario the reader defines, its decision table, and the tracking /
short-flow trade-off figure drawn with the helper the docs use (``plots.plot_tradeoff``). Generated
so its cells stay small, reviewed Python; CI executes the .ipynb with ``pytest --nbmake notebooks/``.
Sizes are tiny (``--quick``, 6 trials: about 15 s on two cores).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

CELLS: list[tuple[str, str]] = [
    ("md", """# Which way serves the DTN best, on a scenario of your own

`scidmz leaderboard` runs every policy on the same paired trials (trial i: the same seed, the same
target signal, the same campus traffic for every policy) and ranks them with paired tests. Here it
runs on the fluid plant at toy sizes, on a scenario you define: change the overrides below (any
scenario key, as `--set KEY=VALUE` takes it) and re-run.

What you get: the leaderboard's rows (one per policy and experiment), the README's decision table
for your scenario, and the trade-off between the DTN's tracking error (MRAE) and what campus
traffic's short flows pay for it. Toy sizes: read the figure, not the p values."""),
    ("code", """import json
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt

t_start = time.perf_counter()
SCENARIO = "testbed"                      # a built-in scenario (scidmz scenarios) or a .toml file
OVERRIDES = {"campus.hosts": 10,          # fewer campus hosts than the testbed's
             "link.buffer_bdp": 0.02}     # a shallower bottleneck buffer (the testbed: 0.05 BDP)
POLICIES = "trivial,pi,mlc,jenks,pacing"  # trivial, the paired baseline, is always run
TRIALS = 6"""),
    ("md", """## 1. The leaderboard

The same command a shell would run (`scidmz leaderboard ... --json`), called in-process. MRAE
trials track a stepping target; short-flow trials add a campus sender of short flows beside the
long ones and record their median completion time."""),
    ("code", """from scidmz.cli import main

out = Path(tempfile.mkdtemp(prefix="scidmz-lb-")) / "run"
argv = ["leaderboard", SCENARIO, "--plant", "fluid", "--policies", POLICIES, "--quick",
        "--trials", str(TRIALS), "--experiments", "mrae,short", "--out", str(out)]
for key, value in OVERRIDES.items():
    argv += ["--set", f"{key}={value}"]
assert main(argv) == 0
doc = json.loads((out / "results.json").read_text())
print(len(doc["rows"]), "rows;", doc["holm"]["tests"], "paired tests, Holm-corrected together")"""),
    ("code", """import pandas as pd

cols = ["experiment", "rank", "policy", "comparable", "trials", "mean", "vs_trivial_pct", "vs_trivial_hl_pct",
        "p_vs_trivial"]
pd.DataFrame(doc["rows"])[cols].round(4)"""),
    ("md", """## 2. Where should the admin act?

The README's decision table, from your run: per place an admin controls, the best policy of that
kind on the paired MRAE ranking, its change against the trivial TBF with its 95 % interval, and a
mark for significance (sign checked). This run has no FCT trials, so the FCT reads n/a. A
policy the fluid plant does not model on equal footing (a paced DTN, ABC, FFS) is named
"not comparable" and never ranked."""),
    ("code", """from IPython.display import Markdown

from scidmz.evaluation.decision import decision_table

table = decision_table(doc)
lines = ["| the admin controls | " + " | ".join(table["columns"]) + " |",
         "|---|" + "---|" * len(table["columns"])]
lines += ["| " + r["where"] + " | " + " | ".join(r["cells"]) + " |" for r in table["rows"]]
Markdown("\\n".join(lines))"""),
    ("md", """## 3. The trade-off

One point per policy with its 95 % intervals: x, the DTN's tracking error; y, the campus
short flows' median completion time. The same helper draws the figures on docs/results.md."""),
    ("code", """import io

from IPython.display import Image, display

from scidmz.evaluation.decision import tradeoff_points
from scidmz.plots import plot_tradeoff

(regime,) = tradeoff_points(doc)
fig, ax = plt.subplots(figsize=(6, 4))
plot_tradeoff(regime, ax=ax)
buf = io.BytesIO()
fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")  # scidmz's plots draw headless (Agg)
display(Image(buf.getvalue()))
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

    out = Path(__file__).with_name("leaderboard_tradeoff.ipynb")
    nb = build()
    if "--no-execute" not in sys.argv:
        # Committed executed, so a reader sees the figure on GitHub without running anything;
        # CI executes it again (pytest --nbmake).
        from nbclient import NotebookClient

        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(out.parent)}}).execute()
    nbformat.write(nb, out)
    print(f"wrote {out}")
