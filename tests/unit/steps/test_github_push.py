"""``github-push`` against the fake GitHub: commits land on the branch through GitHub's API as
the App, signed by GitHub, by the operator's push integration policy.

The fake serves the repository with real git (smart HTTP for the staging push, the REST git
database on the same bare repository), so a branch the API moves is a branch ``git log`` reads.
Every request the step makes must be one of GitHub's documented operations with a documented
body (tests/fixtures/github-openapi, from GitHub's OpenAPI description): the fake refuses
anything else and records it in ``contract_problems``. Kargo's own cases
(``github_pusher_test.go``, ``github_push_integration_test.go``) are ported where they apply:
commits Longshoreman made stand for Kargo's commits signed by its trusted key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import gidgethub
import pytest

from app.controller import kube as k
from handlers.client import RetryPolicy
from handlers.git_credentials import GitHubGitCredentials
from handlers.git_database import GitHubGitDatabase, commit_body
from promoter.errors import ConfigRefused, StepError
from promoter.steps.base import GitSettings, Replaying, StepContext, StepServices, StepStatus
from promoter.steps.git_clone import git_clone
from promoter.steps.git_commit import git_commit
from promoter.steps.git_push import git_push
from promoter.steps.github_push import STEPS as GITHUB_PUSH_STEPS
from promoter.steps.github_push import (
    NewCommit,
    Person,
    RemoteCommit,
    comparison_verdict,
    github_push,
    plan_github_push,
    rebase_is_safe,
    replay_commit,
    replay_parents,
    verify_github_push,
)
from promoter.steps.registry import BUILTIN_KINDS
from tests.support import objects
from tests.support.controller import registry_with, running_controller, wait_terminal
from tests.support.github_env import GitHubEnv, running_github_env
from tests.support.github_openapi import operation_of
from tests.support.gitrepo import git_env, make_remote
from tests.support.kube import running_apiserver
from tests.support.steps import make_context

REPO = "example/gitops"
NS = "github-push"
HERMETIC = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
PROMOTION = "prod.01j000000000000000000000.abc1234"
SALLY = ("Sally", "sally@example.com")
BOT = "longshoreman[bot]"


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[GitHubEnv]:
    async with running_github_env(
        tmp_path,
        repo=REPO,
        files={"app/values.txt": "v1\n", "other.txt": "x\n"},
        git_name="gitops",
        client=RetryPolicy(backoff=0.01, max_wait=1.0),
    ) as env:
        yield env


def context(env: GitHubEnv, git_env_: dict[str, str] | None = None, **git: Any) -> StepContext:
    """What the server gives the steps when the App is configured (app/server.py)."""
    base = make_context(env.tmp, git_env=HERMETIC, promotion=PROMOTION)
    services = StepServices(
        git=GitSettings(
            env=git_env_ or HERMETIC, credentials=GitHubGitCredentials(env.client), **git
        ),
        extra={"github-git": GitHubGitDatabase(env.client)},
    )
    return dataclasses.replace(base, services=services)


async def clone(ctx: StepContext, url: str, branch: str = "main") -> None:
    await git_clone(ctx, {"repoURL": url, "checkout": [{"branch": branch, "path": "./out"}]})


async def commit(ctx: StepContext, files: dict[str, str], message: str, **config: Any) -> str:
    """git-commit of ``files`` in ./out (each call a step of its own)."""
    for name, text in files.items():
        target = ctx.work_dir / "out" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    step = dataclasses.replace(ctx, alias=f"commit-{message}")
    result = await git_commit(step, {"path": "./out", "message": message, **config})
    return str(result.output["commit"])


def log(env: GitHubEnv, branch: str = "main") -> list[str]:
    """Subjects on ``branch``, oldest first."""
    return [subject for _, subject in reversed(env.git.log(branch))]


def identities(env: GitHubEnv, sha: str) -> tuple[str, str]:
    return tuple(env.git.git("show", "-s", "--format=%an%n%cn", sha).splitlines())  # type: ignore[return-value]


def assert_documented(env: GitHubEnv) -> None:
    """Every REST request was one of GitHub's documented operations, with a documented body,
    and the fake answered it as documented."""
    undocumented = [
        f"{r.method} {r.path}" for r in env.fake.log if operation_of(r.method, r.path) is None
    ]
    assert undocumented == []
    assert env.fake.contract_problems == []


# ---- through the API, as the App ---------------------------------------------------------------


async def test_commits_land_on_the_branch_through_the_api_with_no_author_or_committer(
    env: GitHubEnv,
) -> None:
    ctx = context(env)
    await clone(ctx, env.git_url)
    await commit(ctx, {"app/values.txt": "v2\n"}, "bump to v2")
    await commit(ctx, {"app/notes.txt": "n\n"}, "add notes")

    result = await github_push(ctx, {"path": "./out"})

    head = env.git.head("main")
    assert result.status is StepStatus.SUCCEEDED
    assert result.output == {
        "branch": "main",
        "commit": head,
        "commitURL": f"{env.fake.url}/{REPO}/commit/{head}",
    }
    assert log(env) == ["initial", "bump to v2", "add notes"]
    assert env.git.read_file("main", "app/values.txt") == "v2\n"
    sent = env.fake.created_commits(REPO)
    assert len(sent) == 2
    assert all("author" not in body and "committer" not in body for body in sent)
    # GitHub attributed both to the App and signed them: verified, as branch protection wants.
    for sha, _ in env.git.log("main")[:2]:
        assert identities(env, sha) == (BOT, BOT)
        assert sha in env.fake.repo(REPO).verified
    # The staging ref is gone, and the worktree is on the replayed commits.
    assert env.git.git("for-each-ref", "refs/kargo/") == ""
    assert _local_head(ctx) == head
    assert_documented(env)


def _local_head(ctx: StepContext) -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"],
        cwd=ctx.work_dir / "out",
        capture_output=True,
        text=True,
        check=True,
        env={**HERMETIC, "PATH": os.environ.get("PATH", os.defpath)},
    ).stdout.strip()


async def test_required_signed_commits_refuse_git_push_and_accept_github_push(
    env: GitHubEnv,
) -> None:
    env.fake.require_signed_commits(REPO, "main")
    ctx = context(env)
    await clone(ctx, env.git_url)
    await commit(ctx, {"app/values.txt": "v2\n"}, "bump to v2")

    with pytest.raises(StepError) as refused:
        await git_push(ctx, {"path": "./out"})
    assert "Commits must have verified signatures" in refused.value.message

    result = await github_push(ctx, {"path": "./out"})
    assert result.status is StepStatus.SUCCEEDED
    assert log(env) == ["initial", "bump to v2"]
    assert_documented(env)


async def test_a_generated_branch_is_created_through_the_api(env: GitHubEnv) -> None:
    ctx = context(env)
    await clone(ctx, env.git_url)
    await commit(ctx, {"app/values.txt": "v2\n"}, "bump to v2")

    result = await github_push(ctx, {"path": "./out", "generateTargetBranch": True})

    branch = f"kargo/promotion/{PROMOTION}"
    assert result.output["branch"] == branch
    assert result.output["commit"] == env.git.head(branch)
    assert log(env, branch) == ["initial", "bump to v2"]
    assert log(env) == ["initial"]
    created = [c for c in env.fake.calls if c.operation == "git/create-ref"]
    new_ref = {"ref": f"refs/heads/{branch}", "sha": env.git.head(branch)}
    assert [c.body for c in created] == [new_ref]
    assert_documented(env)


async def test_a_branch_created_meanwhile_is_tried_again(env: GitHubEnv) -> None:
    ctx = context(env)
    await clone(ctx, env.git_url)
    await commit(ctx, {"app/values.txt": "v2\n"}, "ours")
    branch = f"kargo/promotion/{PROMOTION}"

    def someone_creates_it(method: str, path: str) -> None:
        if method == "POST" and path.endswith("/git/commits") and env.git.head(branch) is None:
            env.git.git("branch", branch, "main")

    env.fake.after_request = someone_creates_it
    result = await github_push(ctx, {"path": "./out", "generateTargetBranch": True})

    assert [c.status for c in env.fake.calls if "refs" in c.path and c.method != "GET"] == [
        422,  # POST .../git/refs: "Reference already exists"
        200,  # PATCH .../git/refs/heads/<branch>, forced as the generated branch always is
        204,  # DELETE of the staging ref
    ]
    assert result.output["commit"] == env.git.head(branch)
    assert log(env, branch) == ["initial", "ours"]
    assert_documented(env)


async def test_nothing_to_push_changes_nothing(env: GitHubEnv) -> None:
    ctx = context(env)
    await clone(ctx, env.git_url)
    before = env.git.head("main")

    result = await github_push(ctx, {"path": "./out"})

    assert result.output["commit"] == before == env.git.head("main")
    assert env.fake.created_commits(REPO) == []


async def test_a_commit_made_with_another_author_is_verified_with_a_co_author_trailer(
    env: GitHubEnv,
) -> None:
    ctx = context(env)
    await clone(ctx, env.git_url)
    await commit(ctx, {"a.txt": "a\n"}, "by sally", author={"name": SALLY[0], "email": SALLY[1]})

    await github_push(ctx, {"path": "./out"})

    (body,) = env.fake.created_commits(REPO)
    assert "author" not in body and "committer" not in body
    assert body["message"] == "by sally\n\nCo-authored-by: Sally <sally@example.com>"


# ---- a remote that moved meanwhile, by policy --------------------------------------------------


async def _moved_meanwhile(env: GitHubEnv, **git: Any) -> StepContext:
    """Clone main and commit "ours"; then someone else pushes "theirs" to main."""
    ctx = context(env, **git)
    await clone(ctx, env.git_url)
    await commit(ctx, {"app/values.txt": "v2\n"}, "ours")
    env.git.commit_files("main", {"other.txt": "y\n"}, "theirs", author=SALLY)
    return ctx


@pytest.mark.parametrize("policy", ["AlwaysRebase", "RebaseOrMerge", "RebaseOrFail"])
async def test_own_commits_are_rebased_onto_what_others_pushed(env: GitHubEnv, policy: str) -> None:
    ctx = await _moved_meanwhile(env, push_integration_policy=policy)
    theirs = env.git.head("main")

    result = await github_push(ctx, {"path": "./out"})

    assert result.status is StepStatus.SUCCEEDED
    assert log(env) == ["initial", "theirs", "ours"]
    assert env.git.git("rev-parse", "main^") == theirs
    assert env.git.read_file("main", "other.txt") == "y\n"
    (body,) = env.fake.created_commits(REPO)
    assert "author" not in body and body["parents"] == [theirs]
    assert_documented(env)


async def test_always_merge_replays_a_merge_commit_keeping_what_others_pushed(
    env: GitHubEnv,
) -> None:
    ctx = await _moved_meanwhile(env, push_integration_policy="AlwaysMerge")
    theirs = env.git.head("main")

    await github_push(ctx, {"path": "./out"})

    head = env.git.head("main")
    assert head is not None
    parents = env.git.git("show", "-s", "--format=%P", head).split()
    assert len(parents) == 2 and parents[1] == theirs
    assert env.git.git("show", "-s", "--format=%s", parents[0]) == "ours"
    # Both the replayed commit and the merge commit are Longshoreman's: verified.
    assert {head, parents[0]} <= env.fake.repo(REPO).verified
    sent = env.fake.created_commits(REPO)
    assert [len(b["parents"]) for b in sent] == [1, 2]
    assert all("author" not in b for b in sent)
    assert_documented(env)


async def _foreign_commit_in_range(env: GitHubEnv, **git: Any) -> StepContext:
    """Kargo's cases 09-16: the local range holds someone else's commit A (on branch
    `feature`) and Longshoreman's B; main moved meanwhile."""
    env.git.git("branch", "feature", "main")
    env.git.commit_files("feature", {"feature.txt": "f\n"}, "A by sally", author=SALLY)
    ctx = context(env, **git)
    await clone(ctx, env.git_url, branch="feature")
    await commit(ctx, {"app/values.txt": "v2\n"}, "B")
    env.git.commit_files("main", {"other.txt": "y\n"}, "theirs", author=SALLY)
    return ctx


