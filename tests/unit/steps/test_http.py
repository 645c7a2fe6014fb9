"""Tests of the ``http`` step against a real HTTP server on 127.0.0.1.

Where a test needs a step as a user writes it, it takes one from our PromotionTask
tests/fixtures/kargo/task-http.yaml, with the URL pointed at the local server. Kargo's own
documentation examples run against this server in tests/conformance/test_kargo_docs_http.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from promoter.errors import StepError
from promoter.steps.base import HttpSettings, StepContext, StepResult, StepStatus
from promoter.steps.http import (
    STEPS,
    canonical_header_name,
    http_step,
    parse_body,
    parse_duration,
)
from tests.support.fixtures import kargo_step
from tests.support.steps import make_context

SECRET = "s3cr3t-t0ken-value-42"
# A secret the operator configured (ctx.services.git.secrets); redacted from messages too.
OPERATOR_SECRET = "operator-0nly-secret"
SMALL_LIMIT = 1024
FAILURE_CRITERIA = "HTTP (404) response met failure criteria"

ServerFactory = Callable[[web.Application], Awaitable[TestServer]]


# The fake servers listen on loopback, which the http step refuses unless the operator allows it.
LOOPBACK = ("127.0.0.1",)


def make_ctx(
    tmp_path: Path,
    *,
    max_response_bytes: int = 2 * 1024 * 1024,
    allow: tuple[str, ...] = LOOPBACK,
    deny: tuple[str, ...] = (),
) -> StepContext:
    ctx = make_context(tmp_path, secrets=[OPERATOR_SECRET])
    http = HttpSettings(
        default_timeout_seconds=5.0,
        max_response_bytes=max_response_bytes,
        allow_hosts=allow,
        deny_hosts=deny,
    )
    return replace(ctx, services=replace(ctx.services, http=http))


def fixture_step_config(alias: str, url: str) -> dict[str, Any]:
    """The config of the http step ``as: alias`` in task-http.yaml, pointed at ``url``."""
    step = kargo_step("task-http.yaml", alias)
    assert step["uses"] == "http"
    config: dict[str, Any] = step["config"]
    config["url"] = url
    return config


# --- the server ----------------------------------------------------------------------------------


async def facts(request: web.Request) -> web.Response:
    return web.json_response(
        {
            "facts": [
                {"fact_number": 1, "fact": "Kittens have baby teeth."},
                {"fact_number": 2, "fact": "Cats sleep a lot."},
            ]
        },
        status=int(request.query.get("status", "200")),
    )


async def echo(request: web.Request) -> web.Response:
    return web.json_response(
        {
            "method": request.method,
            "path": request.path,
            "query": [[k, v] for k, v in request.query.items()],
            "headers": {k: v for k, v in request.headers.items()},
            "body": await request.text(),
        }
    )


async def job(request: web.Request) -> web.Response:
    """A job status API: the status and the JSON body come from the query."""
    status = int(request.query.get("code", "200"))
    body = request.query.get("body", "{}")
    return web.Response(status=status, text=body, content_type="application/json")


async def yaml_doc(request: web.Request) -> web.Response:
    text = 'version: "2.0"\nreleased: 2024-07-15\nfeatures:\n- name: feature-a\n  enabled: true\n'
    return web.Response(text=text, content_type=request.query.get("type", "application/yaml"))


async def raw(request: web.Request) -> web.Response:
    return web.Response(
        body=request.query.get("body", "").encode(),
        content_type=request.query.get("type", "application/octet-stream"),
    )


async def multi_headers(request: web.Request) -> web.Response:
    response = web.json_response({})
    response.headers.add("x-multi", "a")
    response.headers.add("X-Multi", "b")
    return response


async def slow(request: web.Request) -> web.Response:
    await asyncio.sleep(3)
    return web.json_response({})


async def big(request: web.Request) -> web.Response:
    return web.Response(body=b"x" * (SMALL_LIMIT + 1), content_type="text/plain")


async def big_streamed(request: web.Request) -> web.StreamResponse:
    # No Content-Length: the limit must hold while reading, not only from the header.
    response = web.StreamResponse()
    response.enable_chunked_encoding()
    await response.prepare(request)
    for _ in range(4):
        await response.write(b"y" * (SMALL_LIMIT // 2))
    await response.write_eof()
    return response


async def redirect(request: web.Request) -> web.Response:
    raise web.HTTPFound("/facts")


def make_app() -> web.Application:
    app = web.Application()
    app.router.add_get("/facts", facts)
    app.router.add_route("*", "/echo", echo)
    app.router.add_get("/job", job)
    app.router.add_get("/config.yaml", yaml_doc)
    app.router.add_get("/raw", raw)
    app.router.add_get("/headers", multi_headers)
    app.router.add_get("/slow", slow)
    app.router.add_get("/big", big)
    app.router.add_get("/big-streamed", big_streamed)
    app.router.add_get("/redirect", redirect)
    return app


@pytest.fixture
async def base_url(aiohttp_server: ServerFactory) -> str:
    server = await aiohttp_server(make_app())
    return str(server.make_url("")).rstrip("/")


async def run(tmp_path: Path, config: dict[str, Any], **ctx_args: Any) -> StepResult:
    return await http_step(make_ctx(tmp_path, **ctx_args), config)


# --- requests go out as configured ---------------------------------------------------------------


def test_registered_as_http() -> None:
    assert set(STEPS) == {"http"}


async def test_get_json_with_outputs(base_url: str, tmp_path: Path) -> None:
    config = fixture_step_config("read-facts", f"{base_url}/facts")
    result = await run(tmp_path, config)
    assert result.status is StepStatus.SUCCEEDED
    assert result.output == {
        "status": 200,
        "fact1": {"fact_number": 1, "fact": "Kittens have baby teeth."},
        "fact2": {"fact_number": 2, "fact": "Cats sleep a lot."},
    }


async def test_post_sends_body_and_headers_as_configured(base_url: str, tmp_path: Path) -> None:
    body = json.dumps({"channel": "C123456", "text": "hi"})
    result = await run(
        tmp_path,
        {
            "method": "POST",
            "url": f"{base_url}/echo",
            "headers": [
                {"name": "Authorization", "value": f"Bearer {SECRET}"},
                {"name": "Content-Type", "value": "application/json"},
            ],
            "body": body,
            "outputs": [{"name": "echo", "fromExpression": "response.body"}],
        },
    )
    assert result.status is StepStatus.SUCCEEDED
    echo = result.output["echo"]
    assert echo["method"] == "POST"
    assert echo["body"] == body
    assert echo["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert echo["headers"]["Content-Type"] == "application/json"
    assert echo["headers"]["User-Agent"] == "Longshoreman"


async def test_body_without_content_type_gets_none(base_url: str, tmp_path: Path) -> None:
    # Like Go's http.Client: no Content-Type is invented for a body.
    result = await run(
        tmp_path,
        {
            "method": "PUT",
            "url": f"{base_url}/echo",
            "body": "plain",
            "outputs": [{"name": "headers", "fromExpression": "response.body.headers"}],
        },
    )
    assert result.output["headers"].get("Content-Type") is None


async def test_method_defaults_to_get_and_query_params_are_encoded(
    base_url: str, tmp_path: Path
) -> None:
    result = await run(
        tmp_path,
        {
            "url": f"{base_url}/echo?existing=1",
            "queryParams": [
                {"name": "q", "value": "a b&c=d"},
                {"name": "stage", "value": "prod"},
            ],
            "outputs": [
                {"name": "method", "fromExpression": "response.body.method"},
                {"name": "query", "fromExpression": "response.body.query"},
            ],
        },
    )
    assert result.output["method"] == "GET"
    assert result.output["query"] == [["existing", "1"], ["q", "a b&c=d"], ["stage", "prod"]]


async def test_redirects_are_followed(base_url: str, tmp_path: Path) -> None:
    result = await run(
        tmp_path,
        {
            "url": f"{base_url}/redirect",
            "outputs": [{"name": "n", "fromExpression": "len(response.body.facts)"}],
        },
    )
    assert result.output == {"n": 2}


# --- success, failure, running -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "status", "message"),
    [
        ("", StepStatus.SUCCEEDED, "HTTP (200) response met success criteria"),
        ("?status=404", StepStatus.FAILED, "HTTP (404) response met failure criteria"),
        ("?status=503", StepStatus.RUNNING, "met neither success nor failure criteria"),
    ],
)
async def test_polling_until_success_or_failure(
    base_url: str, tmp_path: Path, query: str, status: StepStatus, message: str
) -> None:
    config = fixture_step_config("poll-facts", f"{base_url}/facts{query}")
    result = await run(tmp_path, config)
    assert result.status is status
    assert message in result.message
    if status is StepStatus.SUCCEEDED:
        assert result.output["status"] == 200
        assert result.output["fact2"]["fact_number"] == 2
    else:
        # Outputs are extracted only from responses deemed successful.
        assert result.output == {}
    if status is StepStatus.RUNNING:
        assert result.retry_after == 30


@pytest.mark.parametrize(
    ("job_status", "status"),
    [
        ("completed", StepStatus.SUCCEEDED),
        ("failed", StepStatus.FAILED),
        ("pending", StepStatus.RUNNING),
    ],
)
async def test_expressions_on_the_body(
    base_url: str, tmp_path: Path, job_status: str, status: StepStatus
) -> None:
    config = fixture_step_config("job-status", f"{base_url}/job")
    body = json.dumps({"status": job_status})
    config["queryParams"] = [{"name": "body", "value": body}]
    result = await run(tmp_path, config)
    assert result.status is status


async def test_failure_wins_over_success(base_url: str, tmp_path: Path) -> None:
    result = await run(
        tmp_path,
        {
            "url": f"{base_url}/facts",
            "successExpression": "response.status == 200",
            "failureExpression": "response.status == 200",
        },
    )
    assert result.status is StepStatus.FAILED
    assert result.message == "HTTP (200) response met failure criteria"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"message": "resource not found"}, f'{FAILURE_CRITERIA}: "resource not found"'),
        ({"error": "resource is disabled"}, f'{FAILURE_CRITERIA}: "resource is disabled"'),
        ({"detail": 42}, FAILURE_CRITERIA),
    ],
)
async def test_error_expression_adds_a_message_from_the_body(
    base_url: str, tmp_path: Path, body: dict[str, Any], message: str
) -> None:
    config = fixture_step_config("job-error", f"{base_url}/job")
    config["queryParams"] = [
        {"name": "code", "value": "404"},
        {"name": "body", "value": json.dumps(body)},
    ]
    result = await run(tmp_path, config)
    assert result.status is StepStatus.FAILED
    assert result.message == message


async def test_success_expression_only_keeps_running_until_met(
    base_url: str, tmp_path: Path
) -> None:
    result = await run(
        tmp_path,
        {
            "url": f"{base_url}/facts?status=202",
            "successExpression": "response.status == 200",
            "pollInterval": "45s",
        },
    )
    assert result.status is StepStatus.RUNNING
    assert result.retry_after == 45


async def test_poll_interval_has_a_lower_bound(base_url: str, tmp_path: Path) -> None:
    result = await run(
        tmp_path,
        {
            "url": f"{base_url}/facts",
            "failureExpression": "response.status == 500",
            "pollInterval": "1s",
        },
    )
    assert result.status is StepStatus.RUNNING
    assert result.retry_after == 10


async def test_without_expressions_2xx_succeeds(base_url: str, tmp_path: Path) -> None:
    result = await run(tmp_path, {"url": f"{base_url}/facts?status=201"})
    assert result.status is StepStatus.SUCCEEDED
    assert result.output == {}


async def test_without_expressions_non_2xx_is_retried(base_url: str, tmp_path: Path) -> None:
    with pytest.raises(StepError) as caught:
        await run(tmp_path, {"url": f"{base_url}/facts?status=503"})
    assert not caught.value.terminal
    assert "HTTP (503)" in caught.value.message


async def test_non_boolean_expression_is_an_error(base_url: str, tmp_path: Path) -> None:
    with pytest.raises(StepError) as caught:
        await run(tmp_path, {"url": f"{base_url}/facts", "successExpression": "response.status"})
    assert "did not evaluate to a boolean" in caught.value.message


async def test_expression_that_does_not_parse_is_terminal(base_url: str, tmp_path: Path) -> None:
    with pytest.raises(StepError) as caught:
        await run(
            tmp_path, {"url": f"{base_url}/facts", "successExpression": "response.status == ("}
        )
    assert caught.value.terminal
    assert "successExpression" in caught.value.message


# --- what expressions see ------------------------------------------------------------------------


async def test_yaml_content_type(base_url: str, tmp_path: Path) -> None:
    config = fixture_step_config("read-config", f"{base_url}/config.yaml")
    result = await run(tmp_path, config)
    assert result.status is StepStatus.SUCCEEDED
    assert result.output == {
        "version": "2.0",
        "features": [{"name": "feature-a", "enabled": True}],
    }


async def test_forced_yaml(base_url: str, tmp_path: Path) -> None:
    config = fixture_step_config("read-as-yaml", f"{base_url}/raw")
    config["queryParams"] = [
        {"name": "body", "value": "key: value\n"},
        {"name": "type", "value": "text/plain"},
    ]
    result = await run(tmp_path, config)
    assert result.output == {"value": "value"}


async def test_yaml_dates_stay_strings(base_url: str, tmp_path: Path) -> None:
    # Kargo parses YAML through JSON, so 2024-07-15 is a string there too.
    result = await run(
        tmp_path,
        {
            "url": f"{base_url}/config.yaml?type=text/plain",
            "responseContentType": "application/yaml",
            "outputs": [{"name": "released", "fromExpression": "response.body.released"}],
        },
    )
    assert result.output == {"released": "2024-07-15"}


def test_yaml_keys_become_strings() -> None:
    assert parse_body(b"2: a\ntrue: b\nnull: c\n", "application/yaml") == {
        "2": "a",
        "true": "b",
        "null": "c",
    }


def test_yaml_alias_bombs_are_refused() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for level in "bcdefgh":
        previous = chr(ord(level) - 1)
        lines.append(f"{level}: &{level} [{', '.join(['*' + previous] * 10)}]")
    with pytest.raises(StepError) as caught:
        parse_body("\n".join(lines).encode(), "application/yaml")
    assert "expands to more than" in caught.value.message


@pytest.mark.parametrize(
    ("content_type", "body", "forced", "expected"),
    [
        ("text/plain", "hello", None, "hello"),
        ("application/octet-stream", '{"a": 1}', None, {"a": 1}),
        ("application/octet-stream", "not json", None, {}),
        ("application/json", "", None, {}),
        ("application/json", '{"a": 1}', "text/plain", '{"a": 1}'),
        ("text/html", "[1, 2]", None, [1, 2]),
    ],
)
async def test_body_parsing(
    base_url: str,
    tmp_path: Path,
    content_type: str,
    body: str,
    forced: str | None,
    expected: Any,
) -> None:
    config: dict[str, Any] = {
        "url": f"{base_url}/raw",
        "queryParams": [{"name": "type", "value": content_type}],
        "outputs": [{"name": "body", "fromExpression": "response.body"}],
    }
    if body:
        config["queryParams"].append({"name": "body", "value": body})
    if forced:
        config["responseContentType"] = forced
    result = await run(tmp_path, config)
    assert result.output == {"body": expected}


async def test_declared_json_that_is_not_json_is_an_error(base_url: str, tmp_path: Path) -> None:
    with pytest.raises(StepError) as caught:
        await run(
            tmp_path,
            {
                "url": f"{base_url}/raw",
                "queryParams": [
                    {"name": "type", "value": "application/json"},
                    {"name": "body", "value": "{oops"},
                ],
            },
        )
    assert "failed to parse JSON response" in caught.value.message
    assert not caught.value.terminal


async def test_headers_map_has_canonical_names_and_every_value(
    base_url: str, tmp_path: Path
) -> None:
    result = await run(
        tmp_path,
        {
            "url": f"{base_url}/headers",
            "outputs": [
                {"name": "multi", "fromExpression": "response.headers['X-Multi']"},
                {"name": "type", "fromExpression": "response.headers['Content-Type'][0]"},
            ],
        },
    )
    assert result.output == {"multi": ["a", "b"], "type": "application/json; charset=utf-8"}


async def test_header_function(base_url: str, tmp_path: Path) -> None:
    result = await run(
        tmp_path,
        {
            "url": f"{base_url}/headers",
            "outputs": [
                {"name": "type", "fromExpression": "response.header('content-type')"},
                {"name": "missing", "fromExpression": "response.header('x-none')"},
            ],
        },
    )
    assert result.output == {"type": "application/json; charset=utf-8", "missing": ""}


# --- limits and errors ---------------------------------------------------------------------------


@pytest.mark.looptime  # the slow server's wait and the timeout run on virtual time
async def test_timeout_is_a_retryable_error(base_url: str, tmp_path: Path) -> None:
    with pytest.raises(StepError) as caught:
        await run(tmp_path, {"url": f"{base_url}/slow", "timeout": "200ms"})
    assert not caught.value.terminal
    assert "timed out after 0.2s" in caught.value.message


@pytest.mark.parametrize("path", ["/big", "/big-streamed"])
async def test_big_bodies_are_refused(base_url: str, tmp_path: Path, path: str) -> None:
    with pytest.raises(StepError) as caught:
        await run(tmp_path, {"url": f"{base_url}{path}"}, max_response_bytes=SMALL_LIMIT)
    assert f"larger than the limit of {SMALL_LIMIT} bytes" in caught.value.message


async def test_connection_refused_is_a_retryable_error(tmp_path: Path) -> None:
    with pytest.raises(StepError) as caught:
        # Port 9 (discard) on loopback: nothing listens there in a test environment.
        await run(tmp_path, {"url": "http://127.0.0.1:9/x"})
    assert not caught.value.terminal
    assert "GET http://127.0.0.1:9/x failed" in caught.value.message


# --- the host policy (HttpSettings.allow_hosts / deny_hosts) ------------------------------------


@pytest.mark.parametrize("allow", [(), ("*",), ("10.0.0.0/8",)])
async def test_metadata_addresses_are_refused(tmp_path: Path, allow: tuple[str, ...]) -> None:
    # Refused when the connection is made, before any packet leaves; a name or a wildcard in
    # the allow list does not open it up, only an address rule would.
    for url in ("http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/latest/"):
        with pytest.raises(StepError) as caught:
            await run(tmp_path, {"url": url, "timeout": "2s"}, allow=allow)
        assert caught.value.terminal
        assert "refused" in caught.value.message


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.5.6.7",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "100.64.0.1",
        "0.0.0.0",
        "[::1]",
        "[fd12:3456::1]",
        "[fe80::1]",
        "[::ffff:127.0.0.1]",
        "localhost",
    ],
)
async def test_private_loopback_and_link_local_hosts_are_refused_by_default(
    tmp_path: Path, host: str
) -> None:
    with pytest.raises(StepError) as caught:
        await run(tmp_path, {"url": f"http://{host}:9/x", "timeout": "2s"}, allow=())
    assert caught.value.terminal, "a policy refusal is not retried"
    assert "refused" in caught.value.message
    assert "not permitted" in caught.value.message or "allowed hosts" in caught.value.message


async def test_loopback_is_reachable_once_allowed(base_url: str, tmp_path: Path) -> None:
    with pytest.raises(StepError) as caught:
        await run(tmp_path, {"url": f"{base_url}/facts"}, allow=())
    assert "private, loopback" in caught.value.message and caught.value.terminal
    for allow in (("127.0.0.1",), ("127.0.0.0/8",), ("127.0.0.1", "example.com")):
        result = await run(tmp_path, {"url": f"{base_url}/facts"}, allow=allow)
        assert result.status is StepStatus.SUCCEEDED


async def test_an_allowed_name_admits_the_addresses_it_resolves_to(
    base_url: str, tmp_path: Path
) -> None:
    url = base_url.replace("127.0.0.1", "localhost") + "/facts"
    with pytest.raises(StepError):
        await run(tmp_path, {"url": url}, allow=())
    # The wildcard admits public hosts only; naming the host trusts what it resolves to.
    with pytest.raises(StepError) as caught:
        await run(tmp_path, {"url": url}, allow=("*",))
    assert caught.value.terminal
    result = await run(tmp_path, {"url": url}, allow=("localhost",))
    assert result.status is StepStatus.SUCCEEDED


async def test_a_non_empty_allow_list_admits_only_what_it_lists(
    base_url: str, tmp_path: Path
) -> None:
    for allow in (("example.com",), ("*.example.com",), ("10.0.0.0/8",)):
        with pytest.raises(StepError) as caught:
            await run(tmp_path, {"url": f"{base_url}/facts"}, allow=allow)
        assert caught.value.terminal
        assert "allowed hosts" in caught.value.message


@pytest.mark.parametrize("deny", [("127.0.0.1",), ("127.0.0.0/8",), ("localhost",), ("*",)])
async def test_deny_wins_over_allow(base_url: str, tmp_path: Path, deny: tuple[str, ...]) -> None:
    url = base_url.replace("127.0.0.1", "localhost") + "/facts"
    with pytest.raises(StepError) as caught:
        await run(tmp_path, {"url": url}, allow=("127.0.0.1", "localhost"), deny=deny)
    assert caught.value.terminal
    assert "denied" in caught.value.message


async def test_redirects_to_refused_hosts_are_refused(
    aiohttp_server: ServerFactory, tmp_path: Path
) -> None:
    async def to_metadata(request: web.Request) -> web.Response:
        raise web.HTTPFound("http://169.254.169.254/latest/meta-data/iam")

    async def to_other_loopback(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://127.0.0.2:{request.url.port}/facts")

    app = make_app()
    app.router.add_get("/to-metadata", to_metadata)
    app.router.add_get("/to-other", to_other_loopback)
    server = await aiohttp_server(app)
    base = f"http://127.0.0.1:{server.port}"
    for path in ("/to-metadata", "/to-other"):
        with pytest.raises(StepError) as caught:
            await run(tmp_path, {"url": f"{base}{path}", "timeout": "2s"}, allow=("127.0.0.1",))
        assert caught.value.terminal
        assert "refused" in caught.value.message


async def test_a_proxy_does_not_bypass_the_policy(base_url: str, tmp_path: Path) -> None:
    # Through a proxy we never connect to the target ourselves: its name or address is judged
    # before sending, and the proxy's address when connecting to it.
    config = {"url": "http://169.254.169.254/latest/", "proxy": base_url, "timeout": "2s"}
    with pytest.raises(StepError) as caught:
        await run(tmp_path, config)
    assert caught.value.terminal and "refused" in caught.value.message
    config = {"url": f"{base_url}/facts", "proxy": "http://10.9.9.9:3128", "timeout": "2s"}
    with pytest.raises(StepError) as caught:
        await run(tmp_path, config)
    assert caught.value.terminal and "refused" in caught.value.message


async def test_a_redirect_through_a_proxy_is_judged_like_the_first_url(
    aiohttp_server: ServerFactory, tmp_path: Path
) -> None:
    # An egress proxy the operator allows; a public site that redirects to the metadata
    # address (or another private one). We never connect to the redirect's target ourselves,
    # so its name or address must be judged before the proxy is asked for it.
    async def proxy(request: web.Request) -> web.Response:
        host = request.headers.get("Host", "")
        if host == "public.example":
            raise web.HTTPFound(request.query.get("to", ""))
        return web.Response(text=f"the proxy fetched {host}")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy)
    server = await aiohttp_server(app)
    for target in ("http://169.254.169.254/latest/meta-data/iam", "http://10.1.2.3/admin"):
        config = {
            "url": "http://public.example/start",
            "queryParams": [{"name": "to", "value": target}],
            "proxy": f"http://127.0.0.1:{server.port}",
            "timeout": "2s",
        }
        with pytest.raises(StepError) as caught:
            await run(tmp_path, config, allow=("127.0.0.1", "*"))
        assert caught.value.terminal and "refused" in caught.value.message


@pytest.mark.parametrize(
    "entry", ["http://x", "a b", "10.0.0.0/33", "*.*", "ex*ample.com", "1.2.3"]
)
async def test_bad_host_rules_are_a_terminal_error(
    base_url: str, tmp_path: Path, entry: str
) -> None:
    with pytest.raises(StepError) as caught:
        await run(tmp_path, {"url": f"{base_url}/facts"}, allow=(entry,))
    assert caught.value.terminal and "host policy" in caught.value.message


@pytest.mark.looptime  # the slow server's wait and the timeout run on virtual time
async def test_secrets_never_appear_in_messages(base_url: str, tmp_path: Path) -> None:
    headers = [{"name": "Authorization", "value": f"Bearer {SECRET}"}]
    query = [{"name": "token", "value": SECRET}]
    messages = []

    # A server that echoes the token back in its error message.
    result = await run(
        tmp_path,
        {
            "method": "POST",
            "url": f"{base_url}/echo",
            "headers": headers,
            "queryParams": query,
            "failureExpression": "true",
            "errorExpression": "response.body.headers.Authorization",
        },
    )
    assert result.status is StepStatus.FAILED
    assert result.message.endswith('criteria: "***"')
    messages.append(result.message)
    result = await run(
        tmp_path,
        {
            "method": "POST",
            "url": f"{base_url}/echo",
            "body": OPERATOR_SECRET,
            "failureExpression": "true",
            "errorExpression": "response.body.body",
        },
    )
    assert result.message.endswith('criteria: "***"')
    messages.append(result.message)

    # Network errors, timeouts and expression errors.
    failing: list[dict[str, Any]] = [
        {"url": f"http://127.0.0.1:9/x?token={SECRET}", "headers": headers},
        {"url": f"{base_url}/slow", "timeout": "100ms", "headers": headers, "queryParams": query},
        {
            "url": f"{base_url}/echo",
            "headers": headers,
            "successExpression": "response.body.headers.Authorization",
        },
        {"url": f"{base_url}/facts?status=500", "headers": headers, "queryParams": query},
        {"url": f"http://user:{SECRET}@127.0.0.1:9/", "headers": headers},
    ]
    for config in failing:
        with pytest.raises(StepError) as caught:
            await run(tmp_path, config)
        messages.append(caught.value.message)

    for message in messages:
        assert SECRET not in message
        assert OPERATOR_SECRET not in message
    assert len(messages) == 7


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({}, "config.url is required"),
        ({"url": "ftp://example.com/x"}, "absolute http:// or https:// URL"),
        ({"url": "http://h:port/"}, "absolute http:// or https:// URL"),
        ({"url": "http://h/", "method": "get"}, "config.method 'get' is not one of"),
        ({"url": "http://h/", "method": "TRACE"}, "config.method 'TRACE' is not one of"),
        ({"url": "http://h/", "timeout": "10 seconds"}, "config.timeout '10 seconds' is not a"),
        ({"url": "http://h/", "timeout": "0s"}, "config.timeout must be longer than zero"),
        ({"url": "http://h/", "responseContentType": "text/yaml"}, "responseContentType"),
        ({"url": "http://h/", "successExpresion": "true"}, "field(s) successExpresion"),
        ({"url": "http://h/", "headers": [{"name": "X"}]}, "config.headers[0].value is required"),
        ({"url": "http://h/", "headers": [{"name": "X", "value": ""}]}, "non-empty name and value"),
        ({"url": "http://h/", "headers": [{"name": "X", "value": "a\r\nB: c"}]}, "line break"),
        ({"url": "http://h/", "outputs": [{"name": "x"}]}, "fromExpression is required"),
        ({"url": "http://h/", "proxy": "socks5://p:1080"}, "config.proxy must be"),
    ],
)
async def test_bad_config_is_terminal(tmp_path: Path, config: dict[str, Any], problem: str) -> None:
    with pytest.raises(StepError) as caught:
        await run(tmp_path, config)
    assert caught.value.terminal
    assert problem in caught.value.message


# --- pure helpers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10s", 10),
        ("1m", 60),
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("300ms", 0.3),
        ("2m0.5s", 120.5),
        ("0", 0),
        ("100us", 0.0001),
        ("100µs", 0.0001),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "s", "1d", "-1s", "10 s", "1h 30m"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("content-type", "Content-Type"),
        ("X-MULTI", "X-Multi"),
        ("www-authenticate", "Www-Authenticate"),
        ("bad header", "bad header"),
    ],
)
def test_canonical_header_name(name: str, canonical: str) -> None:
    assert canonical_header_name(name) == canonical
