"""Git over HTTPS with the GitHub App's installation token, against the fake GitHub's git server.

The fake serves its repositories over smart HTTP (``git http-backend``) and lets git in only with
a currently valid installation token as Basic credentials. A Promotion that clones, commits,
pushes and opens a pull request there succeeds with the App's token, which the git steps get from
``GitSettings.credentials`` (:class:`handlers.git_credentials.GitHubGitCredentials`); the token
is nowhere to be found afterwards: not in git's config files, the remote URL, the logs or the
Promotion. A token GitHub no longer accepts fails the step with a message that does not show it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.controller import kube as k
from app.controller.credentials import ClusterCredentials
from handlers.client import RetryPolicy
from handlers.git_credentials import GitHubGitCredentials, SecretAppTokens, github_repo
from handlers.pull_requests import GitHubPullRequests
from promoter.errors import StepError
from promoter.ports.credentials import CredentialType
from promoter.steps.base import GitSettings, StepContext, StepServices
from promoter.steps.git_clone import git_clone
from promoter.steps.github import STEPS as GITHUB_STEPS
from tests.support import objects
from tests.support.controller import Gate, registry_with, running_controller, wait_terminal
from tests.support.github_env import GitHubEnv, running_github_env
from tests.support.gitrepo import make_remote
from tests.support.kube import running_apiserver
from tests.support.steps import make_context

NS = "git-auth"
# No system or user gitconfig: only what the steps and the credentials provider give git.
HERMETIC = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}


@pytest.mark.parametrize(
    ("repo_url", "base", "expected"),
    [
        ("https://github.com/example/gitops.git", "https://github.com", "example/gitops"),
        ("https://GitHub.com/example/gitops", "https://github.com", "example/gitops"),
        ("https://ghe.example.com/org/repo.git", "https://ghe.example.com", "org/repo"),
        ("http://127.0.0.1:8080/o/r.git", "http://127.0.0.1:8080", "o/r"),
        # Not the App's host, scheme or port: no token is offered.
        ("https://gitlab.com/example/gitops.git", "https://github.com", None),
        ("https://github.com.evil.example/example/gitops.git", "https://github.com", None),
        ("http://github.com/example/gitops.git", "https://github.com", None),
        ("http://127.0.0.1:9090/o/r.git", "http://127.0.0.1:8080", None),
        ("ssh://git@github.com/example/gitops.git", "https://github.com", None),
        ("git@github.com:example/gitops.git", "https://github.com", None),
        ("https://github.com/just-an-owner", "https://github.com", None),
    ],
)
def test_only_repositories_on_the_apps_git_host_get_a_token(
    repo_url: str, base: str, expected: str | None
) -> None:
    assert github_repo(repo_url, base) == expected


def test_the_git_host_is_derived_from_the_api_url() -> None:
    from handlers.settings import GitHubSettings

    def base(api: str) -> str:
        return GitHubSettings.from_env({"LONGSHOREMAN_GITHUB_API_URL": api}).git_base_url

    assert base("https://api.github.com") == "https://github.com"
    assert base("https://ghe.example.com/api/v3") == "https://ghe.example.com"
    assert base("https://api.acme.ghe.com") == "https://acme.ghe.com"
    assert base("http://127.0.0.1:8080") == "http://127.0.0.1:8080"


def services(env: GitHubEnv) -> StepServices:
    """What the server gives the steps: the App's git credentials and pull-request port."""
    return StepServices(
        git=GitSettings(env=HERMETIC, credentials=GitHubGitCredentials(env.client)),
        extra={"github": GitHubPullRequests(env.client)},
    )


def context(env: GitHubEnv, name: str) -> StepContext:
    base = make_context(env.tmp, git_env=HERMETIC, work_dir=env.tmp / name)
    return dataclasses.replace(base, services=services(env))


def issued_tokens(env: GitHubEnv) -> list[str]:
    return list(env.fake.tokens)


def refused_only_challenges(env: GitHubEnv) -> bool:
    """Git sends no credentials until the server asks (our credential helper answers a 401):
    every refused request is such a first ``info/refs``, and the next one got in."""
    requests = env.fake.git_requests
    for i, request in enumerate(requests):
        if request.allowed:
            continue
        if not request.path.endswith("/info/refs") or i + 1 >= len(requests):
            return False
        if not requests[i + 1].allowed or requests[i + 1].path != request.path:
            return False
    return bool(requests) and requests[-1].allowed


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[GitHubEnv]:
    async with running_github_env(
        tmp_path,
        repo="example/gitops",
        files={"staging/version.txt": "old\n"},
        git_name="gitops",
        client=RetryPolicy(backoff=0.01, max_wait=1.0),
    ) as env:
        yield env


