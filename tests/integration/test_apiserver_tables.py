"""Server-side printing in the API server emulator: ``kubectl get`` shows the columns our CRDs
declare, because the emulator answers kubectl's ``as=Table`` requests as kube-apiserver does.

The first tests drive the real kubectl, from ``kubectl apply -k deploy/crds`` on, and read the
expected columns from the CRD files. The rest read the ``Table`` (and the other representations
a client can negotiate) over HTTP, on an emulator whose clock the test holds, so ages are exact.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from tests.support import objects
from tests.support.kube import (
    OUR_CRDS,
    THIRD_PARTY_CRDS,
    RunningApiServer,
    namespaced_crd,
    running_apiserver,
)
from tests.support.kubectl import kubectl_env, needs_kubectl, run_kubectl

NS = "team-a"
GROUP = "test.longshoreman.dev"
TABLE_V1 = "application/json;as=Table;v=v1;g=meta.k8s.io"
TABLE_V1BETA1 = "application/json;as=Table;v=v1beta1;g=meta.k8s.io"
# What kubectl get sends.
KUBECTL_ACCEPT = f"{TABLE_V1},{TABLE_V1BETA1},application/json"
START = datetime(2030, 1, 1, tzinfo=UTC)


def printer_columns(crd_file: str) -> list[dict[str, Any]]:
    crd = yaml.safe_load((OUR_CRDS / crd_file).read_text())
    columns: list[dict[str, Any]] = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    return columns


def headers(columns: list[dict[str, Any]], *, wide: bool = False) -> list[str]:
    """What kubectl prints above the rows: NAME, then the columns kubectl does not hide."""
    shown = [c["name"].upper() for c in columns if wide or not c.get("priority")]
    return ["NAME", *shown]


def parse_kubectl_table(output: str) -> tuple[list[str], list[dict[str, str]]]:
    """kubectl's columns and rows; cells are cut at the header offsets (cells may be blank)."""
    lines = [line for line in output.splitlines() if line.strip()]
    names = re.split(r"\s{2,}", lines[0].strip())
    starts: list[int] = []
    for name in names:
        starts.append(lines[0].index(name, starts[-1] + 1 if starts else 0))
    ends = [*starts[1:], None]
    rows = [
        {
            name: line[start:end].strip()
            for name, start, end in zip(names, starts, ends, strict=True)
        }
        for line in lines[1:]
    ]
    return names, rows


class Kubectl:
    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    async def __call__(self, *args: str, stdin: str = "") -> str:
        result = await run_kubectl(self.kubeconfig, *args, stdin=stdin, within=60)
        assert result.code == 0, result.stderr
        return result.stdout


FREIGHT = "f0123456789abcdef0123456789abcdef0123456"
MANIFESTS = [
    objects.served(o)
    for o in (
        objects.freight(FREIGHT, namespace=NS, alias="first"),
        objects.stage("test", namespace=NS, steps=[{"uses": "compose-output"}]),
        objects.promotion("test.first", "test", namespace=NS, freight=FREIGHT),
    )
]


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[RunningApiServer, Kubectl]]:
    # Only the third-party CRDs are loaded: ours arrive the way an operator installs them.
    async with running_apiserver([THIRD_PARTY_CRDS], namespaces=[NS]) as kube:
        kubectl = Kubectl(kube.kubeconfig_path)
        await kubectl("apply", "-k", str(OUR_CRDS))
        await kubectl("create", "-f", "-", stdin=yaml.safe_dump_all(MANIFESTS))
        yield kube, kubectl


