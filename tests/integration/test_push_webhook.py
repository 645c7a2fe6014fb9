"""Push webhooks refresh the Warehouses subscribed to what was pushed (Kargo's receiver); the
fallback that makes Freight of the head commit does so only when discovery would make exactly that
Freight."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from handlers.push import freight_for_push, freight_name, push_refreshes
from tests.support import objects
from tests.support.github import fixture
from tests.support.github_env import GitHubEnv, running_github_env
from tests.support.promotions import FakePromotions

NS = "default"


def warehouse(
    name: str = "hello",
    branch: str = "master",
    url: str | None = None,
    *,
    image: bool = False,
    **git: Any,
) -> dict[str, Any]:
    subscriptions: list[dict[str, Any]] = [{"image": {"repoURL": "nginx"}}] if image else []
    subscriptions.append(
        {
            "git": {
                "repoURL": url or "https://github.com/codertocat/hello-world",
                "branch": branch,
                **git,
            }
        }
    )
    return objects.warehouse(name, namespace=NS, subscriptions=subscriptions)


def test_a_branch_push_makes_one_deterministically_named_freight() -> None:
    push = fixture("push.with-new-branch")
    freight = freight_for_push(warehouse(), push)
    assert freight is not None
    assert freight["origin"] == {"kind": "Warehouse", "name": "hello"}
    assert freight["commits"] == [
        {
            "repoURL": "https://github.com/codertocat/hello-world",
            "id": "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
            "branch": "master",
            "message": "Initial commit",
            "author": "Codertocat",
        }
    ]
    again = freight_for_push(warehouse(url="https://github.com/Codertocat/Hello-World.git"), push)
    assert again is not None and again["metadata"]["name"] == freight["metadata"]["name"]
    other = freight_for_push(warehouse(name="other"), push)
    assert other is not None and other["metadata"]["name"] != freight["metadata"]["name"]
    assert freight["metadata"]["name"] == freight_name(freight["origin"], freight["commits"])


@pytest.mark.parametrize(
    ("payload", "subscription"),
    [
        (fixture("push.with-installation"), warehouse()),  # a tag deletion
        (fixture("push.with-new-branch"), warehouse(branch="main")),  # another branch
        (fixture("push.with-new-branch"), warehouse(url="https://github.com/x/y")),  # another repo
    ],
)
def test_pushes_a_warehouse_does_not_subscribe_to_make_nothing(
    payload: dict[str, Any], subscription: dict[str, Any]
) -> None:
    assert freight_for_push(subscription, payload) is None


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[GitHubEnv]:
    service = FakePromotions(NS)
    service.warehouse_list.append(warehouse(image=True))
    service.warehouse_list.append(warehouse("elsewhere", url="https://github.com/x/y"))
    async with running_github_env(tmp_path, repo="Codertocat/Hello-World", service=service) as env:
        yield env


async def test_the_same_commit_delivered_twice_refreshes_and_makes_no_freight_itself(
    bot: GitHubEnv,
) -> None:
    for _ in range(2):  # two deliveries (different ids) of the same push
        status, _ = await bot.send("push", fixture("push.with-new-branch"))
        assert status == 202
    await bot.settle()
    # The Warehouse discovers with its own strategies; refreshing twice is harmless.
    assert bot.service.asked("refresh-warehouse") == [(NS, "hello"), (NS, "hello")]
    assert bot.service.asked("create-freight") == []


@pytest.mark.parametrize(
    "subscribed",
    [
        warehouse(image=True),  # the Freight must carry the image too
        warehouse(commitSelectionStrategy="SemVer"),  # the newest tag, not the branch head
        warehouse(commitSelectionStrategy="NewestTag"),
        warehouse(includePaths=["apps/"]),  # the head may not touch those paths
    ],
)
def test_a_push_never_makes_freight_the_warehouse_would_not_make(
    subscribed: dict[str, Any],
) -> None:
    assert freight_for_push(subscribed, fixture("push.with-new-branch")) is None


def test_a_push_refreshes_the_warehouses_whose_refs_it_moved() -> None:
    branch_push = fixture("push.with-new-branch")
    assert push_refreshes(warehouse(image=True), branch_push)
    assert not push_refreshes(warehouse(branch="main"), branch_push)
    assert not push_refreshes(warehouse(url="https://github.com/x/y"), branch_push)
    tag_push = {**branch_push, "ref": "refs/tags/v1.2.3"}
    assert push_refreshes(warehouse(commitSelectionStrategy="SemVer"), tag_push)
    assert not push_refreshes(warehouse(), tag_push)
    assert not push_refreshes(warehouse(commitSelectionStrategy="SemVer"), branch_push)


def test_a_push_refreshes_only_subscriptions_whose_paths_and_tag_filters_it_meets() -> None:
    branch_push = fixture("push.with-new-branch")  # its one commit adds README.md
    assert push_refreshes(warehouse(includePaths=["README.md"]), branch_push)
    assert not push_refreshes(warehouse(includePaths=["apps/"]), branch_push)
    assert not push_refreshes(warehouse(excludePaths=["README.md"]), branch_push)
    # GitHub lists at most 2048 commits: beyond that the paths are unknown, so it refreshes.
    many = {**branch_push, "commits": [{"added": ["x"]}] * 2048, "head_commit": None}
    assert push_refreshes(warehouse(includePaths=["apps/"]), many)
    # A tag push refreshes a tag-based subscription only with a tag its filters accept.
    nightly = {**branch_push, "ref": "refs/tags/nightly-20240101"}
    assert not push_refreshes(warehouse(commitSelectionStrategy="SemVer"), nightly)
    assert push_refreshes(warehouse(commitSelectionStrategy="NewestTag"), nightly)
    held = warehouse(commitSelectionStrategy="SemVer", semverConstraint="^2.0.0")
    assert not push_refreshes(held, {**branch_push, "ref": "refs/tags/v1.2.3"})
