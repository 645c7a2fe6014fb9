"""``promoter.resources.stages.stage_status``: which Promotion a Stage reports as its last one.

``finishedAt`` has second precision and kubectl users name Promotions freely (``p9``, ``p10``),
so neither orders two Promotions that finished within the same second. Reporting the wrong one
made the verifier verify the previous Freight again and the Stage's queue stall
(bench_verification hung at its tenth run).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from promoter.resources.stages import stage_status
from tests.support import objects

NOW = datetime(2026, 11, 30, 1, 6, 26, tzinfo=UTC)
SECOND = "2026-11-30T01:06:26Z"


def finished(name: str, *, at: str = SECOND, created: str = SECOND) -> dict[str, Any]:
    return objects.promotion(
        name,
        "dev",
        namespace="ns",
        freight=f"f-{name}",
        created=created,
        phase="Succeeded",
        status={"startedAt": at, "finishedAt": at},
    )


def stage(last: str | None = None) -> dict[str, Any]:
    status = {"lastPromotion": {"name": last}} if last else {}
    return objects.stage("dev", namespace="ns", generation=1, status=status)


@pytest.mark.parametrize(
    ("promotions", "recorded", "finished_last", "expected"),
    [
        # Different seconds: the later one, whatever the names say.
        ([finished("p9", at="2026-11-30T01:06:25Z"), finished("p10")], None, None, "p10"),
        # Same second: the one the controller has just finished.
        ([finished("p9"), finished("p10")], "p9", "p10", "p10"),
        # Same second, recomputed later: the one recorded when it finished stays.
        ([finished("p9"), finished("p10")], "p10", None, "p10"),
        ([finished("p10"), finished("p9")], "p9", None, "p9"),
        # Same second, nothing known: queue order (creation time, then name).
        (
            [finished("b", created="2026-11-30T01:06:20Z"), finished("a", created=SECOND)],
            None,
            None,
            "a",
        ),
    ],
)
def test_the_last_promotion_is_the_one_that_finished_last(
    promotions: list[dict[str, Any]], recorded: str | None, finished_last: str | None, expected: str
) -> None:
    status = stage_status(stage(recorded), promotions, NOW, finished_last=finished_last)
    assert status["lastPromotion"]["name"] == expected
