"""JSON for the hot paths: Kubernetes API bodies and watch lines, both in our client and the
embedded API server.

orjson parses and writes these several times faster than the standard library, which matters
because every Promotion step is one status write plus its watch event on both sides
(bench/bench_scale.py). What orjson refuses and the standard library accepts (integers beyond
64 bits, NaN) falls back to ``json`` so no object a user can store becomes unreadable.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads(raw: bytes | str) -> Any:
    """Parse JSON; raises ValueError (as ``json.loads`` does) when it is not JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def dumps(value: Any) -> bytes:
    """Compact JSON (no spaces), as kube-apiserver writes it."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":")).encode()
