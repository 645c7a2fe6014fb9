"""Both chat front ends on a real controller, defined once: where whole-bot chat tests start.

:func:`running_chat_cluster` runs everything but GitHub and Slack for real: the Kubernetes API
server emulator, the controller on it, and the chat front ends reaching it through the real
cluster port (``app.controller.promotions.ClusterPromotions``). GitHub is the fake GitHub with a
repository of real git (:mod:`tests.support.github_env`, its webhooks signed), Slack the fake
Slack Web API with the bot's Slack app served at ``client`` (slash commands signed as Slack signs
them, :func:`tests.support.slack.slash`). The test creates its objects once it has the cluster:
the controller's informers see them as a user's writes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient

from app.controller import kube as k
from app.controller.promotions import ClusterPromotions
from app.controller.reconciler import Controller
from slack.app import setup_slack
from tests.support.controller import running_controller
from tests.support.github_env import GitHubEnv, running_github_env
from tests.support.kube import running_apiserver
from tests.support.slack import FakeSlack, running_fake_slack

# Mounts more of the server beside Slack's routes (the status pages...), given the controller.
Mount = Callable[[web.Application, Controller], None]


@dataclass
class ChatCluster:
    kube: k.Kube
    controller: Controller
    github: GitHubEnv
    slack: FakeSlack
    client: TestClient[Any, Any]  # the app with Slack's routes and whatever ``mount`` added


@asynccontextmanager
async def running_chat_cluster(
    tmp_path: Path,
    aiohttp_client: Any,
    namespace: str,
    *,
    mount: Mount | None = None,
) -> AsyncIterator[ChatCluster]:
    """The cluster with ``namespace``, the controller, GitHub (``LONGSHOREMAN_GITHUB_PROJECT`` is
    ``namespace``) and Slack (its project too) over the real cluster port."""
    async with (
        running_fake_slack() as slack,
        running_apiserver(namespaces=[namespace], bookmark_interval=0.2) as server,
    ):
        kube = k.Kube(server.api_client())
        async with running_controller(server, tmp_path / "work") as controller:
            service = ClusterPromotions(kube, controller)
            async with running_github_env(
                tmp_path,
                service=service,
                bot_settings={"LONGSHOREMAN_GITHUB_PROJECT": namespace},  # type: ignore[arg-type]
            ) as github:
                app = web.Application()
                setup_slack(app, slack.settings(namespace), service)
                if mount is not None:
                    mount(app, controller)
                client = await aiohttp_client(app)
                try:
                    yield ChatCluster(kube, controller, github, slack, client)
                finally:
                    await client.close()