def _clone_config(url: str, path: str = "./out") -> dict[str, Any]:
    return {"repoURL": url, "checkout": [{"branch": "main", "path": path}]}


def _files_containing(root: Path, needles: list[str]) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if any(n.encode() in data for n in needles):
                found.append(path)
    return found


async def test_without_credentials_the_fake_refuses_git(env: GitHubEnv) -> None:
    ctx = make_context(env.tmp, git_env=HERMETIC)
    with pytest.raises(StepError) as raised:
        await git_clone(ctx, _clone_config(env.git_url))
    assert raised.value.terminal
    assert "could not clone" in raised.value.message
    assert [r.allowed for r in env.fake.git_requests] == [False]


async def test_tokens_are_renewed_before_they_expire_and_each_one_works(env: GitHubEnv) -> None:
    ctx = context(env, "first")
    await git_clone(ctx, _clone_config(env.git_url))
    assert env.fake.tokens_issued == 1
    # 56 minutes later the cached token is within five minutes of its expiry: a new one is used.
    env.skew = 56 * 60
    await git_clone(context(env, "second"), _clone_config(env.git_url))
    assert env.fake.tokens_issued == 2
    assert refused_only_challenges(env)


async def test_a_token_github_no_longer_accepts_fails_without_showing_it(
    env: GitHubEnv, caplog: pytest.LogCaptureFixture
) -> None:
    await git_clone(context(env, "first"), _clone_config(env.git_url))
    token = issued_tokens(env)[0]
    env.fake.revoke_tokens()  # the client still holds it, as after a rotation GitHub did
    with caplog.at_level(logging.DEBUG), pytest.raises(StepError) as raised:
        await git_clone(context(env, "second"), _clone_config(env.git_url))
    message = raised.value.message
    assert raised.value.terminal
    assert message.startswith("git-clone: could not clone")
    assert token not in message and token not in caplog.text
    assert env.fake.git_requests[-1].allowed is False


async def test_a_promotion_clones_pushes_and_opens_a_pr_with_the_installation_token(
    env: GitHubEnv, caplog: pytest.LogCaptureFixture
) -> None:
    steps: list[dict[str, Any]] = [
        {"uses": "git-clone", "config": _clone_config(env.git_url)},
        {
            "uses": "file-write",
            "config": {
                "path": "./out/staging/version.txt",
                "contents": "new\n",
                "overwrite": True,
            },
        },
        {"uses": "git-commit", "config": {"path": "./out", "message": "Deploy"}},
        {
            "uses": "git-push",
            "as": "push",
            "config": {"path": "./out", "generateTargetBranch": True},
        },
        {
            "uses": "git-open-pr",
            "as": "open-pr",
            "config": {
                "repoURL": env.git_url,
                "sourceBranch": "${{ outputs.push.branch }}",
                "targetBranch": "main",
            },
        },
        # Holds the Promotion (and its work directory, removed when it ends) for inspection.
        {"uses": "gate", "config": {"name": "inspected"}},
    ]
    work = env.tmp / "work"
    gate = Gate()
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(running_apiserver(namespaces=[NS]))
        kube = k.Kube(server.api_client())
        await kube.create(
            k.FREIGHT,
            objects.freight(
                "f" * 40,
                namespace=NS,
                warehouse="app",
                images=[{"repoURL": "ghcr.io/example/app", "tag": "1.0.0"}],
            ),
        )
        await kube.create(
            k.STAGES, objects.stage("staging", namespace=NS, warehouse="app", steps=steps)
        )
        await stack.enter_async_context(
            running_controller(
                server,
                work,
                registry=registry_with(gate=gate, **GITHUB_STEPS),
                services=services(env),
            )
        )
        with caplog.at_level(logging.DEBUG):
            await kube.create(
                k.PROMOTIONS,
                objects.promotion("to-staging", "staging", namespace=NS, freight="f" * 40),
            )
            for _ in range(1500):
                if gate.entered:
                    break
                await asyncio.sleep(0.02)
            assert gate.entered, "the Promotion reached the gate"
            # While it waits: git's files of the clone and its worktree hold no token, and the
            # remote URL is the manifest's, without userinfo.
            tokens = issued_tokens(env)
            assert tokens, "the App's installation token was used"
            assert _files_containing(work, tokens) == []
            clone_configs = list(work.rglob("*.git/config"))
            assert clone_configs
            for config in clone_configs:
                assert f"url = {env.git_url}\n" in config.read_text()
            gate.open("inspected")
            done = await wait_terminal(kube, NS, "to-staging", within=30)
    assert done["status"]["phase"] == "Succeeded", json.dumps(done["status"], indent=1)

    branch = "kargo/promotion/to-staging"
    assert env.git.read_file(branch, "staging/version.txt") == "new\n"
    pulls = env.fake.repo("example/gitops").pulls
    assert [(p.head, p.base) for p in pulls.values()] == [(branch, "main")]
    assert refused_only_challenges(env)
    pushes = [r for r in env.fake.git_requests if r.path.endswith("/git-receive-pack")]
    assert pushes, "the branch went over smart HTTP"

    # Nor in the request lines git sent, the logs, or the Promotion.
    assert all(t not in r.path + r.query for t in tokens for r in env.fake.git_requests)
    assert all(t not in caplog.text for t in tokens)
    assert all(t not in json.dumps(done) for t in tokens)
    assert env.git.head(branch) == done["status"]["state"]["push"]["commit"]


