"""docs/extending.md's Python blocks run as written: a new policy and a new plant, end to end."""

from __future__ import annotations

import re
from pathlib import Path

from scidmz.plant.registry import _REGISTRY as PLANTS
from scidmz.policies.registry import _REGISTRY as POLICIES

DOC = Path(__file__).resolve().parent.parent / "docs" / "extending.md"


def test_extending_examples_run_and_conform() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 5
    ns: dict = {"__name__": "docs_extending"}
    try:
        for code in blocks:
            exec(compile(code, str(DOC), "exec"), ns)  # noqa: S102 - the page's own examples
        assert "checks" in ns and len(ns["checks"]) > 3  # the last block ran check_plant
        assert ns["policy"].margin == 0.1
    finally:
        POLICIES.pop("headroom", None)
        POLICIES.pop("fitted", None)
        PLANTS.pop("lagged", None)
