"""Issue 34, the front ends: who may act on which project, and text from others on every surface.

Each test drives the bot as GitHub or Slack would (signed webhooks and slash commands against the
fakes in :mod:`tests.support`) and reads what a user sees: the fake's comments, check runs and
Slack messages, and what the cluster port was asked to do.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from app.controller import kube as k
from app.embedded import NAMESPACES
from app.server import create_app, wait_started
from app.settings import Settings
from handlers import checks
from handlers.webhook import MAX_BODY, UNVERIFIED_BUDGET, WEBHOOK_PATH
from promoter.resources import annotations as ann
from promoter.warehouses.project_receivers import project_receivers
from slack.app import EVENTS_PATH, SlackIntegration, setup_slack
from slack.settings import SlackSettings
from tests.support import objects
from tests.support.controller import wait_for_object
from tests.support.github import running_fake_github, sign_in
from tests.support.github_env import GitHubEnv, running_github_env
from tests.support.gitrepo import make_remote
from tests.support.processes import QUIET
from tests.support.promotions import FakePromotions
from tests.support.slack import (
    SIGNING_SECRET,
    TEAM,
    TOKEN,
    FakeSlack,
    SlackMessage,
    running_fake_slack,
    signed_headers,
    slash_command,
)

NS = "kargo-demo"
REPO = "example/app"
STEPS = [{"uses": "git-clone", "as": "clone"}]
PROD = "prod"


def succeeded() -> dict[str, Any]:
    return objects.promotion(
        "staging.0001",
        "staging",
        namespace=NS,
        freight="f" * 40,
        steps=STEPS,
        annotations={},
        phase="Succeeded",
        status={"stepExecutionMetadata": [{"alias": "clone", "status": "Succeeded"}]},
    )


def freight_of(sha: str, alias: str, repo_url: str = "", **extra: Any) -> dict[str, Any]:
    """The one Freight these tests put in NS: ``sha`` of ``repo_url`` (REPO on github.com)."""
    commit = {"repoURL": repo_url or f"https://github.com/{REPO}.git", "id": sha}
    return objects.freight(
        "f" * 40,
        namespace=NS,
        alias=alias,
        warehouse="app",
        commits=[{**commit, "author": "Dana <d@x>"}],
        **extra,
    )


def project(**extra: Any) -> FakePromotions:
    return FakePromotions(
        NS,
        stages=[
            objects.stage("staging", namespace=NS, warehouse="app", steps=STEPS),
            objects.stage(PROD, namespace=NS, warehouse="app", upstream=["staging"], steps=STEPS),
        ],
        **extra,
    )


@pytest.fixture
async def elsewhere(tmp_path: Path) -> AsyncIterator[GitHubEnv]:
    """A repository whose commits are in NS's Freight, mapped to another project."""
    async with running_github_env(
        tmp_path,
        service=project(),
        bot_settings={
            "LONGSHOREMAN_GITHUB_PROJECT": NS,
            "LONGSHOREMAN_GITHUB_REPO_PROJECTS": f"{REPO}=other-project",
        },
    ) as env:
        env.fake.set_permission(REPO, "mallory", "admin")
        await env.open_pull("feature", {"x": "1"}, message="x")
        verified = {"verifiedIn": {"staging": {}}}
        env.service.freight.append(freight_of(env.sha, "frozen-tauntaun", status=verified))
        yield env


# ---- finding 4: a check run acts on the project its repository is mapped to ------------------


async def test_a_check_run_in_a_repository_of_another_project_cannot_promote(
    elsewhere: GitHubEnv,
) -> None:
    env = elsewhere
    await env.change(succeeded(), None)
    [run] = env.fake.check_runs(REPO, env.sha)
    next_stage = checks.next_identifier(PROD)
    assert next_stage in [a["identifier"] for a in run["actions"]]
    await env.deliver(
        "check_run",
        env.fake.check_run_payload(
            REPO,
            run["id"],
            "requested_action",
            sender="mallory",
            identifier=next_stage,
            pull_number=env.pr,
        ),
    )
    assert env.service.actions == []
    said = env.fake.comments(REPO, env.pr)[-1]["body"]
    assert said.startswith("@mallory: refused:") and "acts on project `other-project`" in said
    # A comment in the same repository acts on its own project, where there is no such Stage.
    [reply] = await env.comment(f"/promote frozen-tauntaun to {PROD}", user="mallory")
    assert "no Stage `prod` in project `other-project`" in reply["body"]
    assert env.service.actions == []


