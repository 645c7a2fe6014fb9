"""Warehouse discovery against real parts: docker-registry, an HTTP chart repository, bare git
repositories, and the reconciler on the API server emulator."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from app.controller import kube as k
from app.controller.credentials import ClusterCredentials
from app.controller.warehouses.charts import ChartClient
from app.controller.warehouses.credentials import DockerConfigCredentials, parse_docker_config
from app.controller.warehouses.discover import Discoverer
from app.controller.warehouses.gitsource import GitSource
from app.controller.warehouses.reconciler import WarehouseController
from app.controller.warehouses.registry import OCIClient, RateLimited, RegistryError
from app.controller.workqueue import RetryLater
from handlers.client import GitHubClient
from handlers.git_credentials import GitHubGitCredentials
from promoter.ports.credentials import NO_CREDENTIALS, Credentials
from promoter.warehouses.selection import REVISION_LABEL, SOURCE_LABEL
from promoter.warehouses.spec import parse_spec
from tests.support import objects
from tests.support.clock import FakeClock
from tests.support.github import running_fake_github
from tests.support.gitrepo import git_env, make_remote
from tests.support.kube import running_apiserver
from tests.support.registry import PASSWORD, USERNAME, running_registry, serving
from tests.support.telemetry import RecordingTelemetry

NOW = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
# The public URL the Warehouses name; the tests' gitconfig maps it to a local remote.
GIT_URL = "https://git.example.test/acme/app.git"


def day(n: int) -> dt.datetime:
    return dt.datetime(2024, 1, n, tzinfo=dt.UTC)


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


def discoverer(
    session: aiohttp.ClientSession,
    tmp_path: Path,
    credentials: Credentials = NO_CREDENTIALS,
    rewrites: Mapping[str, str] | None = None,
) -> Discoverer:
    """``rewrites`` maps a local remote's URL to the public one a Warehouse names (Warehouses
    refuse local paths, as the operator's gitconfig would map them in production)."""
    client = OCIClient(session)
    git = GitSource(tmp_path / "git-cache", extra_env=git_env(tmp_path, rewrites or {}))
    return Discoverer(client, ChartClient(session, client), git, credentials)


def docker_config(path: Path, auths: Mapping[str, tuple[str, str]]) -> DockerConfigCredentials:
    """The operator's config.json, as ``docker login`` writes it."""
    entries = {
        host: {"auth": base64.b64encode(f"{user}:{password}".encode()).decode()}
        for host, (user, password) in auths.items()
    }
    path.write_text(json.dumps({"auths": entries}))
    return DockerConfigCredentials(path)


async def discover(d: Discoverer, *subscriptions: dict[str, Any]) -> dict[str, Any]:
    spec = parse_spec({"subscriptions": list(subscriptions)})
    return await d.discover(spec, None, NOW)


