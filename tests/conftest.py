"""Shared test setup: root-only tests, quiet TensorFlow, a private mlflow store."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    # Namespaces, tc and OVS need root; CI runs as root, so there these run for real.
    skip = pytest.mark.skip(reason="needs root (network namespaces, tc); CI runs these as root")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _private_mlflow(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # Never write into the repository's ./mlruns from a test.
    store = tmp_path_factory.getbasetemp() / "mlruns"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.as_uri())
