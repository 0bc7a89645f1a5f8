"""Every ``scidmz ...`` command line in README.md and docs/*.md works as written.

The lines are read from the pages' fenced shell blocks (bash/sh/shell/console, or no language).
Each one is classified in ``CLASSES``, with the reason when it is not run here:

* ``run``: runs here quickly without root; run as written in a fresh folder (a subprocess,
  ``scidmz`` being ``python -m scidmz.cli``) and must exit 0;
* ``long``: too long for CI (minutes to hours); parsed, and its path policy and option rules
  (``guard.check.check_args``: defaults filled, outputs checked) run in a fresh folder, which is
  where a documented command used to fail (``reproduce mlc --quick --json`` without ``reports/``);
* ``root``, ``hardware``, ``daemon`` (runs until stopped, or talks to one), ``after`` (needs files an
  earlier documented command writes, or a site's own scenario file): parsed only (argparse accepts
  it, and no option is refused as unused).

A line with alternatives (``[--netns]``, ``A | B``, ``...``) is a template: ``CLASSES`` lists its
concrete forms. A documented line missing from ``CLASSES`` fails the test, so a new one is
classified when it is written, never skipped without a word.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = ("", "bash", "sh", "shell", "console")

RUN, LONG, ROOT_, HW, DAEMON, AFTER = "run", "long", "root", "hardware", "daemon", "after"

#: documented line (comment, ``sudo`` and ``$`` stripped, spaces collapsed) -> (class, reason,
#: concrete forms when the line is a template).
CLASSES: dict[str, tuple[str, str] | tuple[str, str, list[str]]] = {
    # README.md
    "scidmz simulate paper-cubic --policy trivial --target 500M": (RUN, "seconds"),
    "scidmz scenarios": (RUN, "instant"),
    "scidmz scenarios paper-bbr2": (RUN, "instant"),
    "scidmz simulate paper-bbr2 --policy trivial --target 600M --out trace.parquet --plot trace.png --json":
        (RUN, "seconds"),
    "scidmz simulate my.toml --set dtn.cca=bbr --set link.capacity=100M --duration 60":
        (AFTER, "my.toml is the reader's own scenario file"),
    "scidmz evaluate paper-cubic --policies abc,ffs --experiments mrae,fct,utilization --trials 30":
        (LONG, "30 paired trials of three experiments on the paper's scenario: minutes"),
    "scidmz testbed check": (ROOT_, "builds the namespace testbed"),
    "scidmz control run testbed --plant fluid --target 60M": (DAEMON, "the live loop: runs until stopped"),
    "scidmz control run testbed --plant netns --policy mlc --target 60M": (ROOT_, "the netns testbed, until stopped"),
    "scidmz control set-target 40M": (DAEMON, "talks to a running controller"),
    "scidmz identify paper-cubic --duration 28800 --mkdir --out data/cubic.parquet":
        (LONG, "8 simulated hours of identification"),
    "scidmz train data/cubic.parquet --out models/cubic --register dtn-cubic": (AFTER, "the identify line's dataset"),
    "scidmz tune paper-cubic --model models:/dtn-cubic/1 --mkdir --out gains/cubic":
        (AFTER, "the model the train line registers"),
    "scidmz evaluate paper-cubic --model models/cubic --gains gains/cubic/gains.json --trials 100 --mkdir "
    "--out results/cubic": (AFTER, "the train and tune lines' model and gains"),
    "scidmz reproduce mlc --quick --json": (LONG, "the whole MLC chain at tiny sizes: 75 s here, over the CI budget; its fresh-folder checks run"),
    "scidmz leaderboard paper-cubic --plant fluid --trials 50 --mkdir --out runs/lb-cubic":
        (LONG, "every policy, 50 paired trials each"),
    "scidmz leaderboard testbed --plant netns --trials 20 --fct-trials 10 --out runs/lb-netns --resume":
        (ROOT_, "the netns testbed, hours"),
    "scidmz reproduce mlc": (LONG, "the paper's sizes: hours"),
    "scidmz reproduce mlc --plant netns": (ROOT_, "real kernel TCP on the netns testbed"),
    "scidmz reproduce jenks [--netns]": (LONG, "the Jenks papers' tests: minutes (--netns: root, ~30 min)",
                                         ["scidmz reproduce jenks", "scidmz reproduce jenks --netns"]),
    "scidmz reproduce abc [--netns]": (LONG, "the ABC paper's experiments: minutes (--netns: root)",
                                       ["scidmz reproduce abc", "scidmz reproduce abc --netns"]),
    "scidmz reproduce ffs [--netns]": (LONG, "the FFS paper's experiments: minutes (--netns: root)",
                                       ["scidmz reproduce ffs", "scidmz reproduce ffs --netns"]),
    "scidmz reproduce disciplines-dmz": (LONG, "paired trials of three disciplines: minutes"),
    # docs/leaderboard.md
    "scidmz leaderboard paper-cubic --trials 50 --out reports/leaderboard/fluid-paper-cubic --mlc-model MODEL_DIR "
    "--mlc-gains GAINS.json --pi-gains PI_GAINS.json": (AFTER, "the reader's own model and gains files"),
    "scidmz leaderboard testbed --plant netns --trials 20 --fct-trials 10 --policy-trials jenks=10/5,abc=10/5,ffs=10/5 "
    "--out reports/leaderboard/netns-testbed-cubic": (ROOT_, "the netns testbed, hours"),
    "scidmz leaderboard small-cubic --quick --trials 3 --policies trivial,none,abc --json --out lb":
        (RUN, "about 20 s: what CI runs"),
    "scidmz leaderboard --render-only --out reports/leaderboard/fluid-paper-cubic":
        (AFTER, "re-renders a finished run's folder"),
    "scidmz leaderboard --merge --out reports/leaderboard": (AFTER, "merges finished runs' folders"),
    "scidmz leaderboard paper-cubic --policies pacing --experiments mrae --trials 50 --set campus.hosts=0 "
    "--out reports/leaderboard/fluid-paper-cubic-floor": (AFTER, "writes into the repository's reports/leaderboard/ (a checkout's folder)"),
    "scidmz leaderboard testbed --plant netns --policies trivial,pi,pacing,mlc --trials 10 --fct-trials 8 "
    "--out reports/leaderboard-recheck/netns-testbed-cubic --resume": (ROOT_, "the netns testbed, hours"),
    "scidmz leaderboard --out reports/leaderboard-recheck/netns-testbed-cubic --recheck "
    "reports/leaderboard/netns-testbed-cubic": (AFTER, "the re-check line's run, finished"),
    # docs/operations.md: the kernel MLC report from the kernel leaderboard's units
    "scidmz reproduce mlc --evaluation-from reports/leaderboard/netns-testbed-cubic --out reports/mlc-netns":
        (AFTER, "needs a finished kernel leaderboard run of the shipped model"),
    # docs/deployment.md and docs/operations.md: a live router
    "scidmz control run campus.toml --plant hardware ... --metrics-addr 0.0.0.0:9642":
        (HW, "a live router", ["scidmz control run campus.toml --plant hardware --dev eth1 --telemetry 10.0.0.5:9559 "
                               "--metrics-addr 0.0.0.0:9642"]),
    "scidmz control run testbed --plant fluid --policy trivial --target 60M": (DAEMON, "runs until stopped"),
    "scidmz control run testbed --plant netns --policy mlc --target 60M --model models/testbed --gains gains.json "
    "--log /var/log/scidmz/control.jsonl": (ROOT_, "the netns testbed, until stopped"),
    "scidmz control status": (DAEMON, "talks to a running controller"),
    "scidmz control set-target 400M": (DAEMON, "talks to a running controller"),
    "scidmz identify campus.toml --duration 8h --out data/2026-11.parquet": (AFTER, "the site's own scenario file"),
    "scidmz train data/2026-11.parquet --out models/2026-11 --register dtn-cubic": (AFTER, "the identify line's data"),
    "scidmz tune campus.toml --model models:/dtn-cubic/N --out models/2026-11-gains": (
        AFTER, "the site's scenario and registered model (N: its version)",
        ["scidmz tune campus.toml --model models:/dtn-cubic/1 --out models/2026-11-gains"]),
    "scidmz evaluate campus.toml --model models:/dtn-cubic/N --quick": (
        AFTER, "the site's scenario and registered model (N: its version)",
        ["scidmz evaluate campus.toml --model models:/dtn-cubic/1 --quick"]),
    "scidmz identify testbed --plant netns --duration 30min --out data/testbed-kernel.parquet":
        (ROOT_, "real TCP on the netns testbed"),
    "scidmz train data/testbed-kernel.parquet --init models/fluid --out models/refined --folds 3":
        (AFTER, "the identify line's kernel data"),
    "scidmz tune testbed --model models/refined --out gains/ --delta-u 0.05 --refine-plant netns --refine-episodes 2":
        (ROOT_, "refined on the netns testbed"),
    "scidmz control status --token-file /var/lib/scidmz/control.token --json": (DAEMON, "asks a running controller"),
    "scidmz telemetry down --json": (ROOT_, "removes eBPF filters a killed run left on a router's interfaces"),
    # docs/safety.md: a refusal shown with the device node the line before makes
    "scidmz simulate testbed --target 60M --duration 3 --out /tmp/fakenull":
        (ROOT_, "shows a refusal; needs the device node `mknod` makes, as root"),
    # docs/telemetry.md
    "scidmz telemetry capture --egress tapr --ingress tapi --duration 60s --json": (ROOT_, "captures on taps"),
    "scidmz telemetry capture --egress tapr": (ROOT_, "captures on a tap until stopped"),
    # docs/testbed.md
    "scidmz testbed up testbed --switch ovs": (ROOT_, "the netns testbed, until Ctrl-C"),
    "scidmz testbed status": (RUN, "reads the run directory's records; nothing recorded is a clean answer"),
    "scidmz testbed down --prefix sdz | --all": (ROOT_, "removes namespaces",
                                                 ["scidmz testbed down --prefix sdz", "scidmz testbed down --all"]),
    "scidmz simulate testbed --plant netns --policy trivial --target 60M --duration 60": (ROOT_, "the netns testbed"),
}
#: Lines that document the hardware plant on a router (long option lists): matched by prefix.
PREFIXES: dict[str, tuple[str, str]] = {
    "scidmz control run testbed --set link.capacity=10G --plant hardware": (HW, "a live router's interfaces"),
    "scidmz control run campus.toml --plant hardware": (HW, "a live router and a P4Runtime switch"),
    "scidmz telemetry replay egress.pcap": (AFTER, "the reader's own captures"),
    "systemctl restart scidmz-control": (HW, "a systemd service on a router"),
}


def _shell_blocks(text: str) -> list[str]:
    """The bodies of the page's fenced shell blocks (``bash``, ``sh``, ``shell``, ``console`` or no
    language), fences read line by line (also indented ones, in list items)."""
    blocks, body, lang = [], None, ""
    for line in text.splitlines():
        fence = line.strip()
        if fence.startswith("```"):
            if body is None:
                body, lang = [], fence[3:].strip()
            else:
                if lang in SHELL:
                    blocks.append("\n".join(body))
                body = None
        elif body is not None:
            body.append(line)
    return blocks


def documented_lines() -> list[tuple[str, str]]:
    """(page, command line) for every ``scidmz`` command in the pages' shell blocks, normalised."""
    found = []
    for page in PAGES:
        for body in _shell_blocks(page.read_text()):
            body = re.sub(r"\\\n\s*", " ", body)  # continuation lines
            for raw in body.splitlines():
                for part in re.split(r"&&|;", raw.split("  #")[0].split(" # ")[0]):
                    line = " ".join(part.split())
                    line = re.sub(r"^(\$ )?(sudo )?(\S+=\S+ )*", "", line)
                    if line.startswith("scidmz ") or line.startswith("systemctl restart scidmz"):
                        found.append((page.relative_to(ROOT).as_posix(), line))
    return found


