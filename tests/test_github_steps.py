"""The pull-request steps over the GitHub adapter, against the fake GitHub with real git."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from handlers.client import GitHubClient, RetryPolicy
from handlers.pull_requests import GitHubPullRequests
from promoter.errors import StepError
from promoter.steps.base import StepResult, StepStatus
from promoter.steps.github import (
    MAX_TEMPORARY_FAILURES,
    STEPS,
    PullRequest,
    pr_outcome,
    repo_full_name,
)
from tests.support.github import FakeGitHub, running_fake_github
from tests.support.gitrepo import RemoteRepo, make_remote
from tests.support.steps import make_context

REPO_URL = "https://github.com/example/gitops.git"
FAST = RetryPolicy(attempts=3, backoff=0.01, max_backoff=0.02, max_wait=0.5)


@dataclass
class Env:
    fake: FakeGitHub
    git: RemoteRepo
    port: GitHubPullRequests
    tmp: Path

    async def run(
        self, kind: str, config: Mapping[str, Any], previous: Mapping[str, Any] | None = None
    ) -> StepResult:
        ctx = make_context(self.tmp, previous_output=previous, extra_services={"github": self.port})
        return await STEPS[kind].run(ctx, config)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with running_fake_github() as fake:
        git = make_remote(tmp_path, {"app.yaml": "image: v1\n"}, name="gitops")
        fake.add_repo("example/gitops", git)
        client = GitHubClient(fake.settings(), policy=FAST)
        await client.start()
        try:
            yield Env(fake, git, GitHubPullRequests(client), tmp_path)
        finally:
            await client.close()


def push_branch(git: RemoteRepo, message: str = "Deploy v2") -> str:
    """What a git-push of a promotion branch cloned from main leaves in the remote."""
    main = git.head("main")
    assert main is not None
    git.git("update-ref", "refs/heads/kargo/promotion/p1", main)
    return git.commit_files("kargo/promotion/p1", {"app.yaml": "image: v2\n"}, message)


def open_config(**extra: Any) -> dict[str, Any]:
    return {
        "repoURL": REPO_URL,
        "sourceBranch": "kargo/promotion/p1",
        "targetBranch": "main",
        **extra,
    }


async def test_open_pr_opens_one_with_the_commit_message_as_title_and_labels(env: Env) -> None:
    push_branch(env.git, "Deploy v2\n\nBumps the image.")
    result = await env.run("git-open-pr", open_config(labels=["infra", "needs-review"]))
    assert result.status is StepStatus.SUCCEEDED, result.message
    assert result.output == {
        "pr": {"id": 1, "url": "https://github.com/example/gitops/pull/1"},
        "prNumber": 1,
    }
    pull = env.fake.repo("example/gitops").pulls[1]
    assert (pull.title, pull.body, pull.labels) == (
        "Deploy v2",
        "Bumps the image.",
        ["infra", "needs-review"],
    )
    assert (pull.head, pull.base) == ("kargo/promotion/p1", "main")


async def test_open_pr_reuses_its_own_output_and_an_existing_open_pr(env: Env) -> None:
    push_branch(env.git)
    first = await env.run("git-open-pr", open_config(title="Deploy"))
    again = await env.run("git-open-pr", open_config(title="Deploy"), previous=first.output)
    fresh = await env.run("git-open-pr", open_config(title="Deploy"))  # no memory: finds it
    assert first.output == again.output == fresh.output
    assert len(env.fake.repo("example/gitops").pulls) == 1
    assert env.fake.requests("POST", "/pulls") and len(env.fake.requests("POST", "/pulls")) == 1


async def test_open_pr_opens_a_new_one_after_the_old_was_closed_unmerged(env: Env) -> None:
    push_branch(env.git)
    first = await env.run("git-open-pr", open_config())
    await env.fake.close("example/gitops", 1)
    second = await env.run("git-open-pr", open_config(), previous=first.output)
    assert second.output["pr"]["id"] == 2


async def test_open_pr_is_skipped_when_there_is_no_diff(env: Env) -> None:
    main = env.git.head("main")
    assert main is not None
    env.git.git("update-ref", "refs/heads/kargo/promotion/p1", main)
    result = await env.run("git-open-pr", open_config())
    assert result.status is StepStatus.SKIPPED
    assert "no changes" in result.message
    assert not env.fake.repo("example/gitops").pulls


async def test_open_pr_creates_a_missing_target_branch_only_when_asked(env: Env) -> None:
    push_branch(env.git)
    with pytest.raises(StepError) as err:
        await env.run("git-open-pr", open_config(targetBranch="stage/prod"))
    assert err.value.terminal and "createTargetBranch" in err.value.message
    result = await env.run(
        "git-open-pr", open_config(targetBranch="stage/prod", createTargetBranch=True)
    )
    assert result.status is StepStatus.SUCCEEDED, result.message
    assert env.git.log("stage/prod")[0][1] == "Initial commit"


async def test_wait_for_pr_running_then_merged_gives_the_merge_commit(env: Env) -> None:
    push_branch(env.git)
    await env.run("git-open-pr", open_config())
    config = {"repoURL": REPO_URL, "prNumber": "1", "pollInterval": "45s"}
    waiting = await env.run("git-wait-for-pr", config)
    assert waiting.status is StepStatus.RUNNING and waiting.retry_after == 45
    assert waiting.output["pr"]["url"] == "https://github.com/example/gitops/pull/1"
    merged = await env.fake.merge("example/gitops", 1)
    done = await env.run("git-wait-for-pr", config, previous=waiting.output)
    assert done.status is StepStatus.SUCCEEDED
    assert done.output["commit"] == merged["merge_commit_sha"] == env.git.head("main")
    assert done.output["pr"] == {
        "id": 1,
        "url": "https://github.com/example/gitops/pull/1",
        "open": False,
        "merged": True,
    }
    # A real merge commit: two parents, the old main and the PR's head.
    parents = env.git.git("rev-list", "--parents", "-n1", done.output["commit"]).split()[1:]
    assert len(parents) == 2


async def test_wait_for_pr_closed_unmerged_fails_without_retry(env: Env) -> None:
    push_branch(env.git)
    await env.run("git-open-pr", open_config())
    await env.fake.close("example/gitops", 1)
    result = await env.run("git-wait-for-pr", {"repoURL": REPO_URL, "prNumber": 1})
    assert result.status is StepStatus.FAILED
    assert "closed without being merged" in result.message


async def test_merge_pr_merges_with_the_method_and_is_idempotent(env: Env) -> None:
    push_branch(env.git)
    await env.run("git-open-pr", open_config())
    config = {"repoURL": REPO_URL, "prNumber": 1, "mergeMethod": "squash"}
    result = await env.run("git-merge-pr", config)
    assert result.status is StepStatus.SUCCEEDED, result.message
    assert result.output["commit"] == env.git.head("main")
    assert len(env.git.git("rev-list", "--parents", "-n1", "main").split()) == 2  # squash
    again = await env.run("git-merge-pr", config)
    assert again.output["commit"] == result.output["commit"]


async def test_merge_pr_waits_while_github_refuses_to_merge(env: Env) -> None:
    push_branch(env.git)
    await env.run("git-open-pr", open_config())
    env.fake.faults.add(405, path="/merge", message="Required status check is expected.")
    waiting = await env.run(
        "git-merge-pr", {"repoURL": REPO_URL, "prNumber": 1, "wait": True, "pollInterval": 5}
    )
    assert waiting.status is StepStatus.RUNNING and waiting.retry_after == 5
    env.fake.faults.add(405, path="/merge", message="Required status check is expected.")
    refused = await env.run("git-merge-pr", {"repoURL": REPO_URL, "prNumber": 1})
    assert refused.status is StepStatus.FAILED
    assert "Required status check" in refused.message


async def test_5xx_and_rate_limits_during_a_step_do_not_fail_it(env: Env) -> None:
    push_branch(env.git)
    await env.run("git-open-pr", open_config())
    config = {"repoURL": REPO_URL, "prNumber": 1}
    # Short outages are absorbed by the client's retries.
    env.fake.faults.add(502, path="/pulls/1", times=2)
    assert (await env.run("git-wait-for-pr", config)).status is StepStatus.RUNNING
    # Longer ones come back as Running with GitHub's retry-after, keeping the PR URL for wake-ups.
    env.fake.faults.add(503, path="/pulls/1", times=5)
    previous = {"pr": {"id": 1, "url": "https://github.com/example/gitops/pull/1"}}
    outage = await env.run("git-wait-for-pr", config, previous=previous)
    assert outage.status is StepStatus.RUNNING
    assert outage.output["pr"]["url"].endswith("/pull/1")
    assert outage.output["temporaryFailures"] == 1
    env.fake.exhaust_rate_limit(reset_in=120)
    limited = await env.run("git-wait-for-pr", config, previous=outage.output)
    assert limited.status is StepStatus.RUNNING and limited.retry_after is not None
    assert 100 < limited.retry_after <= 122
    assert "rate limit" in limited.message
    # A persistent outage ends as an error after many attempts.
    env.fake.exhaust_rate_limit(reset_in=0)
    env.fake.faults.add(503, path="/pulls/1", times=100)
    with pytest.raises(StepError):
        await env.run(
            "git-wait-for-pr", config, previous={"temporaryFailures": MAX_TEMPORARY_FAILURES - 1}
        )


async def test_missing_port_and_bad_config_are_terminal(env: Env, tmp_path: Path) -> None:
    ctx = make_context(tmp_path)
    with pytest.raises(StepError) as err:
        await STEPS["git-wait-for-pr"].run(ctx, {"repoURL": REPO_URL, "prNumber": 1})
    assert err.value.terminal and "GitHub App" in err.value.message
    for kind, config, message in [
        ("git-open-pr", open_config(sourceBranch="-x"), "sourceBranch"),
        ("git-open-pr", open_config(provider="gitlab"), "provider"),
        ("git-open-pr", open_config(repoURL="https://u:p@github.com/a/b"), "credentials"),
        ("git-wait-for-pr", {"repoURL": REPO_URL, "prNumber": 0}, "prNumber"),
        ("git-wait-for-pr", {"repoURL": REPO_URL, "prNumber": 1, "pollInterval": "x"}, "poll"),
        ("git-merge-pr", {"repoURL": REPO_URL, "prNumber": 1, "mergeMethod": "ff"}, "mergeMethod"),
    ]:
        with pytest.raises(StepError) as err:
            await env.run(kind, config)
        assert err.value.terminal and message in err.value.message, err.value.message


async def test_a_repository_the_app_is_not_installed_on_is_a_terminal_error(env: Env) -> None:
    with pytest.raises(StepError) as err:
        await env.run(
            "git-wait-for-pr", {"repoURL": "https://github.com/example/elsewhere", "prNumber": 1}
        )
    assert err.value.terminal and "not installed" in err.value.message


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://github.com/example/repo.git", "example/repo"),
        ("https://github.example.com/org/repo/", "org/repo"),
        ("git@github.com:example/repo.git", "example/repo"),
        ("ssh://git@github.com/example/repo.git", "example/repo"),
    ],
)
def test_repo_full_name(url: str, expected: str) -> None:
    assert repo_full_name(url) == expected


def test_pr_outcome_is_pure() -> None:
    pr = PullRequest(7, "https://github.com/a/b/pull/7", open=False, merged=True, merge_commit=None)
    assert pr_outcome(pr, 30, "k").status is StepStatus.RUNNING  # merged, commit not known yet
