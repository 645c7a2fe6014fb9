"""Registry webhooks refresh exactly the Warehouses that subscribe to what was pushed.

Every receiver, over HTTP, with bodies in its sender's documented shape
(tests/fixtures/webhooks): a good delivery refreshes the subscribing Warehouse and not one held
to another version range or another repository; a bad signature (token, header, HMAC) is
refused with 401 and refreshes nothing; a repository nobody subscribes to is answered 2xx,
refreshes nothing and says so in one log line. GitHub's ``package`` / ``registry_package``
events arrive on the App's webhook and are held to the same three cases.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from app.receivers.routes import Receivers, setup_receivers
from app.receivers.settings import ReceiverSettings, ReceiverSettingsError, path_token
from app.settings import Settings, SettingsError
from promoter.warehouses.refresh import warehouses_to_refresh
from tests.support import objects
from tests.support.fixtures import webhook_body
from tests.support.github_env import GitHubEnv, running_github_env
from tests.support.promotions import FakePromotions

NS = "default"
SECRETS = {
    "dockerhub": "dockerhub-secret-0123456789",
    "quay": "quay-secret-0123456789abcdef",
    "harbor": "Bearer harbor-secret-0123456789",
    "gitlab": "gitlab-secret-0123456789abcd",
    "artifactory": "artifactory-secret-0123456789",
    "generic": "generic-secret-0123456789abc",
}
ENV = {
    "LONGSHOREMAN_DOCKERHUB_WEBHOOK_SECRET": SECRETS["dockerhub"],
    "LONGSHOREMAN_QUAY_WEBHOOK_SECRET": SECRETS["quay"],
    "LONGSHOREMAN_HARBOR_WEBHOOK_AUTH": SECRETS["harbor"],
    "LONGSHOREMAN_GITLAB_WEBHOOK_TOKEN": SECRETS["gitlab"],
    "LONGSHOREMAN_ARTIFACTORY_WEBHOOK_SECRET": SECRETS["artifactory"],
    "LONGSHOREMAN_GENERIC_WEBHOOK_SECRET": SECRETS["generic"],
}


def warehouse(name: str, kind: str, namespace: str = NS, **body: Any) -> dict[str, Any]:
    return objects.warehouse(name, namespace=namespace, subscriptions=[{kind: body}])


@dataclass(frozen=True)
class Sender:
    """One receiver: its body, how it authenticates, and who subscribes to what it names."""

    name: str
    body: dict[str, Any]
    subscribed: dict[str, Any]  # the Warehouse the good delivery refreshes
    held: dict[str, Any]  # same repository, but it would not select what was pushed
    elsewhere: Callable[[dict[str, Any]], None]  # rewrite the body to name another repository
    headers: Callable[[bytes, bool], dict[str, str]] = lambda body, good: {}

    def path(self, good: bool) -> str:
        if self.name in ("dockerhub", "quay", "generic"):
            token = path_token(SECRETS[self.name] if good else "not-the-secret-at-all")
            return f"/webhooks/{self.name}/{token}"
        return f"/webhooks/{self.name}"


def _dockerhub_elsewhere(body: dict[str, Any]) -> None:
    body["repository"]["repo_name"] = "acme/unknown"


def _quay_elsewhere(body: dict[str, Any]) -> None:
    body["docker_url"] = "quay.io/acme/unknown"


def _harbor_elsewhere(body: dict[str, Any]) -> None:
    body["event_data"]["resources"][0]["resource_url"] = "harbor.example.com/acme/unknown:1.4.2"


def _gitlab_elsewhere(body: dict[str, Any]) -> None:
    for key in ("project", "repository"):
        body[key]["git_http_url"] = "https://gitlab.example.com/acme/unknown.git"
        body[key]["git_ssh_url"] = "git@gitlab.example.com:acme/unknown.git"


def _artifactory_elsewhere(body: dict[str, Any]) -> None:
    body["data"]["path"] = "acme/unknown/1.4.2/manifest.json"


def _generic_elsewhere(body: dict[str, Any]) -> None:
    body["repoURL"] = "registry.example.com/acme/unknown"


def _harbor_headers(body: bytes, good: bool) -> dict[str, str]:
    return {"Authorization": SECRETS["harbor"] if good else "Bearer wrong"}


def _gitlab_headers(body: bytes, good: bool) -> dict[str, str]:
    return {
        "X-Gitlab-Event": "Push Hook",
        "X-Gitlab-Token": SECRETS["gitlab"] if good else "wrong-token",
    }


def _artifactory_headers(body: bytes, good: bool) -> dict[str, str]:
    key = SECRETS["artifactory"] if good else "another-key-entirely"
    return {"X-Jfrog-Event-Auth": hmac.new(key.encode(), body, hashlib.sha256).hexdigest()}


SENDERS = [
    Sender(
        "dockerhub",
        webhook_body("dockerhub.push"),
        warehouse("app", "image", repoURL="docker.io/acme/app", constraint="^1.0.0"),
        warehouse("held", "image", repoURL="acme/app", constraint="^2.0.0"),
        _dockerhub_elsewhere,
    ),
    Sender(
        "quay",
        webhook_body("quay.push"),
        warehouse("app", "image", repoURL="quay.io/acme/app"),
        warehouse("held", "image", repoURL="quay.io/acme/app", allowTagsRegexes=["^v"]),
        _quay_elsewhere,
    ),
    Sender(
        "harbor",
        webhook_body("harbor.push_artifact"),
        warehouse("app", "image", repoURL="harbor.example.com/acme/app"),
        warehouse("held", "image", repoURL="harbor.example.com/acme/app", constraint="<1"),
        _harbor_elsewhere,
        _harbor_headers,
    ),
    Sender(
        "gitlab",
        webhook_body("gitlab.push"),
        warehouse("app", "git", repoURL="https://gitlab.example.com/acme/app", branch="main"),
        # The push touched charts/ only.
        warehouse(
            "held",
            "git",
            repoURL="git@gitlab.example.com:acme/app.git",
            branch="main",
            includePaths=["src/"],
        ),
        _gitlab_elsewhere,
        _gitlab_headers,
    ),
    Sender(
        "artifactory",
        webhook_body("artifactory.pushed"),
        warehouse("app", "image", repoURL="artifactory.example.com/docker-local/acme/app"),
        warehouse(
            "held",
            "image",
            repoURL="artifactory.example.com/docker-local/acme/app",
            imageSelectionStrategy="Digest",
            constraint="latest",
        ),
        _artifactory_elsewhere,
        _artifactory_headers,
    ),
    Sender(
        "generic",
        {"repoURL": "registry.example.com/acme/app", "qualifiers": ["1.4.2"]},
        warehouse("app", "image", repoURL="registry.example.com/acme/app"),
        warehouse(
            "held", "image", repoURL="registry.example.com/acme/app", ignoreTagsRegexes=["4"]
        ),
        _generic_elsewhere,
    ),
]


@pytest.fixture
async def receivers() -> AsyncIterator[tuple[FakePromotions, Receivers, TestClient[Any, Any]]]:
    service = FakePromotions(NS)
    app = web.Application()
    mounted = setup_receivers(app, ReceiverSettings.from_env(ENV), lambda: service)
    async with TestClient(TestServer(app)) as http:
        yield service, mounted, http


def _subscribe(service: FakePromotions, sender: Sender) -> None:
    unrelated = warehouse("other", "image", repoURL="ghcr.io/someone/else")
    service.warehouse_list[:] = [sender.subscribed, sender.held, unrelated]


@pytest.mark.parametrize("sender", SENDERS, ids=lambda s: s.name)
async def test_a_good_delivery_refreshes_only_the_warehouses_that_would_select_it(
    receivers: tuple[FakePromotions, Receivers, TestClient[Any, Any]], sender: Sender
) -> None:
    service, mounted, http = receivers
    _subscribe(service, sender)
    body = json.dumps(sender.body).encode()
    response = await http.post(sender.path(True), data=body, headers=sender.headers(body, True))
    assert response.status == 202, await response.text()
    assert (await response.json())["warehouses"] == [f"{NS}/app"]
    await asyncio.wait_for(mounted.drain(), 5)
    assert service.asked("refresh-warehouse") == [(NS, "app")]


@pytest.mark.parametrize("sender", SENDERS, ids=lambda s: s.name)
async def test_a_bad_signature_is_refused_and_refreshes_nothing(
    receivers: tuple[FakePromotions, Receivers, TestClient[Any, Any]], sender: Sender
) -> None:
    service, mounted, http = receivers
    _subscribe(service, sender)
    body = json.dumps(sender.body).encode()
    wrong = await http.post(sender.path(False), data=body, headers=sender.headers(body, False))
    missing = await http.post(sender.path(False), data=body)  # no header, or a wrong token
    assert (wrong.status, missing.status) == (401, 401)
    await mounted.drain()
    assert service.asked("refresh-warehouse") == []


@pytest.mark.parametrize("sender", SENDERS, ids=lambda s: s.name)
async def test_an_unknown_repository_is_acknowledged_refreshes_nothing_and_logs_once(
    receivers: tuple[FakePromotions, Receivers, TestClient[Any, Any]],
    sender: Sender,
    caplog: pytest.LogCaptureFixture,
) -> None:
    service, mounted, http = receivers
    _subscribe(service, sender)
    payload = json.loads(json.dumps(sender.body))
    sender.elsewhere(payload)
    body = json.dumps(payload).encode()
    with caplog.at_level(logging.INFO, logger="app.receivers.routes"):
        response = await http.post(sender.path(True), data=body, headers=sender.headers(body, True))
    assert response.status == 200, await response.text()
    await mounted.drain()
    assert service.asked("refresh-warehouse") == []
    lines = [r.getMessage() for r in caplog.records if r.name == "app.receivers.routes"]
    assert len(lines) == 1 and "nothing refreshed" in lines[0] and "unknown" in lines[0]
    assert SECRETS[sender.name] not in lines[0]


async def test_a_body_that_is_not_the_senders_shape_is_a_400(
    receivers: tuple[FakePromotions, Receivers, TestClient[Any, Any]],
) -> None:
    service, mounted, http = receivers
    service.warehouse_list[:] = [SENDERS[0].subscribed]
    response = await http.post(SENDERS[0].path(True), data=b"not json")
    assert response.status == 400
    assert "invalid request body" in (await response.json())["error"]
    harbor = next(s for s in SENDERS if s.name == "harbor")
    scan = json.dumps({"type": "SCANNING_COMPLETED", "event_data": {}}).encode()
    response = await http.post(harbor.path(True), data=scan, headers=harbor.headers(scan, True))
    assert response.status == 400 and "PUSH_ARTIFACT" in (await response.json())["error"]
    await mounted.drain()
    assert service.asked("refresh-warehouse") == []


async def test_a_gitlab_tag_push_refreshes_tag_based_subscriptions_only(
    receivers: tuple[FakePromotions, Receivers, TestClient[Any, Any]],
) -> None:
    service, mounted, http = receivers
    url = "https://gitlab.example.com/acme/app.git"
    service.warehouse_list[:] = [
        warehouse("semver", "git", repoURL=url, commitSelectionStrategy="SemVer"),
        warehouse("branch", "git", repoURL=url, branch="main"),
        warehouse(
            "v2", "git", repoURL=url, commitSelectionStrategy="SemVer", semverConstraint="^2"
        ),
    ]
    payload = webhook_body("gitlab.push")
    payload.update(object_kind="tag_push", event_name="tag_push", ref="refs/tags/v1.5.0")
    body = json.dumps(payload).encode()
    headers = {"X-Gitlab-Event": "Tag Push Hook", "X-Gitlab-Token": SECRETS["gitlab"]}
    response = await http.post("/webhooks/gitlab", data=body, headers=headers)
    assert response.status == 202
    await mounted.drain()
    assert service.asked("refresh-warehouse") == [(NS, "semver")]


async def test_only_the_configured_namespace_is_refreshed() -> None:
    service = FakePromotions(NS)
    sender = SENDERS[0]
    service.warehouse_list[:] = [
        sender.subscribed,
        warehouse("app", "image", "team-b", repoURL="acme/app"),
    ]
    app = web.Application()
    settings = ReceiverSettings.from_env({**ENV, "LONGSHOREMAN_WEBHOOK_NAMESPACE": "team-b"})
    mounted = setup_receivers(app, settings, lambda: service)
    async with TestClient(TestServer(app)) as http:
        body = json.dumps(sender.body).encode()
        assert (await http.post(sender.path(True), data=body)).status == 202
        await mounted.drain()
    assert service.asked("refresh-warehouse") == [("team-b", "app")]


async def test_a_delivery_before_the_controller_started_is_a_503() -> None:
    app = web.Application()
    setup_receivers(app, ReceiverSettings.from_env(ENV), lambda: None)
    async with TestClient(TestServer(app)) as http:
        body = json.dumps(SENDERS[0].body).encode()
        assert (await http.post(SENDERS[0].path(True), data=body)).status == 503


async def test_only_receivers_with_a_secret_are_mounted() -> None:
    app = web.Application()
    only = {"LONGSHOREMAN_QUAY_WEBHOOK_SECRET": SECRETS["quay"]}
    setup_receivers(app, ReceiverSettings.from_env(only), lambda: FakePromotions(NS))
    async with TestClient(TestServer(app)) as http:
        assert (await http.post(SENDERS[0].path(True), data=b"{}")).status == 404
        assert (await http.post("/webhooks/harbor", data=b"{}")).status == 404


def test_short_secrets_are_refused_naming_the_variable_not_the_value() -> None:
    with pytest.raises(SettingsError) as err:
        Settings.from_env({"LONGSHOREMAN_QUAY_WEBHOOK_SECRET": "short-secret"})
    assert "LONGSHOREMAN_QUAY_WEBHOOK_SECRET" in str(err.value)
    assert "short-secret" not in str(err.value)
    with pytest.raises(ReceiverSettingsError):
        ReceiverSettings.from_env({"LONGSHOREMAN_WEBHOOK_NAMESPACE": "Not_A_Namespace"})
    # The operator may raise the minimum (for the projects' receivers too), never lower it.
    raised = {"LONGSHOREMAN_WEBHOOK_MIN_SECRET_LENGTH": "40"}
    with pytest.raises(ReceiverSettingsError, match="shorter than 40"):
        ReceiverSettings.from_env({**raised, "LONGSHOREMAN_QUAY_WEBHOOK_SECRET": "x" * 39})
    assert ReceiverSettings.from_env(raised).min_secret_length == 40
    with pytest.raises(ReceiverSettingsError, match="LONGSHOREMAN_WEBHOOK_MIN_SECRET_LENGTH"):
        ReceiverSettings.from_env({"LONGSHOREMAN_WEBHOOK_MIN_SECRET_LENGTH": "8"})


def test_receiver_secrets_and_url_tokens_join_the_log_redactor() -> None:
    settings = Settings.from_env(ENV)
    redacted = settings.secrets()
    assert set(SECRETS.values()) <= set(redacted)
    assert path_token(SECRETS["dockerhub"]) in redacted
    assert SECRETS["generic"] not in repr(settings)


def test_docker_hub_spellings_of_one_repository_are_one_subscription() -> None:
    warehouses = [
        warehouse("a", "image", repoURL="docker.io/library/nginx"),
        warehouse("b", "image", repoURL="index.docker.io/library/nginx"),
        warehouse("c", "image", repoURL="nginx"),
        warehouse("d", "chart", repoURL="oci://registry.example.com/charts/nginx"),
    ]
    assert [n for _, n in warehouses_to_refresh(warehouses, ["nginx"], ["1.27.0"])] == [
        "a",
        "b",
        "c",
    ]
    # No qualifier (a sender that does not say what changed): every subscriber.
    assert warehouses_to_refresh(warehouses, ["registry.example.com/charts/nginx"]) == [(NS, "d")]


# ---------------------------------------------------------------- GitHub packages (ghcr.io)


@pytest.fixture
async def github_bot(tmp_path: Path) -> AsyncIterator[GitHubEnv]:
    service = FakePromotions(NS)
    service.warehouse_list[:] = [
        warehouse("image", "image", repoURL="ghcr.io/acme/app", constraint="^1"),
        warehouse("held", "image", repoURL="ghcr.io/acme/app", constraint="^2"),
        warehouse("chart", "chart", repoURL="oci://ghcr.io/acme/charts/app"),
        warehouse("other", "image", repoURL="ghcr.io/acme/other"),
    ]
    async with running_github_env(tmp_path, repo="acme/app", service=service) as env:
        yield env


@pytest.mark.parametrize(
    ("event", "refreshed"),
    [("package", "image"), ("registry_package", "chart")],
)
async def test_a_ghcr_publish_refreshes_the_subscribing_warehouse(
    github_bot: GitHubEnv,
    event: str,
    refreshed: str,
) -> None:
    status, _ = await github_bot.send(event, webhook_body(f"github.{event}.published"))
    assert status == 202
    await github_bot.settle()
    assert github_bot.service.asked("refresh-warehouse") == [(NS, refreshed)]
    assert github_bot.telemetry.failed() == 0


async def test_a_ghcr_publish_with_a_bad_signature_refreshes_nothing(
    github_bot: GitHubEnv,
) -> None:
    payload = webhook_body("github.package.published")
    status, _ = await github_bot.send("package", payload, secret="wrong")
    assert status == 401
    await github_bot.settle()
    assert github_bot.service.asked("refresh-warehouse") == []


async def test_a_ghcr_publish_of_an_unknown_package_refreshes_nothing_and_logs_once(
    github_bot: GitHubEnv,
    caplog: pytest.LogCaptureFixture,
) -> None:
    payload = webhook_body("github.package.published")
    payload["package"]["package_version"]["package_url"] = "ghcr.io/acme/unknown:1.4.2"
    with caplog.at_level(logging.INFO, logger="handlers.packages"):
        status, _ = await github_bot.send("package", payload)
        assert status == 202
        await github_bot.settle()
    assert github_bot.service.asked("refresh-warehouse") == []
    lines = [r.getMessage() for r in caplog.records if r.name == "handlers.packages"]
    assert len(lines) == 1 and "nothing refreshed" in lines[0]
    # Other actions and package types are no refresh at all.
    for action, kind in (("deleted", "CONTAINER"), ("published", "npm")):
        payload = webhook_body("github.package.published")
        payload["action"] = action
        payload["package"]["package_type"] = kind
        status, _ = await github_bot.send("package", payload)
        assert status == 202
    await github_bot.settle()
    assert github_bot.service.asked("refresh-warehouse") == []
