"""Kargo's own Warehouse examples discover what Kargo's documentation says they discover.

Each subscription below is an example of Kargo's "Working with Warehouses" guide
(docs/docs/50-user-guide/20-how-to-guides/30-working-with-warehouses.md), field for field, with
only its repository URL pointed at a real local part: Debian's docker-registry for images (the
example's ``public.ecr.aws/nginx/nginx`` becomes ``127.0.0.1:<port>/nginx/nginx``), a bare git
repository for git, an index.yaml served on 127.0.0.1 for the chart. The artifacts are made so
that each strategy's answer differs from the others' (a Lexical winner that is not the newest
build, a SemVer range that excludes the highest version, paths that rule out the branch head),
and the Freight-creation examples (named subscriptions, ``freightCreationCriteria``) run through
the reconciler on the API server emulator.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from app.controller import kube as k
from app.controller.warehouses.charts import ChartClient
from app.controller.warehouses.discover import Discoverer
from app.controller.warehouses.gitsource import GitSource
from app.controller.warehouses.reconciler import WarehouseController
from app.controller.warehouses.registry import OCIClient
from promoter.warehouses.spec import parse_spec
from tests.support import objects
from tests.support.gitrepo import RemoteRepo, git_env, make_remote
from tests.support.kube import running_apiserver
from tests.support.registry import Registry, running_registry, serving
from tests.support.waiting import eventually

NOW = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
CHART_INDEX = """apiVersion: v1
entries:
  my-chart:
  - version: 0.9.0
  - version: 1.0.0
  - version: 1.3.0
  - version: 2.0.0
  other-chart:
  - version: 1.9.0
"""


# Local remotes are reached through this public base, mapped by the test's gitconfig.
HOSTED = "https://git.example.test/"


def day(n: int) -> dt.datetime:
    return dt.datetime(2024, 1, n, tzinfo=dt.UTC)


@dataclass
class Parts:
    registry: Registry
    git: RemoteRepo
    charts: str
    digests: dict[str, str]
    commits: dict[str, str]
    discoverer: Discoverer
    local_root: str  # the test's directory as a file:// URL, which HOSTED stands for

    def public(self, remote: RemoteRepo) -> str:
        """The public URL a Warehouse names for a local remote (Warehouses refuse paths)."""
        return HOSTED + remote.url.removeprefix(self.local_root)

    def image(self, repo: str) -> str:
        """Kargo's example URL, on our registry."""
        return self.registry.repo(repo.split("/", 1)[1])

    async def discover(self, subscription: dict[str, Any]) -> dict[str, Any]:
        spec = parse_spec({"subscriptions": [subscription]})
        return await self.discoverer.discover(spec, None, NOW)


@pytest.fixture
async def parts(tmp_path: Path) -> AsyncIterator[Parts]:
    async def index(request: web.Request) -> web.Response:
        return web.Response(text=CHART_INDEX)

    app = web.Application()
    app.router.add_get("/index.yaml", index)
    git = make_remote(tmp_path, files={"README.md": "demo\n"})
    commits = {
        "guestbook": git.commit_files("main", {"apps/guestbook/values.yaml": "a: 1\n"}, "app"),
        "readme": git.commit_files("main", {"apps/guestbook/README.md": "x\n"}, "readme"),
        "docs": git.commit_files("main", {"docs/index.md": "x\n"}, "docs"),
    }
    for tag, commit in [
        ("v1.0.0", "guestbook"),
        ("v1.2.0", "readme"),
        ("v2.0.0", "docs"),
        ("nightly-20240102", "guestbook"),  # lexically greatest nightly, but the oldest tag
        ("nightly-20240101", "docs"),  # the newest tag
    ]:
        git.tag(tag, commits[commit])
    async with (
        serving(app) as charts,
        running_registry(tmp_path) as registry,
        aiohttp.ClientSession() as session,
    ):
        digests = {}
        built = [
            ("1.25.3", 1),
            ("1.26.0", 2),
            ("1.26.2", 3),
            ("1.27.1", 4),
            ("2.0.0", 5),
            ("nightly-20240101", 9),  # built last, lexically smaller
            ("nightly-20240102", 6),
            ("nightly-broken", 7),
            ("latest", 8),
        ]
        for tag, created in built:
            digests[tag] = await registry.push_image("nginx/nginx", tag, created=day(created))
        oci = OCIClient(session)
        root = tmp_path.as_uri() + "/"
        source = GitSource(tmp_path / "git-cache", extra_env=git_env(tmp_path, {root: HOSTED}))
        d = Discoverer(oci, ChartClient(session, oci), source)
        yield Parts(registry, git, charts, digests, commits, d, root)


def image_tags(found: dict[str, Any]) -> list[str]:
    return [r["tag"] for r in found["images"][0]["references"]]


