"""Issue #36, done when: one server, one Slack app, one GitHub App, three projects, two mapped
to channels by their namespaces' annotations and one not; a repository that is team-b's.

Everything real except Slack and GitHub: the controller runs against the API server emulator,
the Slack integration is reached with requests signed as Slack signs them and talks to the fake
Slack Web API over HTTP, and GitHub's webhooks arrive signed from the fake GitHub. Which project
a command acts on is decided from where it was typed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from app.controller import kube as k
from app.controller.promotions import ClusterPromotions
from app.controller.reconciler import Controller
from promoter.resources import annotations as ann
from slack.app import setup_slack
from slack.settings import SlackSettings
from tests.support import objects
from tests.support.controller import running_controller, wait_for_object
from tests.support.github_env import GitHubEnv, running_github_env
from tests.support.kube import running_apiserver
from tests.support.slack import (
    SIGNING_SECRET,
    TOKEN,
    FakeSlack,
    running_fake_slack,
    signed_headers,
    slash_command,
)
from tests.support.waiting import eventually

# team-a and team-b name their channels; team-c is a project no channel names.
CHANNELS = {"team-a": "C0TEAMA", "team-b": "C0TEAMB", "team-c": ""}
# Who may promote, per project (its namespace's slack-promoters; team-c lists nobody: anyone).
PROMOTERS = {"team-a": "U0ALICE", "team-b": "U0BOB", "team-c": ""}
UNMAPPED = "C0LOBBY"
REPO = "acme/app"
FREIGHT = "1a2b3c4d5e6f"


@dataclass
class World:
    kube: k.Kube
    controller: Controller
    slack: FakeSlack
    client: TestClient[Any, Any]
    github: GitHubEnv

    async def command(self, text: str, channel: str, answer: str, user: str = "U0ALICE") -> str:
        """Type ``/promote text`` in ``channel``; the first ephemeral answer's text."""
        body = slash_command(
            text, user=user, channel=channel, response_url=self.slack.response_url(answer)
        )
        response = await self.client.post("/slack/events", data=body, headers=signed_headers(body))
        assert response.status == 200
        await self.slack.wait_for(lambda: self.slack.responses[answer], what=answer)
        said: str = self.slack.responses[answer][0]["text"]
        return said

    async def promotions(self, ns: str) -> list[dict[str, Any]]:
        items, _ = await self.kube.list(k.PROMOTIONS, ns)
        return items


@pytest.fixture
async def world(tmp_path: Path, aiohttp_client: Any) -> AsyncIterator[World]:
    async with (
        running_fake_slack() as slack,
        running_apiserver(namespaces=list(CHANNELS), bookmark_interval=0.2) as server,
    ):
        kube = k.Kube(server.api_client())
        for ns, channel in CHANNELS.items():
            metadata: dict[str, Any] = {"labels": {"kargo.akuity.io/project": "true"}}
            annotations = {
                ann.PROJECT_SLACK_CHANNELS: channel,
                ann.SLACK_PROMOTERS: PROMOTERS[ns],
                # The GitHub repository is team-b's; the operator's default project is team-a.
                ann.PROJECT_GITHUB_REPOSITORIES: REPO if ns == "team-b" else "",
            }
            metadata["annotations"] = {k: v for k, v in annotations.items() if v}
            await kube.patch(k.NAMESPACES, None, ns, {"metadata": metadata})
            await kube.create(
                k.STAGES,
                objects.stage(
                    "test",
                    namespace=ns,
                    # team-a's and team-b's Stages name no channel: their project's is used.
                    annotations=None if channel else {ann.SLACK_CHANNEL: UNMAPPED},
                    steps=[{"uses": "compose-output", "as": "out", "config": {"x": "1"}}],
                ),
            )
            await kube.create(k.FREIGHT, objects.freight(FREIGHT, namespace=ns, alias="first"))
        async with running_controller(server, tmp_path / "work") as controller:
            settings = SlackSettings(
                bot_token=TOKEN,
                signing_secret=SIGNING_SECRET,
                api_url=slack.url,
                update_interval=0.05,
                verify_poll=0.1,
                verify_window=2,
            )
            app = web.Application()
            service = ClusterPromotions(kube, controller)
            integration = setup_slack(app, settings, service)
            controller.listeners.append(integration.on_promotion)
            controller.freight_listeners.append(integration.on_freight)

            async def projects_known() -> bool | None:
                return len(controller.served.projects()) == 3 or None

            await eventually(projects_known, "the three projects in the namespace informer")
            client = await aiohttp_client(app)
            async with running_github_env(
                tmp_path,
                repo=REPO,
                service=service,  # type: ignore[arg-type]
                bot_settings={"LONGSHOREMAN_GITHUB_PROJECT": "team-a"},
            ) as github:
                github.fake.set_permission(REPO, "alice", "write")
                await github.open_pull("feature", {"main.go": "package main // 2\n"})
                yield World(kube, controller, slack, client, github)
            controller.listeners.clear()
            controller.freight_listeners.clear()
            await client.close()