# ---- finding 7: text from others is neutralised on every surface ------------------------------

HOSTILE = "push refused by @example/owners <!-- hidden --> [click](https://evil.example) #1"


async def test_text_from_others_neither_mentions_nor_hides_nor_links_on_github(
    tmp_path: Path,
) -> None:
    async with running_github_env(
        tmp_path, service=project(), bot_settings={"LONGSHOREMAN_GITHUB_PROJECT": NS}
    ) as env:
        env.fake.set_permission(REPO, "alice", "write")
        await env.open_pull("feature", {"x": "1"}, message="x")
        env.service.freight.append(freight_of(env.sha, "frozen`@example/owners`"))
        failed = succeeded()
        failed["status"] = {
            "phase": "Failed",
            "message": HOSTILE,
            "stepExecutionMetadata": [{"alias": "clone", "status": "Failed", "message": HOSTILE}],
        }
        await env.change(failed, None)
        [run] = env.fake.check_runs(REPO, env.sha)
        summary = run["output"]["summary"]
        for said in (summary, run["output"]["text"]):
            assert "@example/owners" not in said
        assert "<!--" not in summary and "&lt;!-- hidden --&gt;" in summary
        assert "[click](" not in summary and "\\[click\\]" in summary
        assert "#1" not in summary
        # The alias cannot end its code span early and mention someone outside it.
        assert "`frozen'@\u200bexample/owners'`" in summary


async def test_text_from_others_neither_mentions_nor_links_in_slack() -> None:
    async with running_fake_slack() as slack:
        service = FakePromotions(NS)
        service.add_stage(PROD, {ann.SLACK_CHANNEL: "C0PROD"})
        service.add_freight("7c9e6b1f3a4d", "<!here>")
        settings = SlackSettings(
            bot_token=TOKEN, signing_secret=SIGNING_SECRET, api_url=slack.url, namespace=NS
        )
        integration = SlackIntegration(settings, service)
        await integration.start()
        service.listeners.append(integration.on_promotion)
        try:
            # A Promotion made with kubectl names its own actor: it is shown, never obeyed.
            ref = await service.promote(NS, PROD, "7c9e6b1f3a4d", actor="slack:T1/<!channel>")
            service.set_status(ref.name, phase="Failed", message="<!channel> <https://evil|ok>")

            def failed() -> SlackMessage | None:
                shown = slack.channel("C0PROD")
                return shown[0] if shown and "Failed" in shown[0].text else None

            message: SlackMessage = await slack.wait_for(failed, what="the failed message")
            await integration.idle()
        finally:
            await integration.close()
        said = message.text + json.dumps(message.blocks)
        assert "<!channel>" not in said and "<!here>" not in said and "<https://evil" not in said
        assert "&lt;!channel&gt;" in said and "&lt;https://evil|ok&gt;" in said


# ---- finding 5: self-approval as GitHub knows it, failing closed ------------------------------

CAROL = ("Carol", "carol@example.com")


@pytest.fixture
async def guarded(tmp_path: Path) -> AsyncIterator[GitHubEnv]:
    """prod forbids self-approval; carol, erin and bob may approve; a pull request to talk on."""
    service = FakePromotions(
        NS,
        stages=[
            objects.stage("staging", namespace=NS, warehouse="app", steps=STEPS),
            objects.stage(
                PROD,
                namespace=NS,
                warehouse="app",
                upstream=["staging"],
                steps=STEPS,
                annotations={ann.SELF_APPROVAL: "false"},
            ),
        ],
    )
    async with running_github_env(
        tmp_path, service=service, bot_settings={"LONGSHOREMAN_GITHUB_PROJECT": NS}
    ) as env:
        for user in ("carol", "erin", "bob"):
            env.fake.set_permission(REPO, user, "write")
        env.fake.emails[CAROL[1]] = "carol"
        env.fake.emails["bob@example.com"] = "bob"
        await env.open_pull("talk", {"talk": "1"})
        yield env


def carrying(env: GitHubEnv, sha: str, repo_url: str | None = None) -> None:
    env.service.freight[:] = [freight_of(sha, "hot-fix", repo_url or env.git_url)]