async def test_rebase_or_merge_merges_when_the_range_holds_someone_elses_commit(
    env: GitHubEnv,
) -> None:
    ctx = await _foreign_commit_in_range(env, push_integration_policy="RebaseOrMerge")

    await github_push(ctx, {"path": "./out", "targetBranch": "main"})

    a, b, merge = env.fake.created_commits(REPO)
    # A keeps its author and committer (unverified); B and the merge commit are the App's.
    assert a["author"]["name"] == "Sally" and "committer" in a
    assert "author" not in b and "author" not in merge and len(merge["parents"]) == 2
    head = env.git.head("main")
    assert head in env.fake.repo(REPO).verified
    assert log(env)[-1].startswith("Merge")
    assert_documented(env)


async def test_rebase_or_fail_fails_when_the_range_holds_someone_elses_commit(
    env: GitHubEnv,
) -> None:
    ctx = await _foreign_commit_in_range(env, push_integration_policy="RebaseOrFail")
    before = env.git.head("main")

    result = await github_push(ctx, {"path": "./out", "targetBranch": "main"})

    assert result.status is StepStatus.FAILED
    assert "RebaseOrFail" in result.message and "did not make" in result.message
    assert env.git.head("main") == before
    assert env.git.git("for-each-ref", "refs/kargo/") == ""


