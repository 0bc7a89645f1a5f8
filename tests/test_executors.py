"""--executor: parsing, a real two-worker Dask LocalCluster giving the local result, unreachable scheduler."""

from __future__ import annotations

import socket
import sys

import numpy as np
import pytest

from scidmz import executors
from scidmz.executors import executor_width, open_executor, parse_executor


def test_parse_executor_forms_and_errors():
    assert parse_executor(None).kind == "local"
    assert parse_executor("processes:3") == ("processes", 3)
    assert parse_executor("dask://10.1.2.3:8786") == ("dask", "tcp://10.1.2.3:8786")
    for bad in ("processes:0", "processes:x", "dask://host", "dask://:8786", "ray://x:1", "dask://h:99999"):
        with pytest.raises(ValueError, match="--executor"):
            parse_executor(bad)


def test_local_and_process_pool_widths():
    with open_executor("local") as ex:
        assert ex is None and executor_width(ex) == 1
    with open_executor("processes:2") as ex:
        assert executor_width(ex) == 2
        assert ex.submit(pow, 2, 10).result() == 1024


def test_unreachable_scheduler_is_one_line(monkeypatch):
    pytest.importorskip("distributed")
    monkeypatch.setattr(executors, "DASK_CONNECT_TIMEOUT", 2.0)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RuntimeError, match=f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}"):
        with open_executor(f"dask://127.0.0.1:{port}"):
            pass


class _TrivialLike:
    """Inverse-model stand-in u_hat = B_max - y_d (TensorFlow-free, picklable by value for workers)."""

    n_features = 22
    per_unit = False

    def __init__(self, capacity: float) -> None:
        self.capacity = capacity

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return self.capacity - X[:, 0]


@pytest.mark.slow
def test_ga_on_a_two_worker_dask_cluster_matches_the_local_run():
    pytest.importorskip("pygad")
    distributed = pytest.importorskip("distributed")
    import cloudpickle

    from scidmz.scenario import load_scenario
    from scidmz.tuning.ga import tune

    # the workers cannot import this test module: ship its classes by value
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    sc = load_scenario("small-cubic")
    model = _TrivialLike(sc.capacity)
    kw = dict(generations=2, population=6, parents=3, episode=8.0, seed=11)
    local = tune(sc, model, chunks=2, **kw)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with open_executor(f"dask://{cluster.scheduler_address.removeprefix('tcp://')}") as ex:
            assert executor_width(ex) == 2
            remote = tune(sc, model, executor=ex, **kw)
    assert remote.gains.to_dict() == local.gains.to_dict()
    assert remote.curve == local.curve and remote.best_iae == local.best_iae


def test_tune_cli_bad_executor_is_one_line(tmp_path):
    import contextlib
    import io

    from scidmz.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["tune", "small-cubic", "--model", str(tmp_path / "m"), "--out", str(tmp_path / "g"),
                   "--executor", "ray://x:1"])
    assert rc == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1 and "--executor" in lines[0]
    assert not (tmp_path / "g").exists()


def test_evaluate_on_a_dask_cluster_equals_the_local_run():
    """`evaluate --executor dask://...`: the same trials (seed per trial) give the same numbers."""
    import dataclasses

    distributed = pytest.importorskip("distributed")
    from scidmz.evaluation.mlc.experiments import ExperimentPlan, run_experiments
    from scidmz.policies import NoShapingPolicy, TrivialPolicy
    from scidmz.scenario import load_scenario

    sc = load_scenario("small-cubic")
    plan = dataclasses.replace(ExperimentPlan.quick(5), trials=4, duration=10.0, target_hold=5.0,
                               transfer=20e6, fct_max_time=40.0)
    pols = {"trivial": TrivialPolicy(), "none": NoShapingPolicy()}
    local = run_experiments(sc, pols, plan, ["mrae", "fct"])
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with open_executor(f"dask://{cluster.scheduler_address.removeprefix('tcp://')}") as ex:
            remote = run_experiments(sc, pols, plan, ["mrae", "fct"], executor=ex)
    for exp in ("mrae", "fct"):
        a = local[exp].table.sort_values(["policy", "trial"]).reset_index(drop=True)
        b = remote[exp].table.sort_values(["policy", "trial"]).reset_index(drop=True)
        assert a.equals(b), exp


