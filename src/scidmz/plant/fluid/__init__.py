"""The fluid (flow-level) plant: a batched numba simulator of the Science DMZ bottleneck.

``FluidPlant`` (plant.py) builds the arrays, ``kernel.py`` advances them one
control period per call, ``constants.py`` holds every model constant.
See docs/fluid_model.md for the model and its limits.
"""

from .plant import FlowShape, FluidPlant

__all__ = ["FluidPlant", "FlowShape"]
