"""Issue #39, done when: every place a promotion is proposed or reported says what it changes.

The whole server (``create_app``) runs against the API server emulator, the fake GitHub (its
compare and commit-pulls endpoints held to GitHub's OpenAPI description) and the fake Slack.
``staging`` runs Freight ``old-otter``: the repository's first commit, and an image whose OCI
labels name that commit. A pull request is merged; Freight ``new-newt`` carries its merge commit
and an image labelled with it. What ``new-newt`` brings (the commits between, the merged pull
request) is then shown in the Slack announcement, ``/promote diff`` and ``/diff``, the Slack
confirmation, the PR reply, the ``promote:`` check run, the Slack live message and the Freight
page, from one compare request.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from app.controller import kube as k
from promoter.resources import annotations as ann
from promoter.warehouses.selection import REVISION_LABEL, SOURCE_LABEL
from tests.support import objects
from tests.support.chatserver import comment_reply, running_chat_server
from tests.support.clock import FakeClock
from tests.support.controller import wait_for_object, wait_terminal
from tests.support.github import FakeGitHub, running_fake_github
from tests.support.gitrepo import make_remote
from tests.support.kube import running_apiserver
from tests.support.slack import FakeSlack, block_kit_errors, running_fake_slack, slash
from tests.support.waiting import eventually

NS = "shop"
REPO = "example/app"
CHANNEL = "C0DEPLOY"
STEPS = [{"uses": "compose-output", "as": "out", "config": {"stage": "${{ ctx.stage }}"}}]


@dataclass
class World:
    kube: k.Kube
    github: FakeGitHub
    slack: FakeSlack
    http: TestClient[Any, Any]
    clock: FakeClock
    pr: int
    initial: str  # the commit staging runs
    head: str  # the pull request's merge commit, in new-newt
    answers: int = 0

    @property
    def repo_url(self) -> str:
        return f"{self.github.url}/{REPO}"

    def release(self, alias: str, sha: str, version: str) -> dict[str, Any]:
        """A Freight of the commit and of an image whose OCI labels name it as its source."""
        labels = {SOURCE_LABEL: self.repo_url, REVISION_LABEL: sha}
        return objects.freight(
            f"{alias[:3]}{sha[:37]}",
            namespace=NS,
            alias=alias,
            warehouse="app",
            commits=[{"repoURL": self.repo_url, "id": sha, "branch": "main"}],
            images=[{"repoURL": "ghcr.io/example/app", "tag": version, "annotations": labels}],
        )

    async def comment(self, body: str) -> str:
        """A comment on the pull request; the id of the bot's first reply to it."""
        return str((await comment_reply(self.http, self.github, REPO, self.pr, body))["id"])

    def body(self, comment_id: str) -> str:
        found = [c for c in self.github.comments(REPO, self.pr) if str(c["id"]) == comment_id]
        return str(found[0]["body"])

    async def slack_command(self, text: str) -> str:
        self.answers += 1
        return await slash(self.http, self.slack, text, user="U0ALICE", answer=f"a{self.answers}")

    def shows_the_change(self, text: str) -> bool:
        """Both ranges' commits (git and the image's source: one range), the merged PR."""
        return (
            f"{self.initial[:7]}" in text
            and f"{self.head[:7]}" in text
            and "2 new commits" in text
            and "Add the feature" in text
            and "#1" in text
        )


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    clock = FakeClock()
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(
            running_apiserver(namespaces=[NS], bookmark_interval=0.2, clock=clock.now)
        )
        github = await stack.enter_async_context(running_fake_github())
        slack = await stack.enter_async_context(running_fake_slack())
        git = make_remote(tmp_path, {"main.go": "package main\n"}, name="app")
        github.add_repo(REPO, git)
        github.set_permission(REPO, "alice", "write")
        initial = git.head("main")
        assert initial is not None
        git.git("update-ref", "refs/heads/feature", initial)
        git.commit_files("feature", {"main.go": "package main // v2\n"}, "Add the feature")
        pull = await github.open_pull(REPO, "feature", "main", title="Add the feature")
        merged = await github.merge(REPO, pull["number"])
        kube = k.Kube(server.api_client())
        staging = objects.stage(
            "staging",
            namespace=NS,
            warehouse="app",
            steps=STEPS,
            annotations={
                ann.SLACK_CHANNEL: CHANNEL,
                ann.SLACK_CONFIRM: "true",
                ann.SLACK_PROMOTERS: "U0ALICE",
                ann.GITHUB_PROMOTERS: "alice",
            },
        )
        await kube.create(k.STAGES, staging)
        http = await stack.enter_async_context(
            running_chat_server(
                server,
                github,
                slack,
                project=NS,
                work=tmp_path / "work",
                clock=clock,
                LONGSHOREMAN_SLACK_UPDATE_INTERVAL="0.05",
            )
        )
        world = World(
            kube,
            github,
            slack,
            http,
            clock,
            int(pull["number"]),
            initial,
            merged["merge_commit_sha"],
        )
        try:
            yield world
        finally:
            await kube.close()
            assert github.contract_problems == []


