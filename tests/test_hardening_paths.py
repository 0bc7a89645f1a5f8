"""One path policy for every path option (``guard.paths.OUTPUTS``/``INPUTS``), as classes of input.

Every declared output option of every command gets the classes that got through before: the empty
(and blank) string, a symlink where links are never followed (output directories, logs), an
append-only directory, a sibling in the way (``tune --out X.json`` writes ``X.tune/``), and two
options naming the same file (also through a symlinked directory or ``a/../``). Each is refused
with exit 2 and one line naming the option, before any work, and nothing in the temp dir changes.
The option lists are read from the declarations, so a new command or option is covered by adding
its one line there; a path-like option left undeclared fails ``test_every_path_option_is_declared``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from test_hardening_props import _examples, assert_refused_cleanly, run_inprocess, snapshot

from scidmz.cli import build_parser
from scidmz.guard.paths import INPUTS, NOT_PATHS, OUTPUTS

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "src" / "scidmz" / "datasets"
MODEL = DATA / "models" / "testbed-cubic"
GAINS = MODEL / "gains.json"
DATASET = DATA / "small-cubic-400s.parquet"
FAST = 20.0  # s: a refusal happens before any work (generous for a loaded 2-core machine)


def _pcap(d: Path) -> Path:
    import numpy as np

    from scidmz.telemetry.sources import synth

    n = 50
    ts = (np.arange(n) * 2_000_000).astype(np.int64)
    p = d / "cap.pcap"
    if not p.exists():
        synth.bulk_pcap(p, ts, np.full(n, synth.ip2int("10.3.0.2"), np.uint32),
                        np.full(n, synth.ip2int("10.1.0.5"), np.uint32), np.full(n, 5001, np.uint16),
                        np.full(n, 40000, np.uint16), (np.arange(n) * 1448).astype(np.uint32),
                        np.zeros(n, np.uint32), np.full(n, 0x10, np.uint8), np.full(n, 1448, np.uint32))
    return p


def base_argv(command: str, d: Path) -> list[str]:
    """A cheap, valid invocation of ``command`` whose own outputs live in ``d`` (options get appended)."""
    return {
        "simulate": ["simulate", "testbed", "--duration", "2"],
        "identify": ["identify", "small-cubic", "--duration", "20", "--out", str(d / "ds.parquet")],
        "train": ["train", str(DATASET), "--out", str(d / "model"), "--epochs", "1", "--folds", "0"],
        "tune": ["tune", "small-cubic", "--model", str(MODEL), "--out", str(d / "g.json"), "--generations", "1",
                 "--population", "2", "--parents", "1", "--episode", "5"],
        "evaluate": ["evaluate", "small-cubic", "--model", str(MODEL), "--gains", str(GAINS), "--quick", "--trials",
                     "2", "--experiments", "mrae"],  # two: a paired test needs two trials
        "reproduce": ["reproduce", "mlc", "--quick", "--out", str(d / "rep")],
        "leaderboard": ["leaderboard", "small-cubic", "--quick", "--policies", "jenks", "--out", str(d / "lb")],
        "control run": ["control", "run", "testbed", "--target", "60M", "--no-api", "--duration", "1"],
        "telemetry replay": ["telemetry", "replay", str(_pcap(d))],
        "telemetry capture": ["telemetry", "capture", "--egress", "lo", "--duration", "1"],
        "agent": ["agent", "--prefix", "203.0.113.0/24", "--shadow", "--api", "127.0.0.1:0"],
    }[command]


def _opt(attr: str) -> str:
    return "--" + attr.replace("_", "-")


DECLARED_OUTPUTS = [(cmd, attr, kind) for cmd, opts in OUTPUTS.items() for attr, kind in opts.items()]


def _run(argv: list[str], cwd: Path) -> tuple[int, str, str, float]:
    t0 = time.monotonic()
    rc, out, err = run_inprocess(argv, cwd)
    return rc, out, err, time.monotonic() - t0


def _refused(argv: list[Any], cwd: Path, must_name: str | None = None) -> str:
    before = snapshot(cwd)
    rc, out, err, took = _run(argv, cwd)
    assert_refused_cleanly(argv, rc, err)
    assert rc == 2, (argv, err)
    assert took < FAST, (argv, took)
    if must_name:
        assert must_name in err, (argv, err)
    assert snapshot(cwd) == before, f"{argv}: the temp dir changed"
    return err


# -- the declarations cover every path option ----------------------------------------------------

_PATHY = re.compile(r"\b(file|files|director(y|ies)|path|PNG|\.json|\.parquet|\.toml|capture|FILE)\b")


def _walk(p: argparse.ArgumentParser, prefix: list[str]) -> list[tuple[str, argparse.Action]]:
    out = []
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                out += _walk(sp, prefix + [name])
        elif a.dest not in ("help", "version", "json", "mkdir"):
            out.append((" ".join(prefix), a))
    return out


def test_every_path_option_is_declared() -> None:
    """An option whose help speaks of files, directories or paths is declared (OUTPUTS, INPUTS) or
    listed in NOT_PATHS: the policy cannot be skipped by forgetting one line."""
    missing = []
    for cmd, action in _walk(build_parser(), []):
        text = f"{action.help or ''} {action.metavar or ''}"
        if action.type not in (None, str) or action.nargs == 0 or not _PATHY.search(text):
            continue
        keys = [cmd, cmd.split()[0]]
        declared = any(action.dest in t.get(k, {}) for t in (OUTPUTS, INPUTS) for k in keys)
        if not declared and action.dest not in NOT_PATHS.get(cmd, frozenset()):
            missing.append(f"{cmd} {action.dest}")
    assert not missing, f"path options not declared in guard.paths: {missing}"


def test_declarations_name_real_options() -> None:
    dests: dict[str, set[str]] = {}
    for cmd, action in _walk(build_parser(), []):
        dests.setdefault(cmd, set()).add(action.dest)
    for table in (OUTPUTS, INPUTS):
        for cmd, opts in table.items():
            known = set().union(*(v for k, v in dests.items() if k == cmd or k.startswith(cmd + " ")))
            assert set(opts) <= known, (cmd, set(opts) - known)


# -- the empty string, and blanks, for every declared path option ----------------------------------


@pytest.mark.parametrize(("cmd", "attr", "kind"), DECLARED_OUTPUTS, ids=lambda x: str(x))
@pytest.mark.parametrize("value", ["", " "], ids=["empty", "blank"])
def test_empty_output_path_is_refused_before_any_work(tmp_path: Path, cmd: str, attr: str, kind: str,
                                                       value: str) -> None:
    """``--out ""`` used to mean the working directory (tune overwrote ./gains.json and copied the whole
    directory into mlruns) or nothing at all (simulate): now one line, nothing written."""
    argv = [a for a in base_argv(cmd, tmp_path)]
    argv += [_opt(attr), value]
    _refused(argv, tmp_path, _opt(attr))


def _declared_inputs() -> list[tuple[str, str]]:
    return [(cmd, attr) for cmd, opts in INPUTS.items() for attr in opts
            if cmd in ("simulate", "evaluate", "tune", "train", "reproduce") and attr not in ("scenario", "dataset")]


@pytest.mark.parametrize(("cmd", "attr"), _declared_inputs(), ids=lambda x: str(x))
def test_empty_input_path_is_refused(tmp_path: Path, cmd: str, attr: str) -> None:
    argv = [a for a in base_argv(cmd, tmp_path) if a]
    if _opt(attr) in argv:
        i = argv.index(_opt(attr))
        argv[i + 1] = ""
    else:
        argv += [_opt(attr), ""]
    _refused(argv, tmp_path, _opt(attr))


# -- links: output directories and logs are never followed; a planted link redirects nothing --------


def _dir_outputs() -> list[tuple[str, str]]:
    return [(c, a) for c, a, k in DECLARED_OUTPUTS if k in ("dir", "model")]


@pytest.mark.parametrize(("cmd", "attr"), _dir_outputs(), ids=lambda x: str(x))
def test_symlinked_output_directory_is_refused(tmp_path: Path, cmd: str, attr: str) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "precious.txt").write_text("keep")
    link = tmp_path / "out"
    link.symlink_to(target)
    argv = base_argv(cmd, tmp_path) + [_opt(attr), str(link)]
    err = _refused(argv, tmp_path, "symlink")
    assert (target / "precious.txt").read_text() == "keep" and sorted(os.listdir(target)) == ["precious.txt"], err


def test_log_through_a_symlink_is_refused_and_the_target_untouched(tmp_path: Path) -> None:
    """``control run --log LINK`` appended to the link's target (docs/safety.md promised it never would)."""
    target = tmp_path / "target.txt"
    target.write_text("precious\n")
    (tmp_path / "link.log").symlink_to(target)
    _refused(base_argv("control run", tmp_path) + ["--log", str(tmp_path / "link.log")], tmp_path, "symlink")
    assert target.read_text() == "precious\n"


