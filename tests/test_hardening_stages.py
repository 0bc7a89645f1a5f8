"""Validation before the work, garbage data, external services, and the small classes.

* Every multi-stage command with one bad late-stage option answers in one line before any stage
  runs or any file is written (``reproduce mlc`` used to run minutes of identification first).
* Training data with inf, NaN, huge values or too few rows is refused, naming the file; no model
  is written, and a model with non-finite weights is refused when loaded.
* A dead tracking server is one line (exit 1) within a bounded time; bad tracking URIs and
  registry names are bad input (exit 2).
* ``scidmz control`` without a subcommand, ``--duration`` inside a long period, PyGAD's own
  traceback.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from test_hardening_paths import DATASET, GAINS, MODEL, base_argv
from test_hardening_props import (
    SRC,
    _env,
    _examples,
    assert_refused_cleanly,
    run_inprocess,
    run_subprocess,
    snapshot,
)

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FAST = 20.0  # s; a refusal before any work (generous for a loaded 2-core machine)

# -- multi-stage commands: one bad late-stage option --------------------------------------------------

LATE = [  # reproduce mlc options that only a late stage used to read, with values that stage refuses
    ("--episode", ["0", "-1", "0.5", "1e12"]), ("--epochs", ["0", "10001"]), ("--cv-folds", ["1", "101", "-1"]),
    ("--identify-duration", ["-5", "0", "1e15"]), ("--ns", ["10000000", "0", "1,2,x"]),
    ("--generations", ["0", "10001"]), ("--population", ["1", "10001"]), ("--trials", ["0", "10001"]),
    ("--fct-trials", ["0"]), ("--ns-trials", ["0"]), ("--short-trials", ["0"]), ("--ns-max-flows", ["0"]),
    ("--experiments", ["bogus", "mrae,,x"]), ("--seed", ["-1"]),
]


@_examples(25)
@given(opt=st.sampled_from(LATE).flatmap(lambda o: st.tuples(st.just(o[0]), st.sampled_from(o[1]))),
       netns=st.booleans())
def test_reproduce_refuses_a_bad_late_stage_option_before_any_stage(tmp_path: Path, opt: tuple[str, str],
                                                                   netns: bool) -> None:
    import tempfile

    with tempfile.TemporaryDirectory(dir=tmp_path) as td:
        d = Path(td)
        argv = ["reproduce", "mlc", "--quick", "--out", str(d / "rep"), opt[0], opt[1]]
        if netns:
            argv += ["--plant", "netns"]
        t0 = time.monotonic()
        rc, out, err = run_inprocess(argv, d)
        assert_refused_cleanly(argv, rc, err)
        assert rc == 2 and time.monotonic() - t0 < FAST, (argv, err)
        assert "->" not in err and "==" not in err  # no stage started
        assert list(d.iterdir()) == [], argv


@pytest.mark.parametrize("argv_extra", [["--plant", "netns"], ["--netns"], ["--trials", "3"], ["--resume"],
                                        ["--tracking-uri", "x"]])
@pytest.mark.parametrize("paper", ["abc", "ffs", "jenks"])
def test_reproduce_refuses_options_its_paper_does_not_take(tmp_path: Path, paper: str, argv_extra: list[str]) -> None:
    from scidmz.commands.reproduce import APPLIES

    dest = argv_extra[0].lstrip("-").replace("-", "_")
    if dest in APPLIES[paper]:
        pytest.skip(f"{paper} takes {argv_extra[0]}")  # (and would run it: never here)
    argv = ["reproduce", paper, "--quick", "--out", str(tmp_path / "rep"), *argv_extra]
    rc, out, err = run_inprocess(argv, tmp_path)
    assert_refused_cleanly(argv, rc, err)
    assert rc == 2 and argv_extra[0] in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("case", ["identify_plot", "replay_plot", "train_register_dotdot", "train_register_slash",
                                  "train_register_long", "control_seed", "tune_late_episode", "tune_refine",
                                  "tune_refine_factor", "tune_refine_many", "tune_factors_alone"])
def test_other_multi_stage_commands_check_everything_first(tmp_path: Path, case: str) -> None:
    argv = {
        "identify_plot": [*base_argv("identify", tmp_path), "--plot", str(tmp_path / "d.xyz")],
        "replay_plot": [*base_argv("telemetry replay", tmp_path), "--plot", str(tmp_path / "x.xyz")],
        "train_register_dotdot": [*base_argv("train", tmp_path), "--register", ".."],
        "train_register_slash": [*base_argv("train", tmp_path), "--register", "a/b"],
        "train_register_long": [*base_argv("train", tmp_path), "--register", "n" * 5000],
        "control_seed": ["control", "run", "testbed", "--target", "60M", "--api", "127.0.0.1:0", "--token-file",
                         str(tmp_path / "tok"), "--duration", "1", "--seed", "-1"],
        "tune_late_episode": [*base_argv("tune", tmp_path)[:-2], "--episode", "1"],
        "tune_refine": [*base_argv("tune", tmp_path), "--refine-plant", "bogus"],
        # the refinement's factors were checked only after the GA
        "tune_refine_factor": [*base_argv("tune", tmp_path), "--refine-plant", "fluid", "--refine-factors", "1,-1"],
        "tune_refine_many": [*base_argv("tune", tmp_path), "--refine-plant", "fluid", "--refine-factors",
                             ",".join(["1"] * 101)],
        "tune_factors_alone": [*base_argv("tune", tmp_path), "--refine-factors", "1,0.3"],
    }[case]
    must = {"identify_plot": "--plot", "replay_plot": "--plot", "control_seed": "--seed",
            "tune_late_episode": "--episode", "tune_refine": "--refine-plant", "tune_refine_factor": "--refine-factors",
            "tune_refine_many": "--refine-factors", "tune_factors_alone": "--refine-factors"}.get(case, "--register")
    before = snapshot(tmp_path)
    t0 = time.monotonic()
    rc, out, err = run_inprocess(argv, tmp_path)
    assert_refused_cleanly(argv, rc, err)
    assert rc == 2 and must in err and time.monotonic() - t0 < FAST, (argv, err)
    assert snapshot(tmp_path) == before  # no dataset, model, token file or gains written


# -- training data: garbage in, nothing out ------------------------------------------------------------

COLUMNS = ["u", "rate_dtn", "rate_campus", "rtt_dtn", "rtt_campus", "qdelay_dtn", "qdelay_campus", "active_flows"]
BAD_VALUES = [float("inf"), float("-inf"), float("nan"), 1e300, -1e300, 1e13, -1.0, 1e308]


@_examples(12)
@given(col=st.sampled_from(COLUMNS), value=st.sampled_from(BAD_VALUES),
       rows=st.one_of(st.just("all"), st.just("one"), st.integers(min_value=0, max_value=399)))
def test_training_on_garbage_is_refused_and_writes_no_model(tmp_path: Path, col: str, value: float, rows) -> None:
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory(dir=tmp_path) as td:
        d = Path(td)
        t = pq.read_table(DATASET)
        df = t.to_pandas()
        if rows == "all":
            df[col] = value
        else:
            df.loc[df.index[0 if rows == "one" else rows], col] = value
        p = d / "bad.parquet"
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False).replace_schema_metadata(t.schema.metadata), p)
        argv = ["train", str(p), "--out", str(d / "model"), "--epochs", "1", "--folds", "0"]
        rc, out, err = run_inprocess(argv, d)
        assert_refused_cleanly(argv, rc, err)
        assert rc == 2 and str(p) in err and col in err, err
        assert not (d / "model").exists()


@pytest.mark.parametrize("n", [0, 1, 3, 19])
def test_too_few_rows_are_refused(tmp_path: Path, n: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pq.read_table(DATASET)
    p = tmp_path / "short.parquet"
    pq.write_table(pa.Table.from_pandas(t.to_pandas().head(n), preserve_index=False)
                   .replace_schema_metadata(t.schema.metadata), p)
    argv = ["train", str(p), "--out", str(tmp_path / "model"), "--epochs", "1", "--folds", "0"]
    rc, out, err = run_inprocess(argv, tmp_path)
    assert_refused_cleanly(argv, rc, err)
    assert rc == 2 and str(p) in err and not (tmp_path / "model").exists()


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_a_model_with_non_finite_weights_is_refused_naming_the_file(tmp_path: Path, value: float) -> None:
    m = tmp_path / "m"
    shutil.copytree(MODEL, m)
    arrays = dict(np.load(m / "weights.npz"))
    arrays["w0"] = arrays["w0"].copy()
    arrays["w0"][0, 0] = value
    np.savez(m / "weights.npz", **arrays)
    argv = ["simulate", "testbed", "--policy", "mlc", "--model", str(m), "--gains", str(m / "gains.json"),
            "--duration", "2"]
    rc, out, err = run_inprocess(argv, tmp_path)
    assert_refused_cleanly(argv, rc, err)
    assert rc == 2 and str(m / "weights.npz") in err


def test_a_diverged_fit_is_never_saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finite, in-range data can still train badly: the fitted weights are checked before the save."""
    pytest.importorskip("keras")
    from scidmz.models import inverse, train

    real_fit = inverse.InverseModel.fit

    def poisoned(self, X, y):  # noqa: ANN001, ANN202
        real_fit(self, X, y)
        w = self.model_.layers[0].get_weights()
        w[0][0, 0] = np.nan
        self.model_.layers[0].set_weights(w)
        return self

    monkeypatch.setattr(inverse.InverseModel, "fit", poisoned)
    with pytest.raises(ValueError, match="non-finite"):
        train.train_model(str(DATASET), str(tmp_path / "m"), epochs=1, folds=0, track=False)
    assert not (tmp_path / "m").exists() and list(tmp_path.iterdir()) == []


