"""The agent's API token: a shared secret the admin gives the controller, kept across restarts.

Unlike the controller's token file (a fresh token per start, read on the same
host), the agent's token must be known to a controller on another host, so it
is stable: ``load_or_create`` reads ``{"token": ...}`` from the 0600 file if it
exists (an admin may provision it), else writes a new random one there once.
The controller is given a copy of the file (``--dtn-agent URL`` with its token
file); the agent never removes it.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from pathlib import Path

from ..actuators.agent_client import read_token
from ..fileio import atomic_write_text

__all__ = ["load_or_create", "read_token"]


def load_or_create(path: str | os.PathLike[str]) -> str:
    """The token from ``path``, created (0600, random) if the file does not exist."""
    p = Path(path)
    if p.exists():
        if p.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ValueError(f"agent token file {p} is readable by others: chmod 600 {p}")
        return read_token(p)
    tok = secrets.token_urlsafe(32)
    try:
        p.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write_text(p, json.dumps({"token": tok}) + "\n", mode=0o600)
    except OSError as exc:
        raise ValueError(f"cannot write the agent token file {p}: {exc.strerror or exc}") from None
    return tok