async def approve(env: GitHubEnv, user: str) -> str:
    [reply] = await env.comment(f"/approve hot-fix for {PROD}", user=user)
    body: str = reply["body"]
    return body


async def test_a_direct_push_is_its_pushers_change(guarded: GitHubEnv) -> None:
    env = guarded
    # No pull request: carol's commit pushed straight to main (an "Author:" line naming dana).
    carrying(env, env.git.commit_files("main", {"fix": "1"}, "fix", author=CAROL))
    assert "carries a change of yours and" in await approve(env, "carol")
    assert env.service.asked("approve") == []
    assert "approved for Stage" in await approve(env, "erin")


async def test_a_commit_inside_someone_elses_pull_request_is_its_authors_change(
    guarded: GitHubEnv,
) -> None:
    env = guarded
    env.git.git("update-ref", "refs/heads/bobs", env.head())
    env.git.commit_files("bobs", {"a": "1"}, "bob's", author=("Bob", "bob@example.com"))
    env.git.commit_files("bobs", {"b": "1"}, "carol's, inside bob's", author=CAROL)
    pull = await env.fake.open_pull(REPO, "bobs", "main", user="bob")
    merged = await env.fake.merge(REPO, pull["number"], by="bob")
    carrying(env, merged["merge_commit_sha"])
    for user in ("carol", "bob"):
        assert "carries a change of yours and" in await approve(env, user)
    assert env.service.asked("approve") == []
    assert "approved for Stage" in await approve(env, "erin")


@pytest.mark.parametrize(
    "case", ["ssh", "an author GitHub does not know", "a repository the App cannot read"]
)
async def test_an_author_that_cannot_be_established_fails_closed(
    guarded: GitHubEnv, case: str
) -> None:
    env = guarded
    if case == "ssh":
        sha = env.git.commit_files("main", {"fix": "1"}, "fix", author=CAROL)
        carrying(env, sha, "ssh://git@github.com/example/app.git")
    elif case == "an author GitHub does not know":
        # The commit's Author: line is free text: whoever committed typed it.
        carrying(env, env.git.commit_files("main", {"fix": "1"}, "fix", author=("D", "d@x")))
    else:
        sha = env.git.commit_files("main", {"fix": "1"}, "fix", author=CAROL)
        carrying(env, sha, env.git_url.replace("/example/", "/elsewhere/"))
    said = await approve(env, "erin")
    assert "cannot tell whether Freight `hot-fix` carries a change of yours" in said
    assert env.service.asked("approve") == []


# ---- finding 9: signature before body, replays, the workspace, secrets, pages -----------------

# Only a safety net so a regression fails instead of hanging: the answers below come before the
# body is sent at all.
SAFETY_NET = 10.0


async def _start_post(
    env: GitHubEnv, length: int, signature: str | None, body: bytes = b""
) -> tuple[Any, Any]:
    """Open a connection and send a webhook's headers announcing ``length`` bytes, then
    ``body`` (none of it unless given)."""
    server = env.http.server
    reader, writer = await asyncio.open_connection(server.host, server.port)
    lines = [
        f"POST {WEBHOOK_PATH} HTTP/1.1",
        f"Host: {server.host}",
        "Content-Type: application/json",
        "X-GitHub-Event: push",
        "X-GitHub-Delivery: d-1",
        f"Content-Length: {length}",
        *([f"X-Hub-Signature-256: {signature}"] if signature else []),
    ]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    await writer.drain()
    return reader, writer


async def _status(reader: Any) -> int:
    line = await asyncio.wait_for(reader.readline(), SAFETY_NET)
    return int(line.split()[1])


async def test_an_unsigned_webhook_is_refused_before_its_body_is_read(
    elsewhere: GitHubEnv,
) -> None:
    reader, writer = await _start_post(elsewhere, MAX_BODY, None)
    try:
        assert await _status(reader) == 401
    finally:
        writer.close()


