"""Git over HTTP for tests: ``git http-backend`` (CGI) behind a small Basic-auth front.

``serve_git(request, repo)`` runs git's own smart-HTTP server for one bare repository and is what
the fake GitHub's git host uses too. ``running_git_server`` serves repositories the way a private
git server does: every request without the right ``Authorization: Basic`` answers ``401`` with a
``WWW-Authenticate: Basic`` challenge (which is what makes git ask its credential helper), and
every request is recorded with the user it authenticated as (never the password).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from aiohttp import web

from tests.support.gitrepo import RemoteRepo

REALM = 'Basic realm="longshoreman-test-git"'


async def serve_git(request: web.Request, repo: RemoteRepo, rest: str, user: str) -> web.Response:
    """Answer one smart-HTTP request (``rest`` is the path after ``<name>.git/``) with
    ``git http-backend``; ``user`` is who authenticated (push needs one)."""
    # aiohttp has already undone any Content-Encoding: gzip, so the CGI gets plain bytes.
    body = await request.read()
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(repo.home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_PROJECT_ROOT": str(repo.path.parent),
        "GIT_HTTP_EXPORT_ALL": "1",
        "PATH_INFO": f"/{repo.path.name}/{rest}",
        "REQUEST_METHOD": request.method,
        "QUERY_STRING": request.query_string,
        "CONTENT_TYPE": request.headers.get("Content-Type", ""),
        "CONTENT_LENGTH": str(len(body)),
        # http-backend enables receive-pack (push) for an authenticated user.
        "REMOTE_USER": user,
        "REMOTE_ADDR": "127.0.0.1",
        "GIT_PROTOCOL": request.headers.get("Git-Protocol", ""),
    }
    proc = await asyncio.create_subprocess_exec(
        "git",
        "http-backend",
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate(body)
    head, sep, payload = out.partition(b"\r\n\r\n")
    if not sep:
        head, _, payload = out.partition(b"\n\n")
    status, headers = 200, {}
    for line in head.decode("latin-1").splitlines():
        key, _, value = line.partition(":")
        if key.lower() == "status":
            status = int(value.strip().split(" ", 1)[0])
        elif key:
            headers[key.strip()] = value.strip()
    return web.Response(status=status, headers=headers, body=payload)


@dataclass(frozen=True, slots=True)
class GitHit:
    """One request the server answered: who it let in ("" when it refused)."""

    method: str
    path: str
    user: str
    status: int


@dataclass
class GitServer:
    """Private repositories at ``{url}/{name}.git``, for ``username``/``password`` only."""

    username: str
    password: str
    url: str = ""
    repos: dict[str, RemoteRepo] = field(default_factory=dict)
    hits: list[GitHit] = field(default_factory=list)

    def add(self, name: str, repo: RemoteRepo) -> str:
        """Serve ``repo`` as ``name``; returns its clone URL."""
        self.repos[name] = repo
        return f"{self.url}/{name}.git"

    def _user(self, request: web.Request) -> str | None:
        scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            user, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return user if (user, password) == (self.username, self.password) else None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        name, rest = request.match_info["name"], request.match_info["rest"]
        user = self._user(request)
        repo = self.repos.get(name.removesuffix(".git"))
        if user is None:
            self.hits.append(GitHit(request.method, request.path, "", 401))
            return web.Response(status=401, headers={"WWW-Authenticate": REALM})
        if repo is None:
            self.hits.append(GitHit(request.method, request.path, user, 404))
            return web.Response(status=404, text="no such repository\n")
        response = await serve_git(request, repo, rest, user)
        self.hits.append(GitHit(request.method, request.path, user, response.status))
        return response


@contextlib.asynccontextmanager
async def running_git_server(username: str, password: str) -> AsyncIterator[GitServer]:
    """A Basic-auth git server on 127.0.0.1 (a free port) for one test."""
    server = GitServer(username, password)
    app = web.Application()
    app.router.add_route("*", "/{name:[^/]+\\.git}/{rest:.*}", server.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.url = f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        await runner.cleanup()