def test_evaluate_bad_or_unusable_executor_is_one_line(tmp_path):
    import contextlib
    import io

    from scidmz.cli import main

    (tmp_path / "m").mkdir()
    (tmp_path / "g.json").write_text('{"kp": 1, "ki": 1, "kw": 1}')
    for argv, needle in ((["--executor", "ray://x:1"], "--executor"),
                         (["--executor", "processes:2", "--plant", "netns"], "batched-plant trials only")):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = main(["evaluate", "small-cubic", "--model", str(tmp_path / "m"), "--gains", str(tmp_path / "g.json"),
                       "--out", str(tmp_path / "o"), *argv])
        assert rc == 2, err.getvalue()
        lines = err.getvalue().strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], lines
    assert not (tmp_path / "o").exists()


def test_process_pool_works_after_openmp_started_in_the_parent(tmp_path) -> None:
    """The fluid plant's evaluation starts GNU OpenMP; a forked pool after it died ("fork() called from a
    process already using GNU OpenMP"), breaking a GA run after evaluation trials in one process."""
    import subprocess
    import sys

    code = (
        "from dataclasses import replace\n"
        "from scidmz.evaluation.mlc.experiments import ExperimentPlan, mrae_experiment\n"
        "from scidmz.executors import open_executor\n"
        "from scidmz.policies import TrivialPolicy\n"
        "from scidmz.scenario import load_scenario\n"
        "if __name__ == '__main__':  # not again in each worker, which imports this file\n"
        "    mrae_experiment(load_scenario('small-cubic'), {'trivial': TrivialPolicy()},"
        " replace(ExperimentPlan.quick(0), trials=2))\n"
        "    assert any('libgomp' in line for line in open('/proc/self/maps'))\n"
        "    with open_executor('processes:2') as ex:\n"
        "        m = ex.submit(mrae_experiment, load_scenario('small-cubic'), {'trivial': TrivialPolicy()},\n"
        "                      replace(ExperimentPlan.quick(0), trials=2)).result()\n"
        "    print(len(m.table))\n"
    )
    script = tmp_path / "pool_after_openmp.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and int(r.stdout.strip().splitlines()[-1]) > 0, r.stderr[-2000:]


_BUSY_POOL = (
    "import faulthandler, sys, time\n"
    "from scidmz.executors import open_executor\n"
    "if __name__ == '__main__':\n"
    # seen once (fresh-clone CI, 2026-12-07, SIGINT): the owner had not ended 60 s after the signal;
    # if it hangs again, every thread's stack goes to stderr, which the test prints
    "    faulthandler.dump_traceback_later(50, exit=False)\n"
    "    with open_executor('processes:2') as ex:\n"
    "        futs = [ex.submit(time.sleep, 600) for _ in range(4)]\n"
    "        while len(ex._processes) < 2:\n"
    "            time.sleep(0.05)\n"
    "        print(' '.join(map(str, ex._processes)), flush=True)\n"
    "        futs[0].result()\n"
)


def _alive(pid: int) -> bool:

    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def _wait_gone(pids: list[int], within: float) -> list[int]:
    import time

    end = time.monotonic() + within
    while time.monotonic() < end and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_a_stopped_process_pool_leaves_no_worker_computing(tmp_path, sig) -> None:
    """The saturator study, stopped mid-generation, kept its GA workers computing: Ctrl-C waited for
    the running chunks, and after SIGTERM a worker ran on, orphaned. A pool whose owner is
    interrupted or killed ends its workers at once (the chunks here would take 10 min)."""
    import signal
    import subprocess
    import sys

    script = tmp_path / "busy_pool.py"
    script.write_text(_BUSY_POOL)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        workers = [int(p) for p in proc.stdout.readline().split()]
        assert len(workers) == 2, proc.stderr.read()
        proc.send_signal(getattr(signal, sig))
        try:
            rc = proc.wait(timeout=60)  # well before a chunk (600 s) could finish
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"the pool's owner did not end within 60 s of {sig}; its threads:\n{proc.communicate()[1]}")
        assert rc != 0
        assert _wait_gone(workers, within=30) == []
    finally:
        proc.kill()
        proc.wait()


def test_an_error_in_the_with_block_does_not_wait_for_running_chunks() -> None:
    import time

    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="boom"):
        with open_executor("processes:2") as ex:
            futs = [ex.submit(time.sleep, 600) for _ in range(2)]
            while not all(f.running() for f in futs):
                time.sleep(0.05)
            workers = list(ex._processes)
            raise RuntimeError("boom")
    assert time.monotonic() - t0 < 60  # not the 600 s a chunk takes
    assert _wait_gone(workers, within=10) == []
