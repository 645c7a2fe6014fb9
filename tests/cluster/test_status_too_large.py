"""A status the API server refuses as too large ends the Promotion Errored, on both servers
(issue 34, finding 2): the emulator takes 1 MiB a request, kube-apiserver 3 MiB (413 either
way). Our own limit (``LONGSHOREMAN_MAX_OBJECT_BYTES``) is raised out of the way here, so the
server's refusal is what the controller meets; the Stage's queue then moves on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.controller import kube as k
from promoter.rules.limits import Limits
from tests.cluster.support import Cluster
from tests.support import objects
from tests.support.controller import running_controller, wait_terminal

NS = "too-large"
FREIGHT = "f0123456789abcdef0123456789abcdef0123456"
OUTPUTS = {name: "${{ repeat('" + name + "', int(vars.size)) }}" for name in "abcd"}


def promotion(name: str, size: int) -> dict[str, Any]:
    vars_ = [{"name": "size", "value": str(size)}]
    return objects.promotion(name, "big", namespace=NS, freight=FREIGHT, vars=vars_)


async def test_a_status_the_server_refuses_as_too_large_ends_the_promotion(
    cluster: Cluster, tmp_path: Path
) -> None:
    await cluster.install_crds()
    await cluster.kubectl("create", "namespace", NS)
    kube = cluster.kube()
    await kube.create(k.FREIGHT, objects.freight(FREIGHT, namespace=NS))
    steps = [{"uses": "compose-output", "as": "out", "config": OUTPUTS}]
    await kube.create(k.STAGES, objects.stage("big", namespace=NS, steps=steps))
    async with (
        cluster.controller_access() as access,
        running_controller(
            access,
            tmp_path / "work",
            # The Promotions size their outputs with vars of their own.
            limits=Limits(max_object_bytes=100_000_000, allow_own_steps=True),
        ),
    ):
        # Four outputs of 900,000 characters: a 3.6 MB status, over both servers' limits.
        await kube.create(k.PROMOTIONS, promotion("huge", 900_000))
        huge = await wait_terminal(kube, NS, "huge")
        await kube.create(k.PROMOTIONS, promotion("small", 10))
        small = await wait_terminal(kube, NS, "small")
    assert huge["status"]["phase"] == "Errored", huge["status"]
    assert "refused the status as too large" in huge["status"]["message"]
    assert small["status"]["phase"] == "Succeeded", small["status"]
