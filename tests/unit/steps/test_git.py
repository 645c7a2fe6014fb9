"""The git steps against real git and local bare repositories.

Manifests name ``https://github.com/example/repo.git``; ``git_env`` maps it to a ``file://`` bare
repository, exactly as an operator would with ``url.<base>.insteadOf``. Steps are called through
``STEPS`` with a hand-built context, the way the engine calls them.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from promoter.errors import StepError
from promoter.steps import git_clear, git_clone, git_commit, git_push, git_tag
from promoter.steps.base import StepContext, StepStatus
from promoter.steps.git import (
    commit_url,
    generated_branch,
    normalize_repo_url,
    ref_name_problem,
)
from promoter.urls import repo_url_problem, without_credentials
from tests.support import objects
from tests.support.gitrepo import RemoteRepo, git_env, make_remote
from tests.support.steps import make_context
from tests.support.telemetry import RecordingTelemetry

# The five git steps, one module each.
STEPS = {
    **git_clone.STEPS,
    **git_clear.STEPS,
    **git_commit.STEPS,
    **git_tag.STEPS,
    **git_push.STEPS,
}
REPO = "https://github.com/example/repo.git"
BASE_FILES = {
    "base/kustomization.yaml": "resources:\n- deployment.yaml\n",
    "base/deployment.yaml": "kind: Deployment\n",
    "stages/test/kustomization.yaml": "resources:\n- ../../base\n",
    "README.md": "demo\n",
}


@pytest.fixture
def remote(tmp_path: Path) -> RemoteRepo:
    return make_remote(tmp_path, files=BASE_FILES)


@pytest.fixture
def env(tmp_path: Path, remote: RemoteRepo) -> dict[str, str]:
    return git_env(tmp_path, {remote.url: REPO})


@pytest.fixture
def telemetry() -> RecordingTelemetry:
    """Counts the git processes the steps run."""
    return RecordingTelemetry()


@pytest.fixture
def ctx(tmp_path: Path, env: dict[str, str], telemetry: RecordingTelemetry) -> StepContext:
    return make_context(tmp_path, git_env=env, telemetry=telemetry)


async def run(step: str, ctx: StepContext, config: dict[str, Any]) -> Any:
    return await STEPS[step].run(ctx, config)


async def clone_out(ctx: StepContext, branch: str = "stage/test", **extra: Any) -> Any:
    config = {"repoURL": REPO, "checkout": [{"branch": branch, "create": True, "path": "./out"}]}
    config.update(extra)
    return await run("git-clone", ctx, config)


def with_marker(config: dict[str, Any], marker: Path) -> dict[str, Any]:
    """Point the injection attempts in ``config`` at a file that must never be created."""
    patched: dict[str, Any] = json.loads(json.dumps(config).replace("MARKER", str(marker)))
    return patched


def marker_exists(marker: Path) -> bool:
    return marker.exists()


def write(ctx: StepContext, rel: str, content: str) -> None:
    path = ctx.work_dir / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")


# ------------------------------------------------------------------------------------------
# Pure helpers
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("main", True),
        ("stage/test", True),
        ("kargo/promotion/test.01abc.def", True),
        ("v1.0.0", True),
        ("--upload-pack=touch MARKER", False),
        ("-f", False),
        ("HEAD", False),
        ("a..b", False),
        ("a b", False),
        ("a:b", False),
        ("a/", False),
        ("/a", False),
        ("a//b", False),
        ("a.lock", False),
        ("a/.hidden", False),
        ("a@{1}", False),
        ("a\nb", False),
        ("", False),
    ],
)
def test_ref_names(name: str, ok: bool) -> None:
    assert (ref_name_problem(name) is None) is ok


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://github.com/example/repo.git", True),
        ("http://gitea.local/x/y", True),
        ("ssh://git@github.com/example/repo.git", True),
        ("git@github.com:example/repo.git", True),
        ("file:///etc/repo.git", False),
        ("/srv/repo.git", False),
        ("ext::sh -c touch% /tmp/pwned", False),
        ("--upload-pack=touch MARKER", False),
        ("https://user:secret@github.com/example/repo.git", False),
        ("https://token@github.com/example/repo.git", False),
        ("fd::17", False),
        ("https:///nohost", False),
    ],
)
def test_repo_urls(url: str, ok: bool) -> None:
    assert (repo_url_problem(url) is None) is ok


def test_url_helpers() -> None:
    assert normalize_repo_url("https://GitHub.com/Example/Repo.git/") == (
        "https://github.com/example/repo"
    )
    assert normalize_repo_url("https://u:p@github.com/example/repo") == (
        "https://github.com/example/repo"
    )
    assert (
        without_credentials("see https://u:s3cret@h/x and ssh://git@h/y")
        == "see https://h/x and ssh://h/y"
    )
    sha = "a" * 40
    assert commit_url(REPO, sha) == f"https://github.com/example/repo/commit/{sha}"
    assert commit_url("git@gitlab.com:g/p.git", sha) == f"https://gitlab.com/g/p/-/commit/{sha}"
    assert commit_url("https://git.corp/x/y", sha) is None
    assert commit_url("https://git.corp/x/y", sha, "gitea") == f"https://git.corp/x/y/commit/{sha}"
    assert generated_branch("p1") == "kargo/promotion/p1"


# ------------------------------------------------------------------------------------------
# git-clone
# ------------------------------------------------------------------------------------------


async def test_clone_branch(ctx: StepContext, remote: RemoteRepo) -> None:
    result = await run(
        "git-clone", ctx, {"repoURL": REPO, "checkout": [{"branch": "main", "path": "./src"}]}
    )
    assert result.status is StepStatus.SUCCEEDED
    assert result.output == {"commits": {"./src": remote.head("main")}}
    assert (ctx.work_dir / "src/base/deployment.yaml").read_text() == "kind: Deployment\n"


async def test_clone_default_branch_and_alias(ctx: StepContext, remote: RemoteRepo) -> None:
    result = await run(
        "git-clone", ctx, {"repoURL": REPO, "checkout": [{"path": "src", "as": "source"}]}
    )
    assert result.output == {"commits": {"source": remote.head("main")}}


async def test_clone_tags(ctx: StepContext, remote: RemoteRepo) -> None:
    first = remote.head("main")
    assert first is not None
    remote.tag("v1.0.0", first, message="release")
    remote.tag("light", first)
    remote.commit_files("main", {"README.md": "newer\n"})
    result = await run(
        "git-clone",
        ctx,
        {
            "repoURL": REPO,
            "checkout": [{"tag": "v1.0.0", "path": "a"}, {"tag": "light", "path": "b"}],
        },
    )
    assert result.output == {"commits": {"a": first, "b": first}}
    assert (ctx.work_dir / "a/README.md").read_text() == "demo\n"


async def test_clone_commit_full_and_abbreviated(ctx: StepContext, remote: RemoteRepo) -> None:
    old = remote.head("main")
    assert old is not None
    remote.commit_files("main", {"README.md": "newer\n"})
    result = await run(
        "git-clone",
        ctx,
        {
            "repoURL": REPO,
            "checkout": [{"commit": old, "path": "a"}, {"commit": old[:10], "path": "b"}],
        },
    )
    assert result.output == {"commits": {"a": old, "b": old}}
    assert (ctx.work_dir / "b/README.md").read_text() == "demo\n"


async def test_clone_from_freight_normalises_urls(
    tmp_path: Path, env: dict[str, str], remote: RemoteRepo
) -> None:
    wanted = remote.head("main")
    remote.commit_files("main", {"README.md": "newer\n"})
    freight = objects.freight(
        commits=[
            {"repoURL": "https://github.com/example/other", "id": "b" * 40},
            {"repoURL": "https://GitHub.com/example/repo/", "id": wanted},
        ],
    )
    ctx = make_context(tmp_path, git_env=env, freight=freight)
    result = await run(
        "git-clone",
        ctx,
        {
            "repoURL": REPO,
            "checkout": [
                {"fromFreight": True, "path": "src"},
                {"fromOrigin": {"kind": "Warehouse", "name": "w"}, "path": "src2"},
            ],
        },
    )
    assert result.output == {"commits": {"src": wanted, "src2": wanted}}


async def test_clone_from_freight_without_a_commit_for_the_repo(
    tmp_path: Path, env: dict[str, str]
) -> None:
    ctx = make_context(tmp_path, git_env=env, freight={"commits": []})
    with pytest.raises(StepError, match="has no commit from") as info:
        await run(
            "git-clone", ctx, {"repoURL": REPO, "checkout": [{"fromFreight": True, "path": "s"}]}
        )
    assert info.value.terminal


async def test_clone_create_pushes_an_empty_orphan_branch(
    ctx: StepContext, remote: RemoteRepo
) -> None:
    result = await clone_out(ctx)
    created = remote.head("stage/test")
    assert result.output == {"commits": {"./out": created}}
    assert remote.log("stage/test") == [(created, "Initial commit")]
    assert remote.files("stage/test") == []
    assert [p.name for p in (ctx.work_dir / "out").iterdir()] == [".git"]


async def test_clone_create_in_an_empty_repository(tmp_path: Path) -> None:
    empty = make_remote(tmp_path, name="empty")
    ctx = make_context(tmp_path, git_env=git_env(tmp_path, {empty.url: REPO}))
    await clone_out(ctx)
    write(ctx, "out/a.yaml", "a: 1\n")
    await run("git-commit", ctx, {"path": "out", "message": "a"})
    await run("git-push", ctx, {"path": "out"})
    assert [m for _, m in empty.log("stage/test")] == ["a", "Initial commit"]


async def test_clone_missing_branch_without_create(ctx: StepContext, remote: RemoteRepo) -> None:
    with pytest.raises(StepError, match=r"does not exist.*create: true") as info:
        await run(
            "git-clone", ctx, {"repoURL": REPO, "checkout": [{"branch": "nope", "path": "o"}]}
        )
    assert info.value.terminal
    assert "nope" not in remote.branches()


async def test_clone_reentry_resets_own_checkout(ctx: StepContext, remote: RemoteRepo) -> None:
    config = {"repoURL": REPO, "checkout": [{"branch": "main", "path": "src"}]}
    await run("git-clone", ctx, config)
    write(ctx, "src/README.md", "local edit\n")
    write(ctx, "src/untracked.txt", "junk\n")
    newer = remote.commit_files("main", {"new.yaml": "n: 1\n"})
    result = await run("git-clone", ctx, config)
    assert result.output == {"commits": {"src": newer}}
    assert (ctx.work_dir / "src/README.md").read_text() == "demo\n"
    assert not (ctx.work_dir / "src/untracked.txt").exists()
    assert (ctx.work_dir / "src/new.yaml").exists()


async def test_one_branch_is_one_git_clone_and_a_promotion_three_git_processes(
    ctx: StepContext, remote: RemoteRepo, telemetry: RecordingTelemetry
) -> None:
    calls = telemetry.git_calls
    config = {"repoURL": REPO, "checkout": [{"branch": "main", "path": "src"}]}
    result = await run("git-clone", ctx, config)
    assert result.output == {"commits": {"src": remote.head("main")}}
    assert calls == {"clone": 1}
    write(ctx, "src/README.md", "changed\n")
    committed = await run("git-commit", ctx, {"path": "src", "message": "change"})
    # HEAD, the new commit's tree and dates come from git's files, not from status or log; no
    # file is new, so `commit -a` stages the change without an `add -A` before it.
    assert calls == {"clone": 1, "commit": 1}, calls
    pushed = await run("git-push", ctx, {"path": "src", "generateTargetBranch": True})
    assert calls.total() == 3, calls  # push (the remote's URL read from the config file)
    assert remote.head(pushed.output["branch"]) == pushed.output["commit"]
    assert pushed.output["commit"] == committed.output["commit"]
    # What was read from the files is what git says.
    logged = git_out(ctx.work_dir / "src", "log", "-1", "--date=raw", "--format=%H %T|%ad|%cd")
    replay_data = committed.replay_data
    assert logged == (
        f"{committed.output['commit']} {replay_data['tree']}|{replay_data['authorDate']}"
        f"|{replay_data['committerDate']}"
    )


@pytest.mark.parametrize(
    ("change", "staged_by_add"),
    [
        pytest.param({"README.md": "changed\n"}, False, id="edited"),
        pytest.param({"README.md": None}, False, id="deleted"),
        pytest.param({"new/file.yaml": "a: 1\n"}, True, id="new-file"),
        pytest.param({"new/.keep": ""}, True, id="new-empty-file"),
        pytest.param({"ignored.log": "x\n", "README.md": "changed\n"}, True, id="ignored-file"),
    ],
)
async def test_commit_stages_every_change_as_add_all_would(
    ctx: StepContext,
    remote: RemoteRepo,
    telemetry: RecordingTelemetry,
    change: dict[str, str | None],
    staged_by_add: bool,
) -> None:
    """What is committed is what ``git add -A`` stages (new files included, ignored ones
    not); ``add -A`` runs only when the working tree has a file git does not track yet."""
    remote.commit_files("main", {".gitignore": "*.log\n"}, "ignore logs")
    await run("git-clone", ctx, {"repoURL": REPO, "checkout": [{"branch": "main", "path": "src"}]})
    for rel, content in change.items():
        if content is None:
            (ctx.work_dir / "src" / rel).unlink()
        else:
            write(ctx, f"src/{rel}", content)
    committed = await run("git-commit", ctx, {"path": "src", "message": "change"})
    assert committed.status == StepStatus.SUCCEEDED
    assert telemetry.git_calls["add"] == (1 if staged_by_add else 0)
    src = ctx.work_dir / "src"
    assert git_out(src, "status", "--porcelain", "--ignored") == (
        "!! ignored.log" if "ignored.log" in change else ""
    )
    files = git_out(src, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
    for rel, content in change.items():
        assert (rel in files) == (content is not None and rel != "ignored.log"), rel


async def test_commit_with_an_index_it_cannot_read_plainly_stages_with_add_all(
    ctx: StepContext, telemetry: RecordingTelemetry
) -> None:
    """Version 4 of the index compresses its paths: ``add -A`` decides what is new."""
    await run("git-clone", ctx, {"repoURL": REPO, "checkout": [{"branch": "main", "path": "src"}]})
    src = ctx.work_dir / "src"
    git_out(src, "update-index", "--index-version", "4")
    write(ctx, "src/README.md", "changed\n")
    await run("git-commit", ctx, {"path": "src", "message": "change"})
    assert telemetry.git_calls["add"] == 1
    assert git_out(src, "status", "--porcelain") == ""


async def test_nothing_to_commit_without_add_all_is_still_skipped(
    ctx: StepContext, telemetry: RecordingTelemetry
) -> None:
    await run("git-clone", ctx, {"repoURL": REPO, "checkout": [{"branch": "main", "path": "src"}]})
    result = await run("git-commit", ctx, {"path": "src", "message": "nothing"})
    assert result.status == StepStatus.SKIPPED
    assert telemetry.git_calls["add"] == 0


async def test_commit_and_push_ask_git_when_its_files_say_more_than_a_plain_reading_can(
    ctx: StepContext, remote: RemoteRepo, telemetry: RecordingTelemetry
) -> None:
    """A packed branch ref and a quoted remote URL: git is asked instead, and the outputs are
    the same."""
    config = {"repoURL": REPO, "checkout": [{"branch": "main", "path": "src"}]}
    await run("git-clone", ctx, config)
    src = ctx.work_dir / "src"
    gitdir = Path((src / ".git").read_text().removeprefix("gitdir:").strip())
    config_file = gitdir / "config"
    config_file.write_text(
        config_file.read_text().replace(f"url = {REPO}", f'url = "{REPO}"'), encoding="utf-8"
    )
    write(ctx, "src/README.md", "changed\n")
    first = await run("git-commit", ctx, {"path": "src", "message": "one"})
    # Pack everything, refs included: HEAD's branch has no refs/heads file.
    git_out(src, "gc", "-q", "--prune=now")
    write(ctx, "src/README.md", "changed again\n")
    before = telemetry.git_calls.total()
    second = await run("git-commit", ctx, {"path": "src", "message": "two"})
    assert second.output["commit"] != first.output["commit"]
    logged = git_out(src, "log", "-1", "--date=raw", "--format=%H %T|%ad|%cd")
    data = second.replay_data
    assert logged == (
        f"{second.output['commit']} {data['tree']}|{data['authorDate']}|{data['committerDate']}"
    )
    assert telemetry.git_calls.total() - before == 2  # rev-parse HEAD (packed ref), commit
    assert telemetry.git_calls["rev-parse"] == 1
    git_out(src, "gc", "-q", "--prune=now")
    pushed = await run("git-push", ctx, {"path": "src", "generateTargetBranch": True})
    assert telemetry.git_calls["config"] == 1  # the quoted URL: asked git
    assert remote.head(pushed.output["branch"]) == second.output["commit"]
    assert pushed.output["commit"] == second.output["commit"]


async def test_a_clone_killed_half_way_is_started_over(
    ctx: StepContext, remote: RemoteRepo
) -> None:
    config = {"repoURL": REPO, "checkout": [{"branch": "main", "path": "src"}]}
    await run("git-clone", ctx, config)
    gitdir = Path((ctx.work_dir / "src/.git").read_text().removeprefix("gitdir:").strip())
    # What a SIGKILL mid-clone leaves: part of the files, a lock, objects missing.
    (ctx.work_dir / "src/base/deployment.yaml").unlink()
    (gitdir / "index.lock").write_text("")
    for pack in (gitdir / "objects/pack").glob("*"):
        pack.unlink()
    newer = remote.commit_files("main", {"new.yaml": "n: 1\n"})
    result = await run("git-clone", ctx, config)
    assert result.output == {"commits": {"src": newer}}
    assert (ctx.work_dir / "src/base/deployment.yaml").read_text() == "kind: Deployment\n"
    write(ctx, "src/new.yaml", "n: 2\n")
    assert (await run("git-commit", ctx, {"path": "src", "message": "n"})).status is (
        StepStatus.SUCCEEDED
    )


async def test_every_git_step_clears_what_a_killed_git_left_in_its_clones(
    ctx: StepContext, remote: RemoteRepo
) -> None:
    """Lock files anywhere git writes them and a worktree left "initializing" by a killed
    ``worktree add`` are removed before a step runs git; a worktree locked for another reason
    and files that only look alike are kept."""
    await run("git-clone", ctx, {"repoURL": REPO, "checkout": [{"branch": "main", "path": "a"}]})
    await clone_out(ctx)  # a second checkout: the shared bare clone with its worktrees
    (repo,) = (ctx.work_dir / ".longshoreman/git").glob("????????????????.git")
    planted = [
        repo / "packed-refs.lock",
        repo / "refs/remotes/origin/main.lock",
        repo / "logs/refs/heads/deep/er/x.lock",
    ]
    (worktree,) = (repo / "worktrees").iterdir()
    planted.append(worktree / "index.lock")
    for path in planted:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    half = repo / "worktrees/half"
    half.mkdir()
    (half / "locked").write_text("initializing\n")
    kept = repo / "worktrees/kept"
    kept.mkdir()
    (kept / "locked").write_text("on a USB stick\n")
    (repo / "refs/not-a-lock.lockfile").write_text("")
    write(ctx, "out/new.yaml", "n: 1\n")
    committed = await run("git-commit", ctx, {"path": "./out", "message": "n"})
    assert committed.status is StepStatus.SUCCEEDED
    assert [p for p in planted if p.exists()] == []
    assert not half.exists() and (kept / "locked").exists()
    assert (repo / "refs/not-a-lock.lockfile").exists()


async def test_a_second_clone_of_the_same_repository_next_to_a_first(
    ctx: StepContext, remote: RemoteRepo
) -> None:
    await run("git-clone", ctx, {"repoURL": REPO, "checkout": [{"branch": "main", "path": "a"}]})
    second = await clone_out(ctx)
    assert second.output == {"commits": {"./out": remote.head("stage/test")}}
    third = await run(
        "git-clone", ctx, {"repoURL": REPO, "checkout": [{"path": "c", "as": "default"}]}
    )
    assert third.output == {"commits": {"default": remote.head("main")}}
    for path in ("a", "out", "c"):
        write(ctx, f"{path}/x.yaml", f"{path}: 1\n")
        done = await run("git-commit", ctx, {"path": path, "message": path})
        assert done.status is StepStatus.SUCCEEDED


def git_out(cwd: Path, *args: str) -> str:
    """Plain git in a checkout, with the test's gitconfig (what a person would see)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
    return done.stdout.decode().strip()