async def test_a_command_acts_on_the_project_of_the_channel_it_was_typed_in(world: World) -> None:
    for ns in ("team-a", "team-b"):
        said = await world.command("latest to test", CHANNELS[ns], f"promote-{ns}", PROMOTERS[ns])
        assert "created" in said, said
        [promotion] = await world.promotions(ns)
        assert promotion["spec"]["stage"] == "test"
        await wait_for_object(
            world.kube,
            k.PROMOTIONS,
            ns,
            promotion["metadata"]["name"],
            lambda p: (p.get("status") or {}).get("phase") == "Succeeded",
        )

        def live(channel: str = CHANNELS[ns]) -> bool | None:
            return any("Succeeded" in m.text for m in world.slack.channel(channel)) or None

        await world.slack.wait_for(live, within=20, what=f"the live message in {ns}'s channel")
    assert await world.promotions("team-c") == []


async def test_a_channel_no_project_names_lists_the_projects_and_how_to_map_it(
    world: World,
) -> None:
    said = await world.command("status", UNMAPPED, "status-lobby")
    assert "No project is mapped to this channel" in said
    for ns in CHANNELS:
        assert f"`{ns}`" in said
    assert f"longshoreman.dev/slack-channels={UNMAPPED}" in said
    for ns in CHANNELS:
        assert await world.promotions(ns) == []


async def test_an_ambiguous_name_lists_the_candidates_and_a_qualified_one_works_anywhere(
    world: World,
) -> None:
    said = await world.command("latest to test", UNMAPPED, "ambiguous")
    assert "several projects" in said and "Nothing was changed" in said, said
    for ns in CHANNELS:
        assert f"`{ns}/test`" in said
        assert await world.promotions(ns) == []

    said = await world.command("latest to nowhere", UNMAPPED, "unknown")
    assert "no Stage `nowhere` in the projects searched" in said, said
    assert all(f"`{ns}`" in said for ns in CHANNELS)

    # Qualified: from a channel that is not the project's, and from one no project names.
    said = await world.command("latest to team-c/test", CHANNELS["team-a"], "qualified")
    assert "created" in said, said
    assert len(await world.promotions("team-c")) == 1
    assert await world.promotions("team-a") == []
    said = await world.command("latest to team-b/test", UNMAPPED, "qualified-lobby", "U0BOB")
    assert "created" in said, said
    assert len(await world.promotions("team-b")) == 1


async def test_a_user_who_may_promote_in_one_project_is_refused_in_another(world: World) -> None:
    said = await world.command("latest to test", CHANNELS["team-a"], "alice-in-a")
    assert "created" in said, said
    said = await world.command("latest to test", CHANNELS["team-b"], "alice-in-b")
    assert "may not act on Stage test in project team-b" in said, said
    assert "Nothing was changed" in said
    assert await world.promotions("team-b") == []


