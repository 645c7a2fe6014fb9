"""Issue #5's "done when", end to end over HTTP.

A signed ``issue_comment`` webhook says ``/promote to staging`` on a merged pull request of the
app repository. The real controller (against the Kubernetes API emulator) runs the Promotion:
it clones the GitOps repository, commits, pushes a branch, opens a pull request on the fake
GitHub (real git behind it), and waits. Someone merges the pull request; its signed ``closed``
webhook wakes the waiting step (the fallback poll is 30 s away), which picks up the merge commit;
Argo CD (the fake application controller over the emulator) syncs it; the Promotion succeeds.
The ``promote: staging`` check run on the app's merge commit and the reply comment show each
stage of that.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from app.controller import kube as k
from app.controller.promotions import ClusterPromotions
from handlers.client import GitHubClient, RetryPolicy
from handlers.pull_requests import GitHubPullRequests
from handlers.webhook import WEBHOOK_PATH, GitHubIntegration, setup_github
from promoter.steps.base import GitSettings, StepServices
from promoter.steps.github import STEPS as GITHUB_STEPS
from tests.support import objects
from tests.support.argocd import FakeArgoCDController, KubernetesApps, make_app
from tests.support.controller import registry_with, running_controller, wait_terminal
from tests.support.github import FakeGitHub, running_fake_github, webhook_request
from tests.support.gitrepo import RemoteRepo, git_env, make_remote
from tests.support.kube import running_apiserver
from tests.support.waiting import eventually

NS = "kargo-demo"
SECRET = "webhook-secret"
APP_URL = "https://github.com/example/app.git"
GITOPS_URL = "https://github.com/example/gitops.git"

STEPS: list[dict[str, Any]] = [
    {
        "uses": "git-clone",
        "config": {"repoURL": GITOPS_URL, "checkout": [{"branch": "main", "path": "./out"}]},
    },
    {
        "uses": "file-write",
        "config": {
            "path": "./out/staging/version.txt",
            "contents": '${{ commitFrom("' + APP_URL + '").ID }}\n',
            "overwrite": True,
        },
    },
    {
        "uses": "git-commit",
        "as": "commit",
        "config": {"path": "./out", "message": "Deploy to ${{ ctx.stage }}"},
    },
    {"uses": "git-push", "as": "push", "config": {"path": "./out", "generateTargetBranch": True}},
    {
        "uses": "git-open-pr",
        "as": "open-pr",
        "config": {
            "repoURL": GITOPS_URL,
            "sourceBranch": "${{ outputs.push.branch }}",
            "targetBranch": "main",
            "labels": ["promotion"],
        },
    },
    {
        "uses": "git-wait-for-pr",
        "as": "wait-for-pr",
        "config": {"repoURL": GITOPS_URL, "prNumber": "${{ outputs['open-pr'].pr.id }}"},
    },
    {
        "uses": "argocd-update",
        "as": "sync",
        "config": {
            "apps": [
                {
                    "name": "staging-app",
                    "sources": [
                        {
                            "repoURL": GITOPS_URL,
                            "desiredRevision": "${{ outputs['wait-for-pr'].commit }}",
                        }
                    ],
                }
            ]
        },
    },
]


@dataclass
class World:
    kube: k.Kube
    fake: FakeGitHub
    apps: KubernetesApps
    argocd: FakeArgoCDController
    integration: GitHubIntegration
    http: TestClient[Any, Any]
    gitops: RemoteRepo
    app_pr: int
    app_sha: str

    async def deliver(self, event: str, payload: dict[str, Any]) -> None:
        headers, body = webhook_request(event, payload, SECRET)
        response = await self.http.post(WEBHOOK_PATH, data=body, headers=headers)
        assert response.status == 202, await response.text()

    async def promote_by_comment(self) -> tuple[dict[str, Any], str]:
        comment = self.fake.add_comment("example/app", self.app_pr, "Ship it!\n/promote to staging")
        await self.deliver("issue_comment", self.fake.comment_payload("example/app", comment))

        async def the_promotion() -> dict[str, Any] | None:
            items, _ = await self.kube.list(k.PROMOTIONS, NS)
            return items[0] if items else None

        promotion = await eventually(the_promotion, "the Promotion")
        assert promotion["spec"]["freight"] == "a" * 40
        return comment, str(promotion["metadata"]["name"])

    async def waiting_on_pr(self, name: str) -> None:
        async def waiting() -> dict[str, Any] | None:
            obj = await self.kube.get(k.PROMOTIONS, NS, name)
            state = (obj.get("status") or {}).get("state") or {}
            return obj if (state.get("wait-for-pr") or {}).get("pr") else None

        await eventually(waiting, "the Promotion waiting on its pull request")

    async def views(self, conclusion: str, phase: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The app commit's check run and the command reply, once both show the end."""

        async def final() -> tuple[dict[str, Any], dict[str, Any]] | None:
            await self.integration.queue.join()
            runs = self.fake.check_runs("example/app", self.app_sha)
            replies = [
                c
                for c in self.fake.comments("example/app", self.app_pr)
                if c["user"]["type"] == "Bot"
            ]
            if runs and runs[0].get("conclusion") == conclusion and replies:
                if f"**{phase}**" in replies[0]["body"]:
                    return runs[0], replies[0]
            return None

        return await eventually(final, f"the check run and reply to show {phase}")


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(running_apiserver(namespaces=[NS, "argocd"]))
        fake = await stack.enter_async_context(running_fake_github())
        kube = k.Kube(server.api_client())

        # The app repository, with a merged pull request whose merge commit is in a Freight.
        app_git = make_remote(tmp_path, {"main.go": "package main\n"}, name="app")
        fake.add_repo("example/app", app_git)
        fake.set_permission("example/app", "alice", "write")
        main = app_git.head("main")
        assert main is not None
        app_git.git("update-ref", "refs/heads/feature", main)
        app_git.commit_files("feature", {"main.go": "package main // v2\n"}, "Feature")
        app_pr = await fake.open_pull("example/app", "feature", "main")
        merged_app = await fake.merge("example/app", app_pr["number"])
        # The GitOps repository the Promotion changes through a pull request.
        gitops_git = make_remote(tmp_path, {"staging/version.txt": "old\n"}, name="gitops")
        fake.add_repo("example/gitops", gitops_git)

        await kube.create(
            k.FREIGHT,
            objects.freight(
                "a" * 40,
                namespace=NS,
                alias="frozen-tauntaun",
                warehouse="app",
                commits=[
                    {"repoURL": APP_URL, "id": merged_app["merge_commit_sha"], "branch": "main"}
                ],
            ),
        )
        await kube.create(
            k.STAGES,
            objects.stage(
                "staging",
                namespace=NS,
                warehouse="app",
                steps=STEPS,
                annotations={"longshoreman.dev/github-promoters": "alice"},
            ),
        )
        apps = KubernetesApps(server.api_client())
        await apps.put(make_app("staging-app", authorized=f"{NS}:staging", repo_url=GITOPS_URL))
        argocd = FakeArgoCDController(apps)
        await stack.enter_async_context(argocd.running())

        # Wiring as the server does it: one client, shared by the steps' port and the webhooks.
        settings = fake.settings(SECRET, LONGSHOREMAN_GITHUB_PROJECT=NS)
        client = GitHubClient(settings, policy=RetryPolicy(backoff=0.01, max_wait=1.0))
        await client.start()
        stack.push_async_callback(client.close)
        services = StepServices(
            git=GitSettings(env=git_env(tmp_path, {gitops_git.url: GITOPS_URL})),
            extra={"github": GitHubPullRequests(client)},
        )
        controller = await stack.enter_async_context(
            running_controller(
                server, tmp_path / "work", registry=registry_with(**GITHUB_STEPS), services=services
            )
        )
        web_app = web.Application()
        integration = setup_github(
            web_app,
            settings,
            ClusterPromotions(kube, controller),
            listeners=controller.listeners,
            client=client,
        )
        http = await stack.enter_async_context(TestClient(TestServer(web_app)))
        yield World(
            kube,
            fake,
            apps,
            argocd,
            integration,
            http,
            gitops_git,
            app_pr["number"],
            merged_app["merge_commit_sha"],
        )