async def test_the_image_examples_select_as_kargo_documents(parts: Parts) -> None:
    nginx = parts.image("public.ecr.aws/nginx/nginx")
    # "Semantic Versioning": constraint ^1.26.0.
    semver = await parts.discover({"image": {"repoURL": nginx, "constraint": "^1.26.0"}})
    assert image_tags(semver) == ["1.27.1", "1.26.2", "1.26.0"]
    # "Lexical": nightly builds by their date in the tag.
    lexical = await parts.discover(
        {
            "image": {
                "repoURL": nginx,
                "imageSelectionStrategy": "Lexical",
                "allowTagsRegexes": [r"^nightly-\d{8}$"],
            }
        }
    )
    assert image_tags(lexical) == ["nightly-20240102", "nightly-20240101"]
    # "Digest": follow a mutable tag.
    digest = await parts.discover(
        {"image": {"repoURL": nginx, "imageSelectionStrategy": "Digest", "constraint": "latest"}}
    )
    assert digest["images"][0]["references"][0]["digest"] == parts.digests["latest"]
    # "Newest Build", with and without cacheByTag: the most recently built nightly.
    for extra in ({}, {"cacheByTag": True}):
        newest = await parts.discover(
            {
                "image": {
                    "repoURL": nginx,
                    "imageSelectionStrategy": "NewestBuild",
                    **extra,
                    "allowTagsRegexes": ["^nightly"],
                }
            }
        )
        assert image_tags(newest) == ["nightly-20240101", "nightly-broken", "nightly-20240102"]
        assert newest["images"][0]["references"][0]["createdAt"] == "2024-01-09T00:00:00Z"


async def test_the_git_examples_select_as_kargo_documents(parts: Parts) -> None:
    url, c = parts.public(parts.git), parts.commits
    branch = await parts.discover({"git": {"repoURL": url, "branch": "main"}})
    assert branch["git"][0]["commits"][0]["id"] == c["docs"]
    semver = await parts.discover(
        {"git": {"repoURL": url, "commitSelectionStrategy": "SemVer", "semverConstraint": "^1.0.0"}}
    )
    assert [x["tag"] for x in semver["git"][0]["commits"]] == ["v1.2.0", "v1.0.0"]
    lexical = await parts.discover(
        {
            "git": {
                "repoURL": url,
                "commitSelectionStrategy": "Lexical",
                "allowTagsRegexes": [r"^nightly-\d{8}$"],
            }
        }
    )
    assert lexical["git"][0]["commits"][0]["tag"] == "nightly-20240102"
    newest_tag = await parts.discover(
        {
            "git": {
                "repoURL": url,
                "commitSelectionStrategy": "NewestTag",
                "allowTagsRegexes": ["^nightly"],
            }
        }
    )
    assert newest_tag["git"][0]["commits"][0]["tag"] == "nightly-20240101"
    # "Path filters": the three examples of the guide.
    include = await parts.discover({"git": {"repoURL": url, "includePaths": ["apps/guestbook"]}})
    assert include["git"][0]["commits"][0]["id"] == c["readme"]
    exclude = await parts.discover({"git": {"repoURL": url, "excludePaths": ["docs"]}})
    assert exclude["git"][0]["commits"][0]["id"] == c["readme"]
    both = await parts.discover(
        {
            "git": {
                "repoURL": url,
                "includePaths": ["apps/guestbook"],
                "excludePaths": ["apps/guestbook/README.md"],
            }
        }
    )
    assert both["git"][0]["commits"][0]["id"] == c["guestbook"]


async def test_the_chart_example_selects_as_kargo_documents(parts: Parts) -> None:
    found = await parts.discover(
        {"chart": {"repoURL": parts.charts, "name": "my-chart", "semverConstraint": "^1.0.0"}}
    )
    assert found["charts"][0]["versions"] == ["1.3.0", "1.0.0"]


