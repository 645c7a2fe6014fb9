"""The garbage collector in the controller, against the API server emulator: what it deletes, when
a delete fails (Kargo's "error deleting" cases: logged, counted as nothing deleted, tried again
on the next pass), and the minimum age read on the controller's clock against the server's
``creationTimestamp``s. Observed only through the objects on the API server.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from app.controller import kube as k
from promoter.control.garbage import Retention
from tests.support import objects
from tests.support.clock import FakeClock
from tests.support.controller import Cluster, running_cluster, running_controller
from tests.support.waiting import eventually

NS = "gc"
DAY = 24 * 3600.0


async def _finished(cluster: Cluster, name: str, freight: str, phase: str = "Succeeded") -> None:
    made = await cluster.kube.create(
        k.PROMOTIONS, objects.promotion(name, namespace=NS, freight=freight)
    )
    await cluster.kube.patch_status(
        k.PROMOTIONS,
        NS,
        name,
        {"phase": phase},
        resource_version=made["metadata"]["resourceVersion"],
    )


async def _names(cluster: Cluster, rt: k.ResourceType) -> list[str]:
    items, _ = await cluster.kube.list(rt, NS)
    return sorted(i["metadata"]["name"] for i in items)


@contextlib.asynccontextmanager
async def populated(tmp_path: Path) -> AsyncIterator[tuple[Cluster, FakeClock]]:
    """The emulator on a fake clock, with what :func:`_populate` makes."""
    clock = FakeClock()
    async with running_cluster(tmp_path, [NS], clock=clock.now) as cluster:
        await _populate(cluster, clock)
        yield cluster, clock


async def _populate(cluster: Cluster, clock: FakeClock) -> None:
    """A Stage holding f4 (held f3 before); f0..f5 made a day apart, and p0..p5 of them, finished
    (p5 Failed)."""
    history = [{"id": "c4", "items": {"Warehouse/w": {"name": "f4"}}}]
    history.append({"id": "c3", "items": {"Warehouse/w": {"name": "f3"}}})
    stage = await cluster.kube.create(k.STAGES, objects.stage("test", namespace=NS))
    await cluster.kube.patch_status(
        k.STAGES, NS, "test", {"freightHistory": history},
        resource_version=stage["metadata"]["resourceVersion"],
    )  # fmt: skip
    for i in range(6):
        await cluster.kube.create(k.FREIGHT, objects.freight(f"f{i}", namespace=NS))
        await _finished(cluster, f"p{i}", f"f{i}", phase="Failed" if i == 5 else "Succeeded")
        clock.advance(DAY)


async def test_old_finished_promotions_and_unused_freight_go_and_are_counted(
    tmp_path: Path,
) -> None:
    deleted: list[str] = []
    async with populated(tmp_path) as (cluster, clock):
        retention = Retention(
            max_promotions=2,
            min_promotion_age=timedelta(0),
            max_freight=2,
            min_freight_age=timedelta(0),
        )
        async with running_controller(
            cluster.server,
            cluster.work,
            clock=clock,
            retention=retention,
            on_garbage_collected=deleted.append,
        ):

            async def collected() -> list[str] | None:
                left = await _names(cluster, k.PROMOTIONS)
                return left if len(deleted) >= 6 else None

            left = await eventually(collected, "the collector's first pass")
            freight_left = await _names(cluster, k.FREIGHT)
    # The newest two finished Promotions stay.
    assert left == ["p4", "p5"]
    # f4 is held (the boundary): f5 is newer, f3 and f2 the two kept beyond it.
    assert freight_left == ["f2", "f3", "f4", "f5"]
    assert sorted(deleted) == ["Freight"] * 2 + ["Promotion"] * 4


async def test_younger_than_the_minimum_age_is_kept_until_the_clock_passes_it(
    tmp_path: Path,
) -> None:
    async with populated(tmp_path) as (cluster, clock):
        # p0 is six days old, p1 five: with a minimum of five and a half days only p0 may go.
        retention = Retention(max_promotions=0, min_promotion_age=timedelta(days=5.5))
        async with running_controller(
            cluster.server, cluster.work, clock=clock, retention=retention, gc_interval=0.05
        ):

            async def only_the_oldest_gone() -> list[str] | None:
                left = await _names(cluster, k.PROMOTIONS)
                return left if "p0" not in left else None

            assert await eventually(only_the_oldest_gone, "p0 collected") == [
                f"p{i}" for i in range(1, 6)
            ]
            clock.advance(5 * DAY)  # p5, the youngest, is six days old now

            async def all_gone() -> bool | None:
                return (await _names(cluster, k.PROMOTIONS)) == [] or None

            await eventually(all_gone, "the rest collected once old enough")


async def test_a_delete_the_server_refuses_is_tried_again_on_the_next_pass(
    tmp_path: Path,
) -> None:
    deleted: list[str] = []
    async with populated(tmp_path) as (cluster, clock):
        cluster.server.faults.add("error", methods="DELETE", path_pattern="/promotions/p0$")
        retention = Retention(max_promotions=5, min_promotion_age=timedelta(0))
        async with running_controller(
            cluster.server,
            cluster.work,
            clock=clock,
            retention=retention,
            gc_interval=0.05,
            on_garbage_collected=deleted.append,
        ):

            async def p0_gone() -> list[Any] | None:
                return deleted if "p0" not in await _names(cluster, k.PROMOTIONS) else None

            assert await eventually(p0_gone, "p0 deleted on a later pass") == ["Promotion"]
        assert [f.path for f in cluster.server.faults.injected][-1].endswith("/promotions/p0")