async def test_always_rebase_makes_every_rebased_commit_longshoremans(env: GitHubEnv) -> None:
    ctx = await _foreign_commit_in_range(env, push_integration_policy="AlwaysRebase")

    await github_push(ctx, {"path": "./out", "targetBranch": "main"})

    a, b = env.fake.created_commits(REPO)
    assert "author" not in a and "author" not in b
    assert a["message"] == "A by sally\n\nCo-authored-by: Sally <sally@example.com>"
    assert log(env) == ["initial", "theirs", "A by sally", "B"]


async def test_someone_elses_commits_are_verified_only_when_the_operator_says_so(
    env: GitHubEnv,
) -> None:
    env.git.git("branch", "feature", "main")
    env.git.commit_files("feature", {"feature.txt": "f\n"}, "A by sally", author=SALLY)
    ctx = context(env, github_push_verify_untrusted=True)
    await clone(ctx, env.git_url, branch="feature")

    await github_push(ctx, {"path": "./out", "targetBranch": "main"})

    (a,) = env.fake.created_commits(REPO)
    assert "author" not in a
    assert a["message"] == "A by sally\n\nCo-authored-by: Sally <sally@example.com>"


async def test_conflicting_changes_fail_the_step(env: GitHubEnv) -> None:
    ctx = context(env)
    await clone(ctx, env.git_url)
    await commit(ctx, {"app/values.txt": "ours\n"}, "ours")
    env.git.commit_files("main", {"app/values.txt": "theirs\n"}, "theirs")

    result = await github_push(ctx, {"path": "./out"})

    assert result.status is StepStatus.FAILED
    assert "conflict" in result.message and "app/values.txt" in result.message
    assert log(env) == ["initial", "theirs"]


