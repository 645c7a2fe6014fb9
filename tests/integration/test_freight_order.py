"""Which Freight is newer, when two were made within one second.

creationTimestamp has whole seconds. A Warehouse stamps the Freight it makes with the time to
the microsecond (``longshoreman.dev/created``), so an auto-promoting Stage takes the second of
two images pushed within one second instead of waiting for a third (it used to treat them as
of one age and never promote the later over the current).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from app.controller import kube as k
from promoter.resources.stages import freight_created
from tests.support import objects
from tests.support.controller import running_cluster, running_controller, wait_for_object

NS = objects.NS
CREATED = "longshoreman.dev/created"


def made(name: str, created: str | None, stamp: str | None = None) -> dict[str, Any]:
    freight = objects.freight(name, created=created)
    if stamp is not None:
        freight["metadata"]["annotations"] = {CREATED: stamp}
    return freight


@pytest.mark.parametrize(
    ("freight", "expected"),
    [
        (made("a", "2026-12-01T10:00:05Z"), "2026-12-01T10:00:05.000000+00:00"),
        # The stamp orders Freight within their second...
        (
            made("b", "2026-12-01T10:00:05Z", "2026-12-01T10:00:05.250000+00:00"),
            "2026-12-01T10:00:05.250000+00:00",
        ),
        # ...written just before the create, it may fall in the second before.
        (
            made("c", "2026-12-01T10:00:05Z", "2026-12-01T10:00:04.999000Z"),
            "2026-12-01T10:00:04.999000+00:00",
        ),
        # A stamp that disagrees with creationTimestamp is not believed.
        (
            made("d", "2026-12-01T10:00:05Z", "2027-01-01T00:00:00Z"),
            "2026-12-01T10:00:05.000000+00:00",
        ),
        (made("e", "2026-12-01T10:00:05Z", "not a time"), "2026-12-01T10:00:05.000000+00:00"),
        # Another offset is the same instant, and sorts as such.
        (made("f", "2026-12-01T12:00:05+02:00"), "2026-12-01T10:00:05.000000+00:00"),
        (objects.freight("g"), ""),
    ],
)
def test_when_a_freight_was_made(freight: dict[str, Any], expected: str) -> None:
    assert freight_created(freight) == expected


async def test_of_two_freight_made_in_one_second_the_later_is_promoted(tmp_path: Path) -> None:
    """Both get the same creationTimestamp (the emulator's clock stands still); the stamps say
    which is newer, and the auto-promoting Stage moves on to it."""
    frozen = datetime(2026, 12, 1, 10, 0, 5, tzinfo=UTC)
    async with running_cluster(tmp_path, [NS], clock=lambda: frozen) as cluster:
        stage = objects.stage(
            "test",
            steps=[{"uses": "compose-output", "config": {"done": "yes"}}],
            annotations={"longshoreman.dev/auto-promote": "true"},
        )
        await cluster.kube.create(k.STAGES, stage)
        async with running_controller(cluster.server, cluster.work):
            first = made("f" * 40, None, "2026-12-01T10:00:05.100000Z")
            await cluster.kube.create(k.FREIGHT, first)
            await wait_for_object(
                cluster.kube, k.STAGES, NS, "test", lambda s: current(s) == "f" * 40
            )
            second = made("e" * 40, None, "2026-12-01T10:00:05.600000Z")
            await cluster.kube.create(k.FREIGHT, second)
            done = await wait_for_object(
                cluster.kube, k.STAGES, NS, "test", lambda s: current(s) == "e" * 40
            )
    assert current(done) == "e" * 40


def current(stage: dict[str, Any]) -> str | None:
    history = (stage.get("status") or {}).get("freightHistory") or []
    if not history:
        return None
    items = history[0].get("items") or {}
    names = [item.get("name") for item in items.values()]
    return names[0] if names else None