async def test_promote_comment_to_merged_gitops_pr_to_argocd_sync(world: World) -> None:
    # 1. The command.
    comment, name = await world.promote_by_comment()

    # 2. It opens a pull request in the GitOps repository and waits on it.
    await world.waiting_on_pr(name)
    gitops_pulls = world.fake.repo("example/gitops").pulls
    assert list(gitops_pulls) == [1] and gitops_pulls[1].labels == ["promotion"]
    assert gitops_pulls[1].head == f"kargo/promotion/{name}"

    # 3. A person merges it; GitHub sends the signed closed webhook, which wakes the step.
    merged = await world.fake.merge("example/gitops", 1, by="bob")
    world.argocd.set_head(GITOPS_URL, "main", merged["merge_commit_sha"])
    woken_at = time.monotonic()
    await world.deliver("pull_request", world.fake.pr_payload("example/gitops", 1, "closed"))

    # 4. The merge commit goes to Argo CD and the Promotion completes.
    done = await wait_terminal(world.kube, NS, name, within=15)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert time.monotonic() - woken_at < 10, "woken by the webhook, not the 30 s poll"
    assert done["status"]["state"]["wait-for-pr"]["commit"] == merged["merge_commit_sha"]
    assert world.gitops.read_file("main", "staging/version.txt") == f"{world.app_sha}\n"
    app = await world.apps.get("argocd", "staging-app")
    assert app is not None
    assert app["status"]["sync"]["revision"] == merged["merge_commit_sha"]

    # 5. The check run on the app's merge commit and the reply comment show each stage.
    run, reply = await world.views("success", "Succeeded")
    assert comment["_reactions"] == ["eyes"]
    assert run["name"] == "promote: staging"
    statuses = [h[0] for h in run["_history"]]
    assert "in_progress" in statuses and statuses[-1] == "completed"
    summary = run["output"]["summary"]
    for alias in ("open-pr", "wait-for-pr", "sync"):
        assert f"`{alias}`" in summary
    assert reply["body"].startswith("@alice: `/promote to staging`")
    assert reply["_edits"] >= 2  # edited in place as it went, not new comments
    assert "- `wait-for-pr` (git-wait-for-pr): Succeeded" in reply["body"]
    assert "- `sync` (argocd-update): Succeeded" in reply["body"]
    assert len(world.fake.comments("example/app", world.app_pr)) == 2
    # The GitOps pull request's head carries the check too.
    head_runs = world.fake.check_runs("example/gitops", gitops_pulls[1].head_sha)
    assert [r["conclusion"] for r in head_runs] == ["success"]


