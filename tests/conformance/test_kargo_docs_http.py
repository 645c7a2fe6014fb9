"""Kargo's ``http`` and ``http-download`` documentation examples, run against a local server.

Each example's step config (``kargo-docs/http.*.yaml``, ``http-download.*.yaml``) runs unchanged
but for its URL, pointed at a server on 127.0.0.1 that answers what the example expects (cat
facts, a job's status, the YAML document of example 7, a chart). What the runner would render
first (``vars``, ``secret()``, ``chartFrom()``) is filled in with what it would render to. These
examples need the network or ``secret()``, which is why test_kargo_examples.py cannot run them
through the local runner; ``http.5.yaml`` (a Slack message built with ``secret()``) runs nowhere.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

from promoter.expressions import Scope, render
from promoter.steps.base import HttpSettings, StepContext, StepResult, StepStatus
from promoter.steps.registry import builtin_registry
from tests.support import conformance
from tests.support.steps import make_context

FIXTURES = conformance.root() / "kargo-docs"
SECRET = "s3cr3t-d0cs-token-42"
FACTS = {
    "facts": [
        {"fact_number": 1, "fact": "Kittens have baby teeth."},
        {"fact_number": 2, "fact": "Cats sleep a lot."},
    ]
}

ServerFactory = Callable[[web.Application], Awaitable[TestServer]]


@dataclass
class Canned:
    """What the server answers next, and the requests it saw."""

    status: int = 200
    body: bytes = b"{}"
    content_type: str = "application/json"
    requests: list[dict[str, Any]] = field(default_factory=list)

    def json(self, value: Any, status: int = 200) -> None:
        self.status, self.body = status, json.dumps(value).encode()
        self.content_type = "application/json"


@dataclass
class Server:
    url: str
    canned: Canned


@pytest.fixture
async def server(aiohttp_server: ServerFactory) -> Server:
    canned = Canned()

    async def answer(request: web.Request) -> web.Response:
        seen = {"method": request.method, "query": dict(request.query)}
        canned.requests.append({**seen, "headers": dict(request.headers)})
        return web.Response(
            status=canned.status, body=canned.body, content_type=canned.content_type
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    running = await aiohttp_server(app)
    return Server(str(running.make_url("/example")), canned)


def context(tmp_path: Path) -> StepContext:
    ctx = make_context(tmp_path)
    # The server listens on loopback, which the steps refuse unless the operator allows it.
    http = HttpSettings(default_timeout_seconds=5.0, allow_hosts=("127.0.0.1",))
    return replace(ctx, services=replace(ctx.services, http=http))


async def run(ctx: StepContext, step: dict[str, Any]) -> StepResult:
    return await builtin_registry()[step["uses"]].run(ctx, step["config"])


def example(name: str) -> Any:
    return yaml.safe_load((FIXTURES / name).read_text())


def example_steps(name: str, url: str, rendered: dict[str, str] | None = None) -> list[Any]:
    """The steps of an example: the first one's URL pointed at ``url``, and the expressions in
    ``rendered`` replaced by what the runner would render them to."""
    text = (FIXTURES / name).read_text()
    for expression, value in (rendered or {}).items():
        text = text.replace(expression, value)
    steps: list[dict[str, Any]] = yaml.safe_load(text)["steps"]
    steps[0]["config"]["url"] = url
    return steps


# ---- http ---------------------------------------------------------------------------------------


def test_example_2_is_example_1_rendered() -> None:
    document = example("http.1.yaml")
    variables = {v["name"]: v["value"] for v in document["vars"]}
    [step] = document["steps"]
    assert render(step["config"], Scope({"vars": variables})) == example("http.2.yaml")


@pytest.mark.parametrize(
    ("job_status", "status"),
    [
        ("completed", StepStatus.SUCCEEDED),
        ("failed", StepStatus.FAILED),
        ("running", StepStatus.RUNNING),
    ],
)
async def test_example_2_follows_a_job_status(
    server: Server, tmp_path: Path, job_status: str, status: StepStatus
) -> None:
    config = {**example("http.2.yaml"), "url": server.url}
    server.canned.json({"status": job_status})
    result = await run(context(tmp_path), {"uses": "http", "config": config})
    assert result.status is status


async def test_example_3_reads_facts_into_outputs(server: Server, tmp_path: Path) -> None:
    [step] = example_steps("http.3.yaml", server.url)
    server.canned.json(FACTS)
    result = await run(context(tmp_path), step)
    assert result.status is StepStatus.SUCCEEDED
    assert result.output == {"status": 200, "fact1": FACTS["facts"][0], "fact2": FACTS["facts"][1]}
    assert server.canned.requests[0]["method"] == "GET"


@pytest.mark.parametrize(
    ("code", "status"),
    [(200, StepStatus.SUCCEEDED), (404, StepStatus.FAILED), (503, StepStatus.RUNNING)],
)
async def test_example_4_polls_until_success_or_failure(
    server: Server, tmp_path: Path, code: int, status: StepStatus
) -> None:
    [step] = example_steps("http.4.yaml", server.url)
    server.canned.json(FACTS, status=code)
    result = await run(context(tmp_path), step)
    assert result.status is status
    # Outputs are extracted only from responses deemed successful.
    facts = FACTS["facts"]
    success = {"status": 200, "fact1": facts[0], "fact2": facts[1]}
    assert result.output == (success if code == 200 else {})


async def test_example_6_reads_the_yaml_document_of_example_7(
    server: Server, tmp_path: Path
) -> None:
    [step] = example_steps("http.6.yaml", server.url)
    document = (FIXTURES / "http.7.yaml").read_text()
    server.canned.body, server.canned.content_type = document.encode(), "application/yaml"
    result = await run(context(tmp_path), step)
    assert result.status is StepStatus.SUCCEEDED
    expected = yaml.safe_load(document)
    assert result.output == {"version": expected["version"], "features": expected["features"]}


async def test_example_8_parses_a_text_response_as_yaml(server: Server, tmp_path: Path) -> None:
    [step] = example_steps("http.8.yaml", server.url)
    server.canned.body, server.canned.content_type = b"key: value\n", "text/plain"
    result = await run(context(tmp_path), step)
    assert result.output == {"value": "value"}


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"message": "resource not found"}, ': "resource not found"'),
        ({"error": "gone"}, ': "gone"'),
        ({}, ""),
    ],
)
async def test_example_9_explains_a_failure_from_the_body(
    server: Server, tmp_path: Path, body: dict[str, Any], detail: str
) -> None:
    [step] = example_steps("http.9.yaml", server.url)
    server.canned.json(body, status=404)
    result = await run(context(tmp_path), step)
    assert result.status is StepStatus.FAILED
    assert result.message == "HTTP (404) response met failure criteria" + detail


# ---- http-download ------------------------------------------------------------------------------


async def test_download_example_1_writes_the_file(server: Server, tmp_path: Path) -> None:
    [step] = example_steps("http-download.1.yaml", server.url)
    server.canned.body = b"apiVersion: v1\nkind: ConfigMap\n"
    ctx = context(tmp_path)
    result = await run(ctx, step)
    assert result.status is StepStatus.SUCCEEDED
    assert result.output == {}, "Kargo's http-download has no outputs"
    assert (ctx.work_dir / step["config"]["outPath"]).read_bytes() == server.canned.body


@pytest.mark.parametrize(
    ("name", "authorization", "query"),
    [
        ("http-download.2.yaml", f"Bearer {SECRET}", {}),
        ("http-download.3.yaml", f"token {SECRET}", {"version": "v1.2.3"}),
    ],
)
async def test_download_examples_2_and_3_send_headers_and_query_params(
    server: Server, tmp_path: Path, name: str, authorization: str, query: dict[str, str]
) -> None:
    rendered = {"${{ secret('artifacts').token }}": SECRET, "${{ vars.version }}": "v1.2.3"}
    [step] = example_steps(name, server.url, rendered)
    ctx = context(tmp_path)
    result = await run(ctx, step)
    assert result.status is StepStatus.SUCCEEDED
    [request] = server.canned.requests
    assert request["headers"]["Authorization"] == authorization
    assert request["query"] == query
    assert SECRET not in result.message


async def test_download_example_4_fetches_and_unpacks_a_chart(
    server: Server, tmp_path: Path
) -> None:
    document = example("http-download.4.yaml")
    variables = {v["name"]: v["value"] for v in document["vars"]}
    rendered = {
        "${{ vars.chartName }}": variables["chartName"],
        "${{ chartFrom(vars.chartRepo, vars.chartName).Version }}": "1.2.3",
    }
    download, untar = example_steps("http-download.4.yaml", server.url, rendered)
    server.canned.body = _chart(variables["chartName"])
    server.canned.content_type = "application/gzip"
    ctx = context(tmp_path)
    assert (await run(ctx, download)).status is StepStatus.SUCCEEDED
    assert (await run(ctx, untar)).status is StepStatus.SUCCEEDED
    out = ctx.work_dir / untar["config"]["outPath"]
    assert (out / variables["chartName"] / "Chart.yaml").is_file()
    assert server.canned.requests[0]["headers"]["Accept"] == "application/gzip"


def _chart(name: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = f"apiVersion: v2\nname: {name}\nversion: 1.2.3\n".encode()
        info = tarfile.TarInfo(f"{name}/Chart.yaml")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buffer.getvalue())
