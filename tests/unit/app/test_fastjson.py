"""The hot-path JSON codec reads and writes everything the standard library does."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app import fastjson

CASES: list[Any] = [
    {"metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"steps": [{"uses": "x"}]}},
    2**70,  # beyond 64 bits: orjson refuses, the fallback does not
    {"n": -(2**65), "f": 1.5, "u": "ünïcode ✓", "none": None, "t": True},
    [],
]


@pytest.mark.parametrize("value", CASES)
def test_round_trips_what_the_standard_library_does(value: Any) -> None:
    encoded = fastjson.dumps(value)
    assert json.loads(encoded) == value
    assert fastjson.loads(encoded) == value
    assert fastjson.loads(json.dumps(value)) == value
    assert b", " not in encoded and b": " not in encoded  # compact, as kube-apiserver writes


def test_not_json_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        fastjson.loads(b"{not json")