def test_our_credential_helper_goes_after_an_operators_own_config_entries() -> None:
    from promoter.ports.gitcmd import CREDENTIAL_HELPER, credential_env
    from promoter.steps.base import GitCredential

    operator = {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.proxy",
        "GIT_CONFIG_VALUE_0": "http://proxy:3128",
    }
    added = credential_env(operator, "https://GitHub.com:443/o/r.git", "x-access-token", "ghs_s3")
    # For that server only: the helper list emptied (an operator's helpers do not answer
    # first), then ours, which reads the two variables of this one git process.
    assert added == {
        "GIT_CONFIG_COUNT": "3",
        "GIT_CONFIG_KEY_1": "credential.https://github.com:443/.helper",
        "GIT_CONFIG_VALUE_1": "",
        "GIT_CONFIG_KEY_2": "credential.https://github.com:443/.helper",
        "GIT_CONFIG_VALUE_2": CREDENTIAL_HELPER,
        "LONGSHOREMAN_GIT_USERNAME": "x-access-token",
        "LONGSHOREMAN_GIT_PASSWORD": "ghs_s3",
    }
    assert "ghs_s3" not in CREDENTIAL_HELPER
    assert credential_env({}, "ssh://git@github.com/o/r.git", "u", "p") is None
    with pytest.raises(ValueError, match="line break"):
        credential_env({}, "https://github.com/o/r.git", "u", "p\nprotocol=evil")
    assert "ghs_s3cret" not in repr(GitCredential("x-access-token", "ghs_s3cret"))


async def test_a_repository_the_app_is_not_installed_on_gets_no_token(env: GitHubEnv) -> None:
    credentials = GitHubGitCredentials(env.client)
    elsewhere = f"{env.fake.url}/example/not-installed.git"
    assert await credentials(elsewhere) is None
    assert await credentials(elsewhere) is None  # remembered: GitHub is asked once
    assert len(env.fake.requests("GET", "/repos/example/not-installed/installation")) == 1
    assert await credentials("https://gitlab.com/example/gitops.git") is None
    found = await credentials(env.git_url)
    assert found is not None and found.username == "x-access-token"
    assert found.password in issued_tokens(env)


async def test_a_github_app_in_a_project_secret_clones_with_a_token_for_that_repository(
    env: GitHubEnv,
) -> None:
    # Kargo's GitHub App Secret (the key base64-encoded, as Kargo once required): its token is
    # minted for the one repository, not the whole installation.
    env.fake.add_repo("example/other", make_remote(env.tmp, {"a": "1\n"}, name="other"))
    key = base64.b64encode(env.fake.private_key.encode()).decode()
    data = {
        "repoURL": f"^{env.fake.url}/example/",
        "repoURLIsRegex": "true",
        "githubAppID": str(env.fake.app_id),
        "githubAppInstallationID": "1",
        "githubAppPrivateKey": key,
    }
    async with running_apiserver(namespaces=[NS]) as server:
        kube = k.Kube(server.api_client())
        await kube.create(
            k.SECRETS,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": "github-app",
                    "namespace": NS,
                    "labels": {"kargo.akuity.io/cred-type": "git"},
                },
                "data": {k_: base64.b64encode(v.encode()).decode() for k_, v in data.items()},
            },
        )
        tokens = SecretAppTokens(configured=env.fake.settings())
        credentials = ClusterCredentials(kube, allow_http=True, app_tokens=tokens)
        base = make_context(env.tmp, git_env=HERMETIC, work_dir=env.tmp / "secret-app")
        ctx = dataclasses.replace(
            base,
            project=NS,
            services=StepServices(git=GitSettings(env=HERMETIC, credentials=credentials)),
        )
        try:
            await git_clone(ctx, _clone_config(env.git_url))
            assert (ctx.work_dir / "out" / "staging" / "version.txt").read_text() == "old\n"
            [token] = env.fake.tokens
            assert env.fake.token_repos[token] == {"gitops"}
            # The same App, another project: no Secret there, no token.
            assert await credentials.get("elsewhere", CredentialType.GIT, env.git_url) is None
        finally:
            await tokens.close()
    assert refused_only_challenges(env)