async def test_new_freight_is_announced_only_in_its_projects_channel(world: World) -> None:
    for ns in ("team-a", "team-b"):
        await world.kube.create(
            k.FREIGHT, objects.freight("9f8e7d6c5b4a", namespace=ns, alias=f"{ns}-news")
        )
    for ns in ("team-a", "team-b"):

        def told(channel: str = CHANNELS[ns], alias: str = f"{ns}-news") -> bool | None:
            return any(alias in m.text for m in world.slack.channel(channel)) or None

        await world.slack.wait_for(told, within=20, what=f"the announcement in {ns}'s channel")
    texts = {ns: " ".join(m.text for m in world.slack.channel(CHANNELS[ns])) for ns in CHANNELS}
    assert "team-b-news" not in texts["team-a"]
    assert "team-a-news" not in texts["team-b"]
    assert not any("news" in m.text for m in world.slack.channel(UNMAPPED))


async def test_a_pull_request_comment_in_a_repository_of_team_b_acts_in_team_b(
    world: World,
) -> None:
    replies = await world.github.comment("/promote latest to test")
    assert len(replies) == 1 and "test." in replies[0]["body"], replies
    [promotion] = await world.promotions("team-b")
    assert promotion["spec"]["stage"] == "test"
    assert await world.promotions("team-a") == []


async def test_on_github_a_qualified_name_reaches_only_the_repositorys_projects(
    world: World,
) -> None:
    replies = await world.github.comment("/promote latest to team-b/test")
    assert "test." in replies[0]["body"], replies
    assert len(await world.promotions("team-b")) == 1
    replies = await world.github.comment("/promote latest to team-a/test")
    assert "there is no project `team-a` here" in replies[0]["body"], replies
    assert await world.promotions("team-a") == []


async def test_subscribing_to_a_repository_does_not_let_its_writers_act_on_the_project(
    world: World,
) -> None:
    """team-c deploys acme/app (a Warehouse subscribes to it) but does not name it: alice, who
    may write to acme/app, still reaches only team-b from there (issue 34, finding 4)."""
    subscription = {"git": {"repoURL": f"https://github.com/{REPO}.git", "branch": "main"}}
    await world.kube.create(
        k.WAREHOUSES, objects.warehouse(namespace="team-c", subscriptions=[subscription])
    )

    async def cached() -> bool | None:
        return (
            world.controller.caches.warehouses.get("team-c", objects.WAREHOUSE) is not None or None
        )

    await eventually(cached, "team-c's Warehouse in the controller's cache")
    replies = await world.github.comment("/promote latest to team-c/test")
    assert "there is no project `team-c` here" in replies[0]["body"], replies
    replies = await world.github.comment("/promote latest to test")
    assert "test." in replies[0]["body"], replies
    assert len(await world.promotions("team-b")) == 1
    assert await world.promotions("team-c") == []


async def test_a_qualified_freeze_acts_on_the_named_projects_stage_from_anywhere(
    world: World,
) -> None:
    """`/freeze team-b/test` from team-a's channel freezes team-b's Stage for team-b's promoter,
    and is refused for someone who may not act there; `/unfreeze team-b/test` lifts it."""
    said = await world.command(
        'freeze team-b/test for 2h "incident 4711"', CHANNELS["team-a"], "freeze-b", "U0BOB"
    )
    assert "frozen" in said and "incident 4711" in said, said
    stage = await world.kube.get(k.STAGES, "team-b", "test")
    assert "incident 4711" in stage["metadata"]["annotations"][ann.FREEZE]
    untouched = await world.kube.get(k.STAGES, "team-a", "test")
    assert ann.FREEZE not in (untouched["metadata"].get("annotations") or {})

    said = await world.command("unfreeze team-b/test", UNMAPPED, "unfreeze-alice")
    assert "may not" in said and "team-b" in said, said
    said = await world.command("unfreeze team-b/test", UNMAPPED, "unfreeze-bob", "U0BOB")
    assert "unfrozen" in said, said
    stage = await world.kube.get(k.STAGES, "team-b", "test")
    assert ann.FREEZE not in (stage["metadata"].get("annotations") or {})

    # On GitHub, where a repository reaches only its own projects.
    [reply] = await world.github.comment("/freeze team-b/test for 1h")
    assert "frozen" in reply["body"], reply
    [reply] = await world.github.comment("/freeze team-a/test for 1h")
    assert "there is no project `team-a` here" in reply["body"], reply