READY = {
    "type": "Ready",
    "status": "False",
    "reason": "NotVerified",
    "message": "wait",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


@needs_kubectl
async def test_kubectl_get_prints_the_printer_columns_of_our_crds(
    cluster: tuple[RunningApiServer, Kubectl],
) -> None:
    _, kubectl = cluster
    await kubectl(
        "-n", NS, "patch", "promotion", "test.first", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"phase": "Running", "message": "step 1 of 2"}}),
    )  # fmt: skip
    await kubectl(
        "-n", NS, "patch", "stage", "test", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"health": {"status": "Healthy"}, "conditions": [READY]}}),
    )  # fmt: skip

    columns = printer_columns("promotions.longshoreman.dev.yaml")
    names, rows = parse_kubectl_table(await kubectl("-n", NS, "get", "promotions"))
    assert names == headers(columns)
    assert "MESSAGE" not in names  # priority 1: only with -o wide
    [row] = rows
    assert row["NAME"] == "test.first"
    assert (row["PHASE"], row["STAGE"], row["FREIGHT"]) == ("Running", "test", FREIGHT)
    # The server renders the age; kubectl prints it as it comes.
    assert re.fullmatch(r"\d+s", row["AGE"])

    names, rows = parse_kubectl_table(await kubectl("-n", NS, "get", "promotions", "-o", "wide"))
    assert names == headers(columns, wide=True)
    assert rows[0]["MESSAGE"] == "step 1 of 2"

    names, rows = parse_kubectl_table(await kubectl("-n", NS, "get", "stages"))
    assert names == headers(printer_columns("stages.longshoreman.dev.yaml"))
    assert (rows[0]["HEALTH"], rows[0]["READY"], rows[0]["STATUS"]) == ("Healthy", "False", "wait")
    assert rows[0]["CURRENT FREIGHT"] == ""  # no value: an empty cell

    names, rows = parse_kubectl_table(await kubectl("-n", NS, "get", "freight", "-o", "wide"))
    assert names == headers(printer_columns("freights.longshoreman.dev.yaml"), wide=True)
    assert (rows[0]["ALIAS"], rows[0]["ORIGIN"], rows[0]["ORIGIN KIND"]) == (
        "first",
        "w",
        "Warehouse",
    )

    # One object; and every namespace at once, where kubectl adds NAMESPACE from the row's
    # object metadata.
    names, rows = parse_kubectl_table(await kubectl("-n", NS, "get", "promotion", "test.first"))
    assert names == headers(columns) and rows[0]["PHASE"] == "Running"
    names, rows = parse_kubectl_table(await kubectl("get", "promotions", "-A"))
    assert names == ["NAMESPACE", *headers(columns)]
    assert (rows[0]["NAMESPACE"], rows[0]["NAME"]) == (NS, "test.first")


@needs_kubectl
async def test_kubectl_get_prints_built_in_columns(
    cluster: tuple[RunningApiServer, Kubectl],
) -> None:
    _, kubectl = cluster
    names, rows = parse_kubectl_table(await kubectl("get", "ns"))
    assert names == ["NAME", "STATUS", "AGE"]
    assert {"NAME": NS, "STATUS": "Active"}.items() <= next(
        r for r in rows if r["NAME"] == NS
    ).items()

    await kubectl("-n", NS, "create", "configmap", "settings", "--from-literal=a=1")
    await kubectl("-n", NS, "create", "secret", "generic", "token", "--from-literal=a=1")
    names, rows = parse_kubectl_table(await kubectl("-n", NS, "get", "configmaps"))
    assert names == ["NAME", "DATA", "AGE"] and rows[0]["DATA"] == "1"
    names, rows = parse_kubectl_table(await kubectl("-n", NS, "get", "secrets"))
    assert names == ["NAME", "TYPE", "DATA", "AGE"] and rows[0]["TYPE"] == "Opaque"
    names, _ = parse_kubectl_table(await kubectl("get", "crds"))
    assert names == ["NAME", "CREATED AT"]


@needs_kubectl
async def test_kubectl_get_watch_prints_each_change_as_a_row(
    cluster: tuple[RunningApiServer, Kubectl],
) -> None:
    kube, kubectl = cluster
    watcher = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(kube.kubeconfig_path), "-n", NS,
        "get", "promotions", "--watch",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=kubectl_env(kube.kubeconfig_path),
    )  # fmt: skip
    assert watcher.stdout is not None
    try:
        header = await asyncio.wait_for(watcher.stdout.readline(), 30)
        assert header.split()[:3] == [b"NAME", b"PHASE", b"STAGE"]
        await asyncio.wait_for(watcher.stdout.readline(), 30)  # the listed row
        await kube.server.wait_for_watches(1, seconds=30)
        await kubectl(
            "-n", NS, "patch", "promotion", "test.first", "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": {"phase": "Succeeded"}}),
        )  # fmt: skip
        changed = await asyncio.wait_for(watcher.stdout.readline(), 30)
        assert changed.split()[:3] == [b"test.first", b"Succeeded", b"test"]
    finally:
        watcher.kill()
        await watcher.wait()