async def test_a_branch_that_moves_between_compare_and_update_is_integrated_and_retried(
    env: GitHubEnv,
) -> None:
    ctx = context(env)
    await clone(ctx, env.git_url)
    await commit(ctx, {"app/values.txt": "v2\n"}, "ours")
    moved: list[str] = []

    def someone_pushes(method: str, path: str) -> None:
        if method == "POST" and path.endswith("/git/commits") and not moved:
            moved.append(env.git.commit_files("main", {"other.txt": "y\n"}, "theirs"))

    env.fake.after_request = someone_pushes
    result = await github_push(ctx, {"path": "./out"})

    assert result.status is StepStatus.SUCCEEDED
    updates = [c.status for c in env.fake.calls if c.operation == "git/update-ref"]
    assert updates == [422, 200]
    assert log(env) == ["initial", "theirs", "ours"]
    assert_documented(env)


async def test_force_overwrites_what_others_pushed(env: GitHubEnv) -> None:
    ctx = await _moved_meanwhile(env)

    await github_push(ctx, {"path": "./out", "force": True})

    assert log(env) == ["initial", "ours"]
    (update,) = [c for c in env.fake.calls if c.operation == "git/update-ref"]
    assert update.body["force"] is True


# ---- limits and where the App is not ---------------------------------------------------------


