"""Plants: the network y = P(u). ``fluid`` (default, fast simulator), ``netns`` (real kernel TCP)."""

from .base import PLANT_KINDS, Plant, StateBatch, make_plant

__all__ = ["Plant", "StateBatch", "make_plant", "PLANT_KINDS"]
