"""Moved to ``scidmz.daemon`` (issue 8: split by concern); these names stay importable from here."""

from __future__ import annotations

from ..daemon.build import build_daemon, run_daemon
from ..daemon.client import ControlClient
from ..daemon.loop import ControlDaemon, _trim
from ..daemon.tokenfile import DEFAULT_API, default_token_file, parse_api_address

__all__ = ["ControlDaemon", "ControlClient", "run_daemon", "build_daemon", "default_token_file",
           "parse_api_address", "DEFAULT_API", "_trim"]
