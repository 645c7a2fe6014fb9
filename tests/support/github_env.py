"""What every GitHub test starts from, defined once (as :mod:`tests.support.controller`'s
``Cluster`` is for the controller tests): :func:`running_github_env` gives a :class:`GitHubEnv`.

Always: the fake GitHub (:mod:`tests.support.github`) serving one repository of real git, and
a :class:`~tests.support.telemetry.RecordingTelemetry`. As the test asks:

- ``client=policy``: an App client of its own (``env.client``) on a clock the test moves past
  token expiry with ``env.skew`` (seconds), for the client, git-credential and step tests;
- ``service=FakePromotions(...)``: the whole bot, ``setup_github`` over that port
  (:mod:`tests.support.promotions`) served over HTTP (``env.integration``, ``env.http``), its
  settings the fake's own plus ``bot_settings`` (``LONGSHOREMAN_GITHUB_PROJECT``...); with
  ``deliver_webhooks`` the fake sends the webhooks its users' actions (and our own writes) cause
  back to it, as GitHub does.

The bot's side is driven as the cluster and GitHub would drive it: :meth:`GitHubEnv.send` and
:meth:`~GitHubEnv.deliver` post signed webhooks, :meth:`~GitHubEnv.comment` comments on a pull
request and returns the bot's replies, :meth:`~GitHubEnv.change` is the controller's listener
call for a Promotion's new state, :meth:`~GitHubEnv.restarted` another replica (or a restart)
over the same settings and port. :meth:`~GitHubEnv.open_pull` makes a pull request of real
commits.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from handlers.client import GitHubClient, RetryPolicy
from handlers.webhook import WEBHOOK_PATH, GitHubIntegration, setup_github
from promoter.clock import SYSTEM, Clock
from tests.support.github import FakeGitHub, running_fake_github, webhook_request
from tests.support.gitrepo import RemoteRepo, make_remote
from tests.support.promotions import FakePromotions
from tests.support.telemetry import RecordingTelemetry

SECRET = "webhook-secret"
# The bot retries quickly in tests: a fault the fake injects costs milliseconds.
BOT_POLICY = RetryPolicy(backoff=0.01, max_wait=0.5)
# How long a test waits for the bot's queue to drain before it fails (never slept).
SETTLE_WITHIN = 10.0


@dataclass
class GitHubEnv:
    fake: FakeGitHub
    repo: str  # "owner/name", served by the fake from ``git``
    git: RemoteRepo
    tmp: Path
    sha: str  # main's head when the Env was made
    telemetry: RecordingTelemetry
    skew: float = 0.0  # seconds added to the App client's clock
    # The bot's clock (running_github_env(clock=...)): a FakeClock the test moves, or the system's.
    clock: Clock = SYSTEM
    # The pull requests the test opened with open_pull, by head branch, in order.
    pulls: dict[str, int] = field(default_factory=dict)
    # The comment the last comment() posted.
    last: dict[str, Any] = field(default_factory=dict)
    _client: GitHubClient | None = None
    _service: FakePromotions | None = None
    _integration: GitHubIntegration | None = None
    _http: TestClient[Any, Any] | None = None

    # ---- what the test asked for --------------------------------------------------------------

    @property
    def client(self) -> GitHubClient:
        assert self._client is not None, "running_github_env(client=...) makes the App client"
        return self._client

    @property
    def service(self) -> FakePromotions:
        assert self._service is not None, "running_github_env(service=...) serves the bot"
        return self._service

    @property
    def integration(self) -> GitHubIntegration:
        assert self._integration is not None, "running_github_env(service=...) serves the bot"
        return self._integration

    @property
    def http(self) -> TestClient[Any, Any]:
        assert self._http is not None, "running_github_env(service=...) serves the bot"
        return self._http

    @property
    def git_url(self) -> str:
        """The repository's smart-HTTP clone URL on the fake."""
        return self.fake.git_url(self.repo)

    @property
    def pr(self) -> int:
        """The first pull request the test opened (what :meth:`comment` comments on)."""
        assert self.pulls, "open_pull() first"
        return next(iter(self.pulls.values()))

    def head(self, branch: str = "main") -> str:
        sha = self.git.head(branch)
        assert sha is not None, f"no branch {branch!r}"
        return sha

    # ---- the repository -----------------------------------------------------------------------

    async def open_pull(
        self,
        head: str,
        files: Mapping[str, str],
        *,
        message: str = "change",
        title: str = "change",
        base: str = "main",
        merge: bool = False,
    ) -> dict[str, Any]:
        """Branch ``head`` off ``base``'s head, commit ``files`` there and open a pull request
        (merged at once with ``merge``); recorded in :attr:`pulls`. Returns GitHub's pull."""
        self.git.git("update-ref", f"refs/heads/{head}", self.head(base))
        self.git.commit_files(head, files, message)
        pull = await self.fake.open_pull(self.repo, head, base, title=title)
        self.pulls[head] = pull["number"]
        if merge:
            pull = await self.fake.merge(self.repo, pull["number"])
        return pull

    # ---- the bot ------------------------------------------------------------------------------

    async def settle(self, integration: GitHubIntegration | None = None) -> None:
        """Wait until the bot's queue has done everything it was handed."""
        await asyncio.wait_for((integration or self.integration).queue.join(), SETTLE_WITHIN)

    async def send(
        self,
        event: str,
        payload: dict[str, Any] | bytes,
        *,
        secret: str | None = SECRET,
        delivery: str | None = None,
        signature: str | None = None,
        content_type: str | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """POST a webhook signed as GitHub signs it; the bot's answer (status, JSON body)."""
        headers, body = webhook_request(
            event, payload, secret, delivery=delivery, signature=signature
        )
        if content_type is not None:
            headers["content-type"] = content_type
        response = await self.http.post(WEBHOOK_PATH, data=body, headers=headers)
        return response.status, await response.json()

    async def deliver(self, event: str, payload: dict[str, Any]) -> None:
        """A webhook the bot accepts (202), and everything it causes done."""
        status, body = await self.send(event, payload)
        assert status == 202, body
        await self.settle()

    async def comment(
        self, body: str, *, user: str = "alice", on: int | None = None, action: str = "created"
    ) -> list[dict[str, Any]]:
        """Comment as ``user`` on pull request ``on`` (the first one opened when not given),
        deliver the webhook and return the bot's replies."""
        number = self.pr if on is None else on
        before = {c["id"] for c in self.fake.comments(self.repo, number)}
        comment = self.fake.add_comment(self.repo, number, body, user=user)
        payload = self.fake.comment_payload(self.repo, comment, action=action)
        await self.deliver("issue_comment", payload)
        self.last = comment
        return [
            c
            for c in self.fake.comments(self.repo, number)
            if c["id"] not in before and c["id"] != comment["id"]
        ]

    async def change(
        self,
        new: dict[str, Any],
        old: dict[str, Any] | None = None,
        integration: GitHubIntegration | None = None,
    ) -> None:
        """The controller's listener call for a Promotion's new state: stored in the port first
        (annotations kept as the cluster keeps them), handed to the bot as a copy."""
        integration = integration or self.integration
        self.service.put(new)
        integration.on_promotion(copy.deepcopy(new), old)
        await self.settle(integration)

    @asynccontextmanager
    async def restarted(self) -> AsyncIterator[GitHubIntegration]:
        """Another replica (or this one restarted): the same settings and port, nothing in
        memory."""
        integration = setup_github(
            web.Application(),
            self.integration.settings,
            self.service,
            policy=RetryPolicy(backoff=0.01),
        )
        await integration.client.start()
        try:
            yield integration
        finally:
            await integration.client.close()


@asynccontextmanager
async def running_github_env(
    tmp: Path,
    *,
    repo: str = "example/app",
    files: Mapping[str, str] | None = None,
    git_name: str = "app",
    git: RemoteRepo | None = None,
    client: RetryPolicy | None = None,
    service: FakePromotions | None = None,
    bot_settings: Mapping[str, str] | None = None,
    deliver_webhooks: bool = False,
    clock: Clock = SYSTEM,
) -> AsyncIterator[GitHubEnv]:
    """The fake GitHub with ``repo`` holding ``files`` on main (a main.go when not given) in a
    bare repository named ``git_name`` (or ``git``, an existing one: a property test's examples
    share one, as git init is the slow part); an App client with policy ``client``; the bot over
    ``service`` (see the module's docstring)."""
    async with running_fake_github() as fake:
        if git is None:
            git = make_remote(tmp, dict(files or {"main.go": "package main\n"}), name=git_name)
        fake.add_repo(repo, git)
        sha = git.head("main")
        assert sha is not None
        env = GitHubEnv(fake, repo, git, tmp, sha, RecordingTelemetry(), clock=clock)
        if client is not None:
            env._client = GitHubClient(
                fake.settings(),
                policy=client,
                clock=lambda: time.time() + env.skew,
                telemetry=env.telemetry,
            )
            await env._client.start()
        try:
            if service is None:
                yield env
                return
            app = web.Application()
            env._service = service
            env._integration = setup_github(
                app,
                fake.settings(SECRET, **(bot_settings or {})),
                service,
                policy=BOT_POLICY,
                telemetry=env.telemetry,
                clock=clock,
            )
            async with TestClient(TestServer(app)) as http:
                env._http = http
                if deliver_webhooks:
                    fake.deliver_to(str(http.make_url(WEBHOOK_PATH)), SECRET)
                yield env
        finally:
            if env._client is not None:
                await env._client.close()