def test_open_append_never_follows_a_link_even_if_planted_after_the_check(tmp_path: Path) -> None:
    from scidmz.fileio import DestinationError, open_append

    target = tmp_path / "target.txt"
    target.write_text("precious\n")
    (tmp_path / "log").symlink_to(target)
    with pytest.raises(DestinationError, match="symlink"):
        open_append(tmp_path / "log")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(DestinationError):
        open_append(tmp_path / "fifo")  # no reader: refused at once, never blocks
    with open_append(tmp_path / "new.log") as fh:
        fh.write("a\n")
    assert (tmp_path / "new.log").read_text() == "a\n" and target.read_text() == "precious\n"


# -- tune's sibling X.tune/ is checked like --out itself ---------------------------------------------


@pytest.mark.parametrize("sibling", ["file", "symlink_to_dir", "fifo"])
def test_tune_sibling_directory_is_checked_before_the_ga(tmp_path: Path, sibling: str) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "gains.json").write_text("precious")
    s = tmp_path / "X.tune"
    if sibling == "file":
        s.write_text("in the way")
    elif sibling == "fifo":
        os.mkfifo(s)
    else:
        s.symlink_to(other)
    argv = base_argv("tune", tmp_path)
    argv[argv.index("--out") + 1] = str(tmp_path / "X.json")
    _refused(argv, tmp_path, "X.tune")
    assert (other / "gains.json").read_text() == "precious" and not (tmp_path / "X.json").exists()