def stage_in_index(ctx: StepContext, checkout: str, name: str) -> None:
    """``git add`` by hand, as a step's own tool might have done."""
    env = {**ctx.services.git.env, "PATH": "/usr/bin:/bin", "HOME": str(ctx.work_dir)}
    subprocess.run(["git", "add", name], cwd=ctx.work_dir / checkout, env=env, check=True)


async def test_changes_that_cancel_out_once_staged_are_nothing_to_commit(
    ctx: StepContext, remote: RemoteRepo
) -> None:
    await run("git-clone", ctx, {"repoURL": REPO, "checkout": [{"branch": "main", "path": "s"}]})
    write(ctx, "s/README.md", "staged\n")
    stage_in_index(ctx, "s", "README.md")
    write(ctx, "s/README.md", "demo\n")
    result = await run("git-commit", ctx, {"path": "s", "message": "nothing"})
    assert (result.status, result.output) == (StepStatus.SKIPPED, {"commit": remote.head("main")})


async def test_clone_refuses_a_foreign_non_empty_path(ctx: StepContext) -> None:
    write(ctx, "src/mine.txt", "not a checkout\n")
    with pytest.raises(StepError, match="not empty") as info:
        await run(
            "git-clone", ctx, {"repoURL": REPO, "checkout": [{"branch": "main", "path": "src"}]}
        )
    assert info.value.terminal
    assert (ctx.work_dir / "src/mine.txt").exists()


