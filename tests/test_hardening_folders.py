"""What lives in an output folder, and who owns it (docs/safety.md, "Output folders").

A generated family: every kind of planted entry (a symlink to a file, to a directory, dangling, to
/dev/zero, to a FIFO; a FIFO; a hard link to a file outside) at every name a run folder holds,
against every way scidmz opens such a file (the fileio primitives, and a leaderboard --resume
on the command line). Each case must be refused with one line naming the file, and nothing
outside the folder may be read or changed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scidmz import fileio
from scidmz.cli import main
from scidmz.evaluation.leaderboard.ledger import LEDGER_NAME, Ledger, parse_ledger
from scidmz.evaluation.leaderboard.recheck import read_ledger
from scidmz.evaluation.leaderboard.run import MEMBERS
from scidmz.fileio import DestinationError, FolderBusy, own_folder

SECRET = b"secret-0600\nlast line without a newline"
PLANTS = ("link-file", "link-dir", "link-dangling", "link-devzero", "link-fifo", "fifo", "hardlink")


@pytest.fixture(autouse=True)
def _no_hang():
    """A FIFO opened for reading blocks forever: fail instead of hanging the suite."""
    def boom(*_):
        raise TimeoutError("blocked (a FIFO or device was opened)")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _outside(tmp: Path) -> Path:
    out = tmp / "outside"
    out.mkdir(exist_ok=True)
    s = out / "secret"
    if not s.exists():
        s.write_bytes(SECRET)
        s.chmod(0o600)
        (out / "hard").write_bytes(SECRET)
        (out / "adir").mkdir()
        os.mkfifo(out / "fifo")
    return out


def _plant(kind: str, at: Path, outside: Path) -> None:
    if at.exists() or at.is_symlink():
        at.unlink()
    if kind == "link-file":
        at.symlink_to(outside / "secret")
    elif kind == "link-dir":
        at.symlink_to(outside / "adir")
    elif kind == "link-dangling":
        at.symlink_to(outside / "missing")
    elif kind == "link-devzero":
        at.symlink_to("/dev/zero")
    elif kind == "link-fifo":
        at.symlink_to(outside / "fifo")
    elif kind == "fifo":
        os.mkfifo(at)
    elif kind == "hardlink":
        os.link(outside / "hard", at)
    else:
        raise AssertionError(kind)


def _snapshot(outside: Path) -> dict:
    return {p.name: (p.lstat().st_mode, p.read_bytes() if p.is_file() else None, p.lstat().st_mtime_ns)
            for p in sorted(outside.iterdir())}


def _one_line(msg: str) -> str:
    assert msg and "\n" not in msg.strip(), msg
    return msg


# -- the primitives, over the family ------------------------------------------------------------

def _ways(folder: Path, name: str):
    """Every way scidmz opens a file of a run folder, as callables on the planted name."""
    p = folder / name
    return {
        "read_member": lambda: fileio.read_member(p),
        "open_member rw": lambda: os.close(fileio.open_member(p, os.O_RDWR | os.O_APPEND)),
        "open_member create": lambda: os.close(fileio.open_member(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL)),
        "check_member": lambda: fileio.check_member(p),
        "atomic write": lambda: fileio.atomic_write_text(p, "new\n"),
        "read_text_input": lambda: fileio.read_text_input(p),
        "ledger resume": lambda: Ledger.open(folder, {"plan": {}}, resume=True),
        "ledger recheck": lambda: read_ledger(p),
    }


@pytest.mark.parametrize("kind", PLANTS)
@pytest.mark.parametrize("name", [*MEMBERS, "results.json", "sub/results.json"])
def test_no_planted_entry_is_followed_read_or_changed(tmp_path, kind, name) -> None:
    outside = _outside(tmp_path)
    folder = tmp_path / "run"
    (folder / "sub").mkdir(parents=True)
    before = _snapshot(outside)
    with own_folder(folder, "--out") as owned:
        assert owned is not None
        for way, call in _ways(folder, name).items():
            if way.startswith("ledger") and name != LEDGER_NAME:
                continue
            _plant(kind, folder / name, outside)
            with pytest.raises((DestinationError, ValueError)) as exc:
                call()
            assert name.split("/")[-1] in _one_line(str(exc.value)), (way, exc.value)
            assert _snapshot(outside) == before, (way, kind, name)
            assert (folder / name).is_symlink() or kind in ("fifo", "hardlink")  # the entry is left as it was


@pytest.mark.parametrize("kind", ["link-dir", "link-dangling"])
def test_a_sub_folder_swapped_for_a_link_is_not_followed(tmp_path, kind) -> None:
    outside = _outside(tmp_path)
    folder = tmp_path / "run"
    folder.mkdir()
    (outside / "adir" / "results.json").write_text("{}")
    with own_folder(folder, "--out"):
        _plant(kind, folder / "sub", outside)
        with pytest.raises(DestinationError):
            fileio.read_member(folder / "sub" / "results.json")


def test_regular_members_are_read_and_written(tmp_path) -> None:
    folder = tmp_path / "run"
    with own_folder(folder, "--out", ["results.json"]):
        assert fileio.read_member(folder / "results.json") is None
        fileio.atomic_write_text(folder / "results.json", '{"a": 1}')
        assert fileio.read_member(folder / "results.json") == b'{"a": 1}'
        assert fileio.read_text_input(folder / "results.json") == '{"a": 1}'
    with pytest.raises(ValueError, match="O_TRUNC"):
        fileio.open_member(folder / "x", os.O_WRONLY | os.O_TRUNC)


# -- the leaderboard on the command line ---------------------------------------------------------

_QUICK = ["--quick", "--trials", "2", "--experiments", "mrae", "--policies", "trivial,none"]


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lbf") / "run"
    assert main(["leaderboard", "small-cubic", *_QUICK, "--out", str(out), "--json"]) == 0
    return out


def _lb(capsys, *argv: str) -> tuple[int, str]:
    code = main(["leaderboard", *argv])
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize("kind", PLANTS)
@pytest.mark.parametrize("name", MEMBERS)
def test_resume_refuses_every_planted_member_before_writing(base_run, tmp_path, capsys, kind, name) -> None:
    """The probe: a ledger.jsonl symlinked to a file outside (a copy of /bin/ls lost its tail) and a
    command.txt symlinked to a 0600 file (copied into a readable one); and the rest of the family."""
    outside = _outside(tmp_path)
    run = tmp_path / "run"
    shutil.copytree(base_run, run)
    if name == LEDGER_NAME:  # the link's target is a ledger-looking file without a final newline
        (outside / "secret").chmod(0o644)
        (outside / "secret").write_bytes((base_run / LEDGER_NAME).read_bytes() + b'{"kind": "unit"')
    before = _snapshot(outside)
    inside = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and not p.is_symlink()
              and p.name != name}
    _plant(kind, run / name, outside)
    code, err = _lb(capsys, "small-cubic", *_QUICK, "--out", str(run), "--resume", "--json")
    assert code == 2, err
    assert name in _one_line(err.strip())
    assert _snapshot(outside) == before
    now = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and not p.is_symlink() and p.name != name}
    now.pop(fileio.LOCK_NAME, None)
    inside.pop(fileio.LOCK_NAME, None)
    assert now == inside  # nothing in the folder written either
    for data in now.values():
        assert b"secret-0600" not in data


def test_a_resume_of_a_regular_ledger_still_cuts_its_partial_line(base_run, tmp_path, capsys) -> None:
    run = tmp_path / "run"
    shutil.copytree(base_run, run)
    whole = (run / LEDGER_NAME).read_bytes()
    with open(run / LEDGER_NAME, "ab") as f:
        f.write(b'{"kind": "unit", "unit": "mr')
    code, err = _lb(capsys, "small-cubic", *_QUICK, "--out", str(run), "--resume", "--json")
    assert code == 0, err
    assert (run / LEDGER_NAME).read_bytes() == whole  # cut, nothing to add: every unit was there


def test_a_refused_resume_leaves_a_foreign_ledger_uncut(base_run, tmp_path, capsys) -> None:
    run = tmp_path / "run"
    shutil.copytree(base_run, run)
    with open(run / LEDGER_NAME, "ab") as f:
        f.write(b'{"kind": "unit", "unit": "mr')
    data = (run / LEDGER_NAME).read_bytes()
    code, err = _lb(capsys, "small-cubic", *_QUICK, "--seed", "7", "--out", str(run), "--resume")
    assert code == 2 and "plan.seed" in err
    assert (run / LEDGER_NAME).read_bytes() == data


# -- a run owns its folder -----------------------------------------------------------------------

def _holder(folder: Path) -> subprocess.Popen:
    """Another process holding the folder's lock until its stdin closes."""
    code = textwrap.dedent(f"""
        import sys
        from scidmz.fileio import own_folder
        with own_folder({str(folder)!r}, "--out"):
            print("held", flush=True)
            sys.stdin.read()
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")})
    assert p.stdout is not None and p.stdout.readline().strip() == b"held"
    return p


@contextlib.contextmanager
def _held(folder: Path):
    p = _holder(folder)
    try:
        yield p.pid
    finally:
        assert p.stdin is not None
        p.stdin.close()
        p.wait(timeout=30)


def test_own_folder_is_exclusive_across_processes_and_reentrant_within_one(tmp_path) -> None:
    folder = tmp_path / "run"
    with _held(folder) as pid:
        with pytest.raises(FolderBusy, match=rf"another scidmz run \(pid {pid}\) is using this folder"):
            with own_folder(folder, "--out"):
                pass
    with own_folder(folder, "--out") as a, own_folder(folder, "--out") as b:
        assert a is b  # nested in one process: one lock
    with own_folder(folder, "--out"):  # released after the outer block
        assert (folder / fileio.LOCK_NAME).read_text().strip() == str(os.getpid())
    assert not (folder / fileio.LOCK_NAME).exists()  # the folder keeps nothing of the lock
    new = tmp_path / "new"
    with pytest.raises(RuntimeError), own_folder(new, "--out"):
        assert new.is_dir()
        raise RuntimeError("a later check refused the run")
    assert not new.exists()  # a folder made for a refused run is not left behind


@pytest.mark.parametrize("argv", [
    ["leaderboard", "small-cubic", *_QUICK],
    ["leaderboard", "--render-only"],
    ["evaluate", "small-cubic", "--policies", "trivial", "--trials", "2", "--experiments", "mrae", "--quick"],
    ["reproduce", "jenks", "--quick"],
    ["tune", "small-cubic", "--policy", "pi", "--generations", "1", "--population", "2", "--parents", "1"],
])
def test_a_second_run_on_an_owned_folder_is_one_line_exit_2(tmp_path, capsys, argv) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "results.json").write_text("{}")
    with _held(folder) as pid:
        code = main([*argv, "--out", str(folder)])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert f"another scidmz run (pid {pid})" in _one_line(err)
    assert json.loads((folder / "results.json").read_text()) == {}  # nothing written


def test_a_planted_lock_file_is_refused(tmp_path) -> None:
    outside = _outside(tmp_path)
    folder = tmp_path / "run"
    folder.mkdir()
    for kind in PLANTS:
        _plant(kind, folder / fileio.LOCK_NAME, outside)
        with pytest.raises(DestinationError, match="lock file"):
            with own_folder(folder, "--out"):
                pass
    assert (outside / "secret").read_bytes() == SECRET


# -- a ledger counts the units of its plan, once ------------------------------------------------

def _ledger_bytes(lines: list[dict]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in lines)


_HEAD = {"kind": "header", "format_version": 1}
_PLAN = {(u, p, i) for u in ("mrae", "fct") for p in ("pi", "none") for i in range(3)}


def _unit(u: str, p: str, i: int) -> dict:
    return {"kind": "unit", "unit": u, "policy": p, "trial": i, "metrics": {}}


@pytest.mark.parametrize("extra,msg", [
    *[(_unit(*k), "repeats") for k in sorted(_PLAN)],  # every unit, a second copy of it
    (_unit("mrae", "pi", 3), "plan does not name"),  # one trial past the count
    (_unit("mrae", "mlc", 0), "plan does not name"),  # a policy the plan does not run
    (_unit("short", "pi", 0), "plan does not name"),  # a kind the plan does not run
    ({**_unit("mrae", "pi", 0), "trial": -1}, "not a unit line"),
    ({**_unit("mrae", "pi", 0), "trial": True}, "not a unit line"),
    ({**_unit("mrae", "pi", 0), "trial": "0"}, "not a unit line"),
])
def test_a_ledger_line_outside_the_plan_or_repeated_is_refused(extra, msg) -> None:
    lines = [_HEAD, *(_unit(*k) for k in sorted(_PLAN))]
    head, done, _ = parse_ledger(_ledger_bytes(lines), "ledger", _PLAN)
    assert set(done) == _PLAN
    with pytest.raises(ValueError, match=msg) as exc:
        parse_ledger(_ledger_bytes([*lines, extra]), "ledger", _PLAN)
    _one_line(str(exc.value))


def test_two_runs_interleaved_in_one_ledger_are_refused_on_resume(base_run, tmp_path, capsys) -> None:
    """The probe: a second run's trials appended under the first one's header were summed."""
    run = tmp_path / "run"
    shutil.copytree(base_run, run)
    lines = (run / LEDGER_NAME).read_bytes().splitlines(keepends=True)
    with open(run / LEDGER_NAME, "ab") as f:
        f.write(lines[1])  # a unit written twice
    data = (run / LEDGER_NAME).read_bytes()
    code, err = _lb(capsys, "small-cubic", *_QUICK, "--out", str(run), "--resume")
    assert code == 2 and "repeats" in _one_line(err.strip())
    assert (run / LEDGER_NAME).read_bytes() == data


# -- a Ctrl-C at the last moment ------------------------------------------------------------------

_LB = "scidmz.evaluation.leaderboard"
_STAGES = [(f"{_LB}.run", "results_doc"), (f"{_LB}.run", "write_results"), (f"{_LB}.run", "render_outputs"),
           ("scidmz.plots", "plot_ranking"), ("scidmz.plots", "save_figure"), (f"{_LB}.results", "render"),
           (f"{_LB}.results", "write_report")]


@pytest.fixture
def default_sigint():
    """Python's own SIGINT handler, as an interactive shell's CLI process starts with. A test run
    started in the background by a non-interactive shell inherits SIGINT ignored, and Python keeps
    it ignored: the stages outside the deferral then returned 0 instead of 130 (a fresh-clone run
    started so), which says nothing about the leaderboard."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


@pytest.mark.parametrize("module,stage", _STAGES)
def test_a_ctrl_c_in_any_stage_of_the_final_pass_leaves_results_json(tmp_path, monkeypatch, module, stage,
                                                                    default_sigint) -> None:
    """The probe: a Ctrl-C during the final render lost results.json although the ledger held every
    unit. A real SIGINT is sent inside each stage; results.json must be written from the ledger."""
    import importlib

    mod = importlib.import_module(module)
    real = getattr(mod, stage)
    hit = []

    def interrupted(*a, **k):
        if not hit:
            hit.append(stage)
            os.kill(os.getpid(), signal.SIGINT)
        return real(*a, **k)

    monkeypatch.setattr(mod, stage, interrupted)
    out = tmp_path / "run"
    code = main(["leaderboard", "small-cubic", *_QUICK, "--out", str(out), "--json"])
    assert hit and code == 130
    doc = json.loads((out / "results.json").read_text())
    assert doc["complete"] is True and doc["units_left"] == 0
    led = [json.loads(s) for s in (out / LEDGER_NAME).read_text().splitlines()[1:]]
    assert sum(r["trials"] for r in doc["rows"] if r["experiment"] == "mrae") == len(led)


def test_a_second_saturator_study_on_one_work_folder_is_one_line_exit_2(tmp_path) -> None:
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "pi_vs_mlc_saturator.py"
    work = tmp_path / "work"
    with _held(work) as pid:
        r = subprocess.run([sys.executable, str(script), "--cca", "cubic", "--quick", "--work", str(work)],
                           capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")})
    assert r.returncode == 2, r.stderr
    assert f"another scidmz run (pid {pid})" in _one_line(r.stderr.strip())
    assert not (work / "identity.json").exists()


@pytest.mark.parametrize("kind", PLANTS)
def test_reproduce_resume_never_reads_a_planted_dataset(tmp_path, kind) -> None:
    from scidmz.evaluation.mlc.reproduce import _reusable_dataset
    from scidmz.scenario import load_scenario

    outside = _outside(tmp_path)
    before = _snapshot(outside)
    folder = tmp_path / "rep" / "cubic"
    folder.mkdir(parents=True)
    with own_folder(tmp_path / "rep", "--out"):
        _plant(kind, folder / "identification.parquet", outside)
        with pytest.raises(DestinationError, match="identification.parquet"):
            _reusable_dataset(folder / "identification.parquet", load_scenario("testbed"), 10.0, 0, "fluid", None)
    assert _snapshot(outside) == before


def test_the_probe_two_leaderboards_started_together_on_one_out(tmp_path) -> None:
    """The probe: two runs on one --out both exited 0, one's trials under the other's header. Now
    exactly one runs; the other is one line, exit 2; the ledger holds each unit once."""
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "scidmz.cli", "leaderboard", "small-cubic", *_QUICK, "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    res = [(p.wait(timeout=600), p.stderr.read() if p.stderr else "") for p in procs]
    assert sorted(c for c, _ in res) == [0, 2], res  # one ran; the other was refused (held, or its ledger)
    refused = next(err for c, err in res if c == 2)
    assert len(refused.strip().splitlines()) == 1 and ("another scidmz run" in refused or "exists" in refused)
    lines = [json.loads(s) for s in (out / LEDGER_NAME).read_text().splitlines()]
    keys = [(r["unit"], r["policy"], r["trial"]) for r in lines[1:]]
    assert len(keys) == len(set(keys)) == 2 * 2  # two policies x two trials, once each
