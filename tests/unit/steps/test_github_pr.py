"""The pull-request steps over the GitHub adapter, against the fake GitHub with real git."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from handlers.client import RetryPolicy
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
from tests.support.github_env import GitHubEnv, running_github_env
from tests.support.gitrepo import RemoteRepo
from tests.support.steps import make_context

REPO_URL = "https://github.com/example/gitops.git"
FAST = RetryPolicy(attempts=3, backoff=0.01, max_backoff=0.02, max_wait=0.5)


async def run_step(
    env: GitHubEnv, kind: str, config: Mapping[str, Any], previous: Mapping[str, Any] | None = None
) -> StepResult:
    """Run step ``kind`` with the App's pull-request port, as the engine would."""
    port = GitHubPullRequests(env.client)
    ctx = make_context(env.tmp, previous_output=previous, extra_services={"github": port})
    return await STEPS[kind].run(ctx, config)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[GitHubEnv]:
    files = {"app.yaml": "image: v1\n"}
    async with running_github_env(
        tmp_path, repo="example/gitops", files=files, git_name="gitops", client=FAST
    ) as env:
        yield env


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


async def test_open_pr_opens_one_with_the_commit_message_as_title_and_labels(
    env: GitHubEnv,
) -> None:
    push_branch(env.git, "Deploy v2\n\nBumps the image.")
    result = await run_step(env, "git-open-pr", open_config(labels=["infra", "needs-review"]))
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


async def test_open_pr_reuses_its_own_output_and_an_existing_open_pr(env: GitHubEnv) -> None:
    push_branch(env.git)
    first = await run_step(env, "git-open-pr", open_config(title="Deploy"))
    again = await run_step(env, "git-open-pr", open_config(title="Deploy"), previous=first.output)
    fresh = await run_step(env, "git-open-pr", open_config(title="Deploy"))  # no memory: finds it
    assert first.output == again.output == fresh.output
    assert len(env.fake.repo("example/gitops").pulls) == 1
    assert env.fake.requests("POST", "/pulls") and len(env.fake.requests("POST", "/pulls")) == 1


async def test_open_pr_opens_a_new_one_after_the_old_was_closed_unmerged(env: GitHubEnv) -> None:
    push_branch(env.git)
    first = await run_step(env, "git-open-pr", open_config())
    await env.fake.close("example/gitops", 1)
    second = await run_step(env, "git-open-pr", open_config(), previous=first.output)
    assert second.output["pr"]["id"] == 2


async def test_open_pr_is_skipped_when_there_is_no_diff(env: GitHubEnv) -> None:
    main = env.git.head("main")
    assert main is not None
    env.git.git("update-ref", "refs/heads/kargo/promotion/p1", main)
    result = await run_step(env, "git-open-pr", open_config())
    assert result.status is StepStatus.SKIPPED
    assert "no changes" in result.message
    assert not env.fake.repo("example/gitops").pulls


async def test_open_pr_creates_a_missing_target_branch_only_when_asked(env: GitHubEnv) -> None:
    push_branch(env.git)
    with pytest.raises(StepError) as err:
        await run_step(env, "git-open-pr", open_config(targetBranch="stage/prod"))
    assert err.value.terminal and "createTargetBranch" in err.value.message
    result = await run_step(
        env, "git-open-pr", open_config(targetBranch="stage/prod", createTargetBranch=True)
    )
    assert result.status is StepStatus.SUCCEEDED, result.message
    assert env.git.log("stage/prod")[0][1] == "Initial commit"


async def test_wait_for_pr_running_then_merged_gives_the_merge_commit(env: GitHubEnv) -> None:
    push_branch(env.git)
    await run_step(env, "git-open-pr", open_config())
    config = {"repoURL": REPO_URL, "prNumber": "1", "pollInterval": "45s"}
    waiting = await run_step(env, "git-wait-for-pr", config)
    assert waiting.status is StepStatus.RUNNING and waiting.retry_after == 45
    assert waiting.output["pr"]["url"] == "https://github.com/example/gitops/pull/1"
    merged = await env.fake.merge("example/gitops", 1)
    done = await run_step(env, "git-wait-for-pr", config, previous=waiting.output)
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