async def test_clone_sparse(ctx: StepContext) -> None:
    await run(
        "git-clone",
        ctx,
        {
            "repoURL": REPO,
            "checkout": [{"branch": "main", "path": "src", "sparse": ["stages/test"]}],
        },
    )
    src = ctx.work_dir / "src"
    assert (src / "stages/test/kustomization.yaml").exists()
    assert (src / "README.md").exists()  # cone mode always keeps top-level files
    assert not (src / "base").exists()


@pytest.mark.parametrize(
    "config",
    [
        {"checkout": [{"branch": "--upload-pack=touch MARKER", "path": "o"}]},
        {"checkout": [{"tag": "--upload-pack=touch MARKER", "path": "o"}]},
        {"checkout": [{"commit": "--upload-pack=touch", "path": "o"}]},
        {"checkout": [{"branch": "main", "path": "o", "sparse": ["--stdin"]}]},
        {"repoURL": "--upload-pack=touch MARKER", "checkout": [{"path": "o"}]},
        {"repoURL": "ext::sh -c touch% MARKER", "checkout": [{"path": "o"}]},
        {"repoURL": "file:///etc", "checkout": [{"path": "o"}]},
        {"checkout": [{"branch": "main", "tag": "v1", "path": "o"}]},
        {"checkout": [{"branch": "main", "path": "a"}, {"branch": "main", "path": "b"}]},
        {"checkout": [{"branch": "main", "path": "a"}, {"commit": "abcd", "path": "a/b"}]},
        {"checkout": []},
    ],
)
async def test_clone_rejects_bad_config_before_running_git(
    ctx: StepContext, tmp_path: Path, config: dict[str, Any], telemetry: RecordingTelemetry
) -> None:
    marker = tmp_path / "pwned"
    config = with_marker({"repoURL": REPO, **config}, marker)
    calls = telemetry.git_calls.total()
    with pytest.raises(StepError) as info:
        await run("git-clone", ctx, config)
    assert info.value.terminal
    assert telemetry.git_calls.total() == calls, "no git process may run for a rejected config"
    assert not marker_exists(marker)