async def test_bodies_not_verified_yet_share_one_budget(elsewhere: GitHubEnv) -> None:
    # Signatures that look right but are not: their bodies would be read, so they hold the
    # budget while they trickle in, and the next delivery past it is told to come back.
    forged = "sha256=" + "0" * 64
    hogs = [await _start_post(elsewhere, MAX_BODY, forged) for _ in range(2)]
    assert 2 * MAX_BODY <= UNVERIFIED_BUDGET < 3 * MAX_BODY
    try:
        # A small, whole delivery: 401 (its forged signature) while the budget has room, 503
        # once the server holds both hogs. Asked until then: their headers are in flight.
        statuses = []
        for _ in range(500):
            reader, writer = await _start_post(elsewhere, 2, forged, b"{}")
            try:
                statuses.append(await _status(reader))
            finally:
                writer.close()
            if statuses[-1] == 503:
                break
            await asyncio.sleep(0.01)
        assert statuses[-1] == 503 and set(statuses) <= {401, 503}
    finally:
        for _, writer in hogs:
            writer.close()


@asynccontextmanager
async def _slack_bot(
    slack: FakeSlack, service: FakePromotions, **settings: Any
) -> AsyncIterator[TestClient[Any, Any]]:
    app = web.Application()
    setup_slack(
        app,
        SlackSettings(
            bot_token=TOKEN,
            signing_secret=SIGNING_SECRET,
            api_url=slack.url,
            namespace=NS,
            **settings,
        ),
        service,
    )
    async with TestClient(TestServer(app)) as client:
        yield client


@pytest.fixture
async def slack_rig() -> AsyncIterator[tuple[FakeSlack, FakePromotions]]:
    async with running_fake_slack() as slack:
        service = FakePromotions(NS)
        service.add_stage(PROD)
        service.add_freight("7c9e6b1f3a4d", "frozen-tauntaun")
        yield slack, service


async def test_a_replayed_slash_command_does_nothing(
    slack_rig: tuple[FakeSlack, FakePromotions],
) -> None:
    slack, service = slack_rig
    async with _slack_bot(slack, service) as client:
        body = slash_command(f"frozen-tauntaun to {PROD}", response_url=slack.response_url("a"))
        headers = signed_headers(body)
        first = await client.post(EVENTS_PATH, data=body, headers=headers)
        assert first.status == 200
        await slack.wait_for(lambda: slack.responses["a"], what="the answer")
        # The same signed request again, well within Slack's five minutes: recognised.
        again = await client.post(EVENTS_PATH, data=body, headers=headers)
        assert again.status == 200 and await again.text() == ""
        # A new request (a new timestamp, so a new signature) is a new command.
        later = await client.post(
            EVENTS_PATH, data=body, headers=signed_headers(body, timestamp=int(time.time()) + 1)
        )
        assert later.status == 200
        await slack.wait_for(lambda: len(slack.responses["a"]) == 2, what="the second answer")
    assert [a[0] for a in service.actions] == ["promote", "promote"]


async def test_a_request_from_another_workspace_is_refused(
    slack_rig: tuple[FakeSlack, FakePromotions],
) -> None:
    slack, service = slack_rig
    async with _slack_bot(slack, service, team_id=TEAM) as client:
        text = f"frozen-tauntaun to {PROD}"
        body = slash_command(text, team="T0OTHER", response_url=slack.response_url("x"))
        refused = await client.post(EVENTS_PATH, data=body, headers=signed_headers(body))
        assert refused.status == 403
        body = slash_command(text, response_url=slack.response_url("a"))
        accepted = await client.post(EVENTS_PATH, data=body, headers=signed_headers(body))
        assert accepted.status == 200
        await slack.wait_for(lambda: slack.responses["a"], what="the answer")
    assert [a[0] for a in service.actions] == ["promote"]
    assert not slack.responses.get("x")


def test_a_project_receiver_secret_shorter_than_the_minimum_is_not_served() -> None:
    specs = [{"name": "hub", "dockerhub": {"secretRef": {"name": "s"}}}]
    found, problems, _ = project_receivers(NS, specs, lambda name: {"secret": "short"})
    assert found == []
    assert problems == [
        "spec.webhookReceivers[0] (hub): Secret 's' key 'secret' is shorter than 16 characters: "
        "use a long random value (e.g. openssl rand -hex 32)"
    ]


