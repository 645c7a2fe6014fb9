"""Repository credentials as Kargo keeps them: labelled Secrets, matched by repoURL.

The matching is Kargo's ``TestGet`` (``pkg/credentials/kubernetes/database_test.go``) ported
case by case, run through :class:`app.controller.credentials.ClusterCredentials` against the
Kubernetes API emulator (real HTTP, real label selectors), plus the rules Kargo documents but
does not test: exact matches before patterns whatever the names, our own label name, a Secret
holding a GitHub App, the order after the Secrets (the GitHub App, the operator's files), and
that a project never gets another project's Secret.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from app.controller import kube as k
from app.controller.credentials import ClusterCredentials
from app.controller.warehouses.credentials import DockerConfigCredentials
from promoter.ports.credentials import Credential, CredentialsError, CredentialType
from promoter.rules.credentials import (
    GitHubAppKey,
    Source,
    find_secret,
    lookup_order,
    parse_secret,
)
from tests.support.kube import RunningApiServer, running_apiserver
from tests.support.rbac import Rbac, ServiceAccount, authorizing_proxy

PROJECT = "fake-namespace"
SHARED = "shared-namespace"
OTHER = "other-project"
# Deliberately without .git: normalization makes it match "...kargo.git" and back.
GIT_URL = "https://github.com/akuity/kargo"
INSECURE_GIT_URL = "http://github.com/akuity/bogus.git"
# Could be mistaken for an SCP-style git URL: image URLs are not normalized as git URLs.
IMAGE_URL = "my-registry.io:5000/image"
OCI_URL = "oci://foo/bar/something"

GIT, IMAGE, HELM = CredentialType.GIT, CredentialType.IMAGE, CredentialType.HELM


def secret(
    name: str,
    namespace: str,
    kind: str,
    repo_url: str,
    username: str,
    *,
    regex: bool = False,
    password: str = "fake-password",
    label: str = "kargo.akuity.io/cred-type",
    **extra: str,
) -> dict[str, Any]:
    data = {"repoURL": repo_url, "username": username, "password": password, **extra}
    if regex:
        data["repoURLIsRegex"] = "true"
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": {label: kind}},
        "data": {key: base64.b64encode(v.encode()).decode() for key, v in data.items() if v},
    }


# Kargo's fixtures, by the name of their variable in database_test.go.
PROJECT_GIT_EXACT = secret("project-credential-git-repo-url", PROJECT, "git", GIT_URL,
                           "project-exact")  # fmt: skip
PROJECT_GIT_PATTERN = secret("project-credential-git-repo-url-pattern", PROJECT, "git", GIT_URL,
                             "project-pattern", regex=True)  # fmt: skip
PROJECT_GIT_INSECURE = secret("project-credential-git-insecure-repo-url", PROJECT, "git",
                              INSECURE_GIT_URL, "project-insecure")  # fmt: skip
SHARED_GIT_EXACT = secret("shared-credential-git-repo-url", SHARED, "git", GIT_URL,
                          "shared-exact")  # fmt: skip
SHARED_GIT_PATTERN = secret("shared-credential-git-repo-url-pattern", SHARED, "git", GIT_URL,
                            "shared-pattern", regex=True)  # fmt: skip
PROJECT_IMAGE_EXACT = secret("project-credential-image-repo-url", PROJECT, "image", IMAGE_URL,
                             "project-exact")  # fmt: skip
PROJECT_IMAGE_PATTERN = secret("project-credential-image-repo-url-pattern", PROJECT, "image",
                               IMAGE_URL, "project-pattern", regex=True)  # fmt: skip
SHARED_IMAGE_EXACT = secret("shared-credential-image-repo-url", SHARED, "image", IMAGE_URL,
                            "shared-exact")  # fmt: skip
SHARED_IMAGE_PATTERN = secret("shared-credential-image-repo-url-pattern", SHARED, "image",
                              IMAGE_URL, "shared-pattern", regex=True)  # fmt: skip
PROJECT_CHART_PATTERN = secret("project-credential-chart-repo-url-pattern", PROJECT, "helm",
                               "^oci://foo/bar", "username", regex=True,
                               password="password")  # fmt: skip

# (name, secrets, allow http, type, repoURL, expected username or None)
KARGO_TABLE: list[tuple[str, list[dict[str, Any]], bool, CredentialType, str, str | None]] = [
    ("git URL exact match in project namespace", [PROJECT_GIT_EXACT], False, GIT, GIT_URL,
     "project-exact"),
    ("git URL pattern match in project namespace", [PROJECT_GIT_PATTERN], False, GIT, GIT_URL,
     "project-pattern"),
    ("git URL exact match in shared namespace", [SHARED_GIT_EXACT], False, GIT, GIT_URL,
     "shared-exact"),
    ("git URL pattern match in shared namespace", [SHARED_GIT_PATTERN], False, GIT, GIT_URL,
     "shared-pattern"),
    ("image URL exact match in project namespace", [PROJECT_IMAGE_EXACT], False, IMAGE,
     IMAGE_URL, "project-exact"),
    ("image URL pattern match in project namespace", [PROJECT_IMAGE_PATTERN], False, IMAGE,
     IMAGE_URL, "project-pattern"),
    ("image URL exact match in shared namespace", [SHARED_IMAGE_EXACT], False, IMAGE, IMAGE_URL,
     "shared-exact"),
    ("image URL pattern match in shared namespace", [SHARED_IMAGE_PATTERN], False, IMAGE,
     IMAGE_URL, "shared-pattern"),
    ("precedence: exact match in project namespace over pattern match",
     [PROJECT_GIT_EXACT, PROJECT_GIT_PATTERN], False, GIT, GIT_URL, "project-exact"),
    ("precedence: exact match in shared namespace over pattern match",
     [SHARED_GIT_EXACT, SHARED_GIT_PATTERN], False, GIT, GIT_URL, "shared-exact"),
    ("precedence: match in project namespace over match in shared namespace",
     [PROJECT_GIT_EXACT, SHARED_GIT_EXACT], False, GIT, GIT_URL, "project-exact"),
    ("no match",
     [PROJECT_GIT_EXACT, PROJECT_GIT_PATTERN, SHARED_GIT_EXACT, SHARED_GIT_PATTERN], False, GIT,
     "http://github.com/no/secrets/should/match/this.git", None),
    ("insecure HTTP endpoint", [PROJECT_GIT_INSECURE], False, GIT, INSECURE_GIT_URL, None),
    ("insecure HTTP endpoint allowed", [PROJECT_GIT_INSECURE], True, GIT, INSECURE_GIT_URL,
     "project-insecure"),
    ("regex normalization", [PROJECT_CHART_PATTERN], False, HELM, OCI_URL, "username"),
]  # fmt: skip


@pytest.fixture
async def api() -> AsyncIterator[RunningApiServer]:
    async with running_apiserver(namespaces=[PROJECT, SHARED, OTHER]) as running:
        yield running


async def put(api: RunningApiServer, *secrets: Mapping[str, Any]) -> k.Kube:
    kube = k.Kube(api.api_client())
    for s in secrets:
        await kube.create(k.SECRETS, dict(s))
    return kube


@pytest.mark.parametrize(
    ("secrets", "allow_http", "kind", "repo_url", "expected"),
    [case[1:] for case in KARGO_TABLE],
    ids=[case[0] for case in KARGO_TABLE],
)
async def test_kargos_credential_matching_table(
    api: RunningApiServer,
    secrets: list[dict[str, Any]],
    allow_http: bool,
    kind: CredentialType,
    repo_url: str,
    expected: str | None,
) -> None:
    kube = await put(api, *secrets)
    credentials = ClusterCredentials(kube, global_namespace=SHARED, allow_http=allow_http)
    found = await credentials.get(PROJECT, kind, repo_url)
    assert (found.username if found else None) == expected
    if found is not None:
        matched = [s for s in secrets if s["metadata"]["name"] in found.source]
        assert len(matched) == 1
        assert found.password == base64.b64decode(matched[0]["data"]["password"]).decode()


async def test_every_secret_request_is_a_labelled_list_of_one_namespace(
    api: RunningApiServer,
) -> None:
    kube = await put(api, PROJECT_GIT_EXACT)
    await ClusterCredentials(kube, global_namespace=SHARED).get(PROJECT, GIT, "https://x.y/z")
    secret_requests = [r for r in api.requests if "/secrets" in r.path and r.method == "GET"]
    assert [r.path for r in secret_requests] == [
        f"/api/v1/namespaces/{PROJECT}/secrets",
        f"/api/v1/namespaces/{PROJECT}/secrets",
        f"/api/v1/namespaces/{SHARED}/secrets",
        f"/api/v1/namespaces/{SHARED}/secrets",
    ]
    assert [parse_qs(r.query)["labelSelector"] for r in secret_requests] == [
        ["kargo.akuity.io/cred-type=git"],
        ["longshoreman.dev/cred-type=git"],
    ] * 2


async def test_a_projects_secret_never_serves_another_project(api: RunningApiServer) -> None:
    kube = await put(api, PROJECT_GIT_EXACT, PROJECT_IMAGE_EXACT)
    credentials = ClusterCredentials(kube, global_namespace=SHARED)
    assert await credentials.get(PROJECT, GIT, GIT_URL) is not None
    assert await credentials.get(OTHER, GIT, GIT_URL) is None
    assert await credentials.get(OTHER, IMAGE, IMAGE_URL) is None
    # Without a global namespace, nothing is shared at all.
    kube = await put(api, SHARED_GIT_EXACT)
    shared = await ClusterCredentials(kube, global_namespace=SHARED).get(OTHER, GIT, GIT_URL)
    assert shared is not None and shared.username == "shared-exact"
    assert await ClusterCredentials(kube, global_namespace=None).get(OTHER, GIT, GIT_URL) is None


async def test_exact_matches_come_before_patterns_whatever_the_names(
    api: RunningApiServer,
) -> None:
    # "a-..." sorts first but is a pattern: the exact "z-..." still wins (Kargo's docs).
    kube = await put(
        api,
        secret("a-pattern", PROJECT, "git", "^https://github.com/", "pattern", regex=True),
        secret("z-exact", PROJECT, "git", GIT_URL + ".git/", "exact"),
        secret("b-pattern", PROJECT, "git", "^https://github.com/akuity/", "b", regex=True),
    )
    credentials = ClusterCredentials(kube)
    assert (await credentials.get(PROJECT, GIT, GIT_URL)) == Credential(
        "exact", "fake-password", f"Secret {PROJECT}/z-exact"
    )
    # Among patterns, the first by name that matches.
    found = await credentials.get(PROJECT, GIT, "https://github.com/akuity/other")
    assert found is not None and found.username == "pattern"
    found = await credentials.get(PROJECT, GIT, "https://gitlab.com/akuity/other")
    assert found is None


async def test_our_own_label_name_works_and_other_types_do_not_match(
    api: RunningApiServer,
) -> None:
    kube = await put(
        api,
        secret("ours", PROJECT, "git", GIT_URL, "ours", label="longshoreman.dev/cred-type"),
        secret("generic", PROJECT, "generic", IMAGE_URL, "generic"),
        {  # no label: never listed, whatever it holds
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "unlabelled", "namespace": PROJECT},
            "data": {"repoURL": base64.b64encode(IMAGE_URL.encode()).decode()},
        },
    )
    credentials = ClusterCredentials(kube)
    found = await credentials.get(PROJECT, GIT, GIT_URL + ".git")
    assert found is not None and found.username == "ours"
    assert await credentials.get(PROJECT, IMAGE, IMAGE_URL) is None
    assert await credentials.get(PROJECT, HELM, GIT_URL) is None


async def test_a_secret_holding_a_github_app_gives_its_installation_token(
    api: RunningApiServer,
) -> None:
    app_secret = secret(
        "github-app", PROJECT, "git", "^https://github.com/akuity/", "", regex=True,
        password="", githubAppID="123", githubAppInstallationID="456",
        githubAppPrivateKey="-----BEGIN RSA PRIVATE KEY-----\n...",
    )  # fmt: skip
    kube = await put(api, app_secret)
    asked: list[tuple[GitHubAppKey, str]] = []

    async def mint(app: GitHubAppKey, repo_url: str) -> Credential:
        asked.append((app, repo_url))
        return Credential("kargo", "ghs_minted")

    credentials = ClusterCredentials(kube, app_tokens=mint)
    found = await credentials.get(PROJECT, GIT, GIT_URL)
    assert found == Credential("kargo", "ghs_minted", f"Secret {PROJECT}/github-app")
    assert [(a.app_id, a.installation_id, u) for a, u in asked] == [("123", 456, GIT_URL)]
    assert "BEGIN" not in repr(asked[0][0])


async def test_after_the_secrets_come_the_github_app_then_the_operators_files(
    api: RunningApiServer, tmp_path: Path
) -> None:
    config = tmp_path / "config.json"
    auth = base64.b64encode(b"operator:op-password").decode()
    config.write_text(json.dumps({"auths": {"my-registry.io:5000": {"auth": auth}}}))

    class App:
        async def get(self, project: str, kind: CredentialType, url: str) -> Credential | None:
            return Credential("x-access-token", "ghs_app") if "github.com" in url else None

    kube = await put(api, PROJECT_IMAGE_EXACT)
    credentials = ClusterCredentials(
        kube, global_namespace=SHARED, app=App(), docker_config=DockerConfigCredentials(config)
    )
    assert (await credentials.get(PROJECT, IMAGE, IMAGE_URL)).username == "project-exact"  # type: ignore[union-attr]
    assert (await credentials.get(OTHER, IMAGE, IMAGE_URL)).username == "operator"  # type: ignore[union-attr]
    assert (await credentials.get(OTHER, GIT, GIT_URL)).password == "ghs_app"  # type: ignore[union-attr]
    # git never reads the docker config: its fallback is the operator's gitconfig, in git.
    assert await credentials.get(OTHER, GIT, "https://gitlab.com/a/b") is None
    assert lookup_order(PROJECT, SHARED) == (
        (Source.PROJECT, PROJECT),
        (Source.GLOBAL, SHARED),
        (Source.GITHUB_APP, ""),
        (Source.OPERATOR, ""),
    )
    assert lookup_order(SHARED, SHARED)[1] == (Source.GITHUB_APP, "")


async def test_a_namespace_the_controller_may_not_read_is_a_clear_refusal(
    api: RunningApiServer,
) -> None:
    # RBAC that grants this ServiceAccount nothing: kube-apiserver's 403, through the proxy.
    user = ServiceAccount("longshoreman", "longshoreman")
    async with authorizing_proxy(api, Rbac([]), user) as proxy:
        kube = k.Kube(proxy.server.api_client())
        with pytest.raises(CredentialsError) as refused:
            await ClusterCredentials(kube).get(PROJECT, GIT, GIT_URL)
    assert str(refused.value) == (
        f"could not read the git credentials for {GIT_URL} in namespace '{PROJECT}': 403 Forbidden"
    )
    assert refused.value.retry_after is None  # a refusal stays one
    api.faults.add("error", methods="GET", path_pattern="/secrets$", times=10)
    with pytest.raises(CredentialsError) as failed:
        await ClusterCredentials(await put(api)).get(PROJECT, GIT, GIT_URL)
    assert failed.value.retry_after is not None  # trouble passes


def test_secrets_are_parsed_as_kargo_writes_them() -> None:
    parsed = parse_secret(PROJECT_GIT_PATTERN)
    assert parsed is not None and parsed.is_regex and parsed.usable
    assert "fake-password" not in repr(parsed)
    assert parse_secret(secret("x", PROJECT, "generic", GIT_URL, "u")) is None
    assert parse_secret(secret("x", PROJECT, "git", "", "u")) is None
    no_password = parse_secret(secret("x", PROJECT, "git", GIT_URL, "u", password=""))
    assert no_password is not None and not no_password.usable
    bad_app = parse_secret(
        secret("x", PROJECT, "git", GIT_URL, "", githubAppID="1",
               githubAppInstallationID="one", githubAppPrivateKey="k")
    )  # fmt: skip
    assert bad_app is not None and "not a number" in bad_app.problem
    # Kargo: the first match wins even when it has nothing to give.
    first = parse_secret(secret("a", PROJECT, "git", GIT_URL, "u", password=""))
    second = parse_secret(secret("b", PROJECT, "git", GIT_URL, "v"))
    assert first is not None and second is not None
    assert find_secret([second, first], GIT, GIT_URL) is first
    # A pattern that does not compile is passed over; one that backtracks is linear here.
    broken = parse_secret(secret("a", PROJECT, "git", "([", "u", regex=True))
    slow = parse_secret(secret("b", PROJECT, "git", "(a+)+$", "v", regex=True))
    assert broken is not None and slow is not None
    assert find_secret([broken, slow], GIT, "a" * 40 + "!") is None