# ------------------------------------------------------------------- the Table over HTTP

# A CRD whose printer columns cover the JSONPath Kubernetes evaluates for them.
GADGET_COLUMNS: list[tuple[str, str, str]] = [
    ("Phase", "string", ".status.phase"),
    ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),
    ("First", "string", ".status.conditions[0].type"),
    ("Last", "string", ".status.conditions[-1].reason"),
    ("Fifth", "string", ".status.conditions[4].type"),
    ("Unknown", "string", ".status.nothing.here"),
    ("Null", "string", ".status.cleared"),
    ("Replicas", "integer", ".spec.replicas"),
    ("Ratio", "number", ".spec.ratio"),
    ("Paused", "boolean", ".spec.paused"),
    ("Big", "string", ".spec.big"),
    ("Labels", "string", ".metadata.labels"),
    ("Extra", "string", ".spec.extra"),
    ("App", "string", ".metadata.labels.app\\.kubernetes\\.io/name"),
    ("Tags", "string", ".spec.tags[*]"),
    ("Started", "date", ".status.startedAt"),
    ("Not a date", "date", ".spec.tags[0]"),
    ("Age", "date", ".metadata.creationTimestamp"),
]
EXPECTED_CELLS: list[Any] = [
    "g",
    "Progressing",
    "True",
    "Synced",
    "Waiting",
    None,  # index out of range
    None,  # missing
    "<no value>",  # a null that is there (client-go prints an invalid value)
    3,
    0.5,
    False,
    "1500000",  # stored, a whole float is an integer
    '{"app.kubernetes.io/name":"x","tier":"web"}',  # maps and lists as JSON, as Go writes it
    '{"a":1,"b":"\\u003cx\\u003e","c":0.25}',
    "x",
    "a",  # first of several results
    "3h",
    "<invalid>",
    "0s",
]


def crd(kind: str, columns: list[tuple[str, str, str]]) -> dict[str, Any]:
    loose = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    schema = {"type": "object", "properties": {"spec": loose, "status": loose}}
    version: dict[str, Any] = {"subresources": {"status": {}}}
    if columns:
        version["additionalPrinterColumns"] = [
            {"name": name, "type": kind_, "jsonPath": path, **({"priority": 1} if i % 5 else {})}
            for i, (name, kind_, path) in enumerate(columns)
        ]
    return namespaced_crd(GROUP, kind, schema, **version)


GADGETS = crd("Gadget", GADGET_COLUMNS)
PLAIN = crd("Plain", [])


