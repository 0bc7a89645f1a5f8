"""Atomic file writes: a crash or Ctrl-C never leaves a half-written result behind.

Every writer of results (traces, datasets, gains, plots, pcaps, reports)
writes to a temporary file in the destination folder and renames it into
place only when complete.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_text"]


def _default_mode() -> int:
    # mkstemp creates 0600; results are meant to be shared, so honour the umask like open() does.
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], mode: int | None = None) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path``, on error it is removed.

    ``mode`` sets the final permissions (default: 0666 minus the umask; pass 0o600 for secrets).
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=dest.name + ".", suffix=".tmp" + dest.suffix, dir=dest.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, _default_mode() if mode is None else mode)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, mode: int | None = None) -> Path:
    with atomic_path(path, mode) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike[str], text: str, mode: int | None = None) -> Path:
    with atomic_path(path, mode) as tmp:
        tmp.write_text(text)
    return Path(path)
