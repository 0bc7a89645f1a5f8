"""Property-based tests (hypothesis) over the CLI's argument parser, scenario loader and outputs.

Whatever the input -- random keys, hostile numbers (inf, nan, 1e999, 400
digits, negative), strings, binary, and paths that are directories, device
nodes, FIFOs, read-only mounts or have missing parents -- scidmz must answer
with exit code 0 (a valid input) or 1/2 and then exactly one line on stderr,
no traceback, nothing created or changed outside its own temp dir, within
bounded time and memory.

Cheap cases run in-process through ``cli.main`` (no interpreter start-up);
the ones that could exhaust the machine (huge scenarios, tiny periods) run as
a subprocess under ``RLIMIT_AS`` = 4 GiB and a timeout. Example counts are
CI-sized and derandomized (same examples every run, so CI is not flaky);
``HYPOTHESIS_PROFILE=deep`` runs ten times as many random ones.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
MEM_LIMIT = 4 << 30  # RLIMIT_AS for subprocess runs
CALL_TIMEOUT = 120.0  # s, per CLI call, generous for a loaded 2-core machine

# CI: the same examples every run, no example database written into the repository, and no
# shrinking (each example can be a subprocess; a failure is reported as generated).
settings.register_profile(
    "ci", max_examples=12, deadline=None, derandomize=True, database=None, print_blob=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "deep", max_examples=120, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
SCALE = 10 if PROFILE == "deep" else 1


def _examples(n: int) -> Any:
    return settings(settings.get_profile(PROFILE), max_examples=n * SCALE)


# -- running the CLI -------------------------------------------------------------------


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def run_inprocess(argv: list[str], cwd: Path, timeout: float = CALL_TIMEOUT) -> tuple[int, str, str]:
    """``scidmz argv`` through ``cli.main`` in this process: (exit code, stdout, stderr)."""
    from scidmz import cli, fileio

    out, err = io.StringIO(), io.StringIO()
    old_cwd = os.getcwd()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli.main(list(argv))
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
            except _Timeout:
                pytest.fail(f"scidmz {argv!r} ran past {timeout} s")
            except BaseException as exc:  # noqa: BLE001 - reported as the failure it is
                import traceback

                err.write("Traceback (escaped cli.main)\n" + "".join(traceback.format_exception(exc)))
                rc = -1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        os.chdir(old_cwd)
        fileio.set_make_parents(False)  # a --mkdir must not leak into the next call
    return int(rc), out.getvalue(), err.getvalue()


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])),
            "PYTHONDONTWRITEBYTECODE": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}


def run_subprocess(argv: list[str | bytes], cwd: Path, timeout: float = CALL_TIMEOUT,
                   prefix: list[str] | None = None) -> tuple[int, str, str]:
    """``python -m scidmz.cli argv`` under RLIMIT_AS = 4 GiB and a timeout."""
    cmd = [*(prefix or []), sys.executable, "-m", "scidmz.cli", *argv]
    try:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, timeout=timeout, env=_env(), preexec_fn=_limits)
    except subprocess.TimeoutExpired:
        pytest.fail(f"scidmz {argv!r} ran past {timeout} s")
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def assert_refused_cleanly(argv: Any, rc: int, err: str, allow_ok: bool = False) -> None:
    """Exit 1 or 2 (or 0 where the input may be valid) and then exactly one line on stderr, no traceback."""
    assert "Traceback" not in err, f"scidmz {argv!r}: traceback\n{err}"
    if allow_ok and rc == 0:
        return
    assert rc in (1, 2), f"scidmz {argv!r}: exit {rc}\n{err}"
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].strip(), f"scidmz {argv!r}: expected one line on stderr, got\n{err}"
    # One line, and a useful one: limits are validation, not crashes caught at the last moment.
    for bad in ("MemoryError", "OverflowError", "internal error", "out of memory", "cannot convert float",
                "non-finite rate"):
        assert bad not in err, f"scidmz {argv!r}: {err.strip()}"


def snapshot(*dirs: Path) -> dict[str, Any]:
    """Names, kinds, sizes and content hashes (regular files) of everything under ``dirs``."""
    out: dict[str, Any] = {}
    for d in dirs:
        for dirpath, dirnames, filenames in os.walk(d):
            dirnames[:] = [n for n in dirnames if n not in ("__pycache__", ".git", ".hypothesis", ".pytest_cache")]
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                st_ = os.lstat(p)
                h = None
                if stat.S_ISREG(st_.st_mode) and st_.st_size < (1 << 20):
                    h = hashlib.sha256(p.read_bytes()).hexdigest()
                out[str(p)] = (stat.S_IFMT(st_.st_mode), st_.st_size if stat.S_ISREG(st_.st_mode) else 0, h,
                               st_.st_rdev)
    return out


def repo_entries() -> set[str]:
    return {p.name for p in ROOT.iterdir()}


# -- what hostile input looks like -------------------------------------------------------

HOSTILE_NUMBERS = [
    "inf", "-inf", "+inf", "nan", "NaN", "-nan", "Infinity", "1e999", "-1e999", "1e400", "1e308", "-1e308",
    "9" * 400, "-" + "9" * 400, "0", "-0", "-1", "1e-9", "1e-300", "5e-324", "0.1ns", "1ns", "1e-999",
    "18446744073709551617", "2**64", "0x10", "1_000", "", " ", "1 2", "1,5", "true", "[]", "{}", "'x'",
    "10000000", "1000000", "1e9", "100T", "1e999M", "infM", "nanms", "-5s", "1e999s", "3h", "∞",
]

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=24)
numbers = st.one_of(
    st.sampled_from(HOSTILE_NUMBERS),
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.builds(lambda a, u: a + u, st.sampled_from(HOSTILE_NUMBERS[:12]), st.sampled_from(["", "M", "G", "s", "ms"])),
)
values = st.one_of(numbers, texts)


def _scenario_keys() -> list[str]:
    rc, out, err = run_inprocess(["scenarios", "testbed", "--json"], Path.cwd())
    assert rc == 0, err
    doc = json.loads(out.strip().splitlines()[-1])["scenario"]
    keys: list[str] = []

    def walk(d: dict[str, Any], pre: str) -> None:
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v, f"{pre}{k}.")
            elif k not in ("name", "description"):
                keys.append(pre + k)

    walk(doc, "")
    return keys


_KEYS: list[str] = []


def scenario_keys() -> list[str]:
    if not _KEYS:
        _KEYS.extend(_scenario_keys())
    return _KEYS


keys = st.one_of(
    st.deferred(lambda: st.sampled_from(scenario_keys())),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz._", min_size=1, max_size=30),
    texts,
)


# -- 1. the argument parser --------------------------------------------------------------

COMMANDS = ["simulate", "scenarios", "telemetry", "evaluate", "reproduce", "identify", "train", "tune", "control",
            "testbed"]
OPTION_WORDS = ["--set", "--out", "--plot", "--duration", "--seed", "--target", "--policy", "--plant", "--json",
                "--period", "--model", "--gains", "--trials", "--epochs", "--episode", "--log", "--token-file",
                "--api", "--prefix", "--all", "--mkdir", "--plant-opt", "-h", "--version", "--", "-"]


@_examples(40)
@given(argv=st.lists(st.one_of(st.sampled_from(COMMANDS), st.sampled_from(OPTION_WORDS), values), max_size=8))
def test_parser_answers_in_one_line(argv):
    """Only the parser: any argv parses or is refused with one line and exit 2 (nothing is executed)."""
    from scidmz.cli import build_parser

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            build_parser().parse_args(argv)
            rc = 0
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 2
    if "-h" in argv or "--help" in argv or "--version" in argv:
        return  # help and version print to stdout and exit 0
    assert_refused_cleanly(argv, rc, err.getvalue(), allow_ok=True)


# -- 2. scenario overrides and numbers on the command line ------------------------------


@_examples(25)
@given(sets=st.lists(st.tuples(keys, values), min_size=1, max_size=3),
       duration=st.one_of(st.just("1"), numbers), seed=st.one_of(st.just("1"), numbers),
       target=st.one_of(st.just("60M"), numbers))
def test_simulate_with_hostile_overrides_and_numbers(tmp_path, sets, duration, seed, target):
    argv = ["simulate", "testbed", "--duration", duration, "--seed", seed, "--target", target, "--json"]
    for k, v in sets:
        argv += ["--set", f"{k}={v}"]
    with tempfile.TemporaryDirectory(dir=tmp_path) as d:
        cwd = Path(d)
        repo = repo_entries()
        rc, out, err = run_inprocess(argv, cwd)
        assert_refused_cleanly(argv, rc, err, allow_ok=True)
        if rc == 0:
            # A valid run: its --json line is JSON (no Infinity/NaN).
            json.loads(out.strip().splitlines()[-1], parse_constant=lambda c: pytest.fail(f"{c} in --json: {argv}"))
        assert list(cwd.iterdir()) == [] or {p.name for p in cwd.iterdir()} <= {"mlruns"}
        assert repo_entries() == repo


# The ones that could exhaust memory or time if a limit were missing: a subprocess under RLIMIT_AS.
HEAVY = [  # (extra arguments, key the refusal must name; None: may be valid, then it must finish in bounds)
    (["--set", "campus.hosts=10000000"], "hosts"), (["--set", "campus.flows_per_host=1000000"], "flows_per_host"),
    (["--set", "period=1e-9"], "period"), (["--set", "dtn.streams=inf"], "streams"), (["--set", "seed=1e400"], "seed"),
    (["--duration=1e999"], "duration"), (["--set", "link.capacity=inf"], "capacity"), (["--set", "dtn.rtt=inf"], "rtt"),
    (["--set", "link.buffer=1e30"], "buffer"), (["--set", "duration=1e12"], "duration"), (["--target", "0"], None),
    (["--set", "campus.hosts=100000", "--set", "campus.flows_per_host=1000"], None),
    (["--set", "period=1e-3", "--duration", "1e9"], "duration"),
]


@pytest.mark.parametrize(("extra", "key"), HEAVY, ids=lambda a: " ".join(a) if isinstance(a, list) else str(a))
def test_resource_hungry_inputs_are_bounded(tmp_path, extra, key):
    argv = ["simulate", "testbed", "--target", "60M", "--json", *extra]
    if not any(a.startswith("--duration") for a in extra):
        argv += ["--duration", "2"]
    rc, out, err = run_subprocess(argv, tmp_path)
    assert_refused_cleanly(argv, rc, err, allow_ok=key is None)
    if rc == 0:
        json.loads(out.strip().splitlines()[-1], parse_constant=lambda c: pytest.fail(f"{c} in --json: {argv}"))
    else:
        assert rc == 2 and (key is None or key in err), f"{argv}: {err.strip()}"
    assert list(tmp_path.iterdir()) == []


# -- 3. scenario files ----------------------------------------------------------------


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return {float("inf"): "inf", float("-inf"): "-inf"}.get(v, "nan" if v != v else repr(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))  # a TOML basic string


toml_scalars = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(), texts, st.sampled_from(HOSTILE_NUMBERS), st.lists(st.integers(-5, 5), max_size=3),
)


@st.composite
def toml_docs(draw: Any) -> str:
    """A TOML document: the testbed's keys (some of them) with hostile values, plus random keys and tables."""
    lines: list[str] = []
    tables: dict[str, list[str]] = {}
    for key in draw(st.lists(st.one_of(st.sampled_from(scenario_keys()),
                                       st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)),
                             max_size=6, unique=True)):
        head, _, leaf = key.rpartition(".")
        line = f"{json.dumps(leaf)} = {_toml_value(draw(toml_scalars))}"
        (tables.setdefault(head, []) if head else lines).append(line)
    for head, body in tables.items():
        lines.append(f"[{head}]")
        lines.extend(body)
    return "\n".join(lines) + "\n"


