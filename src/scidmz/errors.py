"""The project's own error for bad input: ``BadInput``.

The CLI answers a ``BadInput`` (and, for now, any ``ValueError``: hundreds of library checks raise
one for a value the user gave) with one line and exit 2; a built-in ``TypeError`` or
``OverflowError`` is *not* bad input but a bug the validation missed, and gets exit 1 as an
internal error (see :mod:`scidmz.guard.exitcodes`). It subclasses ``ValueError`` so that library
callers that catch ``ValueError`` keep working; it sits at the bottom layer so that any module may
raise it.
"""

from __future__ import annotations

__all__ = ["BadInput"]


class BadInput(ValueError):
    """A value the user gave (an option, a file, a path) that scidmz refuses: one line naming it."""
