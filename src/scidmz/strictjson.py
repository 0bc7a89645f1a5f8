"""Strict JSON: the one cleaner every JSON writer uses (result files, ``--json`` lines, the control API).

``Infinity`` and ``NaN`` are not JSON (RFC 8259), yet ``json.dumps`` writes them by default, and a
parser in another language then refuses the whole file. So every non-finite float becomes ``null``;
NumPy scalars and arrays become their Python values (``np.float32`` is not a ``float``, and
``json`` cannot write it); tuples become lists; a dictionary key that JSON cannot spell (a NumPy
integer, a tuple) becomes its ``str``. Plain ``str``/``int``/``float``/``bool``/``None`` keys are
left to ``json``, which spells them the standard way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

__all__ = ["clean", "dumps"]

_JSON_KEYS = (str, int, float, bool)


def clean(o: Any) -> Any:
    """``o`` ready for strict JSON, recursively (see the module docstring)."""
    if isinstance(o, dict):
        return {(k if k is None or isinstance(k, _JSON_KEYS) else str(k)): clean(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [clean(v) for v in o]
    if isinstance(o, float):  # also np.float64, a float subclass
        return float(o) if math.isfinite(o) else None
    if type(o).__module__ == "numpy" and hasattr(o, "tolist"):
        return clean(o.tolist())  # np.float32, np.int64, np.bool_, arrays: Python values
    return o


def dumps(obj: Any, default: Callable[[Any], Any] | None = None, **kw: Any) -> str:
    """``json.dumps`` of ``clean(obj)``, never ``Infinity``/``NaN``: what ``default`` returns for an
    object JSON cannot write is cleaned too (it may itself hold non-finite numbers)."""
    hook = None if default is None else (lambda o: clean(default(o)))
    return json.dumps(clean(obj), default=hook, allow_nan=False, **kw)