async def test_a_new_commit_and_image_show_their_commits_and_pull_requests_everywhere(
    world: World,
) -> None:
    # staging runs old-otter.
    await world.kube.create(k.FREIGHT, world.release("old-otter", world.initial, "1.0.0"))
    await world.comment("/promote old-otter to staging")

    async def landed() -> list[dict[str, Any]] | None:
        items, _ = await world.kube.list(k.PROMOTIONS, NS)
        return items or None

    (first,) = await eventually(landed, "the Promotion of old-otter")
    await wait_terminal(world.kube, NS, first["metadata"]["name"])
    await wait_for_object(
        world.kube,
        k.STAGES,
        NS,
        "staging",
        lambda s: bool((s.get("status") or {}).get("freightHistory")),
    )

    world.clock.advance(60)  # a minute later: new-newt is the newer Freight
    new = world.release("new-newt", world.head, "1.1.0")
    await world.kube.create(k.FREIGHT, new)

    # The announcement of new-newt in staging's channel.
    def announced() -> Any:
        return next(
            (
                m
                for m in world.slack.channel(CHANNEL)
                if "new-newt" in m.text and "available" in m.text
            ),
            None,
        )

    message = await world.slack.wait_for(announced, what="the announcement of new-newt")
    assert world.shows_the_change(json.dumps(message.blocks)), message.blocks
    assert block_kit_errors(list(message.blocks)) == []

    # /promote diff in Slack, /diff in a comment.
    said = await world.slack_command("diff new-newt staging")
    assert world.shows_the_change(said), said
    reply = world.body(await world.comment("/diff new-newt to staging"))
    assert world.shows_the_change(reply), reply

    # The Freight page, before it is promoted.
    page = await world.http.get(f"/ui/freight/{NS}/new-newt")
    assert page.status == 200
    html = await page.text()
    changes = html.split('<section id="changes">', 1)[1].split("</section>", 1)[0]
    assert world.shows_the_change(changes), changes
    assert f"/compare/{world.initial}...{world.head}" in changes

    # Slack's confirmation before promoting.
    world.answers += 1
    answer = f"a{world.answers}"
    await slash(world.http, world.slack, "new-newt to staging", user="U0ALICE", answer=answer)
    prompt = world.slack.responses[answer][0]
    assert "Confirm" in json.dumps(prompt["blocks"])
    assert world.shows_the_change(json.dumps(prompt["blocks"])), prompt
    assert block_kit_errors(prompt["blocks"]) == []

    # Promoted from the pull request: the reply, the check run, the live message.
    reply_id = await world.comment("/promote new-newt to staging")

    async def promoted() -> dict[str, Any] | None:
        items, _ = await world.kube.list(k.PROMOTIONS, NS)
        return next((p for p in items if p["spec"]["freight"] == new["metadata"]["name"]), None)

    promotion = await eventually(promoted, "the Promotion of new-newt")
    await wait_terminal(world.kube, NS, promotion["metadata"]["name"])

    async def reply_shows() -> str | None:
        body = world.body(reply_id)
        return body if "Succeeded" in body and world.shows_the_change(body) else None

    await eventually(reply_shows, "the PR reply to show the change")

    async def run_shows() -> dict[str, Any] | None:
        runs = [r for r in world.github.check_runs(REPO) if r["name"] == "promote: staging"]
        summaries = [str((r.get("output") or {}).get("summary")) for r in runs]
        return next(
            (
                r
                for r, s in zip(runs, summaries, strict=True)
                if "new-newt" in s and world.shows_the_change(s)
            ),
            None,
        )

    await eventually(run_shows, "the promote: check run to show the change")

    def live() -> Any:
        for m in world.slack.channel(CHANNEL):
            payload = (m.metadata or {}).get("event_payload") or {}
            if payload.get("promotion") == promotion["metadata"]["name"]:
                return m if world.shows_the_change(json.dumps(m.blocks)) else None
        return None

    message = await world.slack.wait_for(live, what="the live message to show the change")
    assert block_kit_errors(list(message.blocks)) == []

    # One compare for the one range, whichever surface and artifact showed it.
    assert len(world.github.requests("GET", f"/repos/{REPO}/compare/")) == 1