@pytest.mark.parametrize(
    "path", ["../x", "/etc/x", "out/../../x", ".longshoreman/git/x", ".longshoreman/home", "."]
)
async def test_clone_refuses_paths_outside_its_area(ctx: StepContext, path: str) -> None:
    with pytest.raises(StepError) as info:
        await run(
            "git-clone", ctx, {"repoURL": REPO, "checkout": [{"branch": "main", "path": path}]}
        )
    assert info.value.terminal


async def test_credentials_never_appear_in_messages(tmp_path: Path, env: dict[str, str]) -> None:
    ctx = make_context(tmp_path, git_env=env)
    with pytest.raises(StepError) as info:
        await run(
            "git-clone",
            ctx,
            {
                "repoURL": "https://user:s3cr3t@github.com/example/repo.git",
                "checkout": [{"path": "o"}],
            },
        )
    assert info.value.terminal
    assert "s3cr3t" not in info.value.message
    assert "user:" not in info.value.message

    # A secret that shows up in git's own output is redacted too.
    missing = tmp_path / "s3cr3t-token-missing.git"
    env = git_env(tmp_path, {missing.as_uri(): "https://github.com/example/gone.git"})
    ctx = make_context(tmp_path, git_env=env, secrets=["s3cr3t-token"])
    with pytest.raises(StepError) as info:
        await run(
            "git-clone",
            ctx,
            {"repoURL": "https://github.com/example/gone.git", "checkout": [{"path": "o"}]},
        )
    assert "s3cr3t-token" not in info.value.message
    assert "***" in info.value.message
    assert info.value.terminal  # "does not appear to be a git repository" will not go away


