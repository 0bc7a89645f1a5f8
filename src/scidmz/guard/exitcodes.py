"""``guarded``: every exception becomes one line on stderr and an exit code.

* bad input -- :class:`scidmz.errors.BadInput`, and any other ``ValueError`` (the library's checks
  raise ``ValueError`` for a value the user gave, at hundreds of sites: we keep them as they are
  rather than convert each), missing files, permissions: exit 2;
* a missing optional module: exit 1, naming the extra that installs it (:mod:`.extras`);
* runtime failures (``OSError``, ``RuntimeError``, ``MemoryError``): exit 1;
* anything else, a built-in ``TypeError`` or ``OverflowError`` included: exit 1 as an "internal
  error". Those come from a value that reached code not expecting it, i.e. a check we lack: a bug
  to report, not the user's mistake. ``SCIDMZ_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from .extras import missing_extra_message

__all__ = ["guarded"]

_BAD_INPUT = (ValueError, FileNotFoundError, PermissionError, NotADirectoryError, IsADirectoryError)


def _one_line(exc: BaseException) -> str:
    msg = " ".join(str(exc).split()) or type(exc).__name__
    if len(msg) > 500:
        msg = msg[:500] + "..."
    return msg


def _fail(prefix: str, exc: BaseException | str, code: int) -> int:
    text = exc if isinstance(exc, str) else _one_line(exc)
    print(f"scidmz: {prefix}{text}", file=sys.stderr)
    return code


def guarded(func: Callable[[], int]) -> int:
    """Run ``func``; turn any exception into one line on stderr and an exit code (see module doc)."""
    debug = bool(os.environ.get("SCIDMZ_DEBUG"))
    try:
        return int(func() or 0)
    except KeyboardInterrupt:
        return _fail("", "interrupted", 130)
    except ModuleNotFoundError as exc:  # an install problem: one line naming the extra
        return _fail("error: ", missing_extra_message(exc), 1)
    except _BAD_INPUT as exc:
        if debug and not isinstance(exc, ValueError):
            raise
        return _fail("error: ", exc, 2)
    except MemoryError:
        return _fail("error: ", "out of memory (the input asks for more than this machine has)", 1)
    except (OSError, RuntimeError) as exc:
        return _fail("error: ", exc, 1)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback
        if debug:
            raise
        return _fail("internal error: ", f"{type(exc).__name__}: {_one_line(exc)} "
                     "(SCIDMZ_DEBUG=1 shows the traceback)", 1)