class Clock:
    """The emulator's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def kube(clock: Clock) -> AsyncIterator[RunningApiServer]:
    async with running_apiserver(
        [], crds=[GADGETS, PLAIN], namespaces=[NS], clock=clock, bookmark_interval=0.2
    ) as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def gadgets_url(kube: RunningApiServer, name: str = "") -> str:
    url = f"{kube.url}/apis/{GROUP}/v1/namespaces/{NS}/gadgets"
    return f"{url}/{name}" if name else url


async def get(
    http: aiohttp.ClientSession, url: str, accept: str = KUBECTL_ACCEPT, **params: str
) -> tuple[int, Any]:
    async with http.get(url, headers={"Accept": accept}, params=params) as response:
        return response.status, await response.json()


async def create_gadget(http: aiohttp.ClientSession, kube: RunningApiServer, name: str) -> None:
    body = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Gadget",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "x", "tier": "web"}},
        "spec": {
            "replicas": 3,
            "ratio": 0.5,
            "paused": False,
            "big": 1.5e6,
            "tags": ["a", "b"],
            "extra": {"c": 0.25, "b": "<x>", "a": 1.0},
        },
    }
    async with http.post(gadgets_url(kube), json=body) as response:
        assert response.status == 201, await response.text()
    status = {
        "phase": "Progressing",
        "cleared": None,  # (a JSON patch, not a merge patch, for this null to stay)
        "startedAt": (START - timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "conditions": [
            {"type": "Synced", "status": "True", "reason": "Applied"},
            {"type": "Ready", "status": "True", "reason": "Waiting"},
        ],
    }
    async with http.patch(
        gadgets_url(kube, name) + "/status",
        data=json.dumps([{"op": "add", "path": "/status", "value": status}]),
        headers={"Content-Type": "application/json-patch+json"},
    ) as response:
        assert response.status == 200, await response.text()


async def test_custom_resource_cells_follow_the_crds_json_paths(
    kube: RunningApiServer, http: aiohttp.ClientSession
) -> None:
    await create_gadget(http, kube, "g")
    code, table = await get(http, gadgets_url(kube))
    assert code == 200
    definitions = table["columnDefinitions"]
    assert definitions[0] == {
        "name": "Name",
        "type": "string",
        "format": "name",
        "description": definitions[0]["description"],
        "priority": 0,
    }
    assert [(d["name"], d["type"]) for d in definitions[1:]] == [
        (name, kind) for name, kind, _ in GADGET_COLUMNS
    ]
    assert [d["priority"] for d in definitions[1:]] == [
        0 if i % 5 == 0 else 1 for i in range(len(GADGET_COLUMNS))
    ]
    assert definitions[1]["description"] == (
        "Custom resource definition column (in JSONPath format): .status.phase"
    )
    [row] = table["rows"]
    assert row["cells"] == EXPECTED_CELLS


async def test_a_table_has_kube_apiservers_shape(
    kube: RunningApiServer, http: aiohttp.ClientSession
) -> None:
    for name in ("g1", "g2", "g3"):
        await create_gadget(http, kube, name)
    code, table = await get(http, gadgets_url(kube))
    assert code == 200
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert table["metadata"] == {"resourceVersion": str(kube.server.store.resource_version)}
    assert list(table) == ["kind", "apiVersion", "metadata", "columnDefinitions", "rows"]
    # By default each row carries its object's metadata (kubectl reads namespace and labels).
    objects = [row["object"] for row in table["rows"]]
    assert [o["metadata"]["name"] for o in objects] == ["g1", "g2", "g3"]
    assert {(o["kind"], o["apiVersion"]) for o in objects} == {
        ("PartialObjectMetadata", "meta.k8s.io/v1")
    }
    assert "spec" not in objects[0]

    # kubectl's second choice, if a server has no v1 Table.
    _, older = await get(http, gadgets_url(kube), TABLE_V1BETA1)
    assert older["apiVersion"] == "meta.k8s.io/v1beta1"
    assert older["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"

    _, bare = await get(http, gadgets_url(kube), includeObject="None")
    assert [row["object"] for row in bare["rows"]] == [None, None, None]
    _, whole = await get(http, gadgets_url(kube), includeObject="Object")
    assert whole["rows"][0]["object"]["kind"] == "Gadget"
    assert whole["rows"][0]["object"]["spec"]["replicas"] == 3
    code, status = await get(http, gadgets_url(kube), includeObject="Everything")
    assert (code, status["reason"]) == (400, "BadRequest")
    assert status["message"] == (
        "Unable to convert to Table as requested: includeObject: Invalid value: "
        "\"Everything\": must be 'Metadata', 'Object', 'None', or empty"
    )

    # The list's paging metadata goes on the Table.
    _, page = await get(http, gadgets_url(kube), limit="2")
    assert len(page["rows"]) == 2
    assert page["metadata"]["remainingItemCount"] == 1
    _, rest = await get(
        http, gadgets_url(kube), limit="2", **{"continue": page["metadata"]["continue"]}
    )
    assert [row["cells"][0] for row in rest["rows"]] == ["g3"]

    # One object: one row, and the object's resourceVersion.
    _, one = await get(http, gadgets_url(kube, "g2"))
    [row] = one["rows"]
    assert row["cells"][0] == "g2"
    assert one["metadata"] == {"resourceVersion": row["object"]["metadata"]["resourceVersion"]}


async def test_a_crd_without_printer_columns_shows_name_and_age(
    kube: RunningApiServer, http: aiohttp.ClientSession, clock: Clock
) -> None:
    url = f"{kube.url}/apis/{GROUP}/v1/namespaces/{NS}/plains"
    body = {"apiVersion": f"{GROUP}/v1", "kind": "Plain", "metadata": {"name": "p"}}
    async with http.post(url, json=body) as response:
        assert response.status == 201
    clock.now = START + timedelta(minutes=90)
    _, table = await get(http, url)
    assert [(d["name"], d["type"]) for d in table["columnDefinitions"]] == [
        ("Name", "string"),
        ("Age", "date"),
    ]
    assert table["rows"][0]["cells"] == ["p", "90m"]


@pytest.mark.parametrize(
    ("elapsed", "age"),
    [
        (timedelta(seconds=0), "0s"),
        (timedelta(seconds=-1), "0s"),
        (timedelta(seconds=-3), "<invalid>"),
        (timedelta(seconds=119), "119s"),
        (timedelta(minutes=2), "2m"),
        (timedelta(minutes=9, seconds=59), "9m59s"),
        (timedelta(minutes=10, seconds=30), "10m"),
        (timedelta(hours=2, minutes=59), "179m"),
        (timedelta(hours=3), "3h"),
        (timedelta(hours=7, minutes=59), "7h59m"),
        (timedelta(hours=47, minutes=59), "47h"),
        (timedelta(days=2), "2d"),
        (timedelta(days=7, hours=23), "7d23h"),
        (timedelta(days=400), "400d"),
        (timedelta(days=3 * 365 + 5), "3y5d"),
        (timedelta(days=9 * 365), "9y"),
    ],
)
async def test_ages_are_rendered_by_the_server(
    kube: RunningApiServer,
    http: aiohttp.ClientSession,
    clock: Clock,
    elapsed: timedelta,
    age: str,
) -> None:
    """A custom resource's date column and a built-in's AGE read like apimachinery's
    HumanDuration, as kube-apiserver 1.20 renders them."""
    url = f"{kube.url}/apis/{GROUP}/v1/namespaces/{NS}/plains"
    body = {"apiVersion": f"{GROUP}/v1", "kind": "Plain", "metadata": {"name": "p"}}
    async with http.post(url, json=body) as response:
        assert response.status == 201
    clock.now = START + elapsed
    _, custom = await get(http, url)
    _, built_in = await get(http, f"{kube.url}/api/v1/namespaces/{NS}")
    assert (custom["rows"][0]["cells"][1], built_in["rows"][0]["cells"][2]) == (age, age)


async def test_built_in_resources_print_kubectls_usual_columns(
    kube: RunningApiServer, http: aiohttp.ClientSession, clock: Clock
) -> None:
    core = f"{kube.url}/api/v1/namespaces/{NS}"
    leases = f"{kube.url}/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
    created = [
        (f"{core}/configmaps", {"metadata": {"name": "c"}, "data": {"a": "1"}, "binaryData": {}}),
        (f"{core}/secrets", {"metadata": {"name": "s"}, "data": {"a": "MQ==", "b": "Mg=="}}),
        (leases, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "pod-1"}}),
        (
            f"{core}/events",
            {
                "metadata": {"name": "e"},
                "involvedObject": {
                    "kind": "Promotion",
                    "name": "p",
                    "namespace": NS,
                    "fieldPath": "spec",
                },
                "reason": "Started",
                "message": "promotion started \n",
                "type": "Normal",
                "source": {"component": "longshoreman", "host": "pod-1"},
                "firstTimestamp": (START - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "lastTimestamp": START.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "count": 4,
            },
        ),
    ]
    for url, body in created:
        async with http.post(url, json=body) as response:
            assert response.status == 201, await response.text()
    clock.now = START + timedelta(minutes=5)

    async def table(url: str) -> tuple[list[str], list[Any]]:
        _, found = await get(http, url)
        names = [d["name"] for d in found["columnDefinitions"]]
        return names, [row["cells"] for row in found["rows"]]

    assert await table(f"{core}/configmaps") == (["Name", "Data", "Age"], [["c", 1, "5m"]])
    assert await table(f"{core}/secrets") == (
        ["Name", "Type", "Data", "Age"],
        [["s", "Opaque", 2, "5m"]],
    )
    assert await table(leases) == (["Name", "Holder", "Age"], [["l", "pod-1", "5m"]])
    assert await table(f"{core}/events") == (
        [
            "Last Seen",
            "Type",
            "Reason",
            "Object",
            "Subobject",
            "Source",
            "Message",
            "First Seen",
            "Count",
            "Name",
        ],
        [
            [
                "5m",
                "Normal",
                "Started",
                "promotion/p",
                "spec",
                "longshoreman, pod-1",
                "promotion started",
                "65m",
                4,
                "e",
            ]
        ],
    )
    _, crds = await get(http, f"{kube.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    assert [d["name"] for d in crds["columnDefinitions"]] == ["Name", "Created At"]
    assert crds["rows"][0]["cells"] == [f"gadgets.{GROUP}", "2030-01-01T00:00:00Z"]


async def test_watch_as_table_sends_column_definitions_once(
    kube: RunningApiServer, http: aiohttp.ClientSession
) -> None:
    await create_gadget(http, kube, "g1")
    events: list[dict[str, Any]] = []
    async with http.get(
        gadgets_url(kube),
        params={"watch": "true", "timeoutSeconds": "5"},
        headers={"Accept": KUBECTL_ACCEPT},
    ) as response:
        await kube.server.wait_for_watches(1)
        await create_gadget(http, kube, "g2")
        async for line in response.content:
            events.append(json.loads(line))
            if len(events) == 3:  # g1 listed, g2 added, g2's status written
                break
    assert [e["type"] for e in events] == ["ADDED", "ADDED", "MODIFIED"]
    assert [e["object"]["kind"] for e in events] == ["Table"] * 3
    assert events[0]["object"]["columnDefinitions"][1]["name"] == "Phase"
    assert [e["object"]["columnDefinitions"] for e in events[1:]] == [None, None]
    assert [[r["cells"][:2] for r in e["object"]["rows"]] for e in events] == [
        [["g1", "Progressing"]],
        [["g2", None]],
        [["g2", "Progressing"]],
    ]


async def test_metadata_only_representations(
    kube: RunningApiServer, http: aiohttp.ClientSession
) -> None:
    await create_gadget(http, kube, "g")
    as_list = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
    as_one = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
    code, listed = await get(http, gadgets_url(kube), as_list)
    assert (code, listed["kind"], listed["apiVersion"]) == (
        200,
        "PartialObjectMetadataList",
        "meta.k8s.io/v1",
    )
    assert [(i["kind"], i["metadata"]["name"], "spec" in i) for i in listed["items"]] == [
        ("PartialObjectMetadata", "g", False)
    ]
    code, one = await get(http, gadgets_url(kube, "g"), as_one)
    assert (code, one["kind"], one["metadata"]["name"]) == (200, "PartialObjectMetadata", "g")
    code, refused = await get(http, gadgets_url(kube), as_one)
    assert (code, refused["reason"], refused["message"]) == (
        406,
        "NotAcceptable",
        "you requested PartialObjectMetadata, but the requested object is a list "
        "(*unstructured.UnstructuredList)",
    )


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, "GadgetList"),
        ("application/json", "GadgetList"),
        ("*/*", "GadgetList"),
        ("application/vnd.kubernetes.protobuf, application/json", "GadgetList"),
        (TABLE_V1, "Table"),
        ("application/json;as=Table;v=v2;g=meta.k8s.io, application/json", "GadgetList"),
        ("application/json;q=0.5, application/json;as=Table;v=v1;g=meta.k8s.io", "Table"),
        ("application/json;as=Table;v=v2;g=meta.k8s.io", 406),
        ("application/json;as=Gadget;v=v1;g=meta.k8s.io", 406),
        ("application/json;as=Table", 406),
    ],
)
async def test_accept_negotiates_the_representation(
    kube: RunningApiServer, http: aiohttp.ClientSession, accept: str | None, expected: Any
) -> None:
    headers = {"Accept": accept} if accept else {"Accept": ""}
    async with http.get(gadgets_url(kube), headers=headers) as response:
        body = await response.json()
    if expected == 406:
        assert (response.status, body["reason"]) == (406, "NotAcceptable")
    else:
        assert (response.status, body["kind"]) == (200, expected)


async def test_printer_columns_are_checked_when_the_crd_is_written(
    kube: RunningApiServer, http: aiohttp.ClientSession
) -> None:
    bad = crd("Widget", [("Phase", "string", "status.phase")])
    url = f"{kube.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    async with http.post(url, json=bad) as response:
        status = await response.json()
    assert (response.status, status["reason"]) == (422, "Invalid")
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "status.phase": must be a simple json path starting with .',
            "field": "spec.versions[0].additionalPrinterColumns[0].jsonPath",
        }
    ]
