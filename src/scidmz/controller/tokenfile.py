"""The daemon's addresses and its token file (who may steer the running daemon).

The token is generated at start and written, with the API address and the
daemon's pid, to a 0600 JSON file (``/run/scidmz/control.token`` as root,
``~/.scidmz/control.token`` otherwise, ``SCIDMZ_CONTROL_TOKEN`` or
``--token-file``) that ``ControlClient`` reads; the file is removed on shutdown.
"""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path

from ..fileio import atomic_write_text
from ..records import RecordError, proc_start_time, recorded_owner_runs

__all__ = ["DEFAULT_API", "default_token_file", "parse_api_address", "parse_listen_address", "read_token_info",
           "TokenFile"]

DEFAULT_API = "127.0.0.1:8642"


def default_token_file() -> Path:
    """Where the daemon writes (and the client reads) the token: /run/scidmz as root, else ~/.scidmz."""
    env = os.environ.get("SCIDMZ_CONTROL_TOKEN")
    if env:
        return Path(env)
    if os.geteuid() == 0 and Path("/run").is_dir():
        return Path("/run/scidmz/control.token")
    return Path.home() / ".scidmz" / "control.token"


def read_token_info(path: str | os.PathLike[str]) -> dict:
    """The token file's JSON object: a regular file of at most ``limits.MAX_TOKEN_BYTES`` (a FIFO or a
    huge file in its place must not block or exhaust the daemon or its client); one line otherwise."""
    from ..fileio import read_json_input
    from ..limits import MAX_TOKEN_BYTES

    info = read_json_input(path, "control token file", MAX_TOKEN_BYTES)
    if not isinstance(info, dict):
        raise ValueError(f"{path} is not a control token file")
    return info


def parse_listen_address(text: str, what: str = "API address") -> tuple[str, int]:
    """``HOST:PORT`` (any host); a one-line ValueError otherwise."""
    host, sep, port_s = str(text).rpartition(":")
    host = host.strip("[]")
    if not sep or not host:
        raise ValueError(f"{what} {text!r}: expected HOST:PORT, e.g. {DEFAULT_API}")
    try:
        port = int(port_s)
    except ValueError:
        raise ValueError(f"{what} {text!r}: port must be a number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"{what} {text!r}: port out of range")
    return host, port


def parse_api_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` with a loopback HOST; anything else is a one-line ValueError."""
    host, port = parse_listen_address(text)
    try:
        loop = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loop = False
    if not loop:
        raise ValueError(f"API address {text!r}: the control API only listens on loopback (127.0.0.1, ::1)")
    return host, port


def _owner_runs(pid: int, start: object) -> bool:
    """Whether the daemon that wrote a token file still runs (``records.recorded_owner_runs``, the
    one owner check: pid *and* start time, so a pid recycled by another process does not keep a dead
    daemon's file claimed; a file without a start time, from an older scidmz, goes by the pid)."""
    try:
        return recorded_owner_runs(pid, start)
    except RecordError:
        return False  # not a pid and start time scidmz writes: not a daemon's file


class TokenFile:
    """The 0600 JSON file ``{"token", "api", "pid", "start"}``; at most one live daemon per file."""

    def __init__(self, path: str | os.PathLike[str] | None, token: str) -> None:
        self.path = Path(path) if path is not None else default_token_file()
        self.token = token

    def check_writable(self) -> None:
        """Fail up front, with one line, on a destination we could never write."""
        p = self.path
        if p.is_dir():
            raise ValueError(f"token file {p} is a directory (pass --token-file FILE)")
        if p.exists() and not p.is_file():
            raise ValueError(f"token file {p} exists and is not a regular file")
        parent = p.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise ValueError(f"token file {p}: {parent} is not a directory")
        if not os.access(parent if not p.parent.exists() else p.parent, os.W_OK | os.X_OK):
            raise ValueError(f"token file {p}: cannot write to {p.parent}")

    def claim(self) -> None:
        """Refuse to start on a token file whose owner process is still alive."""
        try:
            info = read_token_info(self.path)
            pid = int(info.get("pid", 0))
        except (OSError, ValueError, TypeError, AttributeError):
            return
        if pid and pid != os.getpid() and _owner_runs(pid, info.get("start")):
            raise RuntimeError(f"another control daemon (pid {pid}) owns {self.path}; stop it or pass --token-file")

    def write(self, api: tuple[str, int] | None) -> None:
        host, port = api if api is not None else ("", 0)
        body = json.dumps({"token": self.token, "api": f"{host}:{port}" if api else None, "pid": os.getpid(),
                           "start": proc_start_time(os.getpid())})
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            atomic_write_text(self.path, body + "\n", mode=0o600)  # the token is a secret
        except OSError as exc:
            # A read-only filesystem or a directory in the way: one line, exit 2.
            raise ValueError(f"cannot write the token file {self.path}: {exc.strerror or exc}") from None

    def remove(self) -> None:
        try:
            if read_token_info(self.path).get("token") == self.token:
                self.path.unlink()
        except (OSError, ValueError, AttributeError):
            pass