# -- append-only (chattr +a) directories ----------------------------------------------------------------


def _chattr_ok(d: Path) -> bool:
    if os.geteuid() != 0:
        return False
    r = subprocess.run(["chattr", "+a", str(d)], capture_output=True)
    return r.returncode == 0


@pytest.mark.parametrize(("cmd", "attr", "kind"), [o for o in DECLARED_OUTPUTS if o[2] in ("file", "plot", "gains")],
                         ids=lambda x: str(x))
def test_append_only_directory_is_refused_and_nothing_left_behind(tmp_path: Path, cmd: str, attr: str,
                                                                  kind: str) -> None:
    d = tmp_path / "att"
    d.mkdir()
    if not _chattr_ok(d):
        pytest.skip("needs root and a file system with chattr")
    try:
        argv = base_argv(cmd, tmp_path)
        name = {"plot": "f.png", "gains": "g.json"}.get(kind, "f.parquet")
        if _opt(attr) in argv:
            argv[argv.index(_opt(attr)) + 1] = str(d / name)
        else:
            argv += [_opt(attr), str(d / name)]
        err = _refused(argv, tmp_path, "append-only")
        assert os.listdir(d) == [], err  # no .scidmz-probe.* left (it could not be removed there)
    finally:
        subprocess.run(["chattr", "-a", str(d)], check=False)


