"""The API server emulator checks a CRD's ``pattern`` with RE2, as the kube-apiserver does.

The kube-apiserver validates a string field's OpenAPI ``pattern`` with Go's RE2. The emulator
stands alone (it imports nothing of Longshoreman but ``app.fastjson``), so it uses google-re2
itself rather than promoter's regex port; an object whose field meets a runaway pattern is
refused with the kube-apiserver's message instead of stalling the server.
"""

from __future__ import annotations

import json

import pytest
from kubernetes.aio import client
from kubernetes.aio.client.exceptions import ApiException

from tests.support.kube import namespaced_crd, running_apiserver
from tests.support.runaway import RUNAWAY_PATTERN, RUNAWAY_TEXT, comes_back

GROUP = "patterns.longshoreman.dev"
NAME = {"name": {"type": "string", "pattern": RUNAWAY_PATTERN}}
CRD = namespaced_crd(
    GROUP,
    "Gauge",
    {"type": "object", "properties": {"spec": {"type": "object", "properties": NAME}}},
)


async def test_a_runaway_crd_pattern_is_answered_with_the_kube_apiservers_refusal() -> None:
    async with running_apiserver(crd_dirs=[], crds=[CRD], namespaces=["team-a"]) as kube:
        objects = client.CustomObjectsApi(kube.api_client())
        body = {"apiVersion": f"{GROUP}/v1", "kind": "Gauge", "metadata": {"name": "g"}}
        with comes_back("the emulator's CRD pattern check"), pytest.raises(ApiException) as refused:
            await objects.create_namespaced_custom_object(
                GROUP, "v1", "team-a", "gauges", {**body, "spec": {"name": RUNAWAY_TEXT}}
            )
        assert refused.value.status == 422
        (cause,) = json.loads(refused.value.body)["details"]["causes"]
        assert (cause["field"], cause["reason"]) == ("spec.name", "FieldValueInvalid")
        assert cause["message"].endswith(f"should match '{RUNAWAY_PATTERN}'")
        made = await objects.create_namespaced_custom_object(
            GROUP, "v1", "team-a", "gauges", {**body, "spec": {"name": "a" * 10_000}}
        )
        assert made["spec"]["name"] == "a" * 10_000