def warehouse(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return objects.warehouse(name, namespace="kargo-demo", **spec)


async def test_the_freight_creation_examples_make_the_freight_kargo_documents(
    parts: Parts,
) -> None:
    registry = parts.registry
    for tag in ("1.0.0", "1.1.0"):
        await registry.push_image("example/frontend", tag)
    await registry.push_image("example/backend", "1.0.0")
    frontend, backend = registry.repo("example/frontend"), registry.repo("example/backend")
    nginx = parts.image("public.ecr.aws/nginx/nginx")
    async with running_apiserver(namespaces=["kargo-demo"], bookmark_interval=0.2) as api:
        kube = k.Kube(api.api_client())
        controller = WarehouseController(kube, parts.discoverer, rand=lambda: 0.0)
        # "Named subscriptions" and the first example (an image and a git repository).
        await kube.create(
            k.WAREHOUSES,
            warehouse(
                "my-warehouse",
                {
                    "subscriptions": [
                        {"name": "frontend", "image": {"repoURL": nginx, "constraint": "^1.26.0"}},
                        {"git": {"repoURL": parts.public(parts.git)}},
                    ]
                },
            ),
        )
        # "Freight creation criteria": only when both images carry the same tag.
        criteria = (
            f"imageFrom('{frontend}').Tag == imageFrom('{backend}').Tag"  # the guide's expression
        )
        await kube.create(
            k.WAREHOUSES,
            warehouse(
                "criteria",
                {
                    "freightCreationPolicy": "Automatic",
                    "subscriptions": [
                        {"image": {"repoURL": frontend}},
                        {"image": {"repoURL": backend}},
                    ],
                    "freightCreationCriteria": {"expression": criteria},
                },
            ),
        )
        tasks = [
            asyncio.create_task(controller.run_informer()),
            asyncio.create_task(controller.lead()),
        ]
        try:

            async def freight_of(origin: str) -> list[dict[str, Any]]:
                items, _ = await kube.list(k.FREIGHT, "kargo-demo")
                return [f for f in items if f["origin"]["name"] == origin]

            async def some_freight_of(origin: str) -> list[dict[str, Any]] | None:
                return (await freight_of(origin)) or None

            async def conditions(name: str) -> dict[str, str] | None:
                obj = await kube.get(k.WAREHOUSES, "kargo-demo", name)
                found = {c["type"]: c["status"] for c in obj["status"].get("conditions") or ()}
                return found or None

            (made,) = await eventually(lambda: some_freight_of("my-warehouse"), "its Freight")
            assert made["images"] == [
                {
                    "repoURL": nginx,
                    "tag": "1.27.1",
                    "digest": parts.digests["1.27.1"],
                    "subscriptionName": "frontend",
                }
            ]
            assert made["commits"][0]["id"] == parts.commits["docs"]

            async def unsatisfied() -> dict[str, str] | None:
                found = await conditions("criteria")
                return found if found and "FreightCreationCriteriaSatisfied" in found else None

            status = await eventually(unsatisfied, "the criteria evaluated")
            assert status["FreightCreationCriteriaSatisfied"] == "False"
            assert await freight_of("criteria") == []
            await registry.push_image("example/backend", "1.1.0")
            await kube.patch(
                k.WAREHOUSES,
                "kargo-demo",
                "criteria",
                {"metadata": {"annotations": {"kargo.akuity.io/refresh": "1"}}},
            )
            (both,) = await eventually(lambda: some_freight_of("criteria"), "matched Freight")
            assert sorted(i["tag"] for i in both["images"]) == ["1.1.0", "1.1.0"]
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await kube.close()


async def test_the_expression_filter_examples_select_as_kargo_documents(
    tmp_path: Path, parts: Parts
) -> None:
    git = make_remote(tmp_path / "filters", files={"README.md": "x\n"})
    git._clock = int(dt.datetime(2025, 2, 1, tzinfo=dt.UTC).timestamp())  # after 2025-01-01
    john, bot = ("John Doe", "john@example.com"), ("Example Bot", "bot@example.com")
    feat = git.commit_files("main", {"api.py": "1\n"}, "feat: add the API", author=john)
    ignored = git.commit_files("main", {"x": "1\n"}, "chore: bump [kargo-ignore]", author=bot)
    typo = git.commit_files("main", {"README.md": "y\n"}, "docs: typo")
    git.tag("v1.0.0", feat)
    git.tag("v1.1.0-alpha", ignored)
    git.tag("v1.1.0", typo)
    url = parts.public(git)

    async def newest(strategy: str, expression: str) -> dict[str, Any]:
        found = await parts.discover(
            {
                "git": {
                    "repoURL": url,
                    "commitSelectionStrategy": strategy,
                    "expressionFilter": expression,
                }
            }
        )
        commits: list[dict[str, Any]] = found["git"][0]["commits"]
        return commits[0]

    # The guide's NewestFromBranch examples.
    assert (await newest("NewestFromBranch", "!(author contains '<bot@example.com>')"))[
        "id"
    ] == typo
    assert (
        await newest("NewestFromBranch", "subject contains 'feat:' || subject contains 'fix:'")
    )["id"] == feat
    example = "!(author == 'Example Bot') && commitDate.After(date('2025-01-01'))"
    assert (await newest("NewestFromBranch", example))["id"] == typo
    assert (await newest("NewestFromBranch", "!(subject contains '[kargo-ignore]')"))["id"] == typo
    # The tag-based ones.
    assert (await newest("SemVer", "author == 'John Doe <john@example.com>'"))["tag"] == "v1.0.0"
    assert (await newest("NewestTag", "creatorDate.Year() >= 2024"))["tag"] == "v1.1.0"
    assert (await newest("Lexical", "!(committer contains '<bot@example.com>')"))[
        "tag"
    ] == "v1.1.0-alpha"
    example = "creatorDate.After(date('2024-01-01')) && !(tag contains 'alpha')"
    assert (await newest("SemVer", example))["tag"] == "v1.1.0"
    # An expression that is no boolean fails discovery, naming the field.
    with pytest.raises(ValueError, match="expressionFilter"):
        await newest("SemVer", "tag")
