"""Promotions as GitHub Deployments: one per Promotion and commit, statuses that follow it.

The pure decisions (:mod:`handlers.deployments`) are table-tested first; then the Promotion's
changes come in as the controller's listener calls would, against the fake GitHub's Deployments
API (GitHub's REST shapes, its 409 without ``required_contexts``, its ``auto_inactive``, its 403
without the permission), with its ``deployment_status`` webhooks delivered back to us.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from app.controller import kube as k
from app.server import create_app, wait_started
from app.settings import Settings
from handlers import deployments as d
from handlers.markdown import markdown_table
from handlers.webhook import WEBHOOK_PATH
from promoter.chat.views import stage_views
from promoter.resources import annotations as ann
from slack.messages import status_table
from tests.support import objects
from tests.support.controller import registry_with, wait_for_object
from tests.support.github import running_fake_github, webhook_request
from tests.support.github_env import SECRET, GitHubEnv, running_github_env
from tests.support.gitrepo import make_remote
from tests.support.kube import running_apiserver
from tests.support.processes import QUIET, ServerProcess, server_processes
from tests.support.promotions import FakePromotions
from tests.support.waiting import eventually

NS = "kargo-demo"
REPO = "example/app"
FREIGHT = "f" * 40
# What the Promotions run by the whole bot (not the fakes) do: one quick step.
OUT_STEPS = [{"uses": "compose-output", "as": "out", "config": {"a": "1"}}]
PAGE = "https://longshoreman.example.com/promotions/{namespace}/{promotion}"

# ---- the decisions, purely ----------------------------------------------------------------------

KEY = f"{NS}/staging.0002"
SUCCESS = {"state": "success", "description": "Promoted x", "auto_inactive": False}


def latest(state: str, description: str = "") -> dict[str, str]:
    return {"state": state, "description": description}


@pytest.mark.parametrize(
    ("case", "mine", "older", "status", "expected"),
    [
        ("nothing yet: create it", None, [], SUCCESS, ["create"]),
        (
            "GitHub shows it already",
            d.Existing(7, KEY, True, latest("success", "Promoted x")),
            [],
            SUCCESS,
            [],
        ),
        (
            "an inactive one is never revived",
            d.Existing(7, KEY, True, latest("inactive")),
            [d.Existing(5, f"{NS}/staging.0001", True, latest("success"))],
            SUCCESS,
            [],
        ),
        (
            "never back: a stale copy must not undo success",
            d.Existing(7, KEY, True, latest("success", "Promoted x")),
            [],
            {"state": "in_progress", "description": "Promoting"},
            [],
        ),
        (
            "verification changes the description of a success",
            d.Existing(7, KEY, True, latest("success", "Promoted x")),
            [],
            {**SUCCESS, "description": "Promoted x, verified"},
            ["post 7 success"],
        ),
        (
            "success makes our previous active one inactive",
            d.Existing(7, KEY, True, latest("in_progress")),
            [d.Existing(5, f"{NS}/staging.0001", True, latest("success"))],
            SUCCESS,
            ["post 7 success", "post 5 inactive"],
        ),
        (
            "past failed ones, to the one that was active",
            None,
            [
                d.Existing(6, f"{NS}/staging.0001b", True, latest("failure")),
                d.Existing(5, f"{NS}/staging.0001", True, latest("success")),
            ],
            SUCCESS,
            ["create", "post 5 inactive"],
        ),
        (
            "someone else's Deployment is left alone",
            None,
            [d.Existing(6, "", False, latest("success"))],
            SUCCESS,
            ["create"],
        ),
        (
            "only on success",
            d.Existing(7, KEY, True, latest("queued")),
            [d.Existing(5, f"{NS}/staging.0001", True, latest("success"))],
            {"state": "failure", "description": "Failed: boom"},
            ["post 7 failure"],
        ),
    ],
)
def test_what_to_write_for_one_commit(
    case: str,
    mine: d.Existing | None,
    older: list[d.Existing],
    status: dict[str, Any],
    expected: list[str],
) -> None:
    actions = d.plan(KEY, {"ref": "abc"}, status, mine, older)
    shown = [
        "create" if isinstance(a, d.Create) else f"post {a.deployment} {a.status['state']}"
        for a in actions
    ]
    assert shown == expected, case


def test_a_superseded_promotion_keeps_its_end_and_a_crash_left_unfinished_one_ends() -> None:
    done = d.Existing(7, KEY, True, latest("success", "Promoted x, verified"))
    assert d.plan(KEY, {}, SUCCESS, done, superseded=True) == []
    unfinished = d.Existing(7, KEY, True, latest("in_progress"))
    # Its successor may have succeeded meanwhile: it ends inactive, not as what runs.
    [action] = d.plan(KEY, {}, SUCCESS, unfinished, superseded=True)
    assert isinstance(action, d.Post) and action.status["state"] == "inactive"
    failed = {"state": "failure", "description": "Failed: boom"}
    [action] = d.plan(KEY, {}, failed, unfinished, superseded=True)
    assert isinstance(action, d.Post) and action.status == failed


def test_a_stage_opts_in_and_names_its_environment() -> None:
    def stage(**annotations: str) -> dict[str, Any]:
        return objects.stage("prod-eu", namespace=NS, annotations=annotations)

    assert ann.github_environment(stage()) is None
    assert ann.github_environment(stage(**{ann.GITHUB_DEPLOYMENTS: "false"})) is None
    env = ann.github_environment(stage(**{ann.GITHUB_DEPLOYMENTS: "true"}))
    assert env == ann.GitHubEnvironment("prod-eu")
    env = ann.github_environment(
        stage(
            **{
                ann.GITHUB_DEPLOYMENTS: "Example/App, example/other",
                ann.GITHUB_ENVIRONMENT: "production",
                ann.GITHUB_ENVIRONMENT_TYPE: "production",
                ann.GITHUB_ENVIRONMENT_URL: "https://shop.example.com",
            }
        )
    )
    assert env is not None and env.name == "production" and env.production is True
    assert env.covers("example/app") and not env.covers("example/third")
    assert env.url == "https://shop.example.com"
    transient = ann.github_environment(
        stage(**{ann.GITHUB_DEPLOYMENTS: "true", ann.GITHUB_ENVIRONMENT_TYPE: "transient"})
    )
    assert transient is not None and transient.transient and transient.production is False


def test_status_in_github_and_slack_links_the_environment() -> None:
    record = {
        "environment": "staging",
        "ids": {f"{REPO}@abc": 7},
        "links": [{"repo": REPO, "url": f"https://github.com/{REPO}/deployments/staging"}],
        "environmentURL": "https://staging.example.com",
    }
    last = promotion("Succeeded")
    last["metadata"]["annotations"][ann.GITHUB_DEPLOYMENT] = json.dumps(record)
    stages = [
        {**staging(), "status": {"lastPromotion": {"name": "staging.0001"}}},
        objects.stage("prod", namespace=NS, warehouse="app"),
    ]
    rows = stage_views(stages, [last])
    table = markdown_table(rows)
    assert "| Environment |" in table
    assert (
        f"| [staging](https://github.com/{REPO}/deployments/staging) "
        "([open](https://staging.example.com)) |"
    ) in table
    assert table.splitlines()[-2].endswith("| - |")  # prod: no environment
    slack = status_table(rows, NS).text
    assert f"environment <https://github.com/{REPO}/deployments/staging|staging>" in slack
    assert "(<https://staging.example.com|open>)" in slack
    # Without any environment the table is as it always was.
    assert "Environment" not in markdown_table(stage_views(stages[1:], []))


def test_an_environment_url_that_is_not_a_plain_link_is_not_used() -> None:
    for url in ("javascript:alert(1)", "https://x.example.com|<!channel>", "https://a b"):
        stage = staging(**{ann.GITHUB_ENVIRONMENT_URL: url})
        env = ann.github_environment(stage)
        assert env is not None and env.url is None, url


# ---- against the fake GitHub --------------------------------------------------------------------


def promotion(
    phase: str = "Pending", message: str = "", name: str = "staging.0001"
) -> dict[str, Any]:
    steps = [{"uses": "git-clone", "as": "clone"}, {"uses": "git-push", "as": "push"}]
    executions = (
        []
        if phase == "Pending"
        else [
            {"alias": "clone", "status": "Succeeded"},
            *([{"alias": "push", "status": "Succeeded"}] if phase == "Succeeded" else []),
        ]
    )
    finished = {} if phase in ("Pending", "Running") else {"finishedAt": "2026-01-01T00:00:00Z"}
    return objects.promotion(
        name,
        "staging",
        namespace=NS,
        freight=FREIGHT,
        steps=steps,
        annotations={},
        phase=phase,
        status={
            "message": message,
            "currentStep": 1 if phase != "Pending" else 0,
            "stepExecutionMetadata": executions,
            **finished,
        },
    )


def staging(**annotations: str) -> dict[str, Any]:
    return objects.stage(
        "staging",
        namespace=NS,
        warehouse="app",
        annotations={ann.GITHUB_DEPLOYMENTS: "true", **annotations},
    )


def freight(*commits: tuple[str, str]) -> dict[str, Any]:
    """The Freight, carrying ``(owner/repo, sha)`` commits from GitHub."""
    return objects.freight(
        FREIGHT,
        namespace=NS,
        # Not the demo seed's alias: admission keeps aliases unique in a project, as Kargo's does.
        alias="patient-wampa",
        warehouse="app",
        commits=[{"repoURL": f"https://github.com/{repo}.git", "id": sha} for repo, sha in commits],
    )


def deployments(env: GitHubEnv, environment: str = "staging") -> list[dict[str, Any]]:
    return env.fake.deployments(REPO, environment)


def recorded(env: GitHubEnv, name: str = "staging.0001") -> dict[str, Any]:
    """What the bot recorded on the Promotion about its Deployments."""
    return ann.read_json(env.service.promotion(name), ann.GITHUB_DEPLOYMENT)


async def verified(env: GitHubEnv, phase: str, promotion: str = "staging.0001") -> None:
    """The Stage's verification of the Promotion's Freight ended in ``phase``."""
    stage = env.service.stages[0]
    entry = {
        "id": "v1",
        "phase": phase,
        "promotion": promotion,
        "analysisRun": {"name": "run-1", "namespace": NS},
    }
    stage["status"] = {
        "lastPromotion": {"name": promotion},
        "freightHistory": [
            {"items": {"Warehouse/app": {"name": FREIGHT}}, "verificationHistory": [entry]}
        ],
    }
    env.integration.on_stage(copy.deepcopy(stage), None)
    await env.settle()


@pytest.fixture
async def env(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[GitHubEnv]:
    service = FakePromotions(NS, stages=[staging()])
    async with running_github_env(
        tmp_path,
        service=service,
        bot_settings={
            "LONGSHOREMAN_GITHUB_PROJECT": NS,
            "LONGSHOREMAN_GITHUB_PROMOTION_URL": PAGE,
            **getattr(request, "param", {}),
        },
        # GitHub sends the deployment_status webhooks of our own writes back to us.
        deliver_webhooks=True,
    ) as env:
        service.freight.append(freight((REPO, env.sha), ("elsewhere/not-installed", env.sha)))
        yield env


async def test_a_promotion_is_one_deployment_whose_statuses_follow_it(env: GitHubEnv) -> None:
    for phase in ("Pending", "Running", "Running", "Succeeded"):
        await env.change(promotion(phase))
    [deployment] = deployments(env)
    asked = deployment["_request"]
    assert asked["ref"] == env.sha and deployment["sha"] == env.sha
    assert asked["auto_merge"] is False and asked["required_contexts"] == []
    assert asked["payload"]["longshoreman"] == {
        "promotion": f"{NS}/staging.0001",
        "namespace": NS,
        "stage": "staging",
        "freight": FREIGHT,
        "freightAlias": "patient-wampa",
    }
    assert env.fake.states(deployment) == ["queued", "in_progress", "success"]
    statuses = deployment["_statuses"]
    assert statuses[-1]["log_url"] == PAGE.format(namespace=NS, promotion="staging.0001")
    assert statuses[-1]["description"] == "Promoted patient-wampa"
    # Only repositories the App is installed on; the echoes of our writes cost nothing.
    assert [e for e, status in env.fake.deliveries] == ["deployment_status"] * 3
    assert {status for _, status in env.fake.deliveries} == {202}
    assert env.telemetry.failed() == 0
    assert env.fake.requests("GET", "/statuses") == []
    record = recorded(env)
    assert record["ids"] == {f"{REPO}@{env.sha}": deployment["id"]}
    assert record["links"] == [{"repo": REPO, "url": f"{env.fake.url}/{REPO}/deployments/staging"}]


async def test_the_previous_deployment_goes_inactive_and_others_are_left_alone(
    env: GitHubEnv,
) -> None:
    theirs = env.fake.add_deployment(REPO, env.sha, "staging", user="carol")
    await env.change(promotion("Succeeded", name="staging.0001"))
    (first,) = (x for x in deployments(env) if x is not theirs)
    await env.change(promotion("Running", name="staging.0002"))
    assert env.fake.states(first) == ["success"]  # still what runs until the next one succeeds
    await env.change(promotion("Succeeded", name="staging.0002"))
    second = deployments(env)[-1]
    assert env.fake.states(first) == ["success", "inactive"]
    assert first["_statuses"][-1]["description"] == "Replaced by Promotion staging.0002"
    assert env.fake.states(second) == ["in_progress", "success"]
    assert env.fake.states(theirs) == ["success"]
    assert all(s["_request"].get("auto_merge") is False for s in (first, second))


async def test_a_failed_promotion_ends_failure_an_aborted_one_error_with_the_reason(
    env: GitHubEnv,
) -> None:
    await env.change(promotion("Running", name="staging.0001"))
    await env.change(promotion("Failed", "git-push: the remote refused", name="staging.0001"))
    await env.change(promotion("Running", name="staging.0002"))
    await env.change(promotion("Aborted", "Aborted by github:alice", name="staging.0002"))
    failed, aborted = deployments(env)
    assert env.fake.states(failed) == ["in_progress", "failure"]
    assert failed["_statuses"][-1]["description"] == "Failed: git-push: the remote refused"
    assert env.fake.states(aborted) == ["in_progress", "error"]
    assert aborted["_statuses"][-1]["description"] == "Aborted by github:alice"


async def test_verification_adds_a_description(env: GitHubEnv) -> None:
    await env.change(promotion("Succeeded"))
    await verified(env, "Successful")
    [deployment] = deployments(env)
    assert env.fake.states(deployment) == ["success", "success"]
    assert deployment["_statuses"][-1]["description"] == "Promoted patient-wampa, verified"


async def test_a_restart_finds_its_deployment_and_sends_nothing_unchanged(env: GitHubEnv) -> None:
    await env.change(promotion("Running"))
    # Killed after GitHub created the Deployment, before the ids were recorded.
    env.service.promotions[0]["metadata"]["annotations"].pop(ann.GITHUB_DEPLOYMENT)
    writes = len(env.fake.requests("POST", "/deployments"))
    async with env.restarted() as restarted:
        await env.change(promotion("Running"), integration=restarted)
        assert len(env.fake.requests("POST", "/deployments")) == writes  # GitHub shows that already
        await env.change(promotion("Succeeded"), integration=restarted)
    [deployment] = deployments(env)
    assert env.fake.states(deployment) == ["in_progress", "success"]
    assert recorded(env)["ids"] == {f"{REPO}@{env.sha}": deployment["id"]}
    # Finished and shown: a further restart replays it without a request.
    before = len(env.fake.log)
    async with env.restarted() as again:
        await env.change(promotion("Succeeded"), integration=again)
    assert [r for r in env.fake.log[before:] if "/deployments" in r.path] == []


async def test_a_restart_while_it_runs_asks_github_nothing(env: GitHubEnv) -> None:
    # What the running Promotion's Deployment shows is recorded too: a new leader neither
    # searches nor reads its statuses to know that it shows that already.
    await env.change(promotion("Running"))
    assert "shown" in recorded(env)
    before = len(env.fake.log)
    async with env.restarted() as restarted:
        await env.change(promotion("Running"), integration=restarted)
        assert [r for r in env.fake.log[before:] if "/deployments" in r.path] == []
        await env.change(promotion("Succeeded"), integration=restarted)
    [deployment] = deployments(env)
    assert env.fake.states(deployment) == ["in_progress", "success"]


async def test_a_status_someone_else_writes_is_respected(env: GitHubEnv) -> None:
    await env.change(promotion("Succeeded"))
    [deployment] = deployments(env)
    # Someone marks it inactive by hand; GitHub tells us.
    await env.fake.set_deployment_status(REPO, deployment["id"], "inactive", user="carol")
    await env.settle()
    # The verification ends later: the inactive Deployment is not revived.
    await verified(env, "Failed")
    assert env.fake.states(deployment) == ["success", "inactive"]


async def test_a_deployment_deleted_on_github_stays_deleted(
    env: GitHubEnv, caplog: pytest.LogCaptureFixture
) -> None:
    await env.change(promotion("Succeeded"))
    [deployment] = deployments(env)
    await env.fake.set_deployment_status(REPO, deployment["id"], "inactive")
    env.fake.delete_deployment(REPO, deployment["id"])
    await env.settle()
    with caplog.at_level(logging.WARNING, logger="handlers"):
        await verified(env, "Successful")  # something to tell: but the Deployment is gone
    assert deployments(env) == []
    assert [r.getMessage() for r in caplog.records if "Deployment" in r.getMessage()] == []


async def test_without_the_permission_nothing_breaks(
    env: GitHubEnv, caplog: pytest.LogCaptureFixture
) -> None:
    env.fake.deny_permission("deployments")
    with caplog.at_level(logging.WARNING, logger="handlers"):
        for phase in ("Pending", "Running", "Succeeded"):
            await env.change(promotion(phase))
    assert deployments(env) == []
    # The check run followed the Promotion as ever.
    [run] = env.fake.check_runs(REPO, env.sha)
    assert run["conclusion"] == "success"
    lines = [r.getMessage() for r in caplog.records if "deployments permission" in r.getMessage()]
    assert len(lines) == 1, lines
    assert f"in {REPO}" in lines[0] and "403" in lines[0]
    assert "lacks the deployments permission" in recorded(env)["warning"]
    # Refused once, not asked again and again.
    assert len(env.fake.requests(path="/deployments")) == 1


async def test_opting_in_later_writes_what_the_stage_holds_not_its_history(env: GitHubEnv) -> None:
    history = []
    for i in range(1, 4):
        done = promotion("Succeeded", name=f"staging.000{i}")
        done["status"]["finishedAt"] = f"2026-01-0{i}T00:00:00Z"
        history.append(done)
    env.service.promotions[:] = history
    for done in history:  # the informer's initial list, in any order
        env.integration.on_promotion(copy.deepcopy(done), None)
    await env.settle()
    [deployment] = deployments(env)
    assert deployment["payload"]["longshoreman"]["promotion"] == f"{NS}/staging.0003"
    assert env.fake.states(deployment) == ["success"]
    assert len(env.fake.requests("GET", "/deployments")) <= 2  # the newest one's look-ups only


async def test_stages_that_do_not_opt_in_get_no_deployment(env: GitHubEnv) -> None:
    env.service.stages[0]["metadata"]["annotations"] = {}
    await env.change(promotion("Succeeded"))
    assert env.fake.deployments(REPO) == []
    assert env.fake.check_runs(REPO)


@pytest.mark.parametrize(
    "env", [{"LONGSHOREMAN_GITHUB_DEPLOYMENTS": "someone-else"}], indirect=True
)
async def test_the_installation_setting_limits_where_deployments_go(env: GitHubEnv) -> None:
    await env.change(promotion("Succeeded"))
    assert env.fake.deployments(REPO) == []


async def test_environment_name_kind_and_url(env: GitHubEnv) -> None:
    env.service.stages[0] = staging(
        **{ann.GITHUB_ENVIRONMENT: "production", ann.GITHUB_ENVIRONMENT_TYPE: "production"}
    )
    env.service.applications[("argocd", "staging-app")] = {
        "metadata": {"name": "staging-app", "namespace": "argocd"},
        "status": {"summary": {"externalURLs": ["https://staging.example.com"]}},
    }
    done = promotion("Succeeded")
    done["status"]["healthChecks"] = [
        {"uses": "argocd", "config": {"apps": [{"name": "staging-app"}]}}
    ]
    await env.change(done)
    [deployment] = deployments(env, "production")
    assert deployment["production_environment"] is True
    assert deployment["transient_environment"] is False
    assert deployment["_statuses"][-1]["environment_url"] == "https://staging.example.com"
    assert recorded(env)["environmentURL"] == "https://staging.example.com"


# ---- the whole server: the real controller, the pages and /status -------------------------------


async def test_the_server_writes_the_deployment_and_links_the_environment(tmp_path: Path) -> None:
    async with running_fake_github() as fake:
        git = make_remote(tmp_path, {"main.go": "package main\n"}, name="app")
        fake.add_repo(REPO, git)
        fake.add_repo("example/denied", make_remote(tmp_path, {"a": "1"}, name="denied"),
                      installation=2)  # fmt: skip
        fake.deny_permission("deployments", installation=2)
        fake.set_permission(REPO, "alice", "write")
        sha = git.head("main")
        denied_sha = fake.repo("example/denied").git.head("main")
        settings = Settings.from_env(
            {
                **QUIET,
                "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
                "LONGSHOREMAN_MIN_REQUEUE_SECONDS": "0",
                # Its Promotions bring their own steps (OUT_STEPS), not the Stage's.
                "LONGSHOREMAN_ALLOW_PROMOTION_STEPS": "true",
                "LONGSHOREMAN_PUBLIC_URL": "https://ship.example.com",
                "LONGSHOREMAN_GITHUB_APP_ID": str(fake.app_id),
                "LONGSHOREMAN_GITHUB_PRIVATE_KEY": fake.private_key,
                "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET": SECRET,
                "LONGSHOREMAN_GITHUB_API_URL": fake.url,
                "LONGSHOREMAN_GITHUB_PROJECT": NS,
            }
        )
        app = create_app(settings, registry=registry_with())
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            state = await wait_started(client.app)
            assert state.kube is not None and state.controller is not None
            await asyncio.wait_for(state.controller.wait_synced(), 20)
            kube = state.kube
            await kube.create(k.FREIGHT, freight((REPO, sha), ("example/denied", denied_sha)))
            await kube.create(k.STAGES, staging())
            await kube.create(
                k.PROMOTIONS,
                objects.promotion(
                    "staging.0001", "staging", namespace=NS, freight=FREIGHT, steps=OUT_STEPS
                ),
            )
            page = f"https://ship.example.com/ui/promotions/{NS}/staging.0001"

            async def shown() -> list[dict[str, Any]] | None:
                found = fake.deployments(REPO, "staging")
                return found if found and fake.states(found[0])[-1:] == ["success"] else None

            [deployment] = await eventually(shown, "the Deployment to succeed")
            assert deployment["_statuses"][-1]["log_url"] == page
            promotion = await wait_for_object(
                kube, k.PROMOTIONS, NS, "staging.0001",
                lambda o: "warning" in ann.read_json(o, ann.GITHUB_DEPLOYMENT),
            )  # fmt: skip
            assert fake.deployments("example/denied") == []
            environment = f"{fake.url}/{REPO}/deployments/staging"
            assert ann.read_json(promotion, ann.GITHUB_DEPLOYMENT)["links"] == [
                {"repo": REPO, "url": environment}
            ]

            # The Promotion's page links to the environment and warns about the other repository.
            async def page_with_link() -> str | None:
                body = await (await client.get(f"/ui/promotions/{NS}/staging.0001")).text()
                return body if environment in body else None

            body = await eventually(page_with_link, "the page to link the environment")
            assert 'id="github-warning"' in body and "example/denied" in body
            stage_page = await (await client.get(f"/ui/stages/{NS}/staging")).text()
            assert environment in stage_page

            # /status links each Stage to its environment.
            await wait_for_object(
                kube, k.STAGES, NS, "staging",
                lambda o: (o.get("status") or {}).get("lastPromotion", {}).get("name")
                == "staging.0001",
            )  # fmt: skip
            number = fake.add_issue(REPO)
            comment = fake.add_comment(REPO, number, "/status")
            headers, data = webhook_request(
                "issue_comment", fake.comment_payload(REPO, comment), SECRET
            )
            assert (await client.post(WEBHOOK_PATH, data=data, headers=headers)).status == 202

            async def reply() -> str | None:
                bodies = [
                    c["body"] for c in fake.comments(REPO, number) if c["user"]["type"] == "Bot"
                ]
                return bodies[0] if bodies else None

            table = await eventually(reply, "the /status reply")
            assert "| Environment |" in table and f"[staging]({environment})" in table


# ---- SIGKILL of a real server at the Deployments' writes ----------------------------------------


async def test_sigkill_at_each_deployment_write_and_restart_gives_no_duplicate(
    tmp_path: Path,
) -> None:
    git = make_remote(tmp_path, {"main.go": "package main\n"}, name="app")
    sha = git.head("main")
    async with (
        running_apiserver(namespaces=[NS]) as api,
        running_fake_github() as fake,
        server_processes() as servers,
    ):
        fake.add_repo(REPO, git)
        kube = k.Kube(api.api_client())
        await kube.create(k.FREIGHT, freight((REPO, sha)))
        await kube.create(k.STAGES, staging())
        env = {
            "KUBECONFIG": str(api.kubeconfig_path),
            "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
            "LONGSHOREMAN_MIN_REQUEUE_SECONDS": "0",
            # Its Promotions bring their own steps (OUT_STEPS), not the Stage's.
            "LONGSHOREMAN_ALLOW_PROMOTION_STEPS": "true",
            "LONGSHOREMAN_GITHUB_APP_ID": str(fake.app_id),
            "LONGSHOREMAN_GITHUB_PRIVATE_KEY": fake.private_key,
            "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET": SECRET,
            "LONGSHOREMAN_GITHUB_API_URL": fake.url,
            "LONGSHOREMAN_GITHUB_PROJECT": NS,
        }
        lives = 0
        server: ServerProcess | None = None

        async def start() -> None:
            nonlocal lives, server
            lives += 1
            server = await ServerProcess.start(env, tmp_path / f"server-{lives}.log", servers)

        def ours(name: str) -> list[dict[str, Any]]:
            return [
                x
                for x in fake.deployments(REPO)
                if x["payload"]["longshoreman"]["promotion"] == f"{NS}/{name}"
            ]

        async def kill_at(what: str, when: Any) -> None:
            """SIGKILL the server once a request it makes matches, then start another."""
            fired = asyncio.Event()

            def hook(method: str, path: str) -> None:
                if server is not None and not fired.is_set() and when(method, path):
                    server.kill()
                    fired.set()

            fake.after_request = hook
            try:
                await asyncio.wait_for(fired.wait(), 20)
            except TimeoutError:
                log = server.log if server else ""
                raise AssertionError(f"never killed at {what}:\n{log}") from None
            fake.after_request = None
            assert server is not None
            await server.proc.wait()
            await start()

        def posting_status(state: str, name: str) -> Any:
            def when(method: str, path: str) -> bool:
                return (
                    method == "POST"
                    and path.endswith("/statuses")
                    and any(fake.states(x)[-1:] == [state] for x in ours(name))
                )

            return when

        async def create(name: str) -> None:
            await kube.create(
                k.PROMOTIONS,
                objects.promotion(name, "staging", namespace=NS, freight=FREIGHT, steps=OUT_STEPS),
            )

        async def settled(name: str, states: list[str]) -> None:
            async def done() -> bool | None:
                found = ours(name)
                obj = await kube.get(k.PROMOTIONS, NS, name)
                record = ann.read_json(obj, ann.GITHUB_DEPLOYMENT)
                if found and fake.states(found[0])[-len(states) :] == states and "shown" in record:
                    return True
                return None

            await eventually(done, f"{name}'s Deployment to show {states}")

        await start()
        # 1. GitHub created the first Deployment; the server never heard back.
        await create("staging.0001")
        await kill_at("the create", lambda m, p: m == "POST" and p.endswith("/deployments"))
        # 2. Its first status landed, unacknowledged.
        await kill_at("the first status", lambda m, p: m == "POST" and p.endswith("/statuses"))
        await settled("staging.0001", ["success"])
        # 3. The next Promotion's success landed; the previous one is not inactive yet.
        await create("staging.0002")
        await kill_at("the next success", posting_status("success", "staging.0002"))
        # 4. The previous one went inactive; the record saying all is shown is not written yet.
        await kill_at("the inactive status", posting_status("inactive", "staging.0001"))
        await settled("staging.0002", ["success"])
        await settled("staging.0001", ["success", "inactive"])

    first, second = ours("staging.0001"), ours("staging.0002")
    assert len(first) == 1 and len(second) == 1, fake.deployments(REPO)
    for deployment in (*first, *second):
        states = fake.states(deployment)
        assert all(a != b for a, b in itertools.pairwise(states)), states
    assert fake.states(first[0])[-2:] == ["success", "inactive"]
    assert fake.states(second[0])[-1] == "success"
    assert lives == 5