async def test_semver_lexical_newest_build_and_digest_against_a_real_registry(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    async with running_registry(tmp_path) as registry:
        repo = registry.repo("acme/app")
        for tag, created in [("1.0.0", 1), ("1.2.0", 2), ("2.0.0", 4), ("1.10.0", 3)]:
            await registry.push_image("acme/app", tag, created=day(created))
        await registry.push_image("acme/app", "nightly-b", created=day(9))
        latest = await registry.push_image("acme/app", "latest", created=day(5))
        d = discoverer(session, tmp_path)
        found = await discover(
            d,
            {"image": {"repoURL": repo, "constraint": "^1.0.0", "discoveryLimit": 2}},
            {"image": {"repoURL": repo, "imageSelectionStrategy": "Lexical"}},
            {
                "image": {
                    "repoURL": repo,
                    "imageSelectionStrategy": "NewestBuild",
                    "ignoreTagsRegexes": ["^nightly"],
                }
            },
            {
                "image": {
                    "repoURL": repo,
                    "imageSelectionStrategy": "Digest",
                    "constraint": "latest",
                }
            },
        )
    semver, lexical, newest, digest = found["images"]
    assert [r["tag"] for r in semver["references"]] == ["1.10.0", "1.2.0"]
    assert semver["references"][0]["createdAt"] == "2024-01-03T00:00:00Z"
    assert lexical["references"][0]["tag"] == "nightly-b"
    assert [r["tag"] for r in newest["references"]][:2] == ["latest", "2.0.0"]
    assert digest["references"] == [
        {"tag": "latest", "digest": latest, "createdAt": "2024-01-05T00:00:00Z"}
    ]


async def test_tags_are_read_page_by_page_following_the_registrys_link_header(
    session: aiohttp.ClientSession,
) -> None:
    # The distribution spec's pagination (Debian's docker-registry answers every tag at once):
    # n per page, and a Link header to the next page until the last.
    tags = ["1.0.0", "1.1.0", "1.2.0", "1.3.0", "2.0.0"]
    pages = []

    async def tag_list(request: web.Request) -> web.Response:
        n, last = int(request.query["n"]), request.query.get("last")
        pages.append(last)
        rest = tags[tags.index(last) + 1 :] if last else tags
        page, more = rest[:n], rest[n:]
        headers = {}
        if more:
            headers["Link"] = f'</v2/acme/paged/tags/list?n={n}&last={page[-1]}>; rel="next"'
        return web.json_response({"name": "acme/paged", "tags": page}, headers=headers)

    app = web.Application()
    app.router.add_get("/v2/acme/paged/tags/list", tag_list)
    async with serving(app) as url:
        client = OCIClient(session, page_size=2)
        listed = await client.tags(f"{url.removeprefix('http://')}/acme/paged")
    assert listed == tags
    assert pages == [None, "1.1.0", "1.3.0"]


async def test_an_images_oci_source_labels_are_recorded_as_its_annotations(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    source = "https://github.com/acme/app"
    async with running_registry(tmp_path) as registry:
        repo = registry.repo("acme/labelled")
        await registry.push_image(
            "acme/labelled",
            "1.0.0",
            created=day(1),
            labels={SOURCE_LABEL: source, REVISION_LABEL: "a" * 40, "maintainer": "ops"},
        )
        # A manifest annotation wins over the config's label; the other label fills in.
        await registry.push_image(
            "acme/labelled",
            "1.1.0",
            created=day(2),
            labels={SOURCE_LABEL: "https://example.com/old", REVISION_LABEL: "b" * 40},
            annotations={SOURCE_LABEL: source},
        )
        found = await discover(
            discoverer(session, tmp_path), {"image": {"repoURL": repo, "discoveryLimit": 2}}
        )
    (result,) = found["images"]
    assert [(r["tag"], r.get("annotations")) for r in result["references"]] == [
        ("1.1.0", {SOURCE_LABEL: source, REVISION_LABEL: "b" * 40}),
        ("1.0.0", {SOURCE_LABEL: source, REVISION_LABEL: "a" * 40}),
    ]


async def test_a_multi_arch_index_is_selected_by_platform(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    async with running_registry(tmp_path) as registry:
        repo = registry.repo("acme/multi")
        index = await registry.push_index(
            "acme/multi", "1.1.0", [("linux", "amd64"), ("linux", "arm64")], created=day(2)
        )
        await registry.push_image("acme/multi", "1.2.0", platform=("linux", "amd64"))
        d = discoverer(session, tmp_path)
        found = await discover(d, {"image": {"repoURL": repo, "platform": "linux/arm64"}})
    (result,) = found["images"]
    assert result["platform"] == "linux/arm64"
    # 1.2.0 is amd64-only and single-platform: Kargo never matches it to a platform constraint.
    assert result["references"] == [
        {
            "tag": "1.1.0",
            "digest": index,
            "annotations": {"org.example.arch": "arm64"},
            "createdAt": "2024-01-02T00:00:00Z",
        }
    ]


async def test_token_auth_is_anonymous_first_then_a_bearer_token_with_credentials(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    async with running_registry(tmp_path, token_auth=True) as registry:
        await registry.push_image("private/app", "1.0.0")
        repo = registry.repo("private/app")
        tokens = registry.tokens
        assert tokens is not None
        anonymous = discoverer(session, tmp_path)
        with pytest.raises(Exception, match="token request") as refused:
            await discover(anonymous, {"image": {"repoURL": repo}})
        assert PASSWORD not in str(refused.value)
        assert tokens.anonymous_refused == 1
        creds = docker_config(tmp_path / "config.json", {registry.host: (USERNAME, PASSWORD)})
        d = discoverer(session, tmp_path, ClusterCredentials(None, docker_config=creds))
        issued = tokens.issued
        found = await discover(d, {"image": {"repoURL": repo}})
        assert found["images"][0]["references"][0]["tag"] == "1.0.0"
        assert tokens.issued == issued + 1  # one token, cached for tags, manifest and config
        again = await discover(d, {"image": {"repoURL": repo}})
        assert again["images"] == found["images"]
        assert tokens.issued == issued + 1


async def test_credentials_come_from_a_docker_config_json_reread_when_it_changes(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    async with running_registry(tmp_path, token_auth=True) as registry:
        await registry.push_image("private/app", "1.0.0")
        repo = registry.repo("private/app")
        config = tmp_path / "config.json"
        config.write_text(json.dumps({"auths": {"other.example.com": {"auth": "eDp5"}}}))
        os.utime(config, (1, 1))
        creds = ClusterCredentials(None, docker_config=DockerConfigCredentials(config))
        with pytest.raises(RegistryError, match="token request"):
            await discover(
                discoverer(session, tmp_path, credentials=creds), {"image": {"repoURL": repo}}
            )
        # The Secret is rotated in place: the next discovery reads the new file.
        auth = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
        config.write_text(json.dumps({"auths": {f"http://{registry.host}/v2/": {"auth": auth}}}))
        found = await discover(
            discoverer(session, tmp_path, credentials=creds), {"image": {"repoURL": repo}}
        )
    assert found["images"][0]["references"][0]["tag"] == "1.0.0"
    assert parse_docker_config(
        {"auths": {"https://index.docker.io/v1/": {"username": "u", "password": "p"}}}
    ) == {"registry-1.docker.io": ("u", "p")}
    assert parse_docker_config({"auths": {"x.io": {"auth": "%%%"}}}) == {}


async def test_a_ghcr_package_is_read_with_the_github_apps_installation_token(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    async with (
        running_fake_github() as fake,
        running_registry(tmp_path, token_auth=True) as registry,
    ):
        tokens = registry.tokens
        assert tokens is not None
        # The registry takes the App's installation tokens, as GHCR does.
        tokens.accepts = lambda user, password: user == "x-access-token" and password in fake.tokens
        fake.add_repo("acme/app", make_remote(tmp_path, {"a": "1\n"}, name="app"))
        await registry.push_image("acme/app", "1.0.0")
        await registry.push_image("stranger/tool", "1.0.0")
        client = GitHubClient(fake.settings())
        await client.start()
        try:
            app = GitHubGitCredentials(client, registries=(registry.host,))
            d = discoverer(session, tmp_path, ClusterCredentials(None, app=app))
            found = await discover(d, {"image": {"repoURL": registry.repo("acme/app")}})
            assert found["images"][0]["references"][0]["tag"] == "1.0.0"
            assert fake.tokens_issued == 1
            # A package whose repository the App is not installed on is read anonymously.
            with pytest.raises(RegistryError, match="token request") as refused:
                await discover(d, {"image": {"repoURL": registry.repo("stranger/tool")}})
            assert not any(token in str(refused.value) for token in fake.tokens)
        finally:
            await client.close()


async def test_unchanged_tags_cost_one_conditional_request_per_subscription(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    async with running_registry(tmp_path) as registry:
        await registry.push_image("acme/etag", "1.0.0")
        d = discoverer(session, tmp_path)
        sub = {"image": {"repoURL": registry.repo("acme/etag")}}
        await discover(d, sub)
        before = d.oci.requests
        await discover(d, sub)
        # tags/list, then the tag's manifest (If-None-Match); the config blob is cached by digest
        assert d.oci.requests - before <= 2
        # cacheByTag (Kargo's: tags are taken as immutable): the 304 of tags/list is all.
        cached = {"image": {"repoURL": registry.repo("acme/etag"), "cacheByTag": True}}
        await discover(d, cached)
        before = d.oci.requests
        found = await discover(d, cached)
        assert d.oci.requests - before == 1
        assert found["images"][0]["references"][0]["tag"] == "1.0.0"


async def test_a_tag_list_sent_in_chunks_is_read_whole(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    # docker-registry streams a big tags/list chunked; reading "up to N bytes" once got only
    # the first chunk, and 5,000 tags failed as "not JSON".
    tags = [f"1.0.{i}" for i in range(3000)]
    body = json.dumps({"name": "acme/big", "tags": tags}).encode()

    async def tag_list(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        for start in range(0, len(body), 4096):
            await response.write(body[start : start + 4096])
            await asyncio.sleep(0.001)  # let each chunk reach the client on its own
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/v2/acme/big/tags/list", tag_list)
    async with serving(app) as url:
        listed = await OCIClient(session).tags(f"{url.removeprefix('http://')}/acme/big")
    assert listed == tags


async def test_a_registry_429_blocks_its_host_for_retry_after_on_the_injected_clock(
    session: aiohttp.ClientSession,
) -> None:
    """An HTTP-date Retry-After is measured against the client's clock (not the wall's), and the
    host is not asked again until that time has passed on it."""
    clock = FakeClock(NOW)
    asked = 0

    async def throttled(request: web.Request) -> web.Response:
        nonlocal asked
        asked += 1
        if asked == 1:  # two minutes after the clock's now, in HTTP-date form
            return web.Response(
                status=429, headers={"Retry-After": "Wed, 01 Jan 2025 00:02:00 GMT"}
            )
        return web.json_response({"name": "acme/app", "tags": ["1.0.0"]})

    app = web.Application()
    app.router.add_get("/v2/acme/app/tags/list", throttled)
    async with serving(app) as url:
        client = OCIClient(session, clock=clock)
        repo = f"{url.removeprefix('http://')}/acme/app"
        with pytest.raises(RateLimited) as limited:
            await client.tags(repo)
        assert limited.value.retry_after == 120.0
        clock.advance(119)
        with pytest.raises(RateLimited, match="asked us to wait; 1s left"):
            await client.tags(repo)
        assert asked == 1  # blocked here, not sent
        clock.advance(2)
        assert await client.tags(repo) == ["1.0.0"]
    assert asked == 2


async def test_private_chart_repositories_are_read_with_the_projects_helm_secrets(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    """A classic repository that wants Basic auth, and an OCI chart on a registry that does
    (htpasswd), each opened by a ``cred-type: helm`` Secret of the project only."""
    index = "apiVersion: v1\nentries:\n  app:\n  - version: 1.2.3\n"
    basic = "Basic " + base64.b64encode(b"charts:chart-pa55").decode()

    async def handle(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != basic:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="charts"'})
        return web.Response(text=index)

    app = web.Application()
    app.router.add_get("/charts/index.yaml", handle)

    def helm_secret(name: str, repo_url: str, user: str, password: str) -> dict[str, Any]:
        data = {"repoURL": repo_url, "username": user, "password": password}
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": "team-a",
                         "labels": {"kargo.akuity.io/cred-type": "helm"}},
            "data": {k_: base64.b64encode(v.encode()).decode() for k_, v in data.items()},
        }  # fmt: skip

    async with (
        serving(app) as charts,
        running_registry(tmp_path, htpasswd=("robot", "oci-pa55")) as registry,
        running_apiserver(namespaces=["team-a", "team-b"]) as api,
    ):
        await registry.push_chart("charts/app", "2.0.0")
        oci_url = f"oci://{registry.repo('charts/app')}"
        kube = k.Kube(api.api_client())
        await kube.create(k.SECRETS, helm_secret("charts", f"{charts}/charts", "charts",
                                                 "chart-pa55"))  # fmt: skip
        await kube.create(k.SECRETS, helm_secret("oci", oci_url, "robot", "oci-pa55"))
        credentials = ClusterCredentials(kube, allow_http=True)
        d = discoverer(session, tmp_path, credentials)
        spec = parse_spec(
            {
                "subscriptions": [
                    {"chart": {"repoURL": f"{charts}/charts", "name": "app"}},
                    {"chart": {"repoURL": oci_url}},
                ]
            }
        )
        found = await d.discover(spec, None, NOW, project="team-a")
        assert [c["versions"] for c in found["charts"]] == [["1.2.3"], ["2.0.0"]]
        with pytest.raises(RegistryError, match=f"no credentials for {charts}/charts"):
            await d.discover(spec, None, NOW, project="team-b")
        oci_only = parse_spec({"subscriptions": [{"chart": {"repoURL": oci_url}}]})
        with pytest.raises(RegistryError, match=f"no credentials for {oci_url}"):
            await d.discover(oci_only, None, NOW, project="team-b")


async def test_oci_and_http_chart_repositories(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    index = """apiVersion: v1
entries:
  guestbook:
  - version: 0.1.0
  - version: 0.2.0
  - version: 1.0.0-rc.1
  other:
  - version: 9.9.9
"""
    served: list[str | None] = []

    async def handle(request: web.Request) -> web.Response:
        served.append(request.headers.get("If-None-Match"))
        if request.headers.get("If-None-Match") == '"v1"':
            return web.Response(status=304)
        return web.Response(text=index, headers={"ETag": '"v1"'})

    app = web.Application()
    app.router.add_get("/charts/index.yaml", handle)
    async with serving(app) as charts, running_registry(tmp_path) as registry:
        for version in ("0.1.0", "0.3.0+build.7", "1.0.0"):
            await registry.push_chart("charts/app", version)
        d = discoverer(session, tmp_path)
        http_sub = {
            "chart": {
                "repoURL": f"{charts}/charts",
                "name": "guestbook",
                "semverConstraint": "<1.0.0",
            }
        }
        oci_sub = {"chart": {"repoURL": f"oci://{registry.repo('charts/app')}"}}
        found = await discover(d, http_sub, oci_sub)
        await discover(d, http_sub)
    http_result, oci_result = found["charts"]
    assert http_result["versions"] == ["0.2.0", "0.1.0"]
    assert http_result["name"] == "guestbook"
    assert oci_result["versions"] == ["1.0.0", "0.3.0+build.7", "0.1.0"]
    assert served == [None, '"v1"']


async def test_git_strategies_on_real_repositories(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    remote = make_remote(tmp_path, files={"README.md": "hi\n"})
    app_change = remote.commit_files("main", {"apps/guestbook/values.yaml": "a: 1\n"}, "app")
    docs = remote.commit_files("main", {"docs/x.md": "x\n"}, "docs only")
    remote.tag("v1.0.0", app_change)
    remote.tag("v1.2.0", docs)
    remote.tag("v1.10.0-rc.1", docs)
    remote.tag("not-a-version", docs)
    url = GIT_URL
    d = discoverer(session, tmp_path, rewrites={remote.url: url})
    found = await discover(
        d,
        {"git": {"repoURL": url, "branch": "main"}},
        {"git": {"repoURL": url, "branch": "main", "includePaths": ["apps/guestbook"]}},
        {"git": {"repoURL": url, "commitSelectionStrategy": "SemVer"}},
        {
            "git": {
                "repoURL": url,
                "commitSelectionStrategy": "SemVer",
                "semverConstraint": ">=1.0.0-0",
                "excludePaths": ["glob:docs/**"],
            }
        },
        {"git": {"repoURL": url, "commitSelectionStrategy": "NewestTag"}},
    )
    branch, paths, semver, semver_paths, newest_tag = found["git"]
    assert branch["commits"][0] == {
        "id": docs,
        "branch": "main",
        "subject": "docs only",
        "author": "Longshoreman Tests <tests@longshoreman.invalid>",
        "committer": "Longshoreman Tests <tests@longshoreman.invalid>",
        "creatorDate": branch["commits"][0]["creatorDate"],
    }
    assert branch["observedRefs"] == {"branchHead": docs}
    assert paths["commits"][0]["id"] == app_change
    # With no constraint, pre-releases count (Kargo: a nil constraint accepts every semver).
    assert [c["tag"] for c in semver["commits"]] == ["v1.10.0-rc.1", "v1.2.0", "v1.0.0"]
    assert [c["tag"] for c in semver_paths["commits"]] == ["v1.0.0"]
    assert newest_tag["commits"][0]["id"] == docs
    assert semver["observedRefs"]["tags"] == [
        {"name": "v1.0.0", "id": app_change},
        {"name": "v1.10.0-rc.1", "id": docs},
        {"name": "v1.2.0", "id": docs},
    ]


async def test_unchanged_refs_skip_the_fetch(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    remote = make_remote(tmp_path, files={"a": "1\n"})
    d = discoverer(session, tmp_path, rewrites={remote.url: GIT_URL})
    spec = parse_spec({"subscriptions": [{"git": {"repoURL": GIT_URL}}]})
    first = await d.discover(spec, None, NOW)
    commands = d.git.commands
    second = await d.discover(spec, first, NOW)
    assert second["git"] == first["git"]
    assert d.git.commands == commands + 1  # just ls-remote


def warehouse(name: str, subscriptions: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return objects.warehouse(name, namespace="demo", subscriptions=subscriptions, **spec)


async def wait_for(predicate: Any, limit: float = 20.0) -> Any:
    deadline = asyncio.get_running_loop().time() + limit
    while True:
        value = await predicate()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def test_the_reconciler_makes_one_freight_per_artifact_set_and_handles_refresh(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    remote = make_remote(tmp_path, files={"a": "1\n"})
    async with (
        running_apiserver(namespaces=["demo"], bookmark_interval=0.2) as api,
        running_registry(tmp_path) as registry,
    ):
        await registry.push_image("acme/app", "1.0.0")
        kube = k.Kube(api.api_client())
        telemetry = RecordingTelemetry()
        controller = WarehouseController(
            kube,
            discoverer(session, tmp_path, rewrites={remote.url: GIT_URL}),
            rand=lambda: 0.0,
            on_reconcile=telemetry.on_warehouse_reconcile,
        )
        subscriptions = [
            {"image": {"repoURL": registry.repo("acme/app")}},
            {"git": {"repoURL": GIT_URL, "branch": "main"}},
        ]
        await kube.create(k.WAREHOUSES, warehouse("app", subscriptions))
        tasks = [
            asyncio.create_task(controller.run_informer()),
            asyncio.create_task(controller.lead()),
        ]
        try:

            async def freight() -> list[dict[str, Any]]:
                items, _ = await kube.list(k.FREIGHT, "demo")
                return items

            (first,) = await wait_for(freight)
            assert first["images"][0]["tag"] == "1.0.0"
            assert first["commits"][0]["id"] == remote.head("main")
            assert first["origin"] == {"kind": "Warehouse", "name": "app"}
            assert first["alias"]
            obj = await kube.get(k.WAREHOUSES, "demo", "app")
            assert obj["status"]["lastFreightID"] == first["metadata"]["name"]
            ready = {c["type"]: c["status"] for c in obj["status"]["conditions"]}
            assert ready["Ready"] == "True" and ready["FreightCreated"] == "True"

            await registry.push_image("acme/app", "1.1.0")
            await kube.patch(
                k.WAREHOUSES,
                "demo",
                "app",
                {"metadata": {"annotations": {"kargo.akuity.io/refresh": "now-1"}}},
            )

            async def refreshed() -> dict[str, Any] | None:
                got = await kube.get(k.WAREHOUSES, "demo", "app")
                return got if got["status"].get("lastHandledRefresh") == "now-1" else None

            after = await wait_for(refreshed)
            items = await freight()
            assert len(items) == 2
            newest = next(f for f in items if f["metadata"]["name"] != first["metadata"]["name"])
            assert newest["images"][0]["tag"] == "1.1.0"
            assert after["status"]["lastFreightID"] == newest["metadata"]["name"]

            async def reconciled_twice() -> bool:
                return telemetry.warehouse_reconciles >= 2

            # One reconcile on creation, one for the refresh: the status writes of each did
            # not make it run again (the next poll is 5 minutes away).
            await wait_for(reconciled_twice)
            assert telemetry.warehouse_reconciles == 2
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await kube.close()


async def test_a_bad_spec_or_failed_discovery_shows_in_the_conditions(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    async def throttles(request: web.Request) -> web.Response:
        return web.Response(status=429, headers={"Retry-After": "120"})

    throttling = web.Application()
    throttling.router.add_get("/v2/acme/app/tags/list", throttles)
    async with running_apiserver(namespaces=["demo"]) as api, serving(throttling) as registry:
        kube = k.Kube(api.api_client())
        controller = WarehouseController(kube, discoverer(session, tmp_path), rand=lambda: 0.0)
        await kube.create(
            k.WAREHOUSES,
            warehouse("bad", [{"image": {"repoURL": "127.0.0.1:1/none", "allowTags": "^v"}}]),
        )
        await kube.create(
            k.WAREHOUSES, warehouse("down", [{"image": {"repoURL": "127.0.0.1:1/x"}}])
        )
        throttled = [{"image": {"repoURL": f"{registry.removeprefix('http://')}/acme/app"}}]
        await kube.create(k.WAREHOUSES, warehouse("throttled", throttled, interval="10m"))
        task = asyncio.create_task(controller.run_informer())
        try:
            await controller.informer.synced.wait()
            assert await controller.reconcile(("demo", "bad")) is None
            # Retried on the work queue's backoff (5 s first), never later than the 5 minutes
            # of its default interval (tests/unit/controller/test_workqueue.py times it) ...
            assert await controller.reconcile(("demo", "down")) == RetryLater(cap=300.0)
            # ... and never sooner than a registry's Retry-After.
            retry = RetryLater(cap=600.0, not_before=120.0)
            assert await controller.reconcile(("demo", "throttled")) == retry
            bad = await kube.get(k.WAREHOUSES, "demo", "bad")
            down = await kube.get(k.WAREHOUSES, "demo", "down")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await kube.close()
    (ready,) = [c for c in bad["status"]["conditions"] if c["type"] == "Ready"]
    assert ready["reason"] == "InvalidSpec" and "AllowTags is deprecated" in ready["message"]
    (ready,) = [c for c in down["status"]["conditions"] if c["type"] == "Ready"]
    assert ready["reason"] == "DiscoveryFailure"


async def test_a_warehouse_polls_its_interval_after_the_last_discovery_on_the_injected_clock(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    """Ten minutes pass on the controller's clock, not the wall's: the next poll is due at
    ``discoveredAt + interval``; a pass before it discovers nothing and says how long is left."""
    remote = make_remote(tmp_path, files={"a": "1\n"})
    clock = FakeClock(NOW)
    async with running_apiserver(namespaces=["demo"]) as api:
        kube = k.Kube(api.api_client())
        d = discoverer(session, tmp_path, rewrites={remote.url: GIT_URL})
        controller = WarehouseController(kube, d, clock=clock, rand=lambda: 0.0)
        subscriptions = [{"git": {"repoURL": GIT_URL, "branch": "main"}}]
        await kube.create(k.WAREHOUSES, warehouse("app", subscriptions, interval="10m"))
        task = asyncio.create_task(controller.run_informer())
        key = ("demo", "app")
        try:
            await controller.informer.synced.wait()
            assert await controller.reconcile(key) == 600.0
            first = await kube.get(k.WAREHOUSES, "demo", "app")
            assert first["status"]["discoveredArtifacts"]["discoveredAt"].startswith("2025-01-01")
            discovered = d.git.commands
            newer = remote.commit_files("main", {"a": "2\n"})

            clock.advance(599)
            assert await controller.reconcile(key) == 1.0  # a second to go: no discovery yet
            assert d.git.commands == discovered

            clock.advance(2)
            assert await controller.reconcile(key) == 600.0
            assert d.git.commands > discovered
            items, _ = await kube.list(k.FREIGHT, "demo")
            assert sorted(f["commits"][0]["id"] for f in items) == sorted(
                [first["status"]["discoveredArtifacts"]["git"][0]["commits"][0]["id"], newer]
            )
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await kube.close()


class StallsOnce(Discoverer):
    """The first discovery never ends (a registry that hangs until the lease is lost)."""

    def __init__(self, inner: Discoverer) -> None:
        super().__init__(inner.oci, inner.charts, inner.git)
        self.calls = 0
        self.stalled = asyncio.Event()

    async def discover(
        self, spec: Any, last: Mapping[str, Any] | None, now: dt.datetime, project: str = ""
    ) -> dict[str, Any]:
        self.calls += 1
        if self.calls == 1:
            self.stalled.set()
            await asyncio.Event().wait()
        return await super().discover(spec, last, now, project)


async def test_a_discovery_cut_short_by_a_lost_leadership_runs_under_the_next(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    remote = make_remote(tmp_path, files={"a": "1\n"})
    async with running_apiserver(namespaces=["demo"], bookmark_interval=0.2) as api:
        kube = k.Kube(api.api_client())
        stalls = StallsOnce(discoverer(session, tmp_path, rewrites={remote.url: GIT_URL}))
        controller = WarehouseController(kube, stalls, rand=lambda: 0.0)
        subscriptions = [{"git": {"repoURL": GIT_URL, "branch": "main"}}]
        await kube.create(k.WAREHOUSES, warehouse("app", subscriptions, interval="1h"))
        informer = asyncio.create_task(controller.run_informer())
        try:
            first = asyncio.create_task(controller.lead())
            await asyncio.wait_for(stalls.stalled.wait(), 10)
            first.cancel()  # the lease lost mid-discovery
            await asyncio.gather(first, return_exceptions=True)
            second = asyncio.create_task(controller.lead())
            try:

                async def freight() -> list[dict[str, Any]]:
                    items, _ = await kube.list(k.FREIGHT, "demo")
                    return items

                (made,) = await wait_for(freight)
                assert made["commits"][0]["id"] == remote.head("main")
                assert stalls.calls == 2
            finally:
                second.cancel()
                await asyncio.gather(second, return_exceptions=True)
        finally:
            informer.cancel()
            await asyncio.gather(informer, return_exceptions=True)
            await kube.close()


async def test_a_warehouse_cannot_read_another_projects_mirror_by_its_path(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    """Project A's private history is in a mirror under the server's work directory; project
    B's Warehouse naming that mirror (as file:// or as a bare path) makes no Freight and says
    why, as git-clone refuses local repositories."""
    remote = make_remote(tmp_path, files={"secret": "1\n"})
    remote.tag("v1.0.0-private", remote.head("main"))
    async with running_apiserver(namespaces=["proj-a", "proj-b"]) as api:
        kube = k.Kube(api.api_client())
        d = discoverer(session, tmp_path, rewrites={remote.url: GIT_URL})
        controller = WarehouseController(kube, d, rand=lambda: 0.0)
        tags = {"commitSelectionStrategy": "NewestTag"}
        own = objects.warehouse(
            "app", namespace="proj-a", subscriptions=[{"git": {"repoURL": GIT_URL, **tags}}]
        )
        await kube.create(k.WAREHOUSES, own)
        informer = asyncio.create_task(controller.run_informer())
        try:
            await controller.informer.synced.wait()
            await controller.reconcile(("proj-a", "app"))
            (made,) = (await kube.list(k.FREIGHT, "proj-a"))[0]
            assert made["commits"][0]["tag"] == "v1.0.0-private"
        finally:
            informer.cancel()
            await asyncio.gather(informer, return_exceptions=True)
        (mirror,) = (tmp_path / "git-cache" / "mirrors").iterdir()
        paths = [mirror.as_uri(), str(mirror), f"file://{mirror}/"]
        for i, url in enumerate(paths):
            sub = {"git": {"repoURL": url, **tags}}
            steal = objects.warehouse(f"steal-{i}", namespace="proj-b", subscriptions=[sub])
            await kube.create(k.WAREHOUSES, steal)
        controller = WarehouseController(kube, d, rand=lambda: 0.0)
        task = asyncio.create_task(controller.run_informer())
        try:
            await controller.informer.synced.wait()
            for i, url in enumerate(paths):
                await controller.reconcile(("proj-b", f"steal-{i}"))
                got = await kube.get(k.WAREHOUSES, "proj-b", f"steal-{i}")
                (ready,) = [c for c in got["status"]["conditions"] if c["type"] == "Ready"]
                assert ready["reason"] == "InvalidSpec", url
                assert "repoURL" in ready["message"] and "local" in ready["message"]
            assert (await kube.list(k.FREIGHT, "proj-b"))[0] == []
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await kube.close()


async def test_a_password_in_a_warehouse_url_is_neither_stored_nor_shown(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    """A chart repository's URL with a password: the Warehouse's status and the Freight hold it
    without; a git URL with one is refused (credentials come from Secrets), naming no password."""

    async def index(request: web.Request) -> web.Response:
        return web.Response(text="apiVersion: v1\nentries:\n  app:\n  - version: 1.0.0\n")

    charts = web.Application()
    charts.router.add_get("/charts/index.yaml", index)
    async with serving(charts) as base, running_apiserver(namespaces=["demo"]) as api:
        with_password = base.replace("http://", "http://robot:pa55word@") + "/charts"
        kube = k.Kube(api.api_client())
        controller = WarehouseController(kube, discoverer(session, tmp_path), rand=lambda: 0.0)
        chart = [{"chart": {"repoURL": with_password, "name": "app"}}]
        git = [{"git": {"repoURL": "http://robot:pa55word@git.example.test/acme/app.git"}}]
        await kube.create(k.WAREHOUSES, warehouse("charts", chart))
        await kube.create(k.WAREHOUSES, warehouse("git", git))
        task = asyncio.create_task(controller.run_informer())
        try:
            await controller.informer.synced.wait()
            await controller.reconcile(("demo", "charts"))
            await controller.reconcile(("demo", "git"))
            statuses = [
                (await kube.get(k.WAREHOUSES, "demo", name))["status"] for name in ("charts", "git")
            ]
            freight, _ = await kube.list(k.FREIGHT, "demo")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await kube.close()
    (made,) = freight
    assert made["charts"] == [{"repoURL": f"{base}/charts", "name": "app", "version": "1.0.0"}]
    found = statuses[0]["discoveredArtifacts"]["charts"][0]
    assert found["repoURL"] == f"{base}/charts"
    (ready,) = [c for c in statuses[1]["conditions"] if c["type"] == "Ready"]
    assert ready["reason"] == "InvalidSpec" and "must not contain credentials" in ready["message"]
    assert "pa55word" not in json.dumps([statuses, freight])