def test_meta_json_is_strict_json() -> None:
    from scidmz.fileio import strict_json

    text = strict_json({"a": float("nan"), "b": [float("inf"), 1.5], "c": np.float64("-inf")})
    assert "NaN" not in text and "Infinity" not in text and '"a": null' in text


# -- external services: mlflow ---------------------------------------------------------------------------


def _silent_server() -> tuple[socket.socket, int]:
    """A socket that accepts TCP connections (the backlog does) but never answers: a hung server."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    return s, s.getsockname()[1]


def _tracking_argvs(tmp_path: Path, uri: str) -> dict[str, list[str]]:
    return {
        "simulate_models_uri": ["simulate", "small-cubic", "--policy", "mlc", "--model", "models:/x/1",
                                "--gains", str(GAINS), "--duration", "2"],
        "evaluate": [*base_argv("evaluate", tmp_path), "--tracking-uri", uri],
        "train": [*base_argv("train", tmp_path), "--tracking-uri", uri],
        "identify": [*base_argv("identify", tmp_path), "--tracking-uri", uri],
    }


@pytest.mark.parametrize(("which", "server"), [("simulate_models_uri", "refused"), ("evaluate", "refused"),
                                               ("train", "refused"), ("identify", "refused"),
                                               ("simulate_models_uri", "silent"), ("train", "silent")])
def test_a_dead_tracking_server_is_one_line_in_bounded_time(tmp_path: Path, which: str, server: str) -> None:
    """Before: no output and no exit within 60 s (mlflow's 7 retries with back-off). The bound here is
    the 10 s of the issue plus the import of mlflow and TensorFlow on a loaded CI machine."""
    sock = None
    if server == "silent":
        sock, port = _silent_server()
        uri = f"http://127.0.0.1:{port}"
    else:
        uri = "http://127.0.0.1:1"
    argv = _tracking_argvs(tmp_path, uri)[which]
    env = {**_env(), "MLFLOW_TRACKING_URI": uri}
    try:
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "scidmz.cli", *argv], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=120)
        took = time.monotonic() - t0
    finally:
        if sock is not None:
            sock.close()
    assert_refused_cleanly(argv, r.returncode, r.stderr)
    assert r.returncode == 1 and "mlflow" in r.stderr, r.stderr
    assert took < 60, took


def test_mlflow_http_settings_are_bounded_and_overridable(monkeypatch: pytest.MonkeyPatch) -> None:
    from scidmz import tracking

    for k in tracking.MLFLOW_HTTP_DEFAULTS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "7")
    tracking._mlflow()
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "7"  # an exported value wins
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "1"
    from mlflow.environment_variables import (
        MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR,
        MLFLOW_HTTP_REQUEST_MAX_RETRIES,
    )

    assert MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() == 1 and MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR.get() == 1


@pytest.mark.parametrize("uri", ["bogus://x", "sqlite:////proc/x.db", "sqlite:x.db", "file:///proc/x"])
def test_bad_tracking_uris_are_bad_input(tmp_path: Path, uri: str) -> None:
    argv = [*base_argv("evaluate", tmp_path), "--tracking-uri", uri]
    rc, out, err = run_inprocess(argv, tmp_path)
    assert_refused_cleanly(argv, rc, err)
    assert rc == 2, err


@pytest.mark.parametrize("ref", ["models:/" + "x" * 100_000 + "/1", "models:/../1", "models:/a/b/1", "models:/x/",
                                 "models:/x@a b", "models:/x/" + "9" * 40, "models:/@a"])
def test_bad_registry_references_are_bad_input_before_any_request(tmp_path: Path, ref: str) -> None:
    argv = ["simulate", "small-cubic", "--policy", "mlc", "--model", ref, "--gains", str(GAINS), "--duration", "2"]
    env_uri = os.environ.get("MLFLOW_TRACKING_URI")
    os.environ["MLFLOW_TRACKING_URI"] = "http://127.0.0.1:1"  # no request may be made
    try:
        t0 = time.monotonic()
        rc, out, err = run_inprocess(argv, tmp_path)
    finally:
        if env_uri is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = env_uri
    assert_refused_cleanly(argv, rc, err)
    assert rc == 2 and "model reference" in err and len(err) < 700 and time.monotonic() - t0 < FAST, err


# -- the smaller classes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["control"], ["telemetry"]])
def test_a_command_without_its_subcommand_is_usage_on_stderr(tmp_path: Path, argv: list[str]) -> None:
    rc, out, err = run_subprocess(argv, tmp_path, timeout=60)
    assert rc == 2 and out == "" and "subcommand" in err and len(err.strip().splitlines()) == 1, (out, err)


def test_duration_ends_the_daemon_inside_a_long_period(tmp_path: Path) -> None:
    """``--set period=3600 --duration 2`` ran for an hour."""
    argv = ["control", "run", "testbed", "--target", "60M", "--no-api", "--set", "period=3600", "--set",
            "duration=7200", "--duration", "2", "--json", "--log", str(tmp_path / "log.jsonl")]
    t0 = time.monotonic()
    rc, out, err = run_subprocess(argv, tmp_path, timeout=120)
    assert rc == 0, err
    assert time.monotonic() - t0 < 60


def test_an_exception_inside_pygad_is_our_one_line(tmp_path: Path) -> None:
    """PyGAD logged its own 30-line traceback of an exception in a run before our line."""
    code = (
        "import sys\n"
        "from scidmz.tuning import ga\n"
        "def boom(*a, **k):\n"
        "    raise MemoryError()\n"
        "ga.evaluate_gains = boom\n"
        "from scidmz.cli import main\n"
        f"sys.exit(main({base_argv('tune', tmp_path)!r}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                       timeout=180)
    assert_refused_cleanly("tune with a MemoryError in the fitness", r.returncode, r.stderr.replace(
        "out of memory", "OOM"))
    assert r.returncode == 1 and "out of memory" in r.stderr, r.stderr
    assert SRC  # the subprocess runs this checkout's scidmz (PYTHONPATH from _env)
