"""Kargo's data and Freight functions: ``secret()``, ``sharedSecret()``, ``configMap()``,
``sharedConfigMap()``, ``freightStatus()`` and ``artifactFrom()``.

Each table names the Kargo test it is ported from (akuity/kargo,
pkg/expressions/function/functions_test.go); they run through our engine (the local runner's
in-memory ports) or, for the cluster, through the controller against the API server emulator.
Secret values must never reach a step's message.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from promoter.expressions import ExpressionError, evaluate_expression, freight_functions
from promoter.ports.clusterdata import InMemoryData
from promoter.resources.model import Phase
from promoter.rules.metadata import InMemoryMetadata, metadata_functions
from promoter.steps.base import StepServices
from tests.support import objects
from tests.support.steps import run_template

NOW = datetime(2026, 7, 25, 12, 0, tzinfo=UTC)
NS = "fake-project"
SHARED = "shared-things"
FREIGHT = objects.freight("fake-freight", namespace=NS)


def secret(name: str, namespace: str, data: dict[str, str], **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def config_map(name: str, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


async def run(
    config: dict[str, Any], objects: list[dict[str, Any]], tmp_path: Path, *, freight: Any = None
) -> Any:
    target = freight or FREIGHT
    return await run_template(
        [{"uses": "compose-output", "as": "out", "config": config}],
        tmp_path / "work",
        freight=target,
        services=StepServices(cluster_data=InMemoryData(objects, NS), shared_namespace=SHARED),
        extra_functions=metadata_functions(InMemoryMetadata([target], NS), NS),
        now=NOW,
    )


# Test_getSecret (direct access: secret()) and, with hasDirectAccess false, sharedSecret();
# Test_getConfigMap: (case, expression, objects, expected; an error message when a str).
GET_DATA = [
    ("Test_getSecret/no arguments", "secret()", [], "expected 1 argument"),
    ("Test_getSecret/too many arguments", "secret('a', 'b')", [], "expected 1 argument"),
    ("Test_getSecret/invalid argument type", "secret(1)", [], "argument must be string"),
    ("Test_getSecret/Secret not found", "secret('nope')", [], {}),
    ("Test_getSecret/success", "secret('s')", [secret("s", NS, {"foo": "bar"})], {"foo": "bar"}),
    ("Test_getSecret/success with no direct access but is generic", "sharedSecret('s')",
     [secret("s", SHARED, {"foo": "bar"}, **{"kargo.akuity.io/cred-type": "generic"})],
     {"foo": "bar"}),
    ("Test_getSecret/no direct access and not generic returns empty data", "sharedSecret('s')",
     [secret("s", SHARED, {"foo": "bar"})], {}),
    ("Test_getConfigMap/no arguments", "configMap()", [], "expected 1 argument"),
    ("Test_getConfigMap/too many arguments", "configMap('a', 'b')", [], "expected 1 argument"),
    ("Test_getConfigMap/invalid argument type", "configMap(1)", [], "argument must be string"),
    ("Test_getConfigMap/ConfigMap not found", "configMap('nope')", [], {}),
    ("Test_getConfigMap/success", "configMap('c')", [config_map("c", NS, {"foo": "bar"})],
     {"foo": "bar"}),
    ("sharedConfigMap reads the shared-resources namespace", "sharedConfigMap('c')",
     [config_map("c", SHARED, {"foo": "shared"}), config_map("c", NS, {"foo": "project"})],
     {"foo": "shared"}),
    ("secret() reads the Promotion's namespace only", "secret('s')",
     [secret("s", "elsewhere", {"foo": "bar"})], {}),
    ("Test_getConfigMap_getSecret_no_cache_key_collision",
     "[configMap('same'), secret('same')]",
     [config_map("same", NS, {"k": "cm"}), secret("same", NS, {"k": "secret"})],
     [{"k": "cm"}, {"k": "secret"}]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "expression", "objects", "expected"), GET_DATA, ids=[c[0] for c in GET_DATA]
)
async def test_data_functions(
    tmp_path: Path, name: str, expression: str, objects: list[dict[str, Any]], expected: Any
) -> None:
    done = await run({"v": f"${{{{ {expression} }}}}"}, objects, tmp_path)
    if isinstance(expected, str):
        assert done.status.phase is Phase.ERRORED
        assert expected in done.status.steps[0].message
    else:
        assert done.status.phase is Phase.SUCCEEDED, done.status.message
        assert done.status.state["out"]["v"] == expected


async def test_a_secret_value_never_shows_in_a_step_message(tmp_path: Path) -> None:
    value = "hunter2-very-secret"
    done = await run(
        {"n": "${{ int(secret('creds').password) }}"},
        [secret("creds", NS, {"password": value})],
        tmp_path,
    )
    message = done.status.steps[0].message
    assert done.status.phase is Phase.ERRORED
    assert value not in message and value not in done.status.message
    assert "***" in message
    # Nor in what the replay of the step records (the answers of recorded functions).
    assert value not in str(done.status.replay_steps)


async def test_without_a_port_the_data_functions_are_refused_by_name(tmp_path: Path) -> None:
    done = await run_template(
        [{"uses": "compose-output", "config": {"v": "${{ configMap('c') }}"}}],
        tmp_path / "work",
        freight=FREIGHT,
    )
    assert "not available here" in done.status.steps[0].message


# Test_freightStatus: the Freight's status as JSON; nil when there is no such Freight.
STATUS = {
    "currentlyIn": {"staging": {"since": "2026-05-13T14:42:47Z"}},
    "approvedFor": {"prod": {"approvedAt": "2026-07-24T23:11:01Z"}},
    "metadata": {"snow-id": "c2d4dd08833503d4b6207e95eeaad316"},
}
FREIGHT_STATUS = [
    ("no arguments", "freightStatus()", {}, "expected 1 argument"),
    ("too many arguments", "freightStatus('fake-freight', 'extra')", {}, "expected 1 argument"),
    ("invalid argument type", "freightStatus(123)", {}, "argument must be string"),
    ("empty freight ref name", "freightStatus('')", {}, "freight ref name must not be empty"),
    ("freight not found", "freightStatus('other')", {}, None),
    ("freight exists with empty status", "freightStatus('fake-freight')", {}, {}),
    ("successful status retrieval", "freightStatus('fake-freight')", STATUS, STATUS),
]


@pytest.mark.parametrize(
    ("name", "expression", "status", "expected"),
    FREIGHT_STATUS,
    ids=[f"Test_freightStatus/{c[0]}" for c in FREIGHT_STATUS],
)
async def test_freight_status(
    tmp_path: Path, name: str, expression: str, status: dict[str, Any], expected: Any
) -> None:
    freight = {**FREIGHT, "status": status} if status else FREIGHT
    done = await run({"v": f"${{{{ {expression} }}}}"}, [], tmp_path, freight=freight)
    if isinstance(expected, str):
        assert expected in done.status.steps[0].message
    else:
        assert done.status.phase is Phase.SUCCEEDED, done.status.message
        assert done.status.state["out"]["v"] == expected


# Test_getArtifactFromFreight: artifacts of generic subscriptions, by subscription name.
WAREHOUSE = {
    "fake-warehouse": {
        "spec": {
            "subscriptions": [
                {"name": "fake-sub", "subscription": {"subscriptionType": "fake-type"}}
            ]
        }
    }
}
WITH_ARTIFACT = [
    {
        "origin": {"kind": "Warehouse", "name": "fake-warehouse"},
        "artifacts": [{"subscriptionName": "fake-sub", "version": "fake-version"}],
    }
]
ARTIFACT_FROM = [
    ("subscription name only", "artifactFrom('fake-sub')", WAREHOUSE, WITH_ARTIFACT,
     {"ArtifactType": "", "SubscriptionName": "fake-sub", "Version": "fake-version",
      "Metadata": {}}),
    ("subscription name and origin", "artifactFrom('fake-sub', warehouse('fake-warehouse'))",
     {}, WITH_ARTIFACT, {"ArtifactType": "", "SubscriptionName": "fake-sub",
                         "Version": "fake-version", "Metadata": {}}),
    ("no arguments", "artifactFrom()", {}, [], "expected 1-2 arguments"),
    ("too many arguments", "artifactFrom('fake-sub', warehouse('w'), 'extra')", {}, [],
     "expected 1-2 arguments"),
    ("invalid first argument type", "artifactFrom(123)", {}, [], "first argument must be a string"),
    ("invalid second argument type", "artifactFrom('fake-sub', 'invalid')", {}, [],
     "second argument must be FreightOrigin"),
    ("success", "artifactFrom('fake-sub')", {}, [], None),
    ("ambiguous (FindArtifact, more than one possible origin)", "artifactFrom('fake-sub')",
     {**WAREHOUSE, "other": WAREHOUSE["fake-warehouse"]}, WITH_ARTIFACT,
     'multiple requested Freight could potentially provide a "fake-sub" artifact'),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "expression", "warehouses", "freights", "expected"),
    ARTIFACT_FROM,
    ids=[f"Test_getArtifactFromFreight/{c[0]}" for c in ARTIFACT_FROM],
)
def test_artifact_from(
    name: str,
    expression: str,
    warehouses: dict[str, Any],
    freights: list[dict[str, Any]],
    expected: Any,
) -> None:
    functions = freight_functions(freights, warehouses=warehouses, namespace=NS)
    if isinstance(expected, str):
        with pytest.raises(ExpressionError, match=expected.replace("(", r"\(")):
            evaluate_expression(expression, {}, functions)
    else:
        assert evaluate_expression(expression, {}, functions) == expected