async def test_the_operator_s_minimum_holds_for_project_receivers(tmp_path: Path) -> None:
    secret = "project-secret-0123456789abcdef"  # 31 characters: more than 16, fewer than 40
    settings = Settings.from_env(
        {
            **QUIET,
            "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
            "LONGSHOREMAN_WEBHOOK_MIN_SECRET_LENGTH": "40",
        }
    )
    async with TestClient(TestServer(create_app(settings), host="127.0.0.1")) as client:
        state = await wait_started(client.app)
        assert state.kube is not None and state.controller is not None
        await asyncio.wait_for(state.controller.wait_synced(), 20)
        await state.kube.create(
            k.SECRETS,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "hub-secret", "namespace": NS},
                "stringData": {"secret": secret},
            },
        )
        receivers = [{"name": "hub", "dockerhub": {"secretRef": {"name": "hub-secret"}}}]
        await state.kube.create(
            k.PROJECT_CONFIGS, objects.project_config(NS, webhookReceivers=receivers)
        )
        config = await wait_for_object(
            state.kube,
            k.PROJECT_CONFIGS,
            NS,
            NS,
            lambda c: "shorter than 40 characters" in json.dumps(c.get("status") or {}),
        )
        assert not (config.get("status") or {}).get("webhookReceivers")
        digest = hashlib.sha256((NS + "hub" + secret).encode()).hexdigest()
        response = await client.post(f"/webhooks/dockerhub/{digest}", data="{}")
        assert response.status == 404


async def test_in_github_sign_in_mode_members_read_only_projects_they_may_act_on(
    tmp_path: Path,
) -> None:
    async with running_fake_github() as fake:
        for name in ("app", "other"):
            fake.add_repo(f"example/{name}", make_remote(tmp_path, {"a": "1"}, name=name))
        fake.set_permission("example/app", "octocat", "write")
        fake.set_permission("example/other", "octocat", "read")
        fake.add_oauth_app("Iv1.pages", "oauth-client-secret")
        fake.add_org_member("example", "octocat")
        fake.sign_in_as("octocat")
        env = {
            **QUIET,
            "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
            "LONGSHOREMAN_GITHUB_APP_ID": str(fake.app_id),
            "LONGSHOREMAN_GITHUB_PRIVATE_KEY": fake.private_key,
            "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET": "webhook-secret",
            "LONGSHOREMAN_GITHUB_API_URL": fake.url,
            "LONGSHOREMAN_GITHUB_PROJECT": "shared",
            "LONGSHOREMAN_GITHUB_REPO_PROJECTS": f"example/app={NS},example/other=proj-b",
            "LONGSHOREMAN_UI_AUTH": "github",
            "LONGSHOREMAN_UI_GITHUB_CLIENT_ID": "Iv1.pages",
            "LONGSHOREMAN_UI_GITHUB_CLIENT_SECRET": "oauth-client-secret",
            "LONGSHOREMAN_UI_GITHUB_ORG": "example",
            "LONGSHOREMAN_UI_SESSION_SECRET": "s" * 32,
            "LONGSHOREMAN_GITHUB_WEB_URL": fake.url,
        }
        app = create_app(Settings.from_env(env))
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            state = await wait_started(client.app)
            assert state.kube is not None and state.controller is not None
            await asyncio.wait_for(state.controller.wait_synced(), 20)
            await state.kube.create(
                NAMESPACES,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "proj-b"}},
            )
            await state.kube.create(k.STAGES, objects.stage("secret-stage", namespace="proj-b"))
            await wait_for_object(state.kube, k.STAGES, "proj-b", "secret-stage", lambda s: True)

            async def status(path: str) -> int:
                return (await client.get(path, allow_redirects=False)).status

            assert (await sign_in(client, "/ui/")).status == 302
            assert await status(f"/ui/projects/{NS}") == 200
            # Read access to proj-b's repository lets no one act there: nor read it.
            for path in (
                "/ui/projects/proj-b",
                "/ui/projects/proj-b/events",
                "/ui/stages/proj-b/secret-stage",
            ):
                assert await status(path) == 404, path
            index = await (await client.get("/ui/")).text()
            assert f"/ui/projects/{NS}" in index and "proj-b" not in index
            # Someone who may act on proj-b reads it.
            fake.set_permission("example/other", "hubot", "write")
            fake.add_org_member("example", "hubot")
            fake.sign_in_as("hubot")
            assert (await sign_in(client, "/ui/")).status == 302
            assert await status("/ui/projects/proj-b") == 200
            assert await status(f"/ui/projects/{NS}") == 404