async def test_more_commits_than_the_operator_allows_are_refused(env: GitHubEnv) -> None:
    ctx = context(env, github_push_max_revisions=1)
    await clone(ctx, env.git_url)
    await commit(ctx, {"a.txt": "1\n"}, "one")
    await commit(ctx, {"a.txt": "2\n"}, "two")

    with pytest.raises(StepError) as refused:
        await github_push(ctx, {"path": "./out"})

    assert refused.value.terminal
    assert "more than the 1 one push may replay" in refused.value.message
    assert log(env) == ["initial"]


async def test_a_repository_the_app_is_not_installed_on_is_named_in_the_message(
    env: GitHubEnv, tmp_path: Path
) -> None:
    elsewhere = make_remote(tmp_path, {"a.txt": "1\n"}, name="elsewhere")
    url = f"{env.fake.url}/example/elsewhere.git"
    # git reaches the repository from its own copy; GitHub has never heard of it.
    rewrites = git_env(tmp_path, {elsewhere.url: url})
    ctx = context(env, git_env_=rewrites)
    await clone(ctx, url)

    with pytest.raises(StepError) as refused:
        await github_push(ctx, {"path": "./out"})

    assert refused.value.terminal
    assert "the GitHub App is not installed on example/elsewhere" in refused.value.message


async def test_a_repository_on_another_host_is_refused(env: GitHubEnv, tmp_path: Path) -> None:
    elsewhere = make_remote(tmp_path, {"a.txt": "1\n"}, name="gitlab")
    url = "https://gitlab.example.com/example/gitops.git"
    ctx = context(env, git_env_=git_env(tmp_path, {elsewhere.url: url}))
    await clone(ctx, url)

    with pytest.raises(StepError) as refused:
        await github_push(ctx, {"path": "./out"})

    assert "is not a repository on the GitHub the App serves" in refused.value.message


async def test_without_the_app_the_step_says_it_needs_it(tmp_path: Path) -> None:
    remote = make_remote(tmp_path, {"a.txt": "1\n"})
    url = "https://github.com/example/gitops.git"
    ctx = make_context(tmp_path, git_env=git_env(tmp_path, {remote.url: url}))
    await clone(ctx, url)

    with pytest.raises(StepError) as refused:
        await github_push(ctx, {"path": "./out"})

    assert "acts as the GitHub App" in refused.value.message


def test_github_push_is_a_known_step_kind() -> None:
    assert BUILTIN_KINDS["github-push"] == "promoter.steps.github_push"


# ---- the config: Kargo's schema (github-push-config.json, Test_githubPusher_convert) -----------


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({}, "config.path is required"),
        ({"path": ""}, "config.path must not be empty"),
        ({"path": "out", "maxAttempts": 0}, "between 1 and 2147483647"),
        ({"path": "out", "maxAttempts": 2**31}, "between 1 and 2147483647"),
        ({"path": "out", "maxAttempts": "3"}, "must be a whole number"),
        (
            {"path": "out", "generateTargetBranch": True, "targetBranch": "x"},
            "mutually exclusive",
        ),
        ({"path": "out", "force": "yes"}, "config.force must be true or false"),
        ({"path": "out", "targetBranch": "-x"}, "config.targetBranch"),
        ({"path": "out", "tag": "v1"}, "unknown config field(s) tag"),
    ],
)
def test_configs_kargo_refuses_are_refused_with_the_field_named(
    config: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigRefused) as refused:
        plan_github_push(PROMOTION, config)
    assert problem in refused.value.message


@pytest.mark.parametrize(
    "config",
    [
        {"path": "out"},
        {"path": "out", "generateTargetBranch": True},
        {"path": "out", "generateTargetBranch": False, "targetBranch": "main"},
        {"path": "out", "targetBranch": "main", "force": True, "maxAttempts": 3},
        {"path": "out", "insecureSkipTLSVerify": True},
    ],
)
def test_configs_kargo_accepts_are_accepted(config: dict[str, Any]) -> None:
    plan = plan_github_push(PROMOTION, config)
    if config.get("generateTargetBranch"):
        assert (plan.target_branch, plan.force) == (f"kargo/promotion/{PROMOTION}", True)


