"""A fake GitHub: the REST API subset Longshoreman uses, over HTTP on 127.0.0.1, with real git.

The real gidgethub client talks to it exactly as it talks to api.github.com. Repositories are
local bare repositories (:mod:`tests.support.gitrepo`): a pull request is a pair of branches in
one, and merging it is a real ``git merge-tree`` + ``commit-tree`` onto the base branch, so the
merge commit is a real commit the git steps can fetch. Where the REST API has rules a client can
trip over, the fake keeps them: App JWTs are verified (RS256, ``iat``/``exp``), installation
tokens expire and are scoped to their installation's repositories, ``GET`` responses carry ETags
and answer ``If-None-Match`` with ``304`` (not billed), every response carries
``x-ratelimit-*`` headers, check runs are validated against GitHub's documented limits, and
creating a pull request with no commits, or a second open one for the same head and base, is a
``422``.

Test controls:

- ``fake.faults.add(status=503, path="/pulls/", times=2)``: the next matching requests fail;
  ``fake.exhaust_rate_limit(reset_in=1.0)``: the primary limit is spent until the reset;
  ``fake.faults.add(status=403, secondary=True, retry_after=0)``: a secondary limit.
- User actions: ``open_pull``, ``merge``, ``close``, ``add_comment``, ``set_permission``,
  ``add_team_member``, ``add_deployment`` (someone else's Deployment). With
  ``deliver_to(url, secret)`` the fake sends the signed ``pull_request``/``check_run`` webhooks
  a user's action causes, as GitHub does.
- Deployments (``POST``/``GET /repos/{o}/{r}/deployments``, ``POST``/``GET .../statuses``) in
  GitHub's REST shapes: lists newest first with Link pagination, ``409`` when
  ``required_contexts`` is left out and a check on the commit is not green, ``auto_inactive``
  as GitHub applies it, ``deny_permission("deployments")`` for an installation that lacks the
  permission (403 "Resource not accessible by integration"), and signed ``deployment_status``
  webhooks for every status with ``deliver_to``. ``deployments(repo)`` and ``states(d)`` read
  them back; ``after_request`` is called once each request was served.
- Git over smart HTTP: the fake serves each repository's bare repo at
  ``{fake.url}/{owner}/{name}.git`` through ``git http-backend`` (CGI), demanding what GitHub
  demands of an App: ``Authorization: Basic`` with user ``x-access-token`` and a currently valid
  installation token of the repository's installation (no credentials -> 401, another
  installation's token -> 404). ``fake.git_url(full_name)`` is that URL; ``fake.git_requests``
  records each request (path, query and whether it was let in; never the credentials);
  ``fake.revoke_tokens()`` makes every token issued so far invalid. Because the git host is
  the API's own host and port, ``GitHubSettings.git_base_url`` maps such URLs to the App.
- OAuth web flow (the status pages' GitHub sign-in): ``add_oauth_app(client_id, secret)``,
  ``sign_in_as(login)`` (who the browser is signed in to GitHub as; the authorize page then
  approves at once and redirects back with a code), ``add_org_member(org, login,
  state="active")``. Served: ``GET /login/oauth/authorize``, ``POST
  /login/oauth/access_token`` (single-use codes; errors as GitHub's 200 + ``error``), ``GET
  /user`` and ``GET /user/memberships/orgs/{org}`` (needs the ``read:org`` scope; 404 for
  non-members) with the user's token.
- Payloads built from our fixtures in ``tests/fixtures/github`` (GitHub's documented shapes;
  tests/conformance/test_github_payloads.py holds them against GitHub's own samples) with the
  fake's own objects swapped in (:meth:`FakeGitHub.comment_payload`, :meth:`pr_payload`), and
  :func:`webhook_request` to sign any body.

    async with running_fake_github() as gh:
        repo = gh.add_repo("example/gitops", make_remote(tmp_path, {"a.txt": "1"}))
        settings = gh.settings(webhook_secret="s3cret")   # a GitHubSettings for this fake
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import functools
import hashlib
import hmac
import itertools
import json
import re
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp
import jwt
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from handlers.settings import GitHubSettings
from tests.support.fixtures import GITHUB
from tests.support.githttp import serve_git
from tests.support.github_openapi import body_problems, operation_of
from tests.support.gitrepo import TEST_USER_EMAIL, RemoteRepo

WEB_URL = "https://github.com"
APP_ID = 4242
APP_SLUG = "longshoreman"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
RATE_LIMIT = 5000
# GitHub's smart HTTP paths: /{owner}/{name}.git/info/refs, /git-upload-pack, /git-receive-pack.
_OAUTH_PATH = re.compile(r"^/(login/oauth/.*|user|user/.*)$")
_GIT_PATH = re.compile(r"^/(?P<owner>[^/]+)/(?P<name>[^/]+)\.git/(?P<rest>.*)$")


@functools.lru_cache(maxsize=1)
def app_private_key() -> str:
    """One RSA key per test process (generating one takes a moment)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def fixture(name: str) -> dict[str, Any]:
    """A fresh copy of one of our webhook payloads (tests/fixtures/github), e.g.
    ``issue_comment.created``."""
    data: dict[str, Any] = json.loads((GITHUB / f"{name}.json").read_text())
    return data


def sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def webhook_request(
    event: str,
    payload: Mapping[str, Any] | bytes,
    secret: str | None,
    *,
    delivery: str | None = None,
    signature: str | None = None,
) -> tuple[dict[str, str], bytes]:
    """Headers and body of a delivery as GitHub sends it (``secret=None``: unsigned)."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {
        "content-type": "application/json",
        "x-github-event": event,
        "x-github-delivery": delivery or str(uuid.uuid4()),
        "user-agent": "GitHub-Hookshot/fake",
    }
    if signature is not None:
        headers["x-hub-signature-256"] = signature
    elif secret is not None:
        headers["x-hub-signature-256"] = sign(body, secret)
    return headers, body


def _json(raw: bytes) -> Any:
    """A request body as JSON (None when empty or not JSON)."""
    try:
        return json.loads(raw) if raw.strip() else None
    except ValueError:
        return None


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- state -------------------------------------------------------------------------------------


@dataclass
class Fault:
    status: int
    method: str | None = None
    path: str | None = None  # substring of the request path
    times: int = 1
    retry_after: float | None = None
    secondary: bool = False
    message: str | None = None


class Faults:
    def __init__(self) -> None:
        self.pending: list[Fault] = []

    def add(
        self,
        status: int = 503,
        *,
        method: str | None = None,
        path: str | None = None,
        times: int = 1,
        retry_after: float | None = None,
        secondary: bool = False,
        message: str | None = None,
    ) -> None:
        self.pending.append(Fault(status, method, path, times, retry_after, secondary, message))

    def take(self, method: str, path: str) -> Fault | None:
        for fault in self.pending:
            if fault.method and fault.method != method:
                continue
            if fault.path and fault.path not in path:
                continue
            fault.times -= 1
            if fault.times <= 0:
                self.pending.remove(fault)
            return fault
        return None


@dataclass
class Logged:
    method: str
    path: str
    status: int
    installation: int | None
    # The JSON body of a write (POST, PATCH, PUT, DELETE), as sent; None for reads.
    body: Any = None


@dataclass
class ApiCall:
    """A request to one of the operations of tests/fixtures/github-openapi (see
    :mod:`tests.support.github_openapi`): which operation, the JSON body as sent, the answer."""

    operation: str
    method: str
    path: str
    body: Any
    status: int


@dataclass
class GitRequest:
    """One request to the fake's git server (credentials are never kept)."""

    method: str
    path: str
    query: str
    allowed: bool


@dataclass
class Pull:
    number: int
    title: str
    body: str
    head: str
    base: str
    user: str
    head_sha: str
    base_sha: str
    state: str = "open"
    merged: bool = False
    merge_commit_sha: str | None = None
    merged_by: str | None = None
    labels: list[str] = field(default_factory=list)
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)
    closed_at: str | None = None
    merged_at: str | None = None


# The address GitHub commits merges made on github.com with (the ``web-flow`` account).
WEB_FLOW_EMAIL = "noreply@github.com"


@dataclass
class Repo:
    owner: str
    name: str
    git: RemoteRepo
    installation: int
    id: int
    permissions: dict[str, str] = field(default_factory=dict)
    pulls: dict[int, Pull] = field(default_factory=dict)
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    check_runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    # Deployments by id; each keeps its statuses, oldest first, in ``_statuses``.
    deployments: dict[int, dict[str, Any]] = field(default_factory=dict)
    # Commits GitHub made and signed itself (created through the API with no author, committer
    # or signature): its "Verified" badge. Branches whose protection requires such commits.
    verified: set[str] = field(default_factory=set)
    required_signatures: set[str] = field(default_factory=set)
    next_number: int = 1

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def html_url(self) -> str:
        return f"{WEB_URL}/{self.full_name}"

    def take_number(self) -> int:
        number = self.next_number
        self.next_number += 1
        return number


class ApiError(Exception):
    def __init__(
        self, status: int, message: str, *, headers: Mapping[str, str] | None = None, **extra: Any
    ) -> None:
        super().__init__(message)
        self.status = status
        self.headers = dict(headers or {})
        self.body = {"message": message, **extra}


def _validation(message: str, errors: list[Any] | None = None) -> ApiError:
    return ApiError(422, "Validation Failed", errors=errors or [{"message": message}])


_LIMITS = {"label": 20, "identifier": 20, "description": 40}