scenario_blobs = st.one_of(
    toml_docs().map(str.encode),
    st.binary(max_size=256),
    st.sampled_from([b"", b"\n", b"\x00" * 64, b"\xff\xfe\x00\x00", b"[link]\ncapacity = \xff\n", b"a = [[[[[[[[",
                     b"[" * 5000, b"x = 1\n" * 3, b"period = 1e-9\n", b'[campus]\nhosts = 10000000\n']),
)


@_examples(30)
@given(blob=scenario_blobs, suffix=st.sampled_from([".toml", ".txt", ""]))
def test_scenario_files_load_or_fail_in_one_line(tmp_path, blob, suffix):
    with tempfile.TemporaryDirectory(dir=tmp_path) as d:
        cwd = Path(d)
        f = cwd / f"scen{suffix}"
        f.write_bytes(blob)
        before = snapshot(cwd)
        for argv in (["scenarios", str(f), "--json"],):
            rc, out, err = run_inprocess(argv, cwd)
            assert_refused_cleanly(argv, rc, err, allow_ok=True)
            if rc == 0:
                json.loads(out.strip().splitlines()[-1], parse_constant=lambda c: pytest.fail(f"{c} in --json"))
        assert snapshot(cwd) == before


def _special_paths(d: Path) -> dict[str, Path]:
    """A directory, a FIFO, a socket, a device node (root), links to them, a missing file, a file as a folder."""
    import socket

    (d / "adir").mkdir()
    os.mkfifo(d / "fifo")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(d / "sock"))
    s.close()
    (d / "file").write_text("x")
    out = {"dir": d / "adir", "fifo": d / "fifo", "socket": d / "sock", "missing": d / "missing.toml",
           "file_as_dir": d / "file" / "x.toml", "link_to_fifo": d / "lfifo.toml", "dangling": d / "dangling.toml"}
    (d / "lfifo.toml").symlink_to(d / "fifo")
    (d / "dangling.toml").symlink_to(d / "nowhere")
    if os.geteuid() == 0:
        os.mknod(d / "zero", 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # like /dev/zero: endless input
        os.mknod(d / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        out["devzero"] = d / "zero"
        out["devnull"] = d / "null"
        (d / "lzero.toml").symlink_to(d / "zero")
        out["link_to_devzero"] = d / "lzero.toml"
    return out


def test_scenario_paths_that_are_not_files(tmp_path):
    """A directory, FIFO (would block), device node (/dev/zero: endless) or missing file as scenario."""
    paths = _special_paths(tmp_path)
    before = snapshot(tmp_path)
    for name, p in paths.items():
        for argv in (["scenarios", str(p)], ["simulate", str(p), "--duration", "1", "--target", "60M"]):
            rc, out, err = run_inprocess(argv, tmp_path, timeout=30)
            assert_refused_cleanly((name, argv), rc, err)
    assert snapshot(tmp_path) == before


# -- 4. output paths --------------------------------------------------------------------


OUT_OPTIONS = ["--out", "--plot"]


def test_output_paths_that_must_not_be_written(tmp_path):
    """--out/--plot onto a directory, FIFO, socket, device node, link to one, missing parents: one line, untouched."""
    paths = _special_paths(tmp_path)
    paths.pop("missing")
    paths.pop("dangling")  # a new file in place of a dangling link is allowed (the link is replaced)
    paths["no_parent"] = tmp_path / "no" / "such" / "dir" / "t.parquet"
    before = snapshot(tmp_path)
    for name, p in paths.items():
        for opt in OUT_OPTIONS:
            argv = ["simulate", "testbed", "--duration", "1", "--target", "60M", opt, str(p)]
            rc, out, err = run_inprocess(argv, tmp_path, timeout=60)
            assert_refused_cleanly((name, argv), rc, err)
            assert "simulated" not in out, f"{name}: the run happened before the refusal"
    assert snapshot(tmp_path) == before
    assert not (tmp_path / "no").exists()


def test_missing_parents_are_created_only_with_mkdir(tmp_path):
    p = tmp_path / "a" / "b" / "t.parquet"
    rc, out, err = run_inprocess(["simulate", "testbed", "--duration", "1", "--target", "60M", "--out", str(p)],
                                 tmp_path)
    assert_refused_cleanly("no --mkdir", rc, err)
    assert "--mkdir" in err and not (tmp_path / "a").exists()
    rc, out, err = run_inprocess(["simulate", "testbed", "--duration", "1", "--target", "60M", "--out", str(p),
                                  "--mkdir"], tmp_path)
    assert rc == 0, err
    assert p.is_file()


def _can_private_mount() -> bool:
    if os.geteuid() != 0:
        return False
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
    return r.returncode == 0


@pytest.mark.skipif(not _can_private_mount(), reason="needs root and unshare -m for a private read-only mount")
@pytest.mark.parametrize("opt", ["--out", "--plot"])
def test_read_only_mount_is_refused_before_any_work(tmp_path, opt):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "old.parquet").write_text("old")
    before = snapshot(tmp_path)
    for target in (ro / "new.parquet", ro / "old.parquet"):
        if opt == "--plot":
            target = target.with_suffix(".png")
        argv = ["simulate", "testbed", "--duration", "1", "--target", "60M", opt, str(target)]
        # The bind mount exists only inside the child's private mount namespace.
        rc, out, err = run_subprocess(
            argv, tmp_path,
            prefix=["unshare", "-m", "--propagation", "private", "sh", "-c",
                    f'mount --bind -o ro "{ro}" "{ro}" && exec "$0" "$@"'],
        )
        assert_refused_cleanly(argv, rc, err)
        assert "read-only" in err
        assert "simulated" not in out
    assert snapshot(tmp_path) == before


@_examples(15)
@given(name=st.one_of(texts.map(lambda s: s.replace("/", "_")), st.sampled_from(["", ".", "..", "/", "//", "a/", "a" * 300, "/proc/self/mem",
                                               "/sys/kernel/notes", "/dev/full"])))
def test_random_output_names(tmp_path, name):
    """Random --out names relative to a temp dir: written there (exit 0) or refused in one line."""
    with tempfile.TemporaryDirectory(dir=tmp_path) as d:
        cwd = Path(d)
        argv = ["simulate", "testbed", "--duration", "1", "--target", "60M", "--out", name]
        repo = repo_entries()
        rc, out, err = run_inprocess(argv, cwd)
        assert_refused_cleanly(argv, rc, err, allow_ok=True)
        if not name.strip():  # an empty --out is refused, it does not mean "no output"
            assert rc == 2 and "empty path" in err, (name, err)
        if rc == 0:
            written = Path(cwd, name).resolve()
            assert written.is_relative_to(cwd.resolve()) and written.is_file(), (name, written)
        assert repo_entries() == repo


def test_binary_argv_bytes(tmp_path):
    """Non-UTF-8 bytes in argv (surrogate-escaped by Python) get one line, not a UnicodeEncodeError."""
    for argv in ([b"simulate", b"testbed", b"--set", b"campus.hosts=\xff\xfe", b"--duration", b"1"],
                 [b"simulate", b"\xff.toml"], [b"scenarios", b"\xc3\x28"],
                 [b"simulate", b"testbed", b"--duration", b"1", b"--out", b"\xff/x.parquet"]):
        rc, out, err = run_subprocess(argv, tmp_path)
        assert_refused_cleanly(argv, rc, err)
    assert list(tmp_path.iterdir()) == []


# -- 5. telemetry replay on generated captures ---------------------------------------------


def _pcap(records: list[tuple[int, int, bytes, int]], nano: bool) -> bytes:
    """A classic pcap (Ethernet) from (ts_sec, ts_frac, data, orig_len) records, written by hand so any
    timestamp or length can be expressed (the project's own writer may refuse some)."""
    import struct

    out = [struct.pack("<IHHiIII", 0xA1B23C4D if nano else 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)]
    for sec, frac, data, orig in records:
        out.append(struct.pack("<IIII", sec & 0xFFFFFFFF, frac & 0xFFFFFFFF, len(data), orig & 0xFFFFFFFF) + data)
    return b"".join(out)


@st.composite
def captures(draw: Any) -> bytes:
    from scidmz.telemetry.sources.synth import frame

    n = draw(st.integers(min_value=0, max_value=12))
    base = draw(st.sampled_from([0, 1, 1_700_000_000, 2**31, 2**32 - 2]))
    records = []
    for _ in range(n):
        sec = draw(st.one_of(st.just(base), st.integers(0, 2**32 - 1), st.integers(base, base + 3)))
        frac = draw(st.one_of(st.integers(0, 999_999), st.integers(0, 2**32 - 1)))
        kind = draw(st.sampled_from(["dtn", "ack", "campus", "random", "short"]))
        if kind == "random":
            data = draw(st.binary(max_size=80))
        else:
            src, dst = {"dtn": ("10.3.0.2", "10.1.0.5"), "ack": ("10.1.0.5", "10.3.0.2"),
                        "campus": ("10.2.0.7", "10.1.0.9"), "short": ("10.3.0.2", "10.1.0.5")}[kind]
            data = frame(src, dst, 5001, 40000, seq=draw(st.integers(0, 2**32 - 1)),
                         ack=draw(st.integers(0, 2**32 - 1)), flags=draw(st.sampled_from(["A", "PA", "S", "F", "R"])),
                         payload=draw(st.integers(0, 64)))
            if kind == "short":
                data = data[: draw(st.integers(0, len(data)))]
        orig = draw(st.one_of(st.just(len(data)), st.integers(0, 2**32 - 1)))
        records.append((sec, frac, data, orig))
    blob = _pcap(records, nano=draw(st.booleans()))
    if draw(st.integers(0, 9)) == 0:
        blob = blob[: draw(st.integers(0, len(blob)))]  # a truncated file
    return blob


PERIODS = ["1s", "1ms", "1ns", "0.1ns", "1e999", "-1s", "0", "nan", "inf", "100ms", "3600s", "1e-9", "x"]


@_examples(10)
@given(blob=captures(), period=st.sampled_from(PERIODS), ingress=st.booleans())
def test_replay_on_generated_captures_is_bounded(tmp_path, blob, period, ingress):
    with tempfile.TemporaryDirectory(dir=tmp_path) as d:
        cwd = Path(d)
        (cwd / "egress.pcap").write_bytes(blob)
        argv = ["telemetry", "replay", "egress.pcap", "--period", period, "--json"]
        if ingress:
            (cwd / "ingress.pcap").write_bytes(blob[: len(blob) // 2])
            argv += ["--ingress-pcap", "ingress.pcap"]
        before = snapshot(cwd)
        rc, out, err = run_subprocess(argv, cwd, timeout=90)
        assert_refused_cleanly(argv, rc, err, allow_ok=True)
        if rc == 0:
            json.loads(out.strip().splitlines()[-1], parse_constant=lambda c: pytest.fail(f"{c} in --json: {argv}"))
        assert snapshot(cwd) == before
