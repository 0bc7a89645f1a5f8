"""Where batched work runs: in-process, a local process pool, or a Dask cluster.

``--executor`` takes one of:

- ``local`` (default): in this process, no pool;
- ``processes`` or ``processes:N``: a ``concurrent.futures.ProcessPoolExecutor``
  with N workers (default: the CPU count);
- ``dask://HOST:PORT``: a ``dask.distributed`` scheduler; work goes to its
  workers through ``Client.get_executor()``, the standard
  ``concurrent.futures`` interface, so the GA's fitness batches and
  ``evaluate``'s trials need no Dask-specific code.

The callers split work into as many chunks as the executor has worker slots
(``executor_width``) and every chunk carries its own seeds, so the result for
a given seed does not depend on where a chunk ran (the fluid plant integrates
each instance independently of its batch-mates). ``dask[distributed]`` is an
optional extra (``pip install 'scidmz[distributed]'``), imported only here.
"""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from .records import pid_exists

__all__ = ["parse_executor", "open_executor", "executor_width", "ExecutorSpec"]

# how long to wait for a Dask scheduler before giving up with one line
DASK_CONNECT_TIMEOUT = 10.0
# how long a terminated pool worker gets before SIGKILL
WORKER_GRACE = 2.0


def _pool_worker_init(owner: int) -> None:
    """A pool worker ignores Ctrl-C (its owner alone decides, and ends it) and ends when its owner
    does, even on SIGTERM or SIGKILL, so a study stopped mid-generation leaves no worker computing an
    orphaned chunk. PR_SET_PDEATHSIG cannot do it: a forkserver worker's parent is the forkserver,
    which the workers themselves keep alive (they hold its liveness pipe)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with, args=(owner,), daemon=True, name="scidmz-owner-watch").start()


def _exit_with(owner: int) -> None:
    """Block until process ``owner`` ends (a pidfd turns readable), then end this process at once."""
    try:
        fd = os.pidfd_open(owner)
    except ProcessLookupError:
        os._exit(1)
    except OSError:  # no pidfd (Linux < 5.3): look once a second
        while pid_exists(owner):
            time.sleep(1.0)
        os._exit(1)
    select.select([fd], [], [])
    os._exit(1)


def _end_workers_now(pool: ProcessPoolExecutor) -> None:
    """Stop a pool at once: cancel what is queued and terminate the running chunks instead of
    waiting for them (``shutdown`` alone waits; Python 3.14's ``terminate_workers`` does this)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())  # stdlib's own record of its workers
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(WORKER_GRACE)
        if p.is_alive():
            p.kill()
            p.join(WORKER_GRACE)


class ExecutorSpec(tuple):
    """(kind, arg): ("local", None), ("processes", N), ("dask", "tcp://HOST:PORT")."""

    __slots__ = ()

    def __new__(cls, kind: str, arg: Any = None) -> ExecutorSpec:
        return super().__new__(cls, (kind, arg))

    @property
    def kind(self) -> str:
        return self[0]

    @property
    def arg(self) -> Any:
        return self[1]


def parse_executor(text: str | None) -> ExecutorSpec:
    """Parse an ``--executor`` value; a ValueError names what is wrong in one line."""
    if text is None or text in ("", "local"):
        return ExecutorSpec("local")
    if text == "processes" or text.startswith("processes:"):
        n_text = text.partition(":")[2]
        if not n_text:
            return ExecutorSpec("processes", os.cpu_count() or 1)
        from .limits import BOUNDS, check

        if not n_text.isdigit() or int(n_text) < 1:
            raise ValueError(f"--executor processes:N needs N in 1..{BOUNDS['workers'].hi:.0f}, got {n_text!r}")
        return ExecutorSpec("processes", check("workers", int(n_text), "--executor processes:N"))
    if text.startswith("dask://"):
        parts = urlsplit(text)
        try:
            port = parts.port
        except ValueError:
            port = None
        if not parts.hostname or port is None or parts.path not in ("", "/"):
            raise ValueError(f"--executor dask:// needs HOST:PORT, got {text!r}")
        return ExecutorSpec("dask", f"tcp://{parts.hostname}:{port}")
    raise ValueError(f"--executor must be local, processes[:N] or dask://HOST:PORT, got {text!r}")


@contextmanager
def open_executor(spec: ExecutorSpec | str | None) -> Iterator[Executor | None]:
    """Yield a ready executor (None for local) and shut it down on exit, whatever happens."""
    if not isinstance(spec, ExecutorSpec):
        spec = parse_executor(spec)
    if spec.kind == "local":
        yield None
        return
    if spec.kind == "processes":
        # forkserver, not fork: a fork from a process whose OpenMP runtime already started (the fluid
        # plant's numba cores) kills the child ("fork() called from a process already using GNU
        # OpenMP"), which broke the pool of a GA run after evaluation trials in the same process.
        pool = ProcessPoolExecutor(max_workers=spec.arg, mp_context=multiprocessing.get_context("forkserver"),
                                   initializer=_pool_worker_init, initargs=(os.getpid(),))
        try:
            yield pool
        except BaseException:  # Ctrl-C, an error, a SystemExit: do not wait for the running chunks
            _end_workers_now(pool)
            raise
        finally:
            pool.shutdown(cancel_futures=True)
        return
    try:
        from distributed import Client
    except ImportError as exc:
        raise ImportError("--executor dask:// needs dask: pip install 'scidmz[distributed]'") from exc
    try:
        client = Client(spec.arg, timeout=DASK_CONNECT_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise RuntimeError(f"cannot reach the Dask scheduler at {spec.arg}: {exc}") from None
    try:
        ex = client.get_executor()
        ex._scidmz_width = max(1, sum(client.nthreads().values()))  # noqa: SLF001 - our own tag
        yield ex
    finally:
        client.close()


def executor_width(executor: Executor | None) -> int:
    """How many chunks to cut a batch into: the executor's worker slots (1 in-process)."""
    if executor is None:
        return 1
    width = getattr(executor, "_scidmz_width", None)
    if width is None:
        width = getattr(executor, "_max_workers", 1)
    return max(1, int(width or 1))