def classify(line: str) -> tuple[str, str, list[str]]:
    entry = CLASSES.get(line)
    if entry is None:
        prefix = next((p for p in PREFIXES if line.startswith(p)), None)
        if prefix is None:
            raise KeyError(line)
        kind, reason = PREFIXES[prefix]
        if "..." in line or not line.startswith("scidmz "):
            return kind, reason, []
        # Optional parts ``[--plot y.png]``: the line without them, and with all of them.
        return kind, reason, [" ".join(re.sub(r"\[[^]]*\]", "", line).split()), re.sub(r"[][]", "", line)]
    kind, reason = entry[0], entry[1]
    forms = entry[2] if len(entry) > 2 else [line]  # type: ignore[misc]
    return kind, reason, forms


def test_every_documented_line_is_classified() -> None:
    lines = documented_lines()
    assert len(lines) > 40, lines  # the pages have that many; fewer means the extraction broke
    missing = []
    for page, line in lines:
        try:
            classify(line)
        except KeyError:
            missing.append(f"{page}: {line}")
    assert not missing, "classify these documented commands in CLASSES:\n" + "\n".join(missing)
    stale = set(CLASSES) - {line for _, line in lines}
    assert not stale, f"CLASSES names lines no page documents any more: {sorted(stale)}"


def _argv(form: str) -> list[str]:
    return shlex.split(form)[1:]