# ---- the decisions (Kargo's unit tables) -------------------------------------------------------


def _original(**changes: Any) -> RemoteCommit:
    base = RemoteCommit(
        sha="a" * 40,
        tree="t" * 40,
        message="test",
        author=Person("Sally", "sally@example.com", "2024-01-01T00:00:00Z"),
        committer=Person("Sally", "sally@example.com", "2024-01-01T00:00:00Z"),
        parents=("p" * 40,),
    )
    return dataclasses.replace(base, **changes)


LONGSHOREMAN = Person("Longshoreman", "longshoreman@localhost")


@pytest.mark.parametrize(
    ("original", "trusted", "verify_all", "author_sent", "message"),
    [
        (_original(author=None), True, False, False, "test"),
        (_original(), True, False, False, "test\n\nCo-authored-by: Sally <sally@example.com>"),
        (_original(author=LONGSHOREMAN), True, False, False, "test"),
        (_original(), False, False, True, "test"),
        (_original(), False, True, False, "test\n\nCo-authored-by: Sally <sally@example.com>"),
    ],
    ids=["trusted-no-author", "trusted-other-author", "trusted-same", "untrusted", "verify-all"],
)
def test_what_a_replayed_commit_carries(
    original: RemoteCommit, trusted: bool, verify_all: bool, author_sent: bool, message: str
) -> None:
    new = replay_commit(
        original,
        trusted=trusted,
        verify_untrusted=verify_all,
        signer=LONGSHOREMAN if trusted else None,
    )
    body = commit_body(dataclasses.replace(new, parents=("p" * 40,)))
    assert ("author" in body, "committer" in body) == (author_sent, author_sent)
    assert body["message"] == message
    assert body["tree"] == "t" * 40
    if author_sent:
        assert body["author"] == {
            "name": "Sally",
            "email": "sally@example.com",
            "date": "2024-01-01T00:00:00Z",
        }


def test_replayed_parents_follow_kargos_table() -> None:
    plain = _original(parents=())
    assert replay_parents(plain, {}, "prev") == ("prev",)
    assert replay_parents(_original(parents=("old",)), {}, "prev") == ("prev",)
    merge = _original(parents=("old-a", "old-b"))
    assert replay_parents(merge, {"old-a": "new-a"}, "prev") == ("new-a", "old-b")


@pytest.mark.parametrize(
    ("status", "force", "verdict"),
    [
        ("identical", False, "done"),
        ("ahead", False, "replay"),
        ("behind", True, "replay"),
        ("diverged", True, "replay"),
        ("behind", False, "retry"),
        ("diverged", False, "retry"),
    ],
)
def test_what_a_comparison_means(status: str, force: bool, verdict: str) -> None:
    assert comparison_verdict(status, force)[0] == verdict


def test_an_unexpected_comparison_status_is_an_error() -> None:
    with pytest.raises(StepError, match="compared the branches as 'weird'"):
        comparison_verdict("weird", False)


def test_rebasing_is_safe_only_for_commits_longshoreman_made() -> None:
    assert rebase_is_safe([], frozenset())
    assert rebase_is_safe(["a"], frozenset({"a"}))
    assert not rebase_is_safe(["a", "b"], frozenset({"a"}))


def test_a_new_commit_without_author_sends_none() -> None:
    body = commit_body(NewCommit(tree="t", message="m", parents=("p",)))
    assert body == {"message": "m", "tree": "t", "parents": ["p"]}


# ---- the fake holds requests to GitHub's description --------------------------------------------


async def test_the_fake_refuses_a_body_github_does_not_document(env: GitHubEnv) -> None:
    api = await env.client.repo_api(REPO)
    tree = env.git.git("rev-parse", "main^{tree}")

    with pytest.raises(gidgethub.BadRequest) as refused:
        await api.post(
            f"/repos/{REPO}/git/commits",
            data={"message": "m", "tree": tree, "author": {"name": "x"}, "sign": True},
        )
    assert refused.value.status_code == 422
    (problem,) = env.fake.contract_problems
    assert '"sign" is not a permitted key' in problem and '"email" wasn\'t supplied' in problem


