"""scidmz: keep a Science DMZ DTN at its target rate while campus traffic shares the WAN bottleneck.

Kept import-light on purpose: heavy dependencies (TensorFlow, PyGAD, mlflow,
pyroute2, numba) load inside the modules that need them.
"""

from .scenario import Scenario, load_scenario
from .state import STATE_FIELDS, History, NetworkState, Trace

__version__ = "0.1.0"
__all__ = ["Scenario", "load_scenario", "NetworkState", "History", "Trace", "STATE_FIELDS", "__version__"]
