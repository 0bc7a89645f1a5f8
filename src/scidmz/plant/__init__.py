"""Plants: the network y = P(u). ``fluid`` (default, fast simulator), ``netns`` (real kernel TCP), ``hardware``.

The names below are imported on first use, so that ``plant.registry`` (the list of plants, which the
command line's help reads) can be imported without numpy.
"""

from typing import Any

__all__ = ["Plant", "StateBatch", "make_plant", "PLANT_KINDS"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
