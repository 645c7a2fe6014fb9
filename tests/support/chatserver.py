"""The whole server with both chat front ends, for end-to-end tests: ``create_app`` against an
API server emulator, the fake GitHub and the fake Slack, one project; and a pull request comment's
round trip (signed ``issue_comment`` webhook in, the bot's reply out)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from app.server import create_app, wait_started
from app.settings import Settings
from handlers.webhook import WEBHOOK_PATH
from promoter.clock import Clock
from tests.support.github import FakeGitHub, webhook_request
from tests.support.kube import RunningApiServer
from tests.support.slack import SIGNING_SECRET, TOKEN, FakeSlack
from tests.support.waiting import eventually

SECRET = "webhook-secret"


@contextlib.asynccontextmanager
async def running_chat_server(
    server: RunningApiServer,
    github: FakeGitHub,
    slack: FakeSlack,
    *,
    project: str,
    work: Path,
    clock: Clock,
    **env: str,
) -> AsyncIterator[TestClient[Any, Any]]:
    """The server on ``project``, its caches synced; ``env`` adds settings."""
    settings = Settings.from_env(
        {
            "KUBECONFIG": str(server.kubeconfig_path),
            "LONGSHOREMAN_WATCH_NAMESPACE": project,
            "LONGSHOREMAN_WORK_DIR": str(work),
            "LONGSHOREMAN_MIN_REQUEUE_SECONDS": "0",
            "LONGSHOREMAN_WAREHOUSE_DISCOVERY": "false",
            "LONGSHOREMAN_GITHUB_APP_ID": str(github.app_id),
            "LONGSHOREMAN_GITHUB_PRIVATE_KEY": github.private_key,
            "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET": SECRET,
            "LONGSHOREMAN_GITHUB_API_URL": github.url,
            "LONGSHOREMAN_GITHUB_PROJECT": project,
            "LONGSHOREMAN_SLACK_BOT_TOKEN": TOKEN,
            "LONGSHOREMAN_SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "LONGSHOREMAN_SLACK_API_URL": slack.url,
            "LONGSHOREMAN_SLACK_PROJECT": project,
            **env,
        }
    )
    async with TestClient(TestServer(create_app(settings, clock=clock))) as http:
        state = await wait_started(http.app)
        assert state.controller is not None
        await asyncio.wait_for(state.controller.wait_synced(), 20)
        yield http


async def comment_reply(
    http: TestClient[Any, Any],
    github: FakeGitHub,
    repo: str,
    number: int,
    body: str,
    *,
    user: str = "alice",
) -> dict[str, Any]:
    """``body`` commented on issue or pull request ``number`` by ``user``; the bot's first
    reply to it."""
    comment = github.add_comment(repo, number, body, user=user)
    headers, raw = webhook_request("issue_comment", github.comment_payload(repo, comment), SECRET)
    response = await http.post(WEBHOOK_PATH, data=raw, headers=headers)
    assert response.status == 202, await response.text()

    async def replied() -> dict[str, Any] | None:
        return next(
            (
                c
                for c in github.comments(repo, number)
                if c["user"]["type"] == "Bot" and c["id"] > comment["id"]
            ),
            None,
        )

    return await eventually(replied, f"the reply to {body!r}")
