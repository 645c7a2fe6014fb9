"""Shared pytest configuration: the hypothesis profiles.

Property and fuzz tests run on a fixed budget so the suite's time is predictable:

- ``ci`` (the default): a bounded number of examples, a per-example deadline (so an input that
  makes code crawl fails the test instead of slowing the suite), derandomized so a CI run is
  reproducible and a failure can be replayed locally;
- ``dev``: the same budget with random examples, for exploring;
- ``hunt``: many more examples and no deadline, for a long local search
  (``HYPOTHESIS_PROFILE=hunt pytest tests/test_fuzz.py``).

Tests that set their own ``@settings`` keep those values and inherit the rest from the profile.
"""

from __future__ import annotations

import os
from datetime import timedelta

from hypothesis import HealthCheck, settings

_COMMON = {
    "suppress_health_check": [HealthCheck.too_slow],
    "print_blob": True,
}

# Derandomized runs replay nothing, so they keep no example database (no .hypothesis/ dir).
settings.register_profile(
    "ci",
    max_examples=100,
    deadline=timedelta(seconds=2),
    derandomize=True,
    database=None,
    **_COMMON,
)
settings.register_profile("dev", max_examples=100, deadline=timedelta(seconds=2), **_COMMON)
settings.register_profile("hunt", max_examples=5000, deadline=None, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
