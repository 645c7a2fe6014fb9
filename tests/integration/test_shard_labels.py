"""Shard labels through the API server emulator: a Promotion Longshoreman creates (chat,
auto-promotion, the CLI: the one builder) carries its Stage's shard from the start, so no
default controller has to move it (kubectl-made ones are moved: tests/cluster/test_sharding.py).
"""

from __future__ import annotations

from pathlib import Path

from app.controller import kube as k
from app.controller.creation import InformerTasks, create_promotion
from app.controller.informer import Informer
from promoter.control.shards import SHARD_LABEL
from tests.support import objects
from tests.support.controller import running_cluster

NS = "p"


async def test_a_promotion_the_builder_creates_carries_its_stages_shard(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, [NS]) as cluster:
        kube = cluster.kube
        tasks = InformerTasks(
            Informer(kube, k.PROMOTION_TASKS), Informer(kube, k.CLUSTER_PROMOTION_TASKS)
        )
        steps = [{"uses": "compose-output", "config": {"x": 1}}]
        sharded = objects.stage("eu", namespace=NS, steps=steps, shard="eu-1")
        plain = objects.stage("us", namespace=NS, steps=steps)
        freight = await kube.create(k.FREIGHT, objects.freight(namespace=NS))
        made = await create_promotion(kube, sharded, freight, tasks, actor="test", name="p1")
        unsharded = await create_promotion(kube, plain, freight, tasks, actor="test", name="p2")
    assert made["metadata"]["labels"][SHARD_LABEL] == "eu-1"
    assert SHARD_LABEL not in (unsharded["metadata"].get("labels") or {})