def _check_run_problems(data: Mapping[str, Any], *, creating: bool) -> None:
    """GitHub's documented limits for check runs (REST "Create a check run")."""
    if creating and not data.get("name"):
        raise _validation("name is missing", [{"field": "name", "code": "missing_field"}])
    if creating and not data.get("head_sha"):
        raise _validation("head_sha is missing", [{"field": "head_sha", "code": "missing_field"}])
    status = data.get("status")
    if status is not None and status not in ("queued", "in_progress", "completed"):
        raise _validation(f"status {status!r} is invalid")
    if status == "completed" and not data.get("conclusion"):
        raise _validation("conclusion is required when status is completed")
    conclusion = data.get("conclusion")
    if conclusion is not None and conclusion not in (
        "action_required",
        "cancelled",
        "failure",
        "neutral",
        "success",
        "skipped",
        "stale",
        "timed_out",
    ):
        raise _validation(f"conclusion {conclusion!r} is invalid")
    output = data.get("output")
    if output is not None:
        if not output.get("title") or not output.get("summary"):
            raise _validation("output needs a title and a summary")
        for key in ("summary", "text"):
            if len(output.get(key) or "") > 65535:
                raise _validation(f"output.{key} is longer than 65535 characters")
    actions = data.get("actions")
    if actions is not None:
        if len(actions) > 3:
            raise _validation("at most 3 actions are allowed")
        for action in actions:
            for key, limit in _LIMITS.items():
                value = action.get(key)
                if not value:
                    raise _validation(f"actions[].{key} is required")
                if len(value) > limit:
                    raise _validation(f"actions[].{key} is longer than {limit} characters")


# ---- the server --------------------------------------------------------------------------------


