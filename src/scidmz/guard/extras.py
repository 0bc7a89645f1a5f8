"""A missing optional module, named with the pyproject extra that installs it.

``EXTRA_OF_MODULE`` is written here, not read from the installed metadata at run time: the
metadata can map a module to its distribution only when that distribution is installed, which is
exactly what is not the case when the module is missing. ``tests/test_guard_extras.py`` checks
the table against pyproject.toml both ways (every entry's extra installs the module; every
optional module ``src/scidmz`` imports is in the table).
"""

from __future__ import annotations

__all__ = ["EXTRA_OF_MODULE", "missing_extra_message"]

#: Top-level module -> the pyproject extra that installs it.
EXTRA_OF_MODULE = {
    "tensorflow": "ml", "keras": "ml", "pygad": "ml", "sklearn": "ml", "mlflow": "ml",
    "joblib": "ml",  # not a direct requirement: scikit-learn installs it (the model's scalers.joblib)
    "pyroute2": "testbed", "ovsdbapp": "testbed", "prometheus_client": "testbed", "fastapi": "testbed",
    "uvicorn": "testbed", "starlette": "testbed", "netfilterqueue": "datapath",
    "dpkt": "telemetry", "grpc": "telemetry", "p4": "telemetry", "google": "telemetry", "thrift": "telemetry",
    "bm_runtime": "telemetry", "sswitch_runtime": "telemetry",
    "jenkspy": "baselines", "kmeans1d": "baselines", "gymnasium": "rl", "dask": "distributed", "distributed": "distributed",
    "statsmodels": "stats",
}


def missing_extra_message(exc: ModuleNotFoundError) -> str:
    """One line naming the missing module and the extra that installs it."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(top)
    if extra is None:
        return f"missing Python module '{top or exc}'"
    if extra == "datapath":
        return (f"missing Python module '{top}': apt-get install libnetfilter-queue-dev, then "
                f"pip install 'scidmz[{extra}]'")
    return f"missing Python module '{top}': install the '{extra}' extra (pip install 'scidmz[{extra}]')"