async def test_outages_do_not_fail_it_but_a_pr_closed_unmerged_does(world: World) -> None:
    # GitHub misbehaves while the Promotion runs: 5xx on its PR reads, a secondary rate limit.
    world.fake.faults.add(502, path="/repos/example/gitops/pulls", times=2)
    world.fake.faults.add(403, path="/repos/example/gitops/compare", secondary=True, retry_after=0)
    _, name = await world.promote_by_comment()
    await world.waiting_on_pr(name)
    assert [r.status for r in world.fake.requests(path="/repos/example/gitops/pulls")][:3] == [
        502,
        502,
        200,
    ]
    assert [r.status for r in world.fake.requests(path="/compare")] == [403, 200]
    # The PR is closed without merging: the waiting step fails, with no retry.
    await world.fake.close("example/gitops", 1)
    await world.deliver("pull_request", world.fake.pr_payload("example/gitops", 1, "closed"))
    done = await wait_terminal(world.kube, NS, name, within=15)
    assert done["status"]["phase"] == "Failed", done["status"]
    assert "closed without being merged" in done["status"]["message"]
    wait = next(s for s in done["status"]["stepExecutionMetadata"] if s["alias"] == "wait-for-pr")
    assert wait["status"] == "Failed" and not wait.get("errorCount")
    run, reply = await world.views("failure", "Failed")
    assert "closed without being merged" in reply["body"]
    assert run["actions"] == []
    assert world.argocd.started == []