# ------------------------------------------------------------------------------------------
# git-clear and git-commit
# ------------------------------------------------------------------------------------------


async def test_clear_then_commit_replaces_the_content(ctx: StepContext, remote: RemoteRepo) -> None:
    await run("git-clone", ctx, {"repoURL": REPO, "checkout": [{"branch": "main", "path": "out"}]})
    result = await run("git-clear", ctx, {"path": "out"})
    assert result.status is StepStatus.SUCCEEDED
    assert [p.name for p in (ctx.work_dir / "out").iterdir()] == [".git"]
    write(ctx, "out/rendered.yaml", "kind: ConfigMap\n")
    commit = await run("git-commit", ctx, {"path": "out", "message": "render"})
    await run("git-push", ctx, {"path": "out"})
    assert remote.files("main") == ["rendered.yaml"]
    assert remote.head("main") == commit.output["commit"]


async def test_clear_does_not_follow_symlinks(ctx: StepContext, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep\n")
    await clone_out(ctx)
    (ctx.work_dir / "out/link").symlink_to(outside, target_is_directory=True)
    await run("git-clear", ctx, {"path": "out"})
    assert (outside / "keep.txt").exists()


async def test_commit_then_nothing_to_commit_is_skipped_with_head(
    ctx: StepContext, remote: RemoteRepo
) -> None:
    await clone_out(ctx)
    write(ctx, "out/app.yaml", "replicas: 2\n")
    first = await run("git-commit", ctx, {"path": "out", "message": "test: bump\n\nbody #1\n"})
    assert first.status is StepStatus.SUCCEEDED
    # The same step entered again (a crash before its status was written): its own commit.
    again = await run("git-commit", ctx, {"path": "out", "message": "test: bump"})
    assert (again.status, again.output) == (StepStatus.SUCCEEDED, first.output)
    # Another step with nothing to commit: Skipped, as in Kargo, still naming HEAD.
    other = replace(ctx, alias="commit-again")
    nothing = await run("git-commit", other, {"path": "out", "message": "test: bump"})
    assert (nothing.status, nothing.output) == (StepStatus.SKIPPED, first.output)
    assert nothing.message == "nothing to commit"
    await run("git-push", ctx, {"path": "out"})
    assert [msg for _, msg in remote.log("stage/test")] == ["test: bump", "Initial commit"]
    body = remote.git("log", "-1", "--format=%B", "refs/heads/stage/test")
    assert body == "test: bump\n\nbody #1"


async def test_commit_author_precedence(ctx: StepContext, remote: RemoteRepo) -> None:
    await clone_out(ctx, author={"name": "Clone Author", "email": "clone@example.com"})
    write(ctx, "out/a.yaml", "a: 1\n")
    await run("git-commit", ctx, {"path": "out", "message": "one"})
    write(ctx, "out/b.yaml", "b: 1\n")
    await run(
        "git-commit",
        ctx,
        {
            "path": "out",
            "message": "two",
            "author": {"name": "Step Author", "email": "s@example.com"},
        },
    )
    await run("git-push", ctx, {"path": "out"})
    log = remote.git("log", "--format=%an <%ae> / %cn", "refs/heads/stage/test").splitlines()
    assert log[:2] == [
        "Step Author <s@example.com> / Longshoreman",
        "Clone Author <clone@example.com> / Longshoreman",
    ]


async def test_commit_message_from_steps(tmp_path: Path, env: dict[str, str]) -> None:
    ctx = make_context(
        tmp_path, git_env=env, state={"a": {"commitMessage": "set image"}, "b": {"x": 1}}
    )
    await clone_out(ctx)
    write(ctx, "out/a.yaml", "a: 1\n")
    result = await run("git-commit", ctx, {"path": "out", "messageFromSteps": ["a", "b"]})
    assert result.status is StepStatus.SUCCEEDED


async def test_commit_requires_a_message_and_a_real_checkout(ctx: StepContext) -> None:
    await clone_out(ctx)
    with pytest.raises(StepError, match="message is required"):
        await run("git-commit", ctx, {"path": "out"})
    # A directory whose .git some other step wrote is not trusted.
    write(ctx, "fake/.git", f"gitdir: {ctx.work_dir / 'evil'}\n")
    with pytest.raises(StepError, match="not a working tree checked out by a git-clone step"):
        await run("git-commit", ctx, {"path": "fake", "message": "m"})
    with pytest.raises(StepError, match="outside") as info:
        await run("git-commit", ctx, {"path": "../x", "message": "m"})
    assert info.value.terminal


# ------------------------------------------------------------------------------------------
# git-push
# ------------------------------------------------------------------------------------------


async def test_push_to_a_new_target_branch(ctx: StepContext, remote: RemoteRepo) -> None:
    await run("git-clone", ctx, {"repoURL": REPO, "checkout": [{"branch": "main", "path": "out"}]})
    write(ctx, "out/new.yaml", "n: 1\n")
    commit = await run("git-commit", ctx, {"path": "out", "message": "new"})
    result = await run("git-push", ctx, {"path": "out", "targetBranch": "feature/x"})
    sha = commit.output["commit"]
    assert result.output == {
        "branch": "feature/x",
        "commit": sha,
        "commitURL": f"https://github.com/example/repo/commit/{sha}",
    }
    assert remote.head("feature/x") == sha
    assert remote.read_file("main", "new.yaml") is None


async def test_generate_target_branch_is_stable(ctx: StepContext, remote: RemoteRepo) -> None:
    await clone_out(ctx)
    write(ctx, "out/a.yaml", "a: 1\n")
    await run("git-commit", ctx, {"path": "out", "message": "a"})
    first = await run("git-push", ctx, {"path": "out", "generateTargetBranch": True})
    # A re-run of the whole promotion (new commit, same Promotion) force-pushes the same branch.
    await clone_out(ctx)
    write(ctx, "out/a.yaml", "a: 2\n")
    await run("git-commit", ctx, {"path": "out", "message": "a again"})
    second = await run("git-push", ctx, {"path": "out", "generateTargetBranch": True})
    name = f"kargo/promotion/{ctx.promotion}"
    assert first.output["branch"] == second.output["branch"] == name
    assert remote.head(name) == second.output["commit"]
    assert remote.read_file(name, "a.yaml") == "a: 2\n"


async def test_push_rebases_when_the_remote_moved(ctx: StepContext, remote: RemoteRepo) -> None:
    await clone_out(ctx)
    write(ctx, "out/ours.yaml", "ours: 1\n")
    ours = await run("git-commit", ctx, {"path": "out", "message": "ours"})
    theirs = remote.commit_files("stage/test", {"theirs.yaml": "theirs: 1\n"}, "theirs")
    result = await run("git-push", ctx, {"path": "out"})
    assert result.status is StepStatus.SUCCEEDED
    log = remote.log("stage/test")
    assert [m for _, m in log] == ["ours", "theirs", "Initial commit"]
    assert log[1][0] == theirs
    assert result.output["commit"] == log[0][0] != ours.output["commit"]
    assert remote.files("stage/test") == ["ours.yaml", "theirs.yaml"]


async def test_push_conflict_fails_without_pushing(ctx: StepContext, remote: RemoteRepo) -> None:
    await clone_out(ctx)
    write(ctx, "out/same.yaml", "ours: 1\n")
    await run("git-commit", ctx, {"path": "out", "message": "ours"})
    theirs = remote.commit_files("stage/test", {"same.yaml": "theirs: 1\n"}, "theirs")
    result = await run("git-push", ctx, {"path": "out"})
    assert result.status is StepStatus.FAILED
    assert "same.yaml" in result.message
    assert remote.head("stage/test") == theirs


async def test_push_twice_is_a_noop(ctx: StepContext, remote: RemoteRepo) -> None:
    await clone_out(ctx)
    before = len(remote.log("stage/test"))
    write(ctx, "out/a.yaml", "a: 1\n")
    await run("git-commit", ctx, {"path": "out", "message": "a"})
    first = await run("git-push", ctx, {"path": "out"})
    second = await run("git-push", ctx, {"path": "out"})
    assert first.output == second.output
    assert len(remote.log("stage/test")) == before + 1


async def test_push_retry_after_remote_moved_past_our_commit(
    ctx: StepContext, remote: RemoteRepo
) -> None:
    """A crash after pushing, then someone else pushed on top: the retry must not duplicate."""
    await clone_out(ctx)
    write(ctx, "out/a.yaml", "a: 1\n")
    await run("git-commit", ctx, {"path": "out", "message": "a"})
    first = await run("git-push", ctx, {"path": "out"})
    remote.commit_files("stage/test", {"b.yaml": "b: 1\n"}, "someone else")
    again = await run("git-push", ctx, {"path": "out"})
    assert again.status is StepStatus.SUCCEEDED
    assert again.output["commit"] == first.output["commit"]
    assert [m for _, m in remote.log("stage/test")] == ["someone else", "a", "Initial commit"]


async def test_push_of_an_equal_change_already_on_the_remote(
    ctx: StepContext, remote: RemoteRepo
) -> None:
    """The same change, committed twice (different SHAs), lands once."""
    await clone_out(ctx)
    write(ctx, "out/a.yaml", "a: 1\n")
    await run("git-commit", ctx, {"path": "out", "message": "a"})
    remote.commit_files("stage/test", {"a.yaml": "a: 1\n"}, "a")
    result = await run("git-push", ctx, {"path": "out"})
    assert result.status is StepStatus.SUCCEEDED
    assert [m for _, m in remote.log("stage/test")] == ["a", "Initial commit"]
    assert result.output["commit"] == remote.head("stage/test")


async def test_concurrent_promotions_to_one_branch(
    tmp_path: Path, env: dict[str, str], remote: RemoteRepo
) -> None:
    async def promote(name: str) -> Any:
        ctx = make_context(tmp_path, git_env=env, promotion=name, work_dir=tmp_path / name)
        await run(
            "git-clone", ctx, {"repoURL": REPO, "checkout": [{"branch": "main", "path": "out"}]}
        )
        write(ctx, f"out/{name}.yaml", f"{name}: 1\n")
        await run("git-commit", ctx, {"path": "out", "message": name})
        return await run("git-push", ctx, {"path": "out"})

    results = await asyncio.gather(*(promote(f"p{i}") for i in range(4)))
    assert all(r.status is StepStatus.SUCCEEDED for r in results)
    files = remote.files("main")
    assert {f"p{i}.yaml" for i in range(4)} <= set(files)
    assert len(remote.log("main")) == 5


async def test_push_gives_up_after_max_attempts(ctx: StepContext, remote: RemoteRepo) -> None:
    await clone_out(ctx)
    write(ctx, "out/a.yaml", "a: 1\n")
    await run("git-commit", ctx, {"path": "out", "message": "a"})
    remote.commit_files("stage/test", {"b.yaml": "b: 1\n"}, "b")
    with pytest.raises(StepError, match="gave up after 1 attempts") as info:
        await run("git-push", ctx, {"path": "out", "maxAttempts": 1})
    assert not info.value.terminal


@pytest.mark.parametrize(
    "config",
    [
        {"targetBranch": "--upload-pack=touch MARKER"},
        {"targetBranch": "-f"},
        {"tag": "--force"},
        {"targetBranch": "a", "generateTargetBranch": True},
        {"targetBranch": "a", "tag": "v1"},
        {"maxAttempts": 0},
    ],
)
async def test_push_rejects_bad_config_before_running_git(
    ctx: StepContext, tmp_path: Path, config: dict[str, Any], telemetry: RecordingTelemetry
) -> None:
    await clone_out(ctx)
    marker = tmp_path / "pwned"
    calls = telemetry.git_calls.total()
    with pytest.raises(StepError) as info:
        await run("git-push", ctx, with_marker({"path": "out", **config}, marker))
    assert info.value.terminal
    assert telemetry.git_calls.total() == calls
    assert not marker_exists(marker)


async def test_push_from_a_detached_checkout_needs_a_target(
    ctx: StepContext, remote: RemoteRepo
) -> None:
    main = remote.head("main")
    assert main is not None
    await run("git-clone", ctx, {"repoURL": REPO, "checkout": [{"commit": main, "path": "d"}]})
    with pytest.raises(StepError, match="not on a branch") as info:
        await run("git-push", ctx, {"path": "d"})
    assert info.value.terminal


# ------------------------------------------------------------------------------------------
# git-tag and tag pushes
# ------------------------------------------------------------------------------------------


async def test_tag_and_push_tag(ctx: StepContext, remote: RemoteRepo) -> None:
    await clone_out(ctx)
    write(ctx, "out/a.yaml", "a: 1\n")
    commit = await run("git-commit", ctx, {"path": "out", "message": "a"})
    await run("git-push", ctx, {"path": "out"})
    tagged = await run("git-tag", ctx, {"path": "out", "tag": "v1.0.0"})
    assert tagged.output == {"tag": "v1.0.0", "commit": commit.output["commit"]}
    assert (await run("git-tag", ctx, {"path": "out", "tag": "v1.0.0"})).output == tagged.output
    pushed = await run("git-push", ctx, {"path": "out", "tag": "v1.0.0"})
    assert pushed.output["commit"] == commit.output["commit"]
    assert remote.tags() == {"v1.0.0": commit.output["commit"]}
    # Pushing the same tag again (a retry) is fine ...
    assert (
        await run("git-push", ctx, {"path": "out", "tag": "v1.0.0"})
    ).status is StepStatus.SUCCEEDED
    # ... a different tag of the same name on the remote is not.
    remote.tag("v2", remote.log("stage/test")[-1][0], message="elsewhere")
    await run("git-tag", ctx, {"path": "out", "tag": "v2"})
    with pytest.raises(StepError, match="already exists") as info:
        await run("git-push", ctx, {"path": "out", "tag": "v2"})
    assert info.value.terminal
