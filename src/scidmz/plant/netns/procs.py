"""Run programs and set sysctls inside a testbed's network namespaces.

Programs are started with ``nsenter --net=/run/netns/NAME`` (util-linux;
nsenter execs the program, so the pid we record is the program's own), and
die with their parent (PR_SET_PDEATHSIG) so a crashed owner leaves no
traffic running. Sysctls are written in-process after ``setns`` through
pyroute2, which is much faster than one process per key.
"""

from __future__ import annotations

import ctypes
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import IO, Any

__all__ = ["spawn", "run_in", "set_sysctls", "nsenter_argv", "require_tools"]

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def require_tools(*names: str) -> dict[str, str]:
    """Absolute paths of the external tools a testbed needs, or a one-line error."""
    out = {}
    missing = []
    for n in names:
        p = shutil.which(n)
        if p is None:
            missing.append(n)
        else:
            out[n] = p
    if missing:
        raise RuntimeError(
            f"the netns testbed needs {', '.join(missing)} (apt-get install -y iperf3 util-linux ethtool iproute2)"
        )
    return out


def nsenter_argv(ns: str, argv: Sequence[str]) -> list[str]:
    return ["nsenter", f"--net=/run/netns/{ns}", "--", *argv]


def spawn(
    ns: str,
    argv: Sequence[str],
    stdout: IO[Any] | int | None = subprocess.DEVNULL,
    stderr: IO[Any] | int | None = subprocess.DEVNULL,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen:
    """Start ``argv`` inside namespace ``ns``; it is killed if this process dies."""
    return subprocess.Popen(
        nsenter_argv(ns, argv),
        stdout=stdout,
        stderr=stderr,
        stdin=subprocess.DEVNULL,
        env=dict(env) if env is not None else None,
        preexec_fn=_die_with_parent,
        close_fds=True,
    )


def run_in(ns: str, argv: Sequence[str], timeout: float = 30.0, check: bool = True) -> str:
    """Run a short command in ``ns`` and return its stdout."""
    r = subprocess.run(nsenter_argv(ns, argv), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} in {ns} failed: {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout


def set_sysctls(ns: str, values: Mapping[str, str | int]) -> None:
    """Write ``net.*`` sysctls of namespace ``ns`` (keys in dotted form)."""
    from pyroute2 import netns

    netns.pushns(ns)
    try:
        for key, val in values.items():
            path = "/proc/sys/" + key.replace(".", "/")
            with open(path, "w") as f:
                f.write(str(val))
    finally:
        netns.popns()