async def test_wait_for_pr_closed_unmerged_fails_without_retry(env: GitHubEnv) -> None:
    push_branch(env.git)
    await run_step(env, "git-open-pr", open_config())
    await env.fake.close("example/gitops", 1)
    result = await run_step(env, "git-wait-for-pr", {"repoURL": REPO_URL, "prNumber": 1})
    assert result.status is StepStatus.FAILED
    assert "closed without being merged" in result.message


async def test_merge_pr_merges_with_the_method_and_is_idempotent(env: GitHubEnv) -> None:
    push_branch(env.git)
    await run_step(env, "git-open-pr", open_config())
    config = {"repoURL": REPO_URL, "prNumber": 1, "mergeMethod": "squash"}
    result = await run_step(env, "git-merge-pr", config)
    assert result.status is StepStatus.SUCCEEDED, result.message
    assert result.output["commit"] == env.git.head("main")
    assert len(env.git.git("rev-list", "--parents", "-n1", "main").split()) == 2  # squash
    again = await run_step(env, "git-merge-pr", config)
    assert again.output["commit"] == result.output["commit"]


async def test_merge_pr_waits_while_github_refuses_to_merge(env: GitHubEnv) -> None:
    push_branch(env.git)
    await run_step(env, "git-open-pr", open_config())
    env.fake.faults.add(405, path="/merge", message="Required status check is expected.")
    waiting = await run_step(
        env, "git-merge-pr", {"repoURL": REPO_URL, "prNumber": 1, "wait": True, "pollInterval": 5}
    )
    assert waiting.status is StepStatus.RUNNING and waiting.retry_after == 5
    env.fake.faults.add(405, path="/merge", message="Required status check is expected.")
    refused = await run_step(env, "git-merge-pr", {"repoURL": REPO_URL, "prNumber": 1})
    assert refused.status is StepStatus.FAILED
    assert "Required status check" in refused.message


async def test_5xx_and_rate_limits_during_a_step_do_not_fail_it(env: GitHubEnv) -> None:
    push_branch(env.git)
    await run_step(env, "git-open-pr", open_config())
    config = {"repoURL": REPO_URL, "prNumber": 1}
    # Short outages are absorbed by the client's retries.
    env.fake.faults.add(502, path="/pulls/1", times=2)
    assert (await run_step(env, "git-wait-for-pr", config)).status is StepStatus.RUNNING
    # Longer ones come back as Running with GitHub's retry-after, keeping the PR URL for wake-ups.
    env.fake.faults.add(503, path="/pulls/1", times=5)
    previous = {"pr": {"id": 1, "url": "https://github.com/example/gitops/pull/1"}}
    outage = await run_step(env, "git-wait-for-pr", config, previous=previous)
    assert outage.status is StepStatus.RUNNING
    assert outage.output["pr"]["url"].endswith("/pull/1")
    assert outage.output["temporaryFailures"] == 1
    env.fake.exhaust_rate_limit(reset_in=120)
    limited = await run_step(env, "git-wait-for-pr", config, previous=outage.output)
    assert limited.status is StepStatus.RUNNING and limited.retry_after is not None
    assert 100 < limited.retry_after <= 122
    assert "rate limit" in limited.message
    # A persistent outage ends as an error after many attempts.
    env.fake.exhaust_rate_limit(reset_in=0)
    env.fake.faults.add(503, path="/pulls/1", times=100)
    with pytest.raises(StepError):
        await run_step(
            env,
            "git-wait-for-pr",
            config,
            previous={"temporaryFailures": MAX_TEMPORARY_FAILURES - 1},
        )


async def test_missing_port_and_bad_config_are_terminal(env: GitHubEnv, tmp_path: Path) -> None:
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
            await run_step(env, kind, config)
        assert err.value.terminal and message in err.value.message, err.value.message


async def test_a_repository_the_app_is_not_installed_on_is_a_terminal_error(env: GitHubEnv) -> None:
    with pytest.raises(StepError) as err:
        await run_step(
            env,
            "git-wait-for-pr",
            {"repoURL": "https://github.com/example/elsewhere", "prNumber": 1},
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
