"""``--json`` output: one strict-JSON line (``Infinity``/``NaN`` are not JSON; they become null)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..strictjson import dumps

__all__ = ["json_line"]


def json_line(result: Any, default: Callable[[Any], Any] | None = None) -> str:
    """Strict JSON for ``--json``: non-finite numbers as null, never ``Infinity``/``NaN``."""
    return dumps(result, default=default)
