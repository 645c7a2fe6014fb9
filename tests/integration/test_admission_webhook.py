"""``POST /admission/validate``: the app answers a real API server's validating webhook calls
(admission.k8s.io/v1 AdmissionReview) from the controller's caches, every problem at once."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from app.server import create_app, wait_started
from app.settings import Settings
from tests.support import objects
from tests.support.processes import QUIET

NS = "kargo-demo"
FREIGHT = "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[TestClient[Any, Any]]:
    # The embedded cluster, seeded with the example project: test takes the Freight directly,
    # uat only once it is verified in test.
    settings = Settings.from_env({**QUIET, "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work")})
    async with TestClient(TestServer(create_app(settings), host="127.0.0.1")) as client:
        state = await wait_started(client.app)
        assert state.controller is not None
        await asyncio.wait_for(state.controller.wait_synced(), 30)
        yield client


def review(obj: dict[str, Any], *, operation: str = "CREATE", old: Any = None) -> dict[str, Any]:
    kind = str(obj["kind"])
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "longshoreman.dev", "version": "v1alpha1", "kind": kind},
            "resource": {
                "group": "longshoreman.dev",
                "version": "v1alpha1",
                "resource": kind.lower() + "s",
            },
            "name": obj["metadata"]["name"],
            "namespace": obj["metadata"].get("namespace"),
            "operation": operation,
            "userInfo": {"username": "jane"},
            "object": objects.served(obj),
            "oldObject": objects.served(old) if old is not None else None,
            "dryRun": False,
        },
    }


async def answer(client: TestClient[Any, Any], body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/admission/validate", json=body)
    assert response.status == 200, await response.text()
    result: dict[str, Any] = await response.json()
    assert result["kind"] == "AdmissionReview"
    assert result["response"]["uid"] == body["request"]["uid"]
    return result["response"]


async def test_a_promotion_of_freight_not_verified_upstream_is_refused(
    client: TestClient[Any, Any],
) -> None:
    refused = await answer(
        client, review(objects.promotion("p", "uat", namespace=NS, freight=FREIGHT))
    )
    assert refused["allowed"] is False
    status = refused["status"]
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.freight"]
    assert "Freight is not available to Stage" in status["message"]
    allowed = await answer(
        client, review(objects.promotion("p", "test", namespace=NS, freight=FREIGHT))
    )
    assert allowed == {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True}


async def test_a_stage_is_refused_with_every_problem_in_one_answer(
    client: TestClient[Any, Any],
) -> None:
    stage = objects.stage(
        "broken",
        namespace=NS,
        steps=[
            {"uses": "git-clonee"},
            {"task": {"name": "update-image-and-push"}},
            {"task": {"name": "nope"}},
        ],
    )
    refused = await answer(client, review(stage))
    steps = "spec.promotionTemplate.spec.steps"
    assert [c["field"] for c in refused["status"]["details"]["causes"]] == [
        f"{steps}[0].uses",
        f"{steps}[2].task.name",
    ]
    assert refused["status"]["message"].startswith('Stage.longshoreman.dev "broken" is invalid: [')


async def test_freight_updates_that_change_artifacts_are_refused(
    client: TestClient[Any, Any],
) -> None:
    old = objects.freight(FREIGHT, namespace=NS, images=[{"repoURL": "a/b", "tag": "1"}])
    new = objects.freight(FREIGHT, namespace=NS, images=[{"repoURL": "a/b", "tag": "2"}])
    refused = await answer(client, review(new, operation="UPDATE", old=old))
    assert refused["allowed"] is False
    assert refused["status"]["details"]["causes"][0]["field"] == "images"
    deleted = await answer(client, review(old, operation="DELETE"))
    assert deleted["allowed"] is True


async def test_a_body_that_is_not_json_is_a_bad_request(client: TestClient[Any, Any]) -> None:
    response = await client.post("/admission/validate", data=b"not json")
    assert response.status == 400


async def test_the_mutating_webhook_records_who_created_a_promotion(
    client: TestClient[Any, Any],
) -> None:
    body = review(objects.promotion("p", "test", namespace=NS, freight=FREIGHT))
    response = await client.post("/admission/mutate", json=body)
    assert response.status == 200
    answered = (await response.json())["response"]
    assert answered["allowed"] is True and answered["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(answered["patch"])) == [
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {"kargo.akuity.io/create-actor": "kubernetes:jane"},
        }
    ]
    # Longshoreman's own service account writes its actor itself.
    body["request"]["userInfo"]["username"] = "system:serviceaccount:longshoreman:longshoreman"
    response = await client.post("/admission/mutate", json=body)
    assert (await response.json())["response"] == {"uid": body["request"]["uid"], "allowed": True}
