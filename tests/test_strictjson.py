"""The one strict-JSON cleaner (scidmz.strictjson): what every JSON writer of the project relies on."""

from __future__ import annotations

import json
import math

import numpy as np

from scidmz.strictjson import clean, dumps


def _strict_loads(text: str) -> object:
    def refuse(c: str) -> None:
        raise AssertionError(f"non-strict constant {c} in {text}")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_become_null_at_any_depth() -> None:
    doc = {"a": math.nan, "b": [math.inf, (-math.inf, 1.5)], "c": {"d": np.float64("nan"), "e": np.float32("inf")}}
    assert _strict_loads(dumps(doc)) == {"a": None, "b": [None, [None, 1.5]], "c": {"d": None, "e": None}}


def test_numpy_values_become_python_values() -> None:
    out = clean({"f": np.float32(0.5), "i": np.int64(7), "b": np.bool_(True), "a": np.array([[1.0, np.nan]])})
    assert out == {"f": 0.5, "i": 7, "b": True, "a": [[1.0, None]]}
    assert [type(v) for v in (out["f"], out["i"], out["b"])] == [float, int, bool]


def test_keys_json_cannot_spell_become_strings() -> None:
    assert _strict_loads(dumps({np.int64(3): 1, (1, 2): 2, 4: 3, "s": 4})) == {"3": 1, "(1, 2)": 2, "4": 3, "s": 4}


def test_what_default_returns_is_cleaned_too() -> None:
    class Odd:
        pass

    assert _strict_loads(dumps({"x": Odd()}, default=lambda _o: [math.nan, 2.0])) == {"x": [None, 2.0]}


def test_finite_values_are_unchanged() -> None:
    doc = {"n": 1, "x": 0.1, "s": "NaN", "none": None, "t": True, "l": [1, [2.5, "x"]]}
    assert clean(doc) == doc and json.loads(dumps(doc)) == doc
