"""The agent's owner record: which sockets it paced and what they had before, on disk.

Written (atomically) before the agent first sets a new socket and whenever its
set of paced sockets changes, so a SIGKILLed agent leaves a list of what it
touched. A fresh start reads it: a record whose owner (pid *and* start time, as
the testbed's records) is alive is refused; a dead owner's sockets that are
still open get back the ``SO_MAX_PACING_RATE`` they had before it (``original``),
nothing else is touched, and the record is replaced by the new agent's own.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from ..fileio import atomic_write_text
from ..plant.netns.manage.registry import proc_start_time

__all__ = ["OwnerRecord"]


class OwnerRecord:
    """``{"owner_pid", "owner_start", "host", "created", "sockets": {inode: {pid, start, fd, original}}}``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.data: dict[str, Any] = {"owner_pid": os.getpid(), "owner_start": proc_start_time(os.getpid()),
                                     "host": socket.gethostname(), "created": time.time(), "sockets": {}}

    def previous(self) -> dict[str, Any] | None:
        """A dead agent's record to reclaim (None if there is none); RuntimeError if its owner lives."""
        try:
            old = json.loads(self.path.read_text())
            pid, start = int(old["owner_pid"]), old.get("owner_start")
            sockets = dict(old.get("sockets", {}))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RuntimeError(f"agent record {self.path} is unreadable ({exc}); move it away if no agent runs") \
                from None
        if pid != os.getpid() and start is not None and proc_start_time(pid) == start:
            raise RuntimeError(f"another scidmz agent (pid {pid}) owns {self.path}; stop it or pass "
                               "another --state-dir")
        return {"owner_pid": pid, "sockets": sockets}

    def write(self, sockets: dict[int, dict[str, int]]) -> None:
        self.data["sockets"] = {str(k): v for k, v in sockets.items()}
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write_text(self.path, json.dumps(self.data) + "\n", mode=0o600)

    def remove(self) -> None:
        try:
            if json.loads(self.path.read_text()).get("owner_pid") == os.getpid():
                self.path.unlink()
        except (OSError, ValueError, AttributeError):
            pass
