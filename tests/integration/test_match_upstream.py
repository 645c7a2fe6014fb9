"""Auto-promotion's selection policies on a running controller: ``MatchUpstream`` follows the
one upstream Stage, back to older Freight too; ``NewestFreight`` (the default) never goes back.

``test`` takes Freight directly and auto-promotes; ``follower`` (MatchUpstream) and ``newest``
(NewestFreight) take it from ``test``. After f1 then f2 reach all three, f1 is promoted to
``test`` again by hand (a rollback): ``follower`` follows it back, ``newest`` stays on f2.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from app.controller import kube as k
from tests.support import objects
from tests.support.controller import (
    running_cluster,
    running_controller,
    wait_for_object,
    wait_terminal,
)

NS = objects.NS
STEPS = [{"uses": "compose-output", "config": {"at": "${{ ctx.stage }}"}}]
AUTO = {"longshoreman.dev/auto-promote": "true"}
F1, F2 = "1" * 40, "2" * 40


def current(stage: dict[str, Any]) -> str | None:
    history = (stage.get("status") or {}).get("freightHistory") or []
    names = [i.get("name") for i in (history[0].get("items") or {}).values()] if history else []
    return names[0] if names else None


async def on(kube: k.Kube, stage: str, freight: str) -> None:
    await wait_for_object(kube, k.STAGES, NS, stage, lambda s: current(s) == freight)


async def test_match_upstream_follows_the_upstream_stage_back(tmp_path: Path) -> None:
    start = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    async with running_cluster(tmp_path, [NS]) as cluster:
        kube = cluster.kube
        await kube.create(k.STAGES, objects.stage("test", steps=STEPS, annotations=AUTO))
        follow = {"stages": ["test"], "autoPromotionOptions": {"selectionPolicy": "MatchUpstream"}}
        await kube.create(
            k.STAGES, objects.stage("follower", sources=follow, steps=STEPS, annotations=AUTO)
        )
        await kube.create(
            k.STAGES, objects.stage("newest", upstream=["test"], steps=STEPS, annotations=AUTO)
        )
        async with running_controller(cluster.server, cluster.work):
            await kube.create(k.FREIGHT, objects.freight(F1, created=start.isoformat()))
            for stage in ("test", "follower", "newest"):
                await on(kube, stage, F1)
            later = (start + timedelta(minutes=1)).isoformat()
            await kube.create(k.FREIGHT, objects.freight(F2, created=later))
            for stage in ("test", "follower", "newest"):
                await on(kube, stage, F2)
            # Roll test back to f1 by hand.
            await kube.create(k.PROMOTIONS, objects.promotion("back", "test", freight=F1))
            await wait_terminal(kube, NS, "back")
            await on(kube, "test", F1)
            await on(kube, "follower", F1)
            newest = await kube.get(k.STAGES, NS, "newest")
        promotions, _ = await kube.list(k.PROMOTIONS, NS)
    assert current(newest) == F2
    to_follower = [p["spec"]["freight"] for p in promotions if p["spec"]["stage"] == "follower"]
    assert sorted(to_follower) == sorted([F1, F2, F1])