# -- two options naming the same file --------------------------------------------------------------------

ALIAS_PAIRS = [  # (command, option A, option B, name): B given the same file as A, spelt differently
    ("simulate", "--out", "--plot", "p.png"),
    ("identify", "--out", "--plot", "d.png"),
    ("control run", "--log", "--token-file", "x.log"),
]


@_examples(12)
@given(pair=st.sampled_from(ALIAS_PAIRS), spelling=st.sampled_from(["same", "dot", "dotdot", "linked_dir", "hardlink"]))
def test_two_options_naming_the_same_file_are_refused(tmp_path: Path, pair: tuple[str, str, str, str],
                                                      spelling: str) -> None:
    import tempfile

    cmd, a, b, name = pair
    with tempfile.TemporaryDirectory(dir=tmp_path) as td:
        d = Path(td)
        (d / "sub").mkdir()
        first = d / "sub" / name
        second = {"same": first, "dot": d / "sub" / "." / name, "dotdot": d / "sub" / ".." / "sub" / name,
                  "linked_dir": d / "lnk" / name, "hardlink": d / "sub" / ("h" + name)}[spelling]
        if spelling == "linked_dir":
            (d / "lnk").symlink_to(d / "sub")
        if spelling == "hardlink":
            first.write_text("old")
            os.link(first, second)
        argv = base_argv(cmd, d)
        for opt, path in ((a, first), (b, second)):
            if opt in argv:
                argv[argv.index(opt) + 1] = str(path)
            else:
                argv += [opt, str(path)]
        _refused(argv, d, "same")


def test_an_output_that_is_an_input_is_refused(tmp_path: Path) -> None:
    cap = tmp_path / "cap.png"  # a capture that happens to be named like a figure
    cap.write_bytes(_pcap(tmp_path).read_bytes())
    _refused(["telemetry", "replay", str(cap), "--plot", str(cap)], tmp_path, "input")


@pytest.mark.parametrize("cmd", ["tune", "evaluate"])
def test_a_tracked_run_logs_the_files_it_wrote_not_the_directory(tmp_path: Path, cmd: str) -> None:
    """``--out .`` (or any directory holding other things) used to copy that whole directory, mlruns
    included, into the run's artifacts; a run logs the files the command wrote and nothing else."""
    (tmp_path / "stranger.txt").write_text("not ours")
    argv = base_argv(cmd, tmp_path)
    if "--out" in argv:
        argv[argv.index("--out") + 1] = "."
    else:
        argv += ["--out", "."]
    argv += ["--tracking-uri", str(tmp_path / "mlruns")]
    rc, _, err, _ = _run(argv, tmp_path)
    assert rc == 0, err
    logged = [p for p in (tmp_path / "mlruns").rglob("*") if p.is_file() and "artifacts" in p.parts]
    names = {p.name for p in logged}
    assert logged and "stranger.txt" not in names, sorted(names)
    assert not any("mlruns" in p.relative_to(tmp_path / "mlruns").parts for p in logged), logged


def test_a_path_set_in_control_run_config_meets_the_same_policy(tmp_path: Path) -> None:
    """``control run --config FILE`` fills options after the command line was checked; its paths are
    checked too (a log named there is still never appended to through a link)."""
    target = tmp_path / "target.txt"
    target.write_text("keep")
    (tmp_path / "link.log").symlink_to(target)
    cfg = tmp_path / "control.toml"
    cfg.write_text(f'target = "60M"\nlog = "{tmp_path / "link.log"}"\nno-api = true\nduration = "1"\n')
    _refused(["control", "run", "testbed", "--config", str(cfg)], tmp_path, "--log")
    assert target.read_text() == "keep"
