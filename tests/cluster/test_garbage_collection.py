"""The garbage collector on the cluster: 60 Promotions and 40 Freight through one Stage.

With Kargo's rules at retention 10 and minimum age 0, the collector (in the leader, every half
second here) deletes while the Promotions run: when they have all finished, the ten newest
Promotions remain, and the Freight Kargo's rules keep (the newest, the Stage's current Freight
and ten older than it) plus what Longshoreman keeps besides (the Stage's history). Every delete
is watched as it happens: no Promotion was deleted before it finished, and no Freight while a
Stage held it or a Promotion waited for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from app.controller import kube as k
from app.controller.informer import Informer
from promoter.control.garbage import Garbage, Retention, collect
from promoter.resources.annotations import FREIGHT_CREATED
from promoter.resources.model import meta
from tests.cluster.support import Cluster
from tests.support import objects
from tests.support.controller import TERMINAL, running_controller
from tests.support.waiting import eventually

NS = "gc"
FREIGHT = [f"f{i:02d}" for i in range(40)]  # f00 the oldest, f39 the newest
PROMOTIONS = [f"p{i:02d}" for i in range(60)]  # p{i} promotes FREIGHT[i % 40]
KEEP = 10
RETENTION = Retention(
    max_promotions=KEEP,
    min_promotion_age=timedelta(0),
    max_freight=KEEP,
    min_freight_age=timedelta(0),
)


def _freight(name: str) -> dict[str, Any]:
    # The Warehouse's stamp (microseconds) orders Freight made within one second.
    made = objects.freight(name, namespace=NS)
    made["metadata"]["annotations"] = {FREIGHT_CREATED: datetime.now(UTC).isoformat()}
    return made


class Deletions:
    """Every Promotion and Freight deleted, as the server last had it, and what was in use then."""

    def __init__(self) -> None:
        self.promotions: list[dict[str, Any]] = []
        self.freight: list[str] = []
        self.in_use_when_deleted: list[str] = []
        self.stage: Mapping[str, Any] = {}
        self.waiting: dict[str, str] = {}  # unfinished Promotion -> its Freight

    def on_promotion(self, kind: str, obj: dict[str, Any], _old: Any) -> None:
        name = meta(obj)["name"]
        if kind == "DELETED":
            self.promotions.append(obj)
        if kind == "DELETED" or (obj.get("status") or {}).get("phase") in TERMINAL:
            self.waiting.pop(name, None)
        else:
            self.waiting[name] = obj["spec"]["freight"]

    def on_stage(self, kind: str, obj: dict[str, Any], _old: Any) -> None:
        self.stage = obj

    def on_freight(self, kind: str, obj: dict[str, Any], _old: Any) -> None:
        if kind != "DELETED":
            return
        name = meta(obj)["name"]
        self.freight.append(name)
        history = (self.stage.get("status") or {}).get("freightHistory") or []
        held = {ref["name"] for entry in history for ref in (entry.get("items") or {}).values()}
        if name in held or name in self.waiting.values():
            self.in_use_when_deleted.append(name)


async def test_sixty_promotions_and_forty_freight_leave_ten_promotions_and_the_kept_freight(
    cluster: Cluster, tmp_path: Path
) -> None:
    await cluster.install_crds()
    kube = cluster.kube()
    await cluster.kubectl("create", "namespace", NS)
    steps = [{"uses": "compose-output", "config": {"done": True}}]
    await kube.create(k.STAGES, objects.stage("test", namespace=NS, steps=steps))
    for name in FREIGHT:
        await kube.create(k.FREIGHT, _freight(name))
    seen = Deletions()
    watchers = [
        Informer(kube, k.PROMOTIONS, namespace=NS, on_event=seen.on_promotion),
        Informer(kube, k.STAGES, namespace=NS, on_event=seen.on_stage),
        Informer(kube, k.FREIGHT, namespace=NS, on_event=seen.on_freight),
    ]
    watching = [asyncio.create_task(w.run()) for w in watchers]
    try:
        await asyncio.gather(*(w.synced.wait() for w in watchers))
        # All queued before the controller starts: a Promotion created later for a Freight the
        # collector has already taken would fail ("Freight not found"), as in Kargo.
        for i, name in enumerate(PROMOTIONS):
            promotion = objects.promotion(name, namespace=NS, freight=FREIGHT[i % 40])
            await kube.create(k.PROMOTIONS, promotion)
        async with running_controller(
            cluster, tmp_path / "work", retention=RETENTION, gc_interval=0.5
        ):

            async def settled() -> list[dict[str, Any]] | None:
                left, _ = await kube.list(k.PROMOTIONS, NS)
                done = all((p.get("status") or {}).get("phase") in TERMINAL for p in left)
                return left if done and len(left) <= KEEP and len(seen.promotions) >= 50 else None

            left = await eventually(settled, "the Promotions to finish and be collected", 120)

            async def freight_collected() -> list[str] | None:
                freight, _ = await kube.list(k.FREIGHT, NS)
                names = sorted(meta(f)["name"] for f in freight)
                return names if set(FREIGHT[:9]).isdisjoint(names) else None

            remaining = await eventually(freight_collected, "f00..f08 to be collected", 60)
            # What is left is what the rules keep: another pass would delete nothing.
            stages, _ = await kube.list(k.STAGES, NS)
            promotions, _ = await kube.list(k.PROMOTIONS, NS)
            freight, _ = await kube.list(k.FREIGHT, NS)
            again = collect(
                stages=stages,
                promotions=promotions,
                freight=freight,
                retention=RETENTION,
                now=datetime.now(UTC),
            )
    finally:
        for task in watching:
            task.cancel()
        await asyncio.gather(*watching, return_exceptions=True)

    # The ten newest Promotions remain, finished; every one deleted had finished first.
    assert sorted(meta(p)["name"] for p in left) == PROMOTIONS[-KEEP:]
    assert {(p.get("status") or {}).get("phase") for p in left} == {"Succeeded"}, left[0]["status"]
    assert sorted(meta(p)["name"] for p in seen.promotions) == PROMOTIONS[:-KEEP]
    assert {(p.get("status") or {}).get("phase") for p in seen.promotions} == {"Succeeded"}
    # Which Freight go depends on when the passes ran, and every pass keeps Kargo's rules: while
    # p30..p39 ran, each made f30..f39 current in turn and the ten before it were kept, so some
    # of f20..f28 (no longer held, not queued) went; f00..f19 were queued for p40..p59 until
    # they ran. At the end the Stage holds f19 (p59's) and held f10..f18: f19 and the ten
    # before it (f18..f09) stay, f08..f00 go, and so does nothing newer than f19 that is left.
    assert again == Garbage()
    assert set(FREIGHT[9:20] + FREIGHT[29:]) <= set(remaining)
    assert set(FREIGHT[:9]) <= set(seen.freight) <= set(FREIGHT[:9] + FREIGHT[20:29])
    assert seen.in_use_when_deleted == []
    stage = await kube.get(k.STAGES, NS, "test")
    history = stage["status"]["freightHistory"]
    assert [next(iter(e["items"].values()))["name"] for e in history] == [
        FREIGHT[i % 40] for i in range(59, 49, -1)
    ]