class FakeGitHub:
    """State and handlers of the fake; :func:`running_fake_github` serves it."""

    def __init__(self, *, token_ttl: float = 3600.0) -> None:
        self.url = ""  # set once served
        self.app_id = APP_ID
        self.private_key = app_private_key()
        self._public_key = serialization.load_pem_private_key(
            self.private_key.encode(), password=None
        ).public_key()
        self.token_ttl = token_ttl
        self.repos: dict[str, Repo] = {}
        self.tokens: dict[str, tuple[int, float]] = {}
        # Tokens narrowed to some repositories of their installation (by name).
        self.token_repos: dict[str, set[str]] = {}
        self.teams: dict[tuple[str, str], set[str]] = {}
        self.faults = Faults()
        self.log: list[Logged] = []
        self.tokens_issued = 0
        self.jwt_iat: list[int] = []
        self.rate_remaining: dict[int, int] = {}
        self.rate_reset: dict[int, float] = {}
        # Permissions an installation was granted; absent: all that the App's manifest asks for.
        self.denied: dict[int, set[str]] = {}
        # Called with (method, path) once a request was served, before the client has the
        # answer: a test may SIGKILL the client there (its write landed, it never learns so).
        self.after_request: Callable[[str, str], None] | None = None
        self._ids = itertools.count(1000)
        self._delivery: tuple[str, str] | None = None
        self.deliveries: list[tuple[str, int]] = []
        self.git_requests: list[GitRequest] = []
        # Requests to the operations of tests/fixtures/github-openapi, and every way one of them
        # (or the fake's answer to it) left what GitHub documents; see h_* of the git database.
        self.calls: list[ApiCall] = []
        self.contract_problems: list[str] = []
        # OAuth: client_id -> secret; code -> (client_id, login, scope); token -> (login, scope).
        self.oauth_apps: dict[str, str] = {}
        self.oauth_codes: dict[str, tuple[str, str, str]] = {}
        self.user_tokens: dict[str, tuple[str, str]] = {}
        self.oauth_login: str | None = None
        self.org_members: dict[str, dict[str, str]] = {}
        # The accounts GitHub links commit e-mails to (a user's verified addresses): a commit's
        # ``author`` / ``committer`` login, null for an address no account has. The suite's
        # commits are made by the test identity on behalf of alice, the default user of the
        # fake's pull requests; a merge through the fake is authored by its merger's address.
        self.emails: dict[str, str] = {TEST_USER_EMAIL: "alice", WEB_FLOW_EMAIL: "web-flow"}
        self._session: aiohttp.ClientSession | None = None
        self.app = web.Application(middlewares=[self._middleware])
        self._routes()

    # ---- configuration --------------------------------------------------------------------------

    def settings(self, webhook_secret: str = "webhook-secret", **env: str) -> GitHubSettings:
        return GitHubSettings.from_env(
            {
                "LONGSHOREMAN_GITHUB_APP_ID": str(self.app_id),
                "LONGSHOREMAN_GITHUB_PRIVATE_KEY": self.private_key,
                "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET": webhook_secret,
                "LONGSHOREMAN_GITHUB_API_URL": self.url,
                **env,
            }
        )

    def add_repo(self, full_name: str, git: RemoteRepo, *, installation: int = 1) -> Repo:
        owner, name = full_name.split("/")
        repo = Repo(owner, name, git, installation, next(self._ids))
        self.repos[full_name.lower()] = repo
        return repo

    def repo(self, full_name: str) -> Repo:
        return self.repos[full_name.lower()]

    def set_permission(self, full_name: str, user: str, permission: str) -> None:
        self.repo(full_name).permissions[user.lower()] = permission

    def add_team_member(self, org: str, team: str, user: str) -> None:
        self.teams.setdefault((org.lower(), team.lower()), set()).add(user.lower())

    def deny_permission(self, permission: str, installation: int = 1) -> None:
        """The installation was not granted ``permission`` (say, an owner who has not accepted
        the App's request for ``deployments``): its endpoints answer GitHub's 403."""
        self.denied.setdefault(installation, set()).add(permission)

    def exhaust_rate_limit(self, installation: int = 1, reset_in: float = 1.0) -> None:
        self.rate_remaining[installation] = 0
        self.rate_reset[installation] = time.time() + reset_in

    def deliver_to(self, url: str, secret: str) -> None:
        """Send the webhooks users' actions cause (merge, close) to ``url``, signed."""
        self._delivery = (url, secret)

    def git_url(self, full_name: str) -> str:
        """The smart-HTTP clone URL of a repository (``http://127.0.0.1:PORT/owner/name.git``)."""
        return f"{self.url}/{self.repo(full_name).full_name}.git"

    def add_oauth_app(self, client_id: str, client_secret: str) -> None:
        self.oauth_apps[client_id] = client_secret

    def sign_in_as(self, login: str | None) -> None:
        """The browser is signed in to GitHub as ``login`` (None: signed out)."""
        self.oauth_login = login

    def add_org_member(self, org: str, login: str, state: str = "active") -> None:
        self.org_members.setdefault(org.lower(), {})[login.lower()] = state

    def revoke_tokens(self) -> None:
        """Every installation token issued so far stops working (as after a key rotation)."""
        self.tokens.clear()

    def requests(self, method: str | None = None, path: str = "") -> list[Logged]:
        return [r for r in self.log if (method is None or r.method == method) and path in r.path]

    # ---- user actions (what people do in the web UI) --------------------------------------------

    async def open_pull(
        self, full_name: str, head: str, base: str, *, title: str = "change", user: str = "alice"
    ) -> dict[str, Any]:
        repo = self.repo(full_name)
        pull = await asyncio.to_thread(self._create_pull, repo, head, base, title, "", user)
        return self._pull_json(repo, pull)

    async def merge(
        self, full_name: str, number: int, *, by: str = "alice", method: str = "merge"
    ) -> dict[str, Any]:
        repo = self.repo(full_name)
        pull = repo.pulls[number]
        await asyncio.to_thread(self._merge, repo, pull, method, by, None)
        data = self._pull_json(repo, pull)
        await self._deliver("pull_request", self.pr_payload(full_name, number, "closed"))
        return data

    async def close(self, full_name: str, number: int) -> dict[str, Any]:
        repo = self.repo(full_name)
        pull = repo.pulls[number]
        pull.state, pull.closed_at, pull.updated_at = "closed", _now(), _now()
        await self._deliver("pull_request", self.pr_payload(full_name, number, "closed"))
        return self._pull_json(repo, pull)

    def add_issue(self, full_name: str, title: str = "an issue", user: str = "alice") -> int:
        repo = self.repo(full_name)
        number = repo.take_number()
        repo.issues[number] = {"number": number, "title": title, "user": user}
        return number

    def add_comment(
        self, full_name: str, number: int, body: str, *, user: str = "alice", bot: bool = False
    ) -> dict[str, Any]:
        repo = self.repo(full_name)
        comment = self._new_comment(repo, number, body, user, bot=bot)
        return comment

    def comments(self, full_name: str, number: int) -> list[dict[str, Any]]:
        repo = self.repo(full_name)
        return [c for c in repo.comments.values() if c["_issue"] == number]

    def check_runs(self, full_name: str, sha: str | None = None) -> list[dict[str, Any]]:
        repo = self.repo(full_name)
        return [c for c in repo.check_runs.values() if sha is None or c["head_sha"] == sha]

    def add_deployment(
        self,
        full_name: str,
        sha: str,
        environment: str,
        *,
        user: str = "carol",
        state: str | None = "success",
    ) -> dict[str, Any]:
        """A Deployment someone else (a person, another tool) made, with one status."""
        repo = self.repo(full_name)
        deployment = self._new_deployment(
            repo, sha, sha, {"environment": environment}, {"login": user, "type": "User"}, None
        )
        if state is not None:
            self._new_deployment_status(
                repo, deployment, {"state": state}, {"login": user, "type": "User"}, None
            )
        return deployment

    async def set_deployment_status(
        self, full_name: str, deployment_id: int, state: str, *, user: str = "carol"
    ) -> dict[str, Any]:
        """Someone sets a status on a Deployment (any one: ours too); its webhook is sent."""
        repo = self.repo(full_name)
        deployment = repo.deployments[deployment_id]
        status = self._new_deployment_status(
            repo, deployment, {"state": state}, {"login": user, "type": "User"}, None
        )
        await self._deliver_deployment_status(repo, deployment, status)
        return status

    def delete_deployment(self, full_name: str, deployment_id: int) -> None:
        """Someone deletes a Deployment (GitHub allows it once it is inactive)."""
        deployment = self.repo(full_name).deployments[deployment_id]
        if deployment["_statuses"] and deployment["_statuses"][-1]["state"] != "inactive":
            raise ValueError("only an inactive Deployment can be deleted")
        del self.repo(full_name).deployments[deployment_id]

    def deployments(self, full_name: str, environment: str | None = None) -> list[dict[str, Any]]:
        """The repository's Deployments, oldest first (statuses in ``_statuses``)."""
        repo = self.repo(full_name)
        return [
            d
            for d in repo.deployments.values()
            if environment is None or d["environment"] == environment
        ]

    @staticmethod
    def states(deployment: Mapping[str, Any]) -> list[str]:
        """A Deployment's status states, oldest first."""
        return [s["state"] for s in deployment["_statuses"]]

    # ---- payloads from our fixtures -------------------------------------------------------------

    def _repository_json(self, repo: Repo) -> dict[str, Any]:
        template = fixture("pull_request.closed.with-organization")["repository"]
        data: dict[str, Any] = copy.deepcopy(template)
        data.update(
            {
                "id": repo.id,
                "name": repo.name,
                "full_name": repo.full_name,
                "html_url": repo.html_url,
                "url": f"{self.url}/repos/{repo.full_name}",
                "clone_url": f"{repo.html_url}.git",
            }
        )
        data["owner"] = {**data["owner"], "login": repo.owner}
        return data

    def push_payload(self, full_name: str, branch: str, before: str) -> dict[str, Any]:
        """The ``push`` event GitHub sends after ``branch`` moved from ``before`` to its head
        (one commit listed: the head, with the paths it changed)."""
        repo = self.repo(full_name)
        payload = fixture("push.with-new-branch")
        head = repo.git.head(branch)
        assert head is not None
        message = repo.git.git("log", "-1", "--format=%B", head)
        paths = repo.git.git("diff-tree", "--no-commit-id", "--name-only", "-r", "--root", head)
        commit = {
            **payload["head_commit"],
            "id": head,
            "message": message,
            "url": f"{repo.html_url}/commit/{head}",
            "added": [],
            "modified": paths.splitlines(),
        }
        payload.update(
            {
                "ref": f"refs/heads/{branch}",
                "before": before,
                "after": head,
                "created": False,
                "base_ref": None,
                "compare": f"{repo.html_url}/compare/{before[:12]}...{head[:12]}",
                # On this GitHub's own host (as an Enterprise server sends it): where git is.
                "repository": {
                    **self._repository_json(repo),
                    "html_url": f"{self.url}/{repo.full_name}",
                    "clone_url": self.git_url(full_name),
                },
                "installation": {"id": repo.installation},
                "commits": [commit],
                "head_commit": commit,
            }
        )
        return payload

    def pr_payload(self, full_name: str, number: int, action: str) -> dict[str, Any]:
        repo = self.repo(full_name)
        payload = fixture("pull_request.closed.with-organization")
        payload["action"] = action
        payload["number"] = number
        payload["pull_request"] = {
            **payload["pull_request"],
            **self._pull_json(repo, repo.pulls[number]),
        }
        payload["repository"] = self._repository_json(repo)
        payload["installation"] = {"id": repo.installation}
        return payload

    def comment_payload(
        self,
        full_name: str,
        comment: Mapping[str, Any],
        *,
        action: str = "created",
        installation: bool = True,
    ) -> dict[str, Any]:
        """``issue_comment`` from the fixture, on a pull request when the number is one."""
        repo = self.repo(full_name)
        payload = fixture("issue_comment.created.with-installation")
        payload["action"] = action
        number = int(comment["_issue"])
        issue = payload["issue"]
        issue.update(
            {
                "number": number,
                "html_url": f"{repo.html_url}/issues/{number}",
                "url": f"{self.url}/repos/{repo.full_name}/issues/{number}",
            }
        )
        if number in repo.pulls:
            issue["html_url"] = f"{repo.html_url}/pull/{number}"
            issue["pull_request"] = {
                "url": f"{self.url}/repos/{repo.full_name}/pulls/{number}",
                "html_url": f"{repo.html_url}/pull/{number}",
            }
        payload["comment"] = {
            **payload["comment"],
            **{k: v for k, v in comment.items() if not k.startswith("_")},
        }
        payload["sender"] = {**payload["sender"], "login": comment["user"]["login"]}
        payload["repository"] = self._repository_json(repo)
        if installation:
            payload["installation"] = {"id": repo.installation}
        else:
            payload.pop("installation", None)
        return payload

    def check_run_payload(
        self,
        full_name: str,
        run_id: int,
        action: str,
        *,
        sender: str = "alice",
        identifier: str | None = None,
        pull_number: int | None = None,
    ) -> dict[str, Any]:
        """``check_run`` (``requested_action`` / ``rerequested``) about one of the fake's runs."""
        repo = self.repo(full_name)
        payload = fixture(f"check_run.{action}")
        payload["action"] = action
        payload["check_run"] = {**payload["check_run"], **self._public(repo.check_runs[run_id])}
        payload["check_run"]["pull_requests"] = (
            [{"number": pull_number, "url": f"{self.url}/repos/{full_name}/pulls/{pull_number}"}]
            if pull_number is not None
            else []
        )
        if identifier is not None:
            payload["requested_action"] = {"identifier": identifier}
        else:
            payload.pop("requested_action", None)
        payload["sender"] = {**payload["sender"], "login": sender}
        payload["repository"] = self._repository_json(repo)
        payload["installation"] = {"id": repo.installation}
        return payload

    async def _deliver(self, event: str, payload: Mapping[str, Any]) -> None:
        if self._delivery is None:
            return
        url, secret = self._delivery
        headers, body = webhook_request(event, payload, secret)
        if self._session is None:
            self._session = aiohttp.ClientSession()
        async with self._session.post(url, data=body, headers=headers) as response:
            self.deliveries.append((event, response.status))

    # ---- HTTP plumbing --------------------------------------------------------------------------

    def _routes(self) -> None:
        r = self.app.router
        repo = "/repos/{owner}/{name}"
        r.add_post("/app/installations/{id}/access_tokens", self.h_access_token)
        r.add_get(repo + "/installation", self.h_repo_installation)
        r.add_get(repo + "/collaborators/{user}/permission", self.h_permission)
        r.add_get("/orgs/{org}/teams/{team}/memberships/{user}", self.h_team_membership)
        r.add_get(repo + "/pulls", self.h_list_pulls)
        r.add_post(repo + "/pulls", self.h_create_pull)
        r.add_get(repo + "/pulls/{number:\\d+}", self.h_get_pull)
        r.add_get(repo + "/pulls/{number:\\d+}/commits", self.h_pull_commits)
        r.add_put(repo + "/pulls/{number:\\d+}/merge", self.h_merge_pull)
        r.add_post(repo + "/issues/{number:\\d+}/labels", self.h_add_labels)
        r.add_post(repo + "/issues/{number:\\d+}/comments", self.h_create_comment)
        r.add_get(repo + "/issues/{number:\\d+}/comments", self.h_list_comments)
        r.add_patch(repo + "/issues/comments/{id:\\d+}", self.h_edit_comment)
        r.add_post(repo + "/issues/comments/{id:\\d+}/reactions", self.h_reaction)
        r.add_get(repo + "/compare/{basehead:.+}", self.h_compare)
        r.add_get(repo + "/commits/{ref:[^/]+}/check-runs", self.h_list_check_runs)
        r.add_get(repo + "/commits/{ref:[^/]+}/pulls", self.h_commit_pulls)
        r.add_get(repo + "/commits/{ref:.+}", self.h_commit)
        r.add_get(repo + "/branches/{branch:.+}", self.h_branch)
        r.add_post(repo + "/git/commits", self.h_git_commit)
        r.add_get(repo + "/git/ref/{ref:.+}", self.h_get_ref)
        r.add_post(repo + "/git/refs", self.h_git_ref)
        r.add_patch(repo + "/git/refs/{ref:.+}", self.h_update_ref)
        r.add_delete(repo + "/git/refs/{ref:.+}", self.h_delete_ref)
        r.add_post(repo + "/check-runs", self.h_create_check_run)
        r.add_patch(repo + "/check-runs/{id:\\d+}", self.h_update_check_run)
        r.add_get(repo + "/check-runs/{id:\\d+}", self.h_get_check_run)
        r.add_post(repo + "/deployments", self.h_create_deployment)
        r.add_get(repo + "/deployments", self.h_list_deployments)
        r.add_post(repo + "/deployments/{id:\\d+}/statuses", self.h_create_deployment_status)
        r.add_get(repo + "/deployments/{id:\\d+}/statuses", self.h_list_deployment_statuses)
        # Last: git's paths have no /repos/ prefix.
        r.add_route("*", "/{owner}/{name:[^/]+\\.git}/{rest:.*}", self.h_git)
        r.add_get("/login/oauth/authorize", self.h_oauth_authorize)
        r.add_post("/login/oauth/access_token", self.h_oauth_access_token)
        r.add_get("/user", self.h_user)
        r.add_get("/user/memberships/orgs/{org}", self.h_user_membership)

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if _OAUTH_PATH.match(request.path):
            # The OAuth flow and /user endpoints authenticate users, not the App (see h_user).
            try:
                response = await handler(request)
            except ApiError as e:
                response = web.json_response(e.body, status=e.status, headers=e.headers)
            self.log.append(Logged(request.method, request.path, response.status, None))
            return response
        if _GIT_PATH.match(request.path):
            # Git authenticates with Basic credentials of its own (see h_git), unmetered.
            return await handler(request)
        installation: int | None = None
        operation = operation_of(request.method, request.path)
        raw = await request.read() if operation is not None else b""
        served = False  # the handler answered (not authentication, a fault or the rate limit)
        try:
            installation = self._authenticate(request)
            self._authorize(request, installation)
            fault = self.faults.take(request.method, request.path)
            if fault is not None:
                raise self._fault_error(fault, installation)
            if installation is not None and self.rate_remaining.get(installation, 1) <= 0:
                if time.time() < self.rate_reset.get(installation, 0):
                    raise ApiError(403, "API rate limit exceeded for installation ID")
                self.rate_remaining[installation] = RATE_LIMIT
            if operation is not None:
                problems = body_problems(operation, raw)
                if problems:
                    self.contract_problems.append(
                        f"{operation.id} ({request.method} {request.path}): {'; '.join(problems)}"
                    )
                    # GitHub's answer to a body its schema does not allow.
                    raise ApiError(
                        422,
                        "Invalid request.\n\n" + "\n".join(problems),
                        documentation_url="https://docs.github.com/rest",
                    )
            served = True
            response = await handler(request)
        except ApiError as e:
            response = web.json_response(e.body, status=e.status, headers=e.headers)
        except web.HTTPException as e:
            response = web.json_response({"message": e.reason}, status=e.status)
        if operation is not None:
            self._record_call(operation.id, request, raw, response, served)
        if (
            isinstance(response, web.Response)
            and request.method == "GET"
            and response.status == 200
        ):
            assert response.body is not None and isinstance(response.body, bytes)
            etag = '"' + hashlib.sha1(response.body).hexdigest() + '"'
            response.headers["ETag"] = etag
            if request.headers.get("If-None-Match") == etag:
                response = web.Response(status=304, headers={"ETag": etag})
        self._rate_headers(response, installation)
        # Writes keep their body in the log (a test compares what was written, not only where);
        # read after the handler, which may look at whether there is a body to read.
        body = _json(raw or await request.read()) if request.method != "GET" else None
        self.log.append(Logged(request.method, request.path, response.status, installation, body))
        if self.after_request is not None:
            self.after_request(request.method, request.path)
        return response

    def _record_call(
        self,
        operation: str,
        request: web.Request,
        raw: bytes,
        response: web.StreamResponse,
        served: bool,
    ) -> None:
        op = operation_of(request.method, request.path)
        assert op is not None
        try:
            body = json.loads(raw) if raw.strip() else None
        except ValueError:
            body = None
        self.calls.append(ApiCall(operation, request.method, request.path, body, response.status))
        if served and response.status not in op.responses and response.status != 304:
            self.contract_problems.append(
                f"the fake answered {operation} with {response.status}, which GitHub does not "
                f"document for it ({sorted(op.responses)})"
            )

    def _fault_error(self, fault: Fault, installation: int | None) -> ApiError:
        headers: dict[str, str] = {}
        if fault.retry_after is not None:
            headers["Retry-After"] = f"{fault.retry_after:g}"
        default = (
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try "
            "again."
            if fault.secondary
            else f"fake fault {fault.status}"
        )
        return ApiError(fault.status, fault.message or default, headers=headers)

    def _rate_headers(self, response: web.StreamResponse, installation: int | None) -> None:
        if installation is None:
            return
        remaining = self.rate_remaining.get(installation, RATE_LIMIT)
        if response.status != 304 and remaining > 0:
            remaining -= 1
            self.rate_remaining[installation] = remaining
        reset = self.rate_reset.get(installation) or time.time() + 3600
        response.headers["x-ratelimit-limit"] = str(RATE_LIMIT)
        response.headers["x-ratelimit-remaining"] = str(remaining)
        response.headers["x-ratelimit-reset"] = str(int(reset + 0.999))

    def _authenticate(self, request: web.Request) -> int | None:
        auth = request.headers.get("Authorization", "")
        scheme, _, credential = auth.partition(" ")
        needs_jwt = request.path.startswith("/app/") or request.path.endswith("/installation")
        if needs_jwt:
            if scheme.lower() != "bearer":
                raise ApiError(401, "A JSON web token could not be decoded")
            try:
                claims = jwt.decode(credential, self._public_key, algorithms=["RS256"])  # type: ignore[arg-type]
            except jwt.PyJWTError as e:
                raise ApiError(401, f"A JSON web token could not be decoded: {e}") from None
            if str(claims.get("iss")) != str(self.app_id):
                raise ApiError(401, "'Issuer' claim ('iss') is invalid")
            if int(claims["exp"]) - int(claims["iat"]) > 600 + 60:
                raise ApiError(401, "'Expiration time' claim ('exp') is too far in the future")
            self.jwt_iat.append(int(claims["iat"]))
            return None
        if scheme.lower() != "token" or credential not in self.tokens:
            raise ApiError(401, "Bad credentials")
        installation, expires = self.tokens[credential]
        if time.time() >= expires:
            raise ApiError(401, "Bad credentials")
        owner, name = request.match_info.get("owner"), request.match_info.get("name")
        if owner and name:
            repo = self.repos.get(f"{owner}/{name}".lower())
            if repo is None or repo.installation != installation:
                raise ApiError(404, "Not Found")
        return installation

    def _authorize(self, request: web.Request, installation: int | None) -> None:
        # GitHub's answer when an installation token lacks the endpoint's permission.
        if installation is None or "/deployments" not in request.path:
            return
        if "deployments" in self.denied.get(installation, set()):
            raise ApiError(
                403,
                "Resource not accessible by integration",
                documentation_url="https://docs.github.com/rest/deployments/deployments",
            )

    def _repo_of(self, request: web.Request) -> Repo:
        repo = self.repos.get(f"{request.match_info['owner']}/{request.match_info['name']}".lower())
        if repo is None:
            raise ApiError(404, "Not Found")
        return repo

    @staticmethod
    async def _json(request: web.Request) -> dict[str, Any]:
        try:
            data = await request.json()
        except ValueError:
            raise ApiError(400, "Problems parsing JSON") from None
        if not isinstance(data, dict):
            raise ApiError(400, "Problems parsing JSON")
        return data

    # ---- OAuth web flow and the signed-in user ------------------------------------------------

    async def h_oauth_authorize(self, request: web.Request) -> web.Response:
        query = request.query
        client_id = query.get("client_id", "")
        if client_id not in self.oauth_apps:
            return web.Response(status=404, text="Unknown OAuth application\n")
        if self.oauth_login is None:
            return web.Response(status=401, text="Sign in to GitHub first\n")
        code = secrets.token_hex(10)
        self.oauth_codes[code] = (client_id, self.oauth_login, query.get("scope", ""))
        separator = "&" if "?" in query.get("redirect_uri", "") else "?"
        target = (
            query.get("redirect_uri", "")
            + separator
            + urlencode({"code": code, "state": query.get("state", "")})
        )
        return web.Response(status=302, headers={"Location": target})

    async def h_oauth_access_token(self, request: web.Request) -> web.Response:
        form = await request.post()
        client_id, secret = str(form.get("client_id", "")), str(form.get("client_secret", ""))
        if self.oauth_apps.get(client_id) != secret or not secret:
            return web.json_response({"error": "incorrect_client_credentials"})
        grant = self.oauth_codes.pop(str(form.get("code", "")), None)  # single use
        if grant is None or grant[0] != client_id:
            return web.json_response({"error": "bad_verification_code"})
        token = "gho_" + secrets.token_hex(16)
        self.user_tokens[token] = (grant[1], grant[2])
        return web.json_response({"access_token": token, "token_type": "bearer", "scope": grant[2]})

    def _user_of(self, request: web.Request) -> tuple[str, str]:
        scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() not in ("bearer", "token") or credential not in self.user_tokens:
            raise ApiError(401, "Bad credentials")
        return self.user_tokens[credential]

    async def h_user(self, request: web.Request) -> web.Response:
        login, _ = self._user_of(request)
        return web.json_response({"login": login, "id": abs(hash(login)) % 10**8, "type": "User"})

    async def h_user_membership(self, request: web.Request) -> web.Response:
        login, scope = self._user_of(request)
        if "read:org" not in scope.replace(",", " ").split():
            raise ApiError(403, "You need the read:org scope to read organization memberships")
        org = request.match_info["org"]
        state = self.org_members.get(org.lower(), {}).get(login.lower())
        if state is None:
            raise ApiError(404, "Not Found")
        return web.json_response(
            {
                "state": state,
                "role": "member",
                "organization": {"login": org},
                "user": {"login": login},
            }
        )

    # ---- git over smart HTTP --------------------------------------------------------------------

    def _git_denial(self, request: web.Request, repo: Repo | None) -> web.Response | None:
        """GitHub's answers to git without valid App credentials, or None to let it in."""
        challenge = {"WWW-Authenticate": 'Basic realm="GitHub"'}
        scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return web.Response(status=401, headers=challenge, text="Authentication required\n")
        try:
            user, _, token = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return web.Response(status=401, headers=challenge, text="Bad credentials\n")
        issued = self.tokens.get(token)
        if user != "x-access-token" or issued is None or time.time() >= issued[1]:
            return web.Response(status=401, headers=challenge, text="Invalid username or token.\n")
        if repo is None or repo.installation != issued[0]:
            return web.Response(status=404, text="Repository not found.\n")
        if token in self.token_repos and repo.name.lower() not in self.token_repos[token]:
            return web.Response(status=404, text="Repository not found.\n")
        return None

    async def h_git(self, request: web.Request) -> web.StreamResponse:
        """``git http-backend`` as CGI for one repository, behind GitHub's authentication."""
        match = _GIT_PATH.match(request.path)
        assert match is not None
        repo = self.repos.get(f"{match['owner']}/{match['name']}".lower())
        denial = self._git_denial(request, repo)
        self.git_requests.append(
            GitRequest(request.method, request.path, request.query_string, denial is None)
        )
        if denial is not None:
            return denial
        assert repo is not None
        return await serve_git(request, repo.git, match["rest"], "x-access-token")

    # ---- apps -----------------------------------------------------------------------------------

    async def h_access_token(self, request: web.Request) -> web.Response:
        installation = int(request.match_info["id"])
        if not any(r.installation == installation for r in self.repos.values()):
            raise ApiError(404, "Not Found")
        # The documented body: "repositories" (names, not owner/name) narrows the token to those
        # repositories of the installation; a name it does not hold is a 422.
        body = await request.read()
        names = (json.loads(body) if body else {}).get("repositories")
        held = {r.name.lower() for r in self.repos.values() if r.installation == installation}
        if names is not None and not {str(n).lower() for n in names} <= held:
            raise ApiError(422, "There is at least one repository that does not exist or is not "
                                "accessible to the parent installation.")  # fmt: skip
        token = "ghs_" + secrets.token_hex(16)
        if names is not None:
            self.token_repos[token] = {str(n).lower() for n in names}
        expires = time.time() + self.token_ttl
        self.tokens[token] = (installation, expires)
        self.tokens_issued += 1
        expires_at = datetime.fromtimestamp(expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return web.json_response({"token": token, "expires_at": expires_at}, status=201)

    async def h_repo_installation(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        return web.json_response({"id": repo.installation, "app_id": self.app_id})

    async def h_permission(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        user = request.match_info["user"]
        permission = repo.permissions.get(user.lower(), "read")
        role = {"write": "write", "admin": "admin", "read": "read"}.get(permission, permission)
        shown = "write" if permission == "maintain" else permission
        return web.json_response({"permission": shown, "role_name": role, "user": {"login": user}})

    async def h_team_membership(self, request: web.Request) -> web.Response:
        key = (request.match_info["org"].lower(), request.match_info["team"].lower())
        if request.match_info["user"].lower() not in self.teams.get(key, set()):
            raise ApiError(404, "Not Found")
        return web.json_response({"state": "active", "role": "member"})

    # ---- git helpers (run in threads: RemoteRepo uses subprocess) -------------------------------

    @staticmethod
    def _head(repo: Repo, branch: str) -> str | None:
        return repo.git.head(branch)

    def _create_pull(
        self, repo: Repo, head: str, base: str, title: str, body: str, user: str
    ) -> Pull:
        head_branch = head.split(":", 1)[-1]
        head_sha, base_sha = self._head(repo, head_branch), self._head(repo, base)
        if head_sha is None:
            raise _validation("head invalid", [{"field": "head", "code": "invalid"}])
        if base_sha is None:
            raise _validation("base invalid", [{"field": "base", "code": "invalid"}])
        for pull in repo.pulls.values():
            if pull.state == "open" and pull.head == head_branch and pull.base == base:
                raise _validation(
                    "exists",
                    [{"code": "custom", "message": f"A pull request already exists for "
                      f"{repo.owner}:{head_branch}."}],
                )  # fmt: skip
        ahead = repo.git.git("rev-list", "--count", f"{base_sha}..{head_sha}")
        if int(ahead) == 0:
            raise _validation(
                "no commits",
                [{"code": "custom", "message": f"No commits between {base} and {head_branch}"}],
            )
        pull = Pull(repo.take_number(), title, body, head_branch, base, user, head_sha, base_sha)
        repo.pulls[pull.number] = pull
        return pull

    def _refresh(self, repo: Repo, pull: Pull) -> None:
        if pull.state == "open":
            sha = self._head(repo, pull.head)
            if sha is not None:
                pull.head_sha = sha

    def _merge(self, repo: Repo, pull: Pull, method: str, by: str, title: str | None) -> None:
        self._refresh(repo, pull)
        if pull.state != "open":
            raise ApiError(405, "Pull Request is not mergeable")
        base_sha = self._head(repo, pull.base)
        assert base_sha is not None
        try:
            tree = repo.git.git("merge-tree", "--write-tree", base_sha, pull.head_sha)
        except RuntimeError:
            raise ApiError(405, "Pull Request is not mergeable") from None
        tree = tree.splitlines()[0]
        if method == "merge":
            message = title or f"Merge pull request #{pull.number} from {repo.owner}/{pull.head}"
            parents = ["-p", base_sha, "-p", pull.head_sha]
        else:
            # squash and rebase both leave one new commit on the base here (a simplification of
            # rebase, which replays each commit; no caller depends on the difference).
            message = title or f"{pull.title} (#{pull.number})"
            parents = ["-p", base_sha]
        # As on GitHub: the merger authors the merge, GitHub's web-flow commits it.
        merger = self.noreply(by)
        env = {"GIT_AUTHOR_NAME": by, "GIT_AUTHOR_EMAIL": merger}
        env |= {"GIT_COMMITTER_NAME": "GitHub", "GIT_COMMITTER_EMAIL": WEB_FLOW_EMAIL}
        sha = repo.git.git("commit-tree", tree, *parents, stdin=message + "\n", env=env)
        repo.git.git("update-ref", f"refs/heads/{pull.base}", sha, base_sha)
        pull.state, pull.merged, pull.merge_commit_sha = "closed", True, sha
        pull.merged_by, pull.merged_at = by, _now()
        pull.closed_at = pull.updated_at = pull.merged_at

    def _pull_json(self, repo: Repo, pull: Pull) -> dict[str, Any]:
        self._refresh(repo, pull)
        api = f"{self.url}/repos/{repo.full_name}"
        return {
            "url": f"{api}/pulls/{pull.number}",
            "id": 500000 + pull.number,
            "html_url": f"{repo.html_url}/pull/{pull.number}",
            "issue_url": f"{api}/issues/{pull.number}",
            "number": pull.number,
            "state": pull.state,
            "title": pull.title,
            "body": pull.body,
            "user": {"login": pull.user, "type": "User"},
            "labels": [{"name": label} for label in pull.labels],
            "created_at": pull.created_at,
            "updated_at": pull.updated_at,
            "closed_at": pull.closed_at,
            "merged_at": pull.merged_at,
            "merged": pull.merged,
            "merge_commit_sha": pull.merge_commit_sha,
            "merged_by": {"login": pull.merged_by} if pull.merged_by else None,
            "mergeable": pull.state == "open" or None,
            "head": {
                "ref": pull.head,
                "sha": pull.head_sha,
                "label": f"{repo.owner}:{pull.head}",
                "repo": {"full_name": repo.full_name},
            },
            "base": {
                "ref": pull.base,
                "sha": pull.base_sha,
                "label": f"{repo.owner}:{pull.base}",
                "repo": {"full_name": repo.full_name},
            },
        }

    # ---- pulls ----------------------------------------------------------------------------------

    async def h_list_pulls(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        state = request.query.get("state", "open")
        head = request.query.get("head")
        base = request.query.get("base")
        out = []
        for pull in sorted(repo.pulls.values(), key=lambda p: -p.number):
            if state != "all" and pull.state != state:
                continue
            if head is not None:
                owner, _, branch = head.partition(":")
                if owner.lower() != repo.owner.lower() or branch != pull.head:
                    continue
            if base is not None and pull.base != base:
                continue
            out.append(await asyncio.to_thread(self._pull_json, repo, pull))
        return web.json_response(out)

    async def h_commit_pulls(self, request: web.Request) -> web.Response:
        """List pull requests associated with a commit (``repos/list-pull-requests-associated-
        with-commit``): the pull requests whose merge commit it is or whose commits hold it,
        merged ones first; 422 for a commit the repository does not have, as GitHub answers."""
        repo = self._repo_of(request)
        ref = request.match_info["ref"]
        sha = await asyncio.to_thread(self._resolve, repo, ref)
        if sha is None:
            raise ApiError(422, f"No commit found for SHA: {ref}")

        def holds(pull: Pull) -> bool:
            if pull.merge_commit_sha == sha or pull.head_sha == sha:
                return True
            listed = repo.git.git("rev-list", f"{pull.base_sha}..{pull.head_sha}")
            return sha in listed.split()

        found = []
        for pull in sorted(repo.pulls.values(), key=lambda p: (not p.merged, p.number)):
            if await asyncio.to_thread(holds, pull):
                found.append(await asyncio.to_thread(self._pull_json, repo, pull))
        return web.json_response(found)

    async def h_create_pull(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        data = await self._json(request)
        for key in ("head", "base", "title"):
            if not data.get(key):
                raise _validation(f"{key} missing", [{"field": key, "code": "missing_field"}])
        pull = await asyncio.to_thread(
            self._create_pull,
            repo,
            str(data["head"]),
            str(data["base"]),
            str(data["title"]),
            str(data.get("body") or ""),
            f"{APP_SLUG}[bot]",
        )
        return web.json_response(self._pull_json(repo, pull), status=201)

    async def h_get_pull(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        pull = repo.pulls.get(int(request.match_info["number"]))
        if pull is None:
            raise ApiError(404, "Not Found")
        return web.json_response(await asyncio.to_thread(self._pull_json, repo, pull))

    async def h_merge_pull(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        pull = repo.pulls.get(int(request.match_info["number"]))
        if pull is None:
            raise ApiError(404, "Not Found")
        data = await self._json(request) if request.can_read_body else {}
        method = str(data.get("merge_method") or "merge")
        if method not in ("merge", "squash", "rebase"):
            raise _validation(f"merge_method {method!r} is invalid")
        if data.get("sha") and data["sha"] != pull.head_sha:
            raise ApiError(409, "Head branch was modified. Review and try the merge again.")
        await asyncio.to_thread(
            self._merge, repo, pull, method, f"{APP_SLUG}[bot]", data.get("commit_title")
        )
        await self._deliver("pull_request", self.pr_payload(repo.full_name, pull.number, "closed"))
        return web.json_response(
            {
                "sha": pull.merge_commit_sha,
                "merged": True,
                "message": "Pull Request successfully merged",
            }
        )

    async def h_add_labels(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        number = int(request.match_info["number"])
        pull = repo.pulls.get(number)
        if pull is None:
            raise ApiError(404, "Not Found")
        data = await self._json(request)
        for label in data.get("labels") or []:
            if label not in pull.labels:
                pull.labels.append(str(label))
        return web.json_response([{"name": label} for label in pull.labels])

    # ---- issues and comments --------------------------------------------------------------------

    def _new_comment(
        self, repo: Repo, number: int, body: str, user: str, *, bot: bool
    ) -> dict[str, Any]:
        if number not in repo.pulls and number not in repo.issues:
            raise ApiError(404, "Not Found")
        comment_id = next(self._ids)
        kind = "pull" if number in repo.pulls else "issues"
        comment = {
            "id": comment_id,
            "url": f"{self.url}/repos/{repo.full_name}/issues/comments/{comment_id}",
            "html_url": f"{repo.html_url}/{kind}/{number}#issuecomment-{comment_id}",
            "body": body,
            "user": {"login": user, "type": "Bot" if bot else "User"},
            "performed_via_github_app": {"id": self.app_id, "slug": APP_SLUG} if bot else None,
            "created_at": _now(),
            "updated_at": _now(),
            "author_association": "MEMBER",
            "_issue": number,
            "_reactions": [],
            "_edits": 0,
        }
        repo.comments[comment_id] = comment
        return comment

    @staticmethod
    def _public(comment: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in comment.items() if not k.startswith("_")}

    async def h_create_comment(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        data = await self._json(request)
        if not isinstance(data.get("body"), str) or not data["body"]:
            raise _validation("body missing", [{"field": "body", "code": "missing_field"}])
        if len(data["body"]) > 65536:
            raise _validation("body is too long (maximum is 65536 characters)")
        comment = self._new_comment(
            repo, int(request.match_info["number"]), data["body"], f"{APP_SLUG}[bot]", bot=True
        )
        return web.json_response(self._public(comment), status=201)

    async def h_list_comments(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        number = int(request.match_info["number"])
        return web.json_response(
            [self._public(c) for c in repo.comments.values() if c["_issue"] == number]
        )

    async def h_edit_comment(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        comment = repo.comments.get(int(request.match_info["id"]))
        if comment is None:
            raise ApiError(404, "Not Found")
        data = await self._json(request)
        if len(str(data.get("body") or "")) > 65536:
            raise _validation("body is too long (maximum is 65536 characters)")
        comment["body"] = str(data.get("body") or "")
        comment["updated_at"] = _now()
        comment["_edits"] += 1
        return web.json_response(self._public(comment))

    async def h_reaction(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        comment = repo.comments.get(int(request.match_info["id"]))
        if comment is None:
            raise ApiError(404, "Not Found")
        data = await self._json(request)
        content = data.get("content")
        if content not in ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"):
            raise _validation(f"content {content!r} is invalid")
        comment["_reactions"].append(content)
        return web.json_response({"id": next(self._ids), "content": content}, status=201)

    # ---- commits, branches, comparisons ---------------------------------------------------------

    def _resolve(self, repo: Repo, ref: str) -> str | None:
        if re.fullmatch(r"[0-9a-f]{40}", ref):
            try:
                repo.git.git("cat-file", "-e", f"{ref}^{{commit}}")
            except RuntimeError:
                return None
            return ref
        return self._head(repo, ref)

    def noreply(self, login: str) -> str:
        """``login``'s no-reply address, linked to the account (GitHub's
        ``ID+login@users.noreply.github.com``)."""
        address = f"{login}@users.noreply.fake-github.invalid"
        self.emails.setdefault(address, login)
        return address

    async def h_commit(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        sha = await asyncio.to_thread(self._resolve, repo, request.match_info["ref"])
        if sha is None:
            raise ApiError(422, f"No commit found for SHA: {request.match_info['ref']}")
        return web.json_response(await asyncio.to_thread(self._commit_json, repo, sha))

    async def h_pull_commits(self, request: web.Request) -> web.Response:
        """List commits on a pull request (``pulls/list-commits``), oldest first."""
        repo = self._repo_of(request)
        pull = repo.pulls.get(int(request.match_info["number"]))
        if pull is None:
            raise ApiError(404, "Not Found")

        def listed() -> list[dict[str, Any]]:
            self._refresh(repo, pull)
            shas = repo.git.git("rev-list", "--reverse", f"{pull.base_sha}..{pull.head_sha}")
            return [self._commit_json(repo, sha) for sha in shas.split()]

        return web.json_response(await asyncio.to_thread(listed))

    async def h_branch(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        branch = request.match_info["branch"]
        sha = await asyncio.to_thread(self._head, repo, branch)
        if sha is None:
            raise ApiError(404, "Branch not found")
        return web.json_response({"name": branch, "commit": {"sha": sha}})

    def _compare(
        self, repo: Repo, base: str, head: str, page: int = 1, per_page: int = 30
    ) -> dict[str, Any]:
        base_sha, head_sha = self._resolve(repo, base), self._resolve(repo, head)
        if base_sha is None or head_sha is None:
            raise ApiError(404, "Not Found")
        ahead = int(repo.git.git("rev-list", "--count", f"{base_sha}..{head_sha}"))
        behind = int(repo.git.git("rev-list", "--count", f"{head_sha}..{base_sha}"))
        try:
            merge_base = repo.git.git("merge-base", base_sha, head_sha)
            names = repo.git.git("diff", "--name-status", merge_base, head_sha)
        except RuntimeError:
            merge_base, names = "", repo.git.git("diff", "--name-status", base_sha, head_sha)
        files = []
        for line in names.splitlines():
            status, _, path = line.partition("\t")
            files.append(
                {"filename": path, "status": {"A": "added", "D": "removed"}.get(status, "modified")}
            )
        status = (
            "identical"
            if ahead == behind == 0
            else "ahead"
            if behind == 0
            else "behind"
            if ahead == 0
            else "diverged"
        )
        # GitHub lists the commits of base...head oldest first, parents before children, and
        # pages them with page/per_page (total_commits counts them all).
        listed = repo.git.git("rev-list", "--reverse", "--topo-order", f"{base_sha}..{head_sha}")
        shas = listed.split()
        chosen = shas[(page - 1) * per_page : page * per_page]
        api = f"{self.url}/repos/{repo.full_name}"
        return {
            "url": f"{api}/compare/{base}...{head}",
            "html_url": f"{repo.html_url}/compare/{base}...{head}",
            "permalink_url": f"{repo.html_url}/compare/{base_sha}...{head_sha}",
            "diff_url": f"{repo.html_url}/compare/{base}...{head}.diff",
            "patch_url": f"{repo.html_url}/compare/{base}...{head}.patch",
            "base_commit": self._commit_json(repo, base_sha),
            "merge_base_commit": self._commit_json(repo, merge_base) if merge_base else None,
            "status": status,
            "ahead_by": ahead,
            "behind_by": behind,
            "total_commits": ahead,
            "commits": [self._commit_json(repo, sha) for sha in chosen],
            "files": files,
        }

    async def h_compare(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        base, sep, head = request.match_info["basehead"].partition("...")
        if not sep:
            raise ApiError(404, "Not Found")
        try:
            page = max(1, int(request.query.get("page", "1")))
            per_page = min(250, max(1, int(request.query.get("per_page", "30"))))
        except ValueError:
            raise _validation("page and per_page must be integers") from None
        return web.json_response(
            await asyncio.to_thread(self._compare, repo, base, head, page, per_page)
        )

    # ---- the git database (commits, refs), on the real bare repository -----------------------
    #
    # GitHub's "Git database" REST API (https://docs.github.com/rest/git), backed by the very
    # repository git clones and pushes to: a commit created here is a real commit object, and a
    # ref updated here really moves the branch (``git log`` shows it). Bodies are held to GitHub's
    # schema by the middleware (tests/support/github_openapi.py); the rules below are the ones
    # GitHub applies beyond the schema, with its messages. Only the operations the bot calls are
    # served (tests/integration/test_deploy.py holds the routes to the App's permissions):
    # github-push sends
    # its objects with git to a staging ref, as Kargo's does, so blobs and trees are not among
    # them.

    def _bot(self) -> dict[str, str]:
        """The identity GitHub gives what the App creates without an author: its bot user."""
        return {
            "name": f"{APP_SLUG}[bot]",
            "email": f"{self.app_id}+{APP_SLUG}[bot]@users.noreply.github.com",
        }

    def _object_type(self, repo: Repo, sha: str) -> str | None:
        if not re.fullmatch(r"[0-9a-f]{40}", sha):
            return None
        try:
            return repo.git.git("cat-file", "-t", sha)
        except RuntimeError:
            return None

    def _commit_json(self, repo: Repo, sha: str) -> dict[str, Any]:
        """A commit as the REST API shows it in comparisons (``commit`` schema)."""
        fields = repo.git.git(
            "show", "-s", "--format=%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B", sha
        ).split("\0")
        tree, parents, an, ae, ad, cn, ce, cd, message = fields
        api = f"{self.url}/repos/{repo.full_name}"
        return {
            "sha": sha,
            "node_id": f"C_{sha[:12]}",
            "url": f"{api}/commits/{sha}",
            "html_url": f"{repo.html_url}/commit/{sha}",
            "comments_url": f"{api}/commits/{sha}/comments",
            "commit": {
                "url": f"{api}/git/commits/{sha}",
                "author": {"name": an, "email": ae, "date": ad},
                "committer": {"name": cn, "email": ce, "date": cd},
                "message": message.rstrip("\n"),
                "comment_count": 0,
                "tree": {"sha": tree, "url": f"{api}/git/trees/{tree}"},
                "verification": self._verification(repo, sha),
            },
            # The accounts GitHub links the addresses to (a user's verified addresses).
            "author": self._account(ae),
            "committer": self._account(ce),
            "parents": [
                {"sha": p, "url": f"{api}/commits/{p}", "html_url": f"{repo.html_url}/commit/{p}"}
                for p in parents.split()
            ],
        }

    def _account(self, email: str) -> dict[str, Any] | None:
        login = self.emails.get(email.lower())
        return {"login": login, "type": "User"} if login else None

    @staticmethod
    def _verification(repo: Repo, sha: str) -> dict[str, Any]:
        signed = sha in repo.verified
        return {
            "verified": signed,
            "reason": "valid" if signed else "unsigned",
            "signature": "-----BEGIN PGP SIGNATURE-----\n(fake)\n-----END PGP SIGNATURE-----"
            if signed
            else None,
            "payload": None,
            "verified_at": _now() if signed else None,
        }

    def _git_commit_json(self, repo: Repo, sha: str) -> dict[str, Any]:
        """A commit as the git database shows it (``git-commit`` schema)."""
        full = self._commit_json(repo, sha)
        inner = full["commit"]
        api = f"{self.url}/repos/{repo.full_name}"
        return {
            "sha": sha,
            "node_id": full["node_id"],
            "url": f"{api}/git/commits/{sha}",
            "html_url": full["html_url"],
            "author": inner["author"],
            "committer": inner["committer"],
            "tree": inner["tree"],
            "message": inner["message"],
            "parents": [
                {"sha": p["sha"], "url": f"{api}/git/commits/{p['sha']}", "html_url": p["html_url"]}
                for p in full["parents"]
            ],
            "verification": inner["verification"],
        }

    def _ref_json(self, repo: Repo, ref: str, sha: str) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo.full_name}"
        kind = self._object_type(repo, sha) or "commit"
        return {
            "ref": ref,
            "node_id": f"REF_{hashlib.sha1(ref.encode()).hexdigest()[:12]}",
            "url": f"{api}/git/{ref}",
            "object": {"type": kind, "sha": sha, "url": f"{api}/git/{kind}s/{sha}"},
        }

    def _ref_sha(self, repo: Repo, ref: str) -> str | None:
        try:
            return repo.git.git("rev-parse", "--verify", "-q", ref)
        except RuntimeError:
            return None

    def _check_signatures(self, repo: Repo, ref: str, old: str | None, new: str) -> None:
        """Branch protection "Require signed commits": every commit the update brings must be
        one GitHub verified."""
        branch = ref.removeprefix("refs/heads/")
        if ref == branch or branch not in repo.required_signatures:
            return
        listed = repo.git.git("rev-list", new, *(["--not", old] if old else []))
        if any(sha not in repo.verified for sha in listed.split()):
            raise _validation(
                "Commits must have verified signatures.",
                [{"message": f"Protected branch update failed for {ref}."}],
            )

    def _write_signature_rules(self, repo: Repo) -> None:
        """The same rule for git pushes: a pre-receive hook (run by ``git http-backend``'s
        receive-pack) refuses protected branches' updates that bring unverified commits, with
        GitHub's GH006 message."""
        root = repo.git.path
        (root / "longshoreman-required-signatures").write_text(
            "".join(f"refs/heads/{b}\n" for b in sorted(repo.required_signatures))
        )
        (root / "longshoreman-verified").write_text("".join(f"{s}\n" for s in repo.verified))
        hook = root / "hooks" / "pre-receive"
        hook.parent.mkdir(exist_ok=True)
        hook.write_text(
            "#!/bin/sh\n"
            "zero=0000000000000000000000000000000000000000\n"
            "while read old new ref; do\n"
            '  grep -qxF "$ref" longshoreman-required-signatures || continue\n'
            '  [ "$new" = "$zero" ] && continue\n'
            '  if [ "$old" = "$zero" ]; then range="$new"; else range="$old..$new"; fi\n'
            "  for c in $(git rev-list $range); do\n"
            '    if ! grep -qxF "$c" longshoreman-verified; then\n'
            '      echo "error: GH006: Protected branch update failed for $ref." >&2\n'
            '      echo "error: Commits must have verified signatures." >&2\n'
            "      exit 1\n"
            "    fi\n"
            "  done\n"
            "done\n"
        )
        hook.chmod(0o755)

    def require_signed_commits(self, full_name: str, branch: str) -> None:
        """Protect ``branch`` with "Require signed commits" (pushes and ref updates alike)."""
        repo = self.repo(full_name)
        repo.required_signatures.add(branch)
        self._write_signature_rules(repo)

    def created_commits(self, full_name: str) -> list[dict[str, Any]]:
        """The bodies of every ``POST .../git/commits`` to ``full_name``, as sent."""
        path = f"/repos/{full_name}/git/commits".lower()
        return [c.body for c in self.calls if c.method == "POST" and c.path.lower() == path]

    async def h_git_commit(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        data = await self._json(request)
        sha = await asyncio.to_thread(self._write_commit, repo, data)
        return web.json_response(
            await asyncio.to_thread(self._git_commit_json, repo, sha), status=201
        )

    def _write_commit(self, repo: Repo, data: Mapping[str, Any]) -> str:
        tree = str(data["tree"])
        if tree == EMPTY_TREE:
            # Every GitHub repository has git's empty tree; a bare one here may not yet.
            repo.git.git("hash-object", "-t", "tree", "-w", "/dev/null")
        if self._object_type(repo, tree) != "tree":
            raise _validation("Tree SHA does not exist")
        parents: list[str] = []
        for parent in data.get("parents") or []:
            if self._object_type(repo, str(parent)) != "commit":
                raise _validation("Parent SHA does not exist or is not a commit object")
            parents += ["-p", str(parent)]
        # GitHub's defaults: no author is the authenticated identity (the App's bot user) now;
        # no committer is the author. Only a commit GitHub attributes to the App and signs
        # itself is verified (https://docs.github.com/rest/git/commits#create-a-commit).
        author = data.get("author") or {**self._bot(), "date": _now()}
        committer = data.get("committer") or author
        env = {
            "GIT_AUTHOR_NAME": author["name"],
            "GIT_AUTHOR_EMAIL": author["email"],
            "GIT_AUTHOR_DATE": author.get("date") or _now(),
            "GIT_COMMITTER_NAME": committer["name"],
            "GIT_COMMITTER_EMAIL": committer["email"],
            "GIT_COMMITTER_DATE": committer.get("date") or _now(),
        }
        sha = repo.git.git("commit-tree", tree, *parents, stdin=str(data["message"]), env=env)
        if not data.get("author") and not data.get("committer") and not data.get("signature"):
            repo.verified.add(sha)
            if repo.required_signatures:
                self._write_signature_rules(repo)
        return sha

    async def h_get_ref(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        ref = "refs/" + request.match_info["ref"]
        sha = await asyncio.to_thread(self._ref_sha, repo, ref)
        if sha is None:
            raise ApiError(404, "Not Found")
        return web.json_response(await asyncio.to_thread(self._ref_json, repo, ref, sha))

    async def h_git_ref(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        data = await self._json(request)
        ref, sha = str(data["ref"]), str(data["sha"])
        if not ref.startswith("refs/") or ref.count("/") < 2:
            raise _validation("Reference name is invalid")

        def create() -> dict[str, Any]:
            if self._object_type(repo, sha) is None:
                raise _validation("Object does not exist")
            self._check_signatures(repo, ref, None, sha)
            try:
                repo.git.git("update-ref", ref, sha, "")
            except RuntimeError:
                raise _validation("Reference already exists") from None
            return self._ref_json(repo, ref, sha)

        return web.json_response(await asyncio.to_thread(create), status=201)

    async def h_update_ref(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        data = await self._json(request)
        ref, sha, force = "refs/" + request.match_info["ref"], str(data["sha"]), data.get("force")

        def update() -> dict[str, Any]:
            old = self._ref_sha(repo, ref)
            if old is None:
                raise _validation("Reference does not exist")
            if self._object_type(repo, sha) is None:
                raise _validation("Object does not exist")
            if not force:
                try:
                    repo.git.git("merge-base", "--is-ancestor", old, sha)
                except RuntimeError:
                    raise _validation("Update is not a fast forward") from None
            self._check_signatures(repo, ref, old, sha)
            try:
                # Compare-and-swap on the value read: a push in between is not overwritten.
                repo.git.git("update-ref", ref, sha, old)
            except RuntimeError:
                raise _validation("Update is not a fast forward") from None
            return self._ref_json(repo, ref, sha)

        return web.json_response(await asyncio.to_thread(update))

    async def h_delete_ref(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        ref = "refs/" + request.match_info["ref"]

        def delete() -> None:
            old = self._ref_sha(repo, ref)
            if old is None:
                raise _validation("Reference does not exist")
            repo.git.git("update-ref", "-d", ref, old)

        await asyncio.to_thread(delete)
        return web.Response(status=204)

    # ---- check runs -----------------------------------------------------------------------------

    async def h_create_check_run(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        data = await self._json(request)
        _check_run_problems(data, creating=True)
        sha = await asyncio.to_thread(self._resolve, repo, str(data["head_sha"]))
        if sha is None:
            raise _validation("No commit found for SHA", [{"field": "head_sha", "code": "invalid"}])
        run_id = next(self._ids)
        run = {
            "id": run_id,
            "name": data["name"],
            "head_sha": sha,
            "external_id": data.get("external_id") or "",
            "status": data.get("status") or "queued",
            "conclusion": data.get("conclusion"),
            "details_url": data.get("details_url"),
            "output": data.get("output") or {"title": None, "summary": None, "text": None},
            "actions": data.get("actions") or [],
            "html_url": f"{repo.html_url}/runs/{run_id}",
            "url": f"{self.url}/repos/{repo.full_name}/check-runs/{run_id}",
            "app": {"id": self.app_id, "slug": APP_SLUG},
            "_history": [(data.get("status") or "queued", data.get("conclusion"))],
        }
        repo.check_runs[run_id] = run
        return web.json_response(self._public(run), status=201)

    async def h_update_check_run(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        run = repo.check_runs.get(int(request.match_info["id"]))
        if run is None:
            raise ApiError(404, "Not Found")
        data = await self._json(request)
        _check_run_problems(data, creating=False)
        for key in (
            "name",
            "status",
            "conclusion",
            "details_url",
            "output",
            "actions",
            "external_id",
        ):
            if key in data:
                run[key] = data[key]
        if data.get("conclusion") and "status" not in data:
            run["status"] = "completed"
        run["_history"].append((run["status"], run.get("conclusion")))
        return web.json_response(self._public(run))

    async def h_get_check_run(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        run = repo.check_runs.get(int(request.match_info["id"]))
        if run is None:
            raise ApiError(404, "Not Found")
        return web.json_response(self._public(run))

    async def h_list_check_runs(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        sha = await asyncio.to_thread(self._resolve, repo, request.match_info["ref"])
        runs = [self._public(r) for r in repo.check_runs.values() if r["head_sha"] == sha]
        return web.json_response({"total_count": len(runs), "check_runs": runs})

    # ---- deployments ----------------------------------------------------------------------------
    # REST "Deployments" and "Deployment statuses" (https://docs.github.com/en/rest/deployments):
    # lists newest first, paginated with Link headers; without ``required_contexts`` GitHub
    # demands every check on the commit be green (409 otherwise); ``auto_inactive`` (the default)
    # makes every prior successful Deployment of the environment, whoever made it, inactive.

    _DEPLOYMENT_STATES = (
        "error",
        "failure",
        "inactive",
        "in_progress",
        "queued",
        "pending",
        "success",
    )

    def _app_actor(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return (
            {"login": f"{APP_SLUG}[bot]", "type": "Bot"},
            {"id": self.app_id, "slug": APP_SLUG},
        )

    def _new_deployment(
        self,
        repo: Repo,
        ref: str,
        sha: str,
        data: Mapping[str, Any],
        creator: dict[str, Any],
        app: dict[str, Any] | None,
    ) -> dict[str, Any]:
        deployment_id = next(self._ids)
        environment = str(data.get("environment") or "production")
        api = f"{self.url}/repos/{repo.full_name}"
        deployment = {
            "url": f"{api}/deployments/{deployment_id}",
            "id": deployment_id,
            "node_id": f"DE_{deployment_id}",
            "sha": sha,
            "ref": ref,
            "task": str(data.get("task") or "deploy"),
            "payload": data.get("payload") if data.get("payload") is not None else {},
            "original_environment": environment,
            "environment": environment,
            "description": data.get("description"),
            "creator": creator,
            "created_at": _now(),
            "updated_at": _now(),
            "statuses_url": f"{api}/deployments/{deployment_id}/statuses",
            "repository_url": api,
            "transient_environment": bool(data.get("transient_environment", False)),
            "production_environment": bool(
                data.get("production_environment", environment == "production")
            ),
            "performed_via_github_app": app,
            "_request": dict(data),
            "_statuses": [],
        }
        repo.deployments[deployment_id] = deployment
        return deployment

    def _new_deployment_status(
        self,
        repo: Repo,
        deployment: dict[str, Any],
        data: Mapping[str, Any],
        creator: dict[str, Any],
        app: dict[str, Any] | None,
    ) -> dict[str, Any]:
        status_id = next(self._ids)
        status = {
            "url": f"{deployment['url']}/statuses/{status_id}",
            "id": status_id,
            "node_id": f"DES_{status_id}",
            "state": data["state"],
            "creator": creator,
            "description": str(data.get("description") or ""),
            "environment": deployment["environment"],
            "target_url": str(data.get("target_url") or data.get("log_url") or ""),
            "created_at": _now(),
            "updated_at": _now(),
            "deployment_url": deployment["url"],
            "repository_url": deployment["repository_url"],
            "environment_url": str(data.get("environment_url") or ""),
            "log_url": str(data.get("log_url") or data.get("target_url") or ""),
            "performed_via_github_app": app,
        }
        deployment["_statuses"].append(status)
        deployment["updated_at"] = status["created_at"]
        if data["state"] == "success" and data.get("auto_inactive", True):
            for other in repo.deployments.values():
                if (
                    other is deployment
                    or other["id"] > deployment["id"]
                    or other["environment"] != deployment["environment"]
                    or other["transient_environment"]
                    or other["production_environment"]
                    or not other["_statuses"]
                    or other["_statuses"][-1]["state"] != "success"
                ):
                    continue
                self._new_deployment_status(repo, other, {"state": "inactive"}, creator, app)
        return status

    def _paged(self, request: web.Request, items: list[dict[str, Any]]) -> web.Response:
        try:
            per_page = max(1, min(100, int(request.query.get("per_page") or 30)))
            page = max(1, int(request.query.get("page") or 1))
        except ValueError:
            raise _validation("per_page and page must be numbers") from None
        shown = items[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(items):
            query = {**request.query, "page": str(page + 1), "per_page": str(per_page)}
            headers["Link"] = f'<{self.url}{request.path}?{urlencode(query)}>; rel="next"'
        return web.json_response([self._public(i) for i in shown], headers=headers)

    def _deployment_of(self, request: web.Request) -> tuple[Repo, dict[str, Any]]:
        repo = self._repo_of(request)
        deployment = repo.deployments.get(int(request.match_info["id"]))
        if deployment is None:
            raise ApiError(404, "Not Found")
        return repo, deployment

    async def h_create_deployment(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        data = await self._json(request)
        ref = data.get("ref")
        if not isinstance(ref, str) or not ref:
            raise _validation("ref is missing", [{"field": "ref", "code": "missing_field"}])
        payload = data.get("payload")
        if payload is not None and not isinstance(payload, dict | str):
            raise _validation("payload must be an object or a string")
        sha = await asyncio.to_thread(self._resolve, repo, ref)
        if sha is None:
            raise ApiError(422, f"No ref found for: {ref}")
        contexts = data.get("required_contexts")
        if contexts is None or contexts:
            wanted = set(contexts or ())
            red = [
                r["name"]
                for r in repo.check_runs.values()
                if r["head_sha"] == sha
                and (not wanted or r["name"] in wanted)
                and (r["status"] != "completed" or r.get("conclusion") != "success")
            ]
            if red:
                raise ApiError(
                    409,
                    f"Conflict: Commit status checks failed for {ref}.",
                    errors=[{"contexts": [{"context": n, "state": "pending"} for n in red]}],
                )
        creator, app = self._app_actor()
        deployment = self._new_deployment(repo, ref, sha, data, creator, app)
        return web.json_response(self._public(deployment), status=201)

    async def h_list_deployments(self, request: web.Request) -> web.Response:
        repo = self._repo_of(request)
        query = request.query
        found = [
            d
            for d in reversed(list(repo.deployments.values()))
            if all(
                not query.get(key) or str(d[key]) == query[key]
                for key in ("sha", "ref", "task", "environment")
            )
        ]
        return self._paged(request, found)

    async def h_create_deployment_status(self, request: web.Request) -> web.Response:
        repo, deployment = self._deployment_of(request)
        data = await self._json(request)
        state = data.get("state")
        if state not in self._DEPLOYMENT_STATES:
            raise _validation(
                f"state {state!r} is not included in the list",
                [{"field": "state", "code": "invalid"}],
            )
        if len(str(data.get("description") or "")) > 140:
            raise _validation("description is too long (maximum is 140 characters)")
        creator, app = self._app_actor()
        status = self._new_deployment_status(repo, deployment, data, creator, app)
        await self._deliver_deployment_status(repo, deployment, status)
        return web.json_response(status, status=201)

    async def _deliver_deployment_status(
        self, repo: Repo, deployment: dict[str, Any], status: dict[str, Any]
    ) -> None:
        await self._deliver(
            "deployment_status",
            {
                "action": "created",
                "deployment_status": status,
                "deployment": self._public(deployment),
                "repository": self._repository_json(repo),
                "installation": {"id": repo.installation},
                "sender": status["creator"],
            },
        )

    async def h_list_deployment_statuses(self, request: web.Request) -> web.Response:
        _, deployment = self._deployment_of(request)
        return self._paged(request, list(reversed(deployment["_statuses"])))

    async def close_session(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


@asynccontextmanager
async def running_fake_github(**options: Any) -> AsyncIterator[FakeGitHub]:
    """Serve a :class:`FakeGitHub` on 127.0.0.1:<ephemeral> until the block ends."""
    fake = FakeGitHub(**options)
    runner = web.AppRunner(fake.app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    fake.url = f"http://127.0.0.1:{port}"
    try:
        yield fake
    finally:
        await fake.close_session()
        await runner.cleanup()


async def sign_in(client: Any, next_path: str) -> aiohttp.ClientResponse:
    """Sign in to the status pages behind ``client`` (an aiohttp ``TestClient``) with the fake's
    OAuth web flow: our /ui/login, GitHub's authorize, our callback (its answer)."""
    login = await client.get("/ui/login", params={"next": next_path}, allow_redirects=False)
    assert login.status == 302
    authorize = login.headers["Location"]
    async with aiohttp.ClientSession() as github:
        async with github.get(authorize, allow_redirects=False) as approved:
            assert approved.status == 302, await approved.text()
            back = urlsplit(approved.headers["Location"])
    assert back.path == "/ui/oauth/callback"
    answer: aiohttp.ClientResponse = await client.get(
        f"{back.path}?{back.query}", allow_redirects=False
    )
    return answer