def _all_forms() -> list[tuple[str, str, str]]:
    out = []
    for _, line in documented_lines():
        try:
            kind, _, forms = classify(line)
        except KeyError:
            continue  # the classification test names it
        out += [(kind, line, f) for f in forms]
    return out


@pytest.mark.parametrize("kind, line, form", [f for f in _all_forms() if f[0] != RUN], ids=lambda x: x[:60])
def test_documented_command_parses(kind: str, line: str, form: str, tmp_path: Path) -> None:
    from scidmz.cli import build_parser
    from scidmz.guard.check import check_args
    from scidmz.guard.options import check_option_rules

    args = build_parser().parse_args(_argv(form))  # argparse's refusal is SystemExit: a failure here
    check_option_rules(args)
    if kind == LONG:
        old = os.getcwd()
        os.chdir(tmp_path)
        try:
            check_args(args)  # the defaults, the path policy and the counts, in a fresh folder
        finally:
            os.chdir(old)


@pytest.mark.parametrize("form", sorted({f for k, _, f in _all_forms() if k == RUN}), ids=lambda x: x[:60])
def test_documented_quick_command_runs_as_written(form: str, tmp_path: Path) -> None:
    # A fresh folder, and fresh state: its own mlflow store and run directory (``testbed status``
    # would otherwise read this host's records).
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MLFLOW_TRACKING_URI": (tmp_path / "mlruns").as_uri(),
           "SCIDMZ_RUN_DIR": str(tmp_path / "run")}
    proc = subprocess.run([sys.executable, "-m", "scidmz.cli", *_argv(form)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{form}\n{proc.stderr[-2000:]}"
