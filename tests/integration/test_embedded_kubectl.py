"""kubectl against the embedded cluster, as a new Kargo user meets it: Kargo's manifests apply
unchanged with validation on (``kargo.akuity.io`` served beside ``longshoreman.dev``, OpenAPI
built from the CRD schemas), and ``kubectl explain`` reads those schemas.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest_asyncio
import yaml

from app.controller import kube as k
from app.embedded import KARGO_GROUP_ALIAS, ROOT, embedded_cluster
from tests.support import objects
from tests.support.admission import (
    BROKEN_STAGE_FIELDS,
    BROKEN_WINDOW_PROBLEMS,
    STEPS,
    broken_project_config,
    broken_stage,
    broken_warehouse,
)
from tests.support.kube import running_apiserver
from tests.support.kubectl import KubectlResult, needs_kubectl, run_kubectl

pytestmark = needs_kubectl

NS = "kargo-demo"
PROJECT = ROOT / "examples" / "kargo-demo" / "project.yaml"
FREIGHT = "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b"


@dataclass(frozen=True)
class Embedded:
    url: str
    kubeconfig: Path

    async def kubectl(self, *args: str, stdin: str = "") -> KubectlResult:
        return await run_kubectl(self.kubeconfig, *args, stdin=stdin)

    async def annotation(self, kind: str, name: str, key: str) -> str:
        jsonpath = "{.metadata.annotations." + key.replace(".", "\\.") + "}"
        got = await self.kubectl("get", kind, name, "-n", NS, "-o", f"jsonpath={jsonpath}")
        return got.stdout


@pytest_asyncio.fixture
async def embedded(tmp_path: Path) -> AsyncIterator[Embedded]:
    async with embedded_cluster(tmp_path / "kubeconfig") as cluster:
        yield Embedded(cluster.url, cluster.kubeconfig)


async def test_kubectl_applies_kargos_example_project_unchanged_with_validation(
    embedded: Embedded,
) -> None:
    assert (await embedded.kubectl("create", "namespace", NS)).code == 0
    applied = await embedded.kubectl("apply", "-f", str(PROJECT))
    assert applied.code == 0, applied.stderr
    assert applied.stdout.splitlines() == [
        "warehouse.kargo.akuity.io/kargo-demo created",
        "freight.kargo.akuity.io/7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b created",
        "promotiontask.kargo.akuity.io/update-image-and-push created",
        "stage.kargo.akuity.io/test created",
        "stage.kargo.akuity.io/uat created",
    ]
    # The same objects under both groups; the controller reads ours.
    for resource in ("stages.kargo.akuity.io", "stages.longshoreman.dev"):
        names = await embedded.kubectl(
            "get", resource, "-n", NS, "-o", "jsonpath={.items[*].metadata.name}"
        )
        assert names.stdout == "test uat", resource
    kube = await k.load_kube(str(embedded.kubeconfig))
    try:
        warehouse = await kube.get(k.WAREHOUSES, NS, "kargo-demo")
    finally:
        await kube.close()
    assert warehouse["apiVersion"] == "longshoreman.dev/v1alpha1"
    again = await embedded.kubectl("apply", "-f", str(PROJECT))
    assert again.code == 0 and "stage.kargo.akuity.io/test unchanged" in again.stdout


async def test_a_misspelt_field_in_a_kargo_manifest_is_refused_naming_it(
    embedded: Embedded,
) -> None:
    await embedded.kubectl("create", "namespace", NS)
    stage = objects.stage("test", namespace=NS)
    stage["spec"]["requestedFreigt"] = stage["spec"].pop("requestedFreight")
    result = await embedded.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(stage))
    assert result.code != 0
    assert 'unknown field "spec.requestedFreigt"' in result.stderr, result.stderr


async def test_kubectl_explain_reads_the_crd_schemas(embedded: Embedded) -> None:
    explained = await embedded.kubectl("explain", "warehouses.spec")
    assert explained.code == 0, explained.stderr
    assert "subscriptions" in explained.stdout
    assert "GROUP:      longshoreman.dev" in explained.stdout
    kargo = await embedded.kubectl(
        "explain", "stages.spec", "--api-version", "kargo.akuity.io/v1alpha1"
    )
    assert kargo.code == 0, kargo.stderr
    assert "GROUP:      kargo.akuity.io" in kargo.stdout and "requestedFreight" in kargo.stdout


async def test_openapi_v2_is_served_as_json_with_every_crd_schema(embedded: Embedded) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{embedded.url}/openapi/v2") as response:
            assert response.status == 200
            document = await response.json()
        protobuf = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
        async with http.get(f"{embedded.url}/openapi/v2", headers={"Accept": protobuf}) as refused:
            assert refused.status == 406
    assert document["swagger"] == "2.0"
    definitions = document["definitions"]
    for name in ("dev.longshoreman.v1alpha1.Stage", "io.akuity.kargo.v1alpha1.Stage"):
        stage = definitions[name]
        assert stage["properties"]["metadata"] == {
            "$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        }
        assert "spec" in stage["properties"]
    assert "/apis/kargo.akuity.io/v1alpha1/namespaces/{namespace}/stages" in document["paths"]


async def test_an_alias_group_serves_the_same_objects_and_goes_with_its_crd() -> None:
    async with running_apiserver(namespaces=[NS], group_aliases=KARGO_GROUP_ALIAS) as server:
        ours = f"{server.url}/apis/longshoreman.dev/v1alpha1/namespaces/{NS}/stages"
        kargos = f"{server.url}/apis/kargo.akuity.io/v1alpha1/namespaces/{NS}/stages"
        async with aiohttp.ClientSession() as http:
            uat = objects.served(objects.stage("uat", namespace=NS))
            async with http.post(ours, json=uat) as created:
                assert created.status == 201
            async with http.get(kargos) as listed:
                body = await listed.json()
            assert [i["apiVersion"] for i in body["items"]] == ["kargo.akuity.io/v1alpha1"]
            async with http.get(f"{server.url}/apis") as groups:
                names = [g["name"] for g in (await groups.json())["groups"]]
            # After ours, so a bare `kubectl get stages` means longshoreman.dev.
            assert names.index("kargo.akuity.io") > names.index("longshoreman.dev")
            crd = f"{server.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
            async with http.delete(f"{crd}/stages.longshoreman.dev") as deleted:
                assert deleted.status == 200
            async with http.get(kargos) as gone:
                assert gone.status == 404
            own = yaml.safe_load((ROOT / "deploy/crds/stages.longshoreman.dev.yaml").read_text())
            own["metadata"]["name"] = "stages.kargo.akuity.io"
            own["spec"]["group"] = "kargo.akuity.io"
            async with http.post(crd, json=own) as refused:
                assert refused.status == 422


async def applied_project(embedded: Embedded) -> None:
    await embedded.kubectl("create", "namespace", NS)
    result = await embedded.kubectl("apply", "-f", str(PROJECT))
    assert result.code == 0, result.stderr


async def promote(embedded: Embedded, name: str, stage: str) -> None:
    """Create a Promotion of the example Freight with kubectl; it must be admitted."""
    promotion = objects.promotion(name, stage, namespace=NS, freight=FREIGHT)
    created = await embedded.kubectl("create", "-f", "-", stdin=yaml.safe_dump(promotion))
    assert created.code == 0, created.stderr


async def refusal(embedded: Embedded, obj: dict[str, object]) -> str:
    result = await embedded.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(obj))
    assert result.code != 0, result.stdout
    return result.stderr


async def test_kubectl_apply_refuses_a_bad_stage_naming_every_problem_at_once(
    embedded: Embedded,
) -> None:
    await applied_project(embedded)
    stderr = await refusal(embedded, broken_stage(NS, "kargo-demo"))
    assert 'The Stage "broken" is invalid' in stderr
    for field in BROKEN_STAGE_FIELDS:
        assert f"{field}: " in stderr, stderr
    assert 'Unsupported value: "git-clonee"' in stderr and 'did you mean "git-clone"' in stderr
    assert f"{STEPS}[4]" not in stderr


async def test_kubectl_apply_refuses_bad_warehouse_urls(embedded: Embedded) -> None:
    await applied_project(embedded)
    stderr = await refusal(embedded, broken_warehouse(NS))
    assert (
        'spec.subscriptions[0].image.repoURL: Invalid value: "https://ghcr.io/acme/app"' in stderr
    )
    assert 'spec.subscriptions[1].image.repoURL: Invalid value: "ghcr.io/Acme/My App"' in stderr
    assert "must be lower case" in stderr


async def test_kubectl_apply_refuses_a_promotion_of_freight_not_available_or_not_there(
    embedded: Embedded,
) -> None:
    await applied_project(embedded)
    freight = "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b"
    # uat takes Freight verified in test; this one was never there.
    unverified = await refusal(
        embedded, objects.promotion("p1", "uat", namespace=NS, freight=freight)
    )
    assert f'spec.freight: Invalid value: "{freight}": Freight is not available' in unverified
    missing = await refusal(embedded, objects.promotion("p2", "test", namespace=NS, freight="gone"))
    assert 'spec.freight: Invalid value: "gone": could not find Freight "gone"' in missing
    await promote(embedded, "p3", "test")


async def test_freight_cannot_change_what_it_carries(embedded: Embedded) -> None:
    await applied_project(embedded)
    freight = "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b"
    patch = '{"images":[{"repoURL":"public.ecr.aws/nginx/nginx","tag":"1.28.0"}]}'
    result = await embedded.kubectl(
        "patch", "freight", freight, "-n", NS, "--type", "merge", "-p", patch
    )
    assert result.code != 0
    assert "images: Invalid value" in result.stderr and "Freight is immutable" in result.stderr
    alias = await embedded.kubectl(
        "patch", "freight", freight, "-n", NS, "--type", "merge", "-p", '{"alias":"new-name"}'
    )
    assert alias.code == 0, alias.stderr


async def test_freight_that_carries_nothing_is_refused(embedded: Embedded) -> None:
    await applied_project(embedded)
    empty = objects.freight("0123456789abcdef0123456789abcdef01234567", namespace=NS)
    stderr = await refusal(embedded, empty)
    assert (
        "commits: Required value: freight must contain at least one commit, image, or chart"
        in stderr
    )


async def test_the_kubectl_user_is_recorded_as_creator_and_as_who_aborted(
    embedded: Embedded,
) -> None:
    await applied_project(embedded)
    await promote(embedded, "p1", "test")
    user = getpass.getuser()
    actor = await embedded.annotation("promotion", "p1", "kargo.akuity.io/create-actor")
    assert actor == f"kubernetes:{user}"
    aborted = await embedded.kubectl(
        "annotate", "promotion", "p1", "-n", NS, "kargo.akuity.io/abort=terminate"
    )
    assert aborted.code == 0, aborted.stderr
    request = await embedded.annotation("promotion", "p1", "kargo.akuity.io/abort")
    assert json.loads(request) == {"action": "terminate", "actor": f"kubernetes:{user}"}


async def test_a_project_config_names_every_problem_in_one_apply(embedded: Embedded) -> None:
    await embedded.kubectl("create", "namespace", NS)
    stderr = await refusal(embedded, broken_project_config(NS))
    assert 'The ProjectConfig "kargo-demo" is invalid' in stderr
    for problem in BROKEN_WINDOW_PROBLEMS:
        assert problem in stderr, stderr


async def test_an_alias_in_use_is_refused(embedded: Embedded) -> None:
    await applied_project(embedded)
    second = objects.freight(
        "0123456789abcdef0123456789abcdef01234567",
        namespace=NS,
        alias="frozen-tauntaun",
        warehouse="kargo-demo",
        images=[{"repoURL": "public.ecr.aws/nginx/nginx", "tag": "1.28.0"}],
    )
    stderr = await refusal(embedded, second)
    assert 'alias: Invalid value: "frozen-tauntaun": already used by Freight' in stderr
