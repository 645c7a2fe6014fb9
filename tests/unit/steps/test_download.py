"""Tests of the ``http-download`` and ``untar`` steps against a real HTTP server on 127.0.0.1.

Steps are looked up in the built-in registry and run with a hand-built context, like
test_http.py does. Steps as a user writes them come from our ClusterPromotionTask
tests/fixtures/kargo/task-download.yaml, with their URL pointed at the local server; expressions
the runner would render (``secret()``, ``vars``) are replaced by the values they would render to.
Kargo's own documentation examples run against this server in
tests/conformance/test_kargo_docs_http.py.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import tarfile
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from promoter.errors import StepError
from promoter.steps.base import HttpSettings, StepContext, StepResult, StepStatus
from promoter.steps.download import DEFAULT_TIMEOUT_SECONDS, parse_config
from promoter.steps.registry import builtin_registry
from promoter.steps.workdir.untar import Limits, extract, member_path
from tests.support.fixtures import kargo_step
from tests.support.steps import make_context

SECRET = "s3cr3t-d0wnload-token-42"
PAYLOAD = b"apiVersion: v1\nkind: ConfigMap\n"
SMALL_LIMIT = 1024
LOOPBACK = ("127.0.0.1",)

ServerFactory = Callable[[web.Application], Awaitable[TestServer]]


def make_ctx(
    tmp_path: Path,
    *,
    max_download_bytes: int = 100 * 1024 * 1024,
    allow: tuple[str, ...] = LOOPBACK,
) -> StepContext:
    ctx = make_context(tmp_path)
    http = HttpSettings(max_download_bytes=max_download_bytes, allow_hosts=allow)
    return replace(ctx, services=replace(ctx.services, http=http))


async def run(kind: str, ctx: StepContext, config: dict[str, Any]) -> StepResult:
    return await builtin_registry()[kind].run(ctx, config)


def tarball(entries: list[tarfile.TarInfo | tuple[str, bytes]], *, gz: bool = True) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                tar.addfile(entry)
            else:
                name, data = entry
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
    raw = buffer.getvalue()
    return gzip.compress(raw) if gz else raw


CHART = tarball(
    [
        ("my-helm-chart/Chart.yaml", b"apiVersion: v2\nname: my-helm-chart\nversion: 1.2.3\n"),
        ("my-helm-chart/templates/cm.yaml", PAYLOAD),
    ]
)


def fixture_configs(aliases: list[str], url: str, rendered: dict[str, str]) -> list[dict[str, Any]]:
    """The configs of the steps ``as: alias`` in task-download.yaml: the first one's ``url``
    pointed at the local server, and the expressions in ``rendered`` replaced by what the runner
    would render them to."""
    configs = [
        filled(kargo_step("task-download.yaml", alias)["config"], rendered) for alias in aliases
    ]
    configs[0]["url"] = url
    return configs


def filled(value: Any, rendered: dict[str, str]) -> Any:
    if isinstance(value, str):
        for expression, text in rendered.items():
            value = value.replace(expression, text)
        return value
    if isinstance(value, dict):
        return {k: filled(v, rendered) for k, v in value.items()}
    if isinstance(value, list):
        return [filled(v, rendered) for v in value]
    return value


# --- the server ----------------------------------------------------------------------------------


async def echo(request: web.Request) -> web.Response:
    lines = [f"{k}={v}" for k, v in request.query.items()]
    lines += [f"{k}: {v}" for k, v in request.headers.items()]
    return web.Response(body="\n".join(lines).encode())


async def payload(request: web.Request) -> web.Response:
    return web.Response(body=PAYLOAD)


async def chart(request: web.Request) -> web.Response:
    return web.Response(body=CHART, content_type="application/gzip")


async def big(request: web.Request) -> web.Response:
    return web.Response(body=b"x" * (SMALL_LIMIT + 1))


async def big_streamed(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse()
    response.enable_chunked_encoding()
    await response.prepare(request)
    for _ in range(4):
        await response.write(b"y" * (SMALL_LIMIT // 2))
    await response.write_eof()
    return response


async def slow(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse()
    await response.prepare(request)
    await response.write(b"partial")
    await asyncio.sleep(3)
    await response.write_eof()
    return response


async def forbidden(request: web.Request) -> web.Response:
    return web.json_response({"error": "quota exceeded"}, status=403)


async def to_private(request: web.Request) -> web.Response:
    raise web.HTTPFound(request.query["to"])


def make_app() -> web.Application:
    app = web.Application()
    app.router.add_get("/echo", echo)
    app.router.add_get("/payload", payload)
    app.router.add_get("/chart.tgz", chart)
    app.router.add_get("/big", big)
    app.router.add_get("/big-streamed", big_streamed)
    app.router.add_get("/slow", slow)
    app.router.add_get("/forbidden", forbidden)
    app.router.add_get("/redirect", to_private)
    return app


@pytest.fixture
async def base_url(aiohttp_server: ServerFactory) -> str:
    server = await aiohttp_server(make_app())
    return str(server.make_url("")).rstrip("/")


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if p.name.startswith("."))


# --- http-download -------------------------------------------------------------------------------


def test_both_steps_are_registered() -> None:
    assert {"http-download", "untar"} <= set(builtin_registry())


async def test_download_to_a_path_in_the_work_dir(base_url: str, tmp_path: Path) -> None:
    [config] = fixture_configs(["fetch-config"], f"{base_url}/payload", {})
    ctx = make_ctx(tmp_path)
    result = await run("http-download", ctx, config)
    assert result.status is StepStatus.SUCCEEDED
    assert result.output == {}, "Kargo's http-download has no outputs"
    assert (ctx.work_dir / "config/app.yaml").read_bytes() == PAYLOAD
    assert leftovers(ctx.work_dir) == []


async def test_existing_file_is_refused_unless_overwrite_is_allowed(
    base_url: str, tmp_path: Path
) -> None:
    ctx = make_ctx(tmp_path)
    existing = ctx.work_dir / "out.yaml"
    existing.write_bytes(b"old\n")
    config = {"url": f"{base_url}/payload", "outPath": "out.yaml"}
    with pytest.raises(StepError) as caught:
        await run("http-download", ctx, config)
    assert caught.value.terminal and "allowOverwrite" in caught.value.message
    assert existing.read_bytes() == b"old\n"
    result = await run("http-download", ctx, {**config, "allowOverwrite": True})
    assert result.status is StepStatus.SUCCEEDED
    assert existing.read_bytes() == PAYLOAD
    assert leftovers(ctx.work_dir) == []


@pytest.mark.parametrize("alias", ["fetch-with-token", "fetch-version"])
async def test_headers_and_query_params_are_sent(base_url: str, tmp_path: Path, alias: str) -> None:
    rendered = {"${{ secret('artifacts').token }}": SECRET, "${{ vars.version }}": "v1.2.3"}
    [config] = fixture_configs([alias], f"{base_url}/echo", rendered)
    ctx = make_ctx(tmp_path)
    result = await run("http-download", ctx, config)
    assert result.status is StepStatus.SUCCEEDED
    received = (ctx.work_dir / config["outPath"]).read_text()
    assert f"Authorization: {config['headers'][0]['value']}" in received
    assert SECRET in received
    if alias == "fetch-version":
        assert "version=v1.2.3" in received
    assert SECRET not in result.message


def test_timeout_defaults_to_kargos_five_minutes() -> None:
    spec = parse_config({"url": "https://example.com/x", "outPath": "x"})
    assert spec.request.timeout_seconds == DEFAULT_TIMEOUT_SECONDS == 300
    assert (
        parse_config(
            {"url": "https://e.com/", "outPath": "x", "timeout": "10m"}
        ).request.timeout_seconds
        == 600
    )


async def test_download_and_untar_a_chart(base_url: str, tmp_path: Path) -> None:
    rendered = {"${{ vars.chartName }}": "my-helm-chart"}
    download, untar = fixture_configs(
        ["fetch-chart", "extract-chart"], f"{base_url}/chart.tgz", rendered
    )
    ctx = make_ctx(tmp_path)
    assert (await run("http-download", ctx, download)).status is StepStatus.SUCCEEDED
    assert (await run("untar", ctx, untar)).status is StepStatus.SUCCEEDED
    out = ctx.work_dir / "charts/my-helm-chart/my-helm-chart"
    assert (out / "templates/cm.yaml").read_bytes() == PAYLOAD
    # allowOverwrite: true, and untar over an existing directory replaces its files.
    assert (await run("http-download", ctx, download)).status is StepStatus.SUCCEEDED
    assert (await run("untar", ctx, untar)).status is StepStatus.SUCCEEDED


@pytest.mark.parametrize("path", ["/big", "/big-streamed"])
async def test_downloads_over_the_limit_are_refused(
    base_url: str, tmp_path: Path, path: str
) -> None:
    ctx = make_ctx(tmp_path, max_download_bytes=SMALL_LIMIT)
    with pytest.raises(StepError) as caught:
        await run("http-download", ctx, {"url": f"{base_url}{path}", "outPath": "big.bin"})
    assert f"larger than the limit of {SMALL_LIMIT} bytes" in caught.value.message
    assert caught.value.terminal
    assert not (ctx.work_dir / "big.bin").exists()
    assert leftovers(ctx.work_dir) == []


@pytest.mark.looptime  # the slow server's wait and the timeout run on virtual time
async def test_timeout_is_retried_and_leaves_no_partial_file(base_url: str, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    with pytest.raises(StepError) as caught:
        await run(
            "http-download", ctx, {"url": f"{base_url}/slow", "outPath": "s", "timeout": "1s"}
        )
    assert not caught.value.terminal
    assert "timed out after 1s" in caught.value.message
    assert list(ctx.work_dir.iterdir()) == []


async def test_a_refused_download_is_a_retried_error_with_the_error_expression(
    base_url: str, tmp_path: Path
) -> None:
    ctx = make_ctx(tmp_path)
    config = {
        "url": f"{base_url}/forbidden",
        "outPath": "f",
        "headers": [{"name": "Authorization", "value": f"Bearer {SECRET}"}],
        "queryParams": [{"name": "token", "value": SECRET}],
        "errorExpression": "response.body?.message ?? response.body?.error",
    }
    with pytest.raises(StepError) as caught:
        await run("http-download", ctx, config)
    assert not caught.value.terminal
    assert 'HTTP request failed with status 403: "quota exceeded"' in caught.value.message
    assert SECRET not in caught.value.message
    assert list(ctx.work_dir.iterdir()) == []


async def test_private_addresses_are_refused_by_default(base_url: str, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, allow=())
    for url in (
        f"{base_url}/payload",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
    ):
        with pytest.raises(StepError) as caught:
            await run("http-download", ctx, {"url": url, "outPath": "p", "timeout": "2s"})
        assert caught.value.terminal and "refused" in caught.value.message
    assert list(ctx.work_dir.iterdir()) == []


@pytest.mark.parametrize(
    "target", ["http://169.254.169.254/latest/meta-data/iam", "http://127.0.0.2:9/x"]
)
async def test_redirects_to_private_addresses_are_refused(
    base_url: str, tmp_path: Path, target: str
) -> None:
    ctx = make_ctx(tmp_path)
    config = {
        "url": f"{base_url}/redirect",
        "queryParams": [{"name": "to", "value": target}],
        "outPath": "r",
        "timeout": "2s",
    }
    with pytest.raises(StepError) as caught:
        await run("http-download", ctx, config)
    assert caught.value.terminal and "refused" in caught.value.message
    assert list(ctx.work_dir.iterdir()) == []


@pytest.mark.parametrize(
    "out_path", ["../escape", "/etc/escape", "link/escape", ".git/hooks/pre-commit", "sub/.git/x"]
)
async def test_out_path_must_stay_in_the_work_directory(
    base_url: str, tmp_path: Path, out_path: str
) -> None:
    ctx = make_ctx(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (ctx.work_dir / "link").symlink_to(outside)
    with pytest.raises(StepError) as caught:
        await run("http-download", ctx, {"url": f"{base_url}/payload", "outPath": out_path})
    assert caught.value.terminal and "outPath" in caught.value.message
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"outPath": "x"}, "config.url is required"),
        ({"url": "ftp://example.com/x", "outPath": "x"}, "http:// or https://"),
        ({"url": "https://example.com/x"}, "config.outPath is required"),
        ({"url": "https://example.com/x", "outPath": "x", "method": "POST"}, "unknown config"),
        ({"url": "https://example.com/x", "outPath": "x", "timeout": "soon"}, "config.timeout"),
        ({"url": "https://e.com/", "outPath": "x", "headers": [{"name": "A"}]}, "headers[0]"),
    ],
)
async def test_bad_config_is_terminal(tmp_path: Path, config: dict[str, Any], problem: str) -> None:
    with pytest.raises(StepError) as caught:
        await run("http-download", make_ctx(tmp_path), config)
    assert caught.value.terminal
    assert caught.value.message.startswith("http-download: ")
    assert problem in caught.value.message


# --- untar ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [True, False])
async def test_untar_strips_leading_components_and_ignores(tmp_path: Path, gz: bool) -> None:
    ctx = make_ctx(tmp_path)
    archive = tarball(
        [
            ("./pkg/v1/app.yaml", PAYLOAD),
            ("pkg/v1/debug.log", b"log\n"),
            ("pkg/v1/.git/hooks/pre-commit", b"#!/bin/sh\nrm -rf /\n"),
            ("pkg/top.txt", b"stripped away\n"),
        ],
        gz=gz,
    )
    (ctx.work_dir / "bundle.tar").write_bytes(archive)
    config = {"inPath": "bundle.tar", "outPath": "out", "stripComponents": 2, "ignore": "*.log\n"}
    result = await run("untar", ctx, config)
    assert result.status is StepStatus.SUCCEEDED
    out = ctx.work_dir / "out"
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == ["app.yaml"]
    assert (out / "app.yaml").read_bytes() == PAYLOAD
    assert leftovers(ctx.work_dir) == []


def _symlink(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info


def _device(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.CHRTYPE
    info.devmajor, info.devminor = 1, 3
    return info


@pytest.mark.parametrize(
    ("entries", "problem"),
    [
        ([("ok.txt", b"x"), ("../evil", b"x")], "'..'"),
        ([("a/../../evil", b"x")], "'..'"),
        ([("/etc/evil", b"x")], "absolute"),
        ([_symlink("etc", "/etc")], "symlink"),
        ([_symlink("up", "../../..")], "symlink"),
        ([_symlink("inner", "sub"), _symlink("inner2", "inner/../..")], "symlink"),
        ([_device("null")], "special file"),
    ],
)
async def test_untar_refuses_unsafe_archives_as_a_whole(
    tmp_path: Path, entries: list[Any], problem: str
) -> None:
    ctx = make_ctx(tmp_path)
    (ctx.work_dir / "evil.tgz").write_bytes(tarball(entries))
    with pytest.raises(StepError) as caught:
        await run("untar", ctx, {"inPath": "evil.tgz", "outPath": "out"})
    assert caught.value.terminal and problem in caught.value.message
    assert sorted(p.name for p in ctx.work_dir.iterdir()) == ["evil.tgz"], "nothing extracted"
    assert not (tmp_path / "evil").exists()


async def test_untar_keeps_symlinks_inside_out_path(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    archive = tarball([("data/real.txt", b"real\n"), _symlink("data/alias.txt", "real.txt")])
    (ctx.work_dir / "a.tgz").write_bytes(archive)
    await run("untar", ctx, {"inPath": "a.tgz", "outPath": "out"})
    assert (ctx.work_dir / "out/data/alias.txt").read_text() == "real\n"


async def test_untar_paths_must_stay_in_the_work_directory(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    (ctx.work_dir / "a.tgz").write_bytes(CHART)
    for config in (
        {"inPath": "../a.tgz", "outPath": "out"},
        {"inPath": "a.tgz", "outPath": "/tmp/out"},
        {"inPath": "a.tgz", "outPath": "src/.git"},
    ):
        with pytest.raises(StepError) as caught:
            await run("untar", ctx, config)
        assert caught.value.terminal


async def test_untar_refuses_what_is_not_a_tarball(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    (ctx.work_dir / "a.tgz").write_bytes(gzip.compress(b"not a tar file at all" * 100))
    with pytest.raises(StepError) as caught:
        await run("untar", ctx, {"inPath": "a.tgz", "outPath": "out"})
    assert caught.value.terminal and "not a valid tar" in caught.value.message


def test_untar_caps_the_extracted_size_and_member_count(tmp_path: Path) -> None:
    archive = tmp_path / "bomb.tgz"
    archive.write_bytes(tarball([("a", b"x" * 600), ("b", b"y" * 600)]))
    for limits, problem in (
        (Limits(max_bytes=1000), "size limit"),
        (Limits(max_members=1), "more than 1 members"),
    ):
        staging = tmp_path / f"staging-{limits.max_members}"
        staging.mkdir()
        with pytest.raises(StepError) as caught:
            extract(archive, staging, 0, "", limits)
        assert caught.value.terminal and problem in caught.value.message
    staging = tmp_path / "fits"
    staging.mkdir()
    assert extract(archive, staging, 0, "", Limits(max_bytes=1200, max_members=2)) == 2


@pytest.mark.parametrize(
    ("name", "strip", "expected"),
    [("a/b/c", 0, "a/b/c"), ("./a/b/c", 1, "b/c"), ("a/b", 2, None), ("a//b/./c", 1, "b/c")],
)
def test_member_path(name: str, strip: int, expected: str | None) -> None:
    assert member_path(name, strip) == expected