# ---- a replica rebuilding the work directory --------------------------------------------------


async def test_a_rebuilt_work_directory_continues_from_the_replayed_commits(
    env: GitHubEnv,
) -> None:
    first = await _moved_meanwhile(env)
    pushed = await github_push(first, {"path": "./out"})
    # Another replica rebuilds: it clones what was recorded and commits the same change again
    # (the original commit, not on GitHub: only its replay is), then checks the push.
    again = dataclasses.replace(first, work_dir=env.tmp / "rebuilt")
    again.work_dir.mkdir()
    await git_clone(
        again,
        {"repoURL": env.git_url, "checkout": [{"commit": _first_commit(env), "path": "./out"}]},
    )
    await commit(again, {"app/values.txt": "v2\n"}, "ours")

    await verify_github_push(
        dataclasses.replace(again, replay=Replaying(output=pushed.output)), {"path": "./out"}
    )

    assert _local_head(again) == pushed.output["commit"] == env.git.head("main")


async def test_a_rebuild_refuses_a_branch_that_lost_the_pushed_commit(env: GitHubEnv) -> None:
    ctx = context(env)
    await clone(ctx, env.git_url)
    await commit(ctx, {"app/values.txt": "v2\n"}, "ours")
    pushed = await github_push(ctx, {"path": "./out"})
    env.git.git("update-ref", "refs/heads/main", _first_commit(env))

    with pytest.raises(StepError) as refused:
        await verify_github_push(
            dataclasses.replace(ctx, replay=Replaying(output=pushed.output)), {"path": "./out"}
        )

    assert refused.value.terminal and "no longer contains" in refused.value.message


def _first_commit(env: GitHubEnv) -> str:
    return env.git.git("rev-list", "--max-parents=0", "main")


# ---- through the controller --------------------------------------------------------------------


async def test_a_promotion_pushes_through_the_api_under_branch_protection(
    env: GitHubEnv, caplog: pytest.LogCaptureFixture
) -> None:
    """A Stage's steps run by the controller on the API server: clone, write, commit and
    github-push to a branch that requires signed commits; the token is nowhere to be seen."""
    env.fake.require_signed_commits(REPO, "main")
    steps: list[dict[str, Any]] = [
        {"uses": "git-clone", "config": {"repoURL": env.git_url,
                                         "checkout": [{"branch": "main", "path": "./out"}]}},
        {"uses": "file-write", "config": {"path": "./out/app/values.txt", "contents": "v9\n",
                                          "overwrite": True}},
        {"uses": "git-commit", "config": {"path": "./out", "message": "Deploy v9"}},
        {"uses": "github-push", "as": "push", "config": {"path": "./out"}},
    ]  # fmt: skip
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(running_apiserver(namespaces=[NS]))
        kube = k.Kube(server.api_client())
        await kube.create(k.FREIGHT, objects.freight("f" * 40, namespace=NS, warehouse="app"))
        await kube.create(
            k.STAGES, objects.stage("prod", namespace=NS, warehouse="app", steps=steps)
        )
        await stack.enter_async_context(
            running_controller(
                server,
                env.tmp / "work",
                registry=registry_with(**GITHUB_PUSH_STEPS),
                services=context(env).services,
            )
        )
        with caplog.at_level(logging.DEBUG):
            await kube.create(
                k.PROMOTIONS, objects.promotion("to-prod", "prod", namespace=NS, freight="f" * 40)
            )
            done = await wait_terminal(kube, NS, "to-prod", within=30)

    assert done["status"]["phase"] == "Succeeded", json.dumps(done["status"], indent=1)
    head = env.git.head("main")
    assert done["status"]["state"]["push"]["commit"] == head
    assert log(env) == ["initial", "Deploy v9"]
    assert head in env.fake.repo(REPO).verified
    tokens = list(env.fake.tokens)
    assert tokens and all(t not in caplog.text and t not in json.dumps(done) for t in tokens)
    assert_documented(env)
