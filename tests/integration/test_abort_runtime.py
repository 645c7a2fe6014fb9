"""An aborted Promotion's running step undoes its work in the world its run saw.

A step that started something outside the Promotion (an Argo CD sync) is asked to undo it when
the Promotion is aborted, and it renders its config again to know what to undo. So the abort
must give it the Runtime a normal run gets: the Stage's Freight from every origin (what
``chartFrom()`` finds) and the Stage's requested Warehouses. Observed through the objects on the
API server emulator and what the step itself saw, as the reconciler's other tests do.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.controller import kube as k
from promoter.resources import annotations as ann
from promoter.rules.limits import Limits
from promoter.steps.base import StepContext, StepResult, StepStatus
from tests.support import objects
from tests.support.controller import (
    registry_with,
    running_cluster,
    running_controller,
    wait_for_object,
    wait_terminal,
)

NS = "abort-demo"
IMAGE = "example.com/web"
CHART = "oci://example.com/charts/web"


class Probe:
    """``uses: probe``: notes what it sees when it runs and when it is asked to undo; it keeps
    running, so a test can abort it mid-step."""

    def __init__(self) -> None:
        self.ran: list[dict[str, Any]] = []
        self.undone: list[dict[str, Any]] = []

    @staticmethod
    def seen(ctx: StepContext, config: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "freights": [str((f.get("metadata") or {}).get("name")) for f in ctx.freights],
            "warehouses": None if ctx.warehouses is None else sorted(ctx.warehouses),
            "config": dict(config),
        }

    async def run(self, ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
        self.ran.append({"promotion": ctx.promotion, **self.seen(ctx, config)})
        return StepResult(StepStatus.RUNNING, message="syncing", retry_after=30)

    async def abort(self, ctx: StepContext, config: Mapping[str, Any]) -> None:
        self.undone.append({"promotion": ctx.promotion, **self.seen(ctx, config)})


async def test_an_abort_renders_the_running_step_with_the_runtime_of_its_run(
    tmp_path: Path,
) -> None:
    probe = Probe()
    requested = [
        {"origin": {"kind": "Warehouse", "name": name}, "sources": {"direct": True}}
        for name in ("images", "charts")
    ]
    steps = [
        {
            "uses": "probe",
            "config": {
                # Both read beyond the Promotion's own Freight: the chart comes from the
                # Freight the Stage holds from the other Warehouse.
                "image": f"${{{{ imageFrom('{IMAGE}').Tag }}}}",
                "chart": f"${{{{ chartFrom('{CHART}').Version }}}}",
            },
        }
    ]
    async with running_cluster(tmp_path, [NS]) as cluster:
        kube = cluster.kube
        await kube.create(
            k.WAREHOUSES,
            objects.warehouse(
                "images", namespace=NS, subscriptions=[{"image": {"repoURL": IMAGE}}]
            ),
        )
        await kube.create(
            k.WAREHOUSES,
            objects.warehouse(
                "charts", namespace=NS, subscriptions=[{"chart": {"repoURL": CHART}}]
            ),
        )
        await kube.create(
            k.FREIGHT,
            objects.freight(
                "chart-1",
                namespace=NS,
                warehouse="charts",
                charts=[{"repoURL": CHART, "version": "2.0.0"}],
            ),
        )
        await kube.create(
            k.FREIGHT,
            objects.freight(
                "image-1",
                namespace=NS,
                warehouse="images",
                images=[{"repoURL": IMAGE, "tag": "1.0.0", "digest": "sha256:" + "a" * 64}],
            ),
        )
        await kube.create(
            k.STAGES,
            objects.stage("prod", namespace=NS, steps=steps, requestedFreight=requested),
        )
        async with running_controller(
            cluster.server,
            cluster.work,
            registry=registry_with(probe=probe),
            # The first Promotion brings steps of its own (the template's need an image).
            limits=Limits(allow_own_steps=True),
        ):
            # The Stage comes to hold the chart (with steps of its own: the template's need
            # an image)...
            await kube.create(
                k.PROMOTIONS,
                objects.promotion(
                    "with-chart",
                    "prod",
                    namespace=NS,
                    freight="chart-1",
                    steps=[{"uses": "compose-output", "config": {"held": "chart"}}],
                ),
            )
            done = await wait_terminal(kube, NS, "with-chart")
            assert done["status"]["phase"] == "Succeeded", done["status"]
            # ...then an image is promoted beside it, and aborted while its step runs.
            await kube.create(
                k.PROMOTIONS,
                objects.promotion("with-image", "prod", namespace=NS, freight="image-1"),
            )
            await wait_for_object(
                kube,
                k.PROMOTIONS,
                NS,
                "with-image",
                lambda o: (o.get("status") or {}).get("phase") == "Running",
            )
            await kube.patch(
                k.PROMOTIONS,
                NS,
                "with-image",
                {"metadata": {"annotations": ann.abort("slack:T1/U2")}},
            )
            aborted = await wait_terminal(kube, NS, "with-image")

    assert aborted["status"]["phase"] == "Aborted"
    assert aborted["status"]["message"] == "Aborted by slack:T1/U2"
    ran = [seen for seen in probe.ran if seen["promotion"] == "with-image"]
    assert ran, "the step ran before the abort"
    assert probe.undone == [ran[-1]], "the abort saw what the run saw"
    assert probe.undone[0] == {
        "promotion": "with-image",
        "freights": ["image-1", "chart-1"],
        "warehouses": ["charts", "images"],
        "config": {"image": "1.0.0", "chart": "2.0.0"},
    }
