"""Git discovery: ``git ls-remote`` to see whether anything moved, a cached fetch to read it.

Kargo clones the repository on every discovery unless ``ls-remote`` shows the refs it selected
from unchanged (``status.discoveredArtifacts.git[].observedRefs``). We keep one bare mirror per
repository under the work directory and fetch into it, so a moved branch costs only the new
objects; the branch walk (``git log``) and the changed paths of a commit (for
``includePaths``/``excludePaths``) are read from the mirror.

Every git process runs with the project's safe settings (as ``promoter/steps/git.py``): hooks
and fsmonitor off, the ``ext::`` transport refused, no terminal prompts, no system config, only
``PATH`` inherited from the environment, and as global config the operator's gitconfig
(``LONGSHOREMAN_GIT_CONFIG``) when there is one, as the git steps have it, so the server's own
environment never reaches a repository it does not trust.

Credentials come from the credentials port, for the Warehouse's project: git gets them from
our credential helper (:func:`promoter.ports.gitcmd.credential_env`), never in a URL or on the
command line. Mirrors are kept per project, so one project's fetch never serves another's
Warehouse. A remote that asks for credentials nobody had fails with "no credentials for
<repoURL>".
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from promoter.ports.credentials import Credential
from promoter.ports.gitcmd import credential_env
from promoter.warehouses.selection import CommitFacts, TagFacts

__all__ = ["GitError", "GitSource"]

_SAFE = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "protocol.ext.allow=never",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
)  # fmt: skip
# What git says when the server wanted credentials it did not get (or refused the ones it got).
_AUTH_FAILURES = (
    "could not read username",
    "could not read password",
    "terminal prompts disabled",
    "authentication failed",
    "authentication required",
)

_SEP = "\x1f"
_REC = "\x1e"


class GitError(Exception):
    """A git command failed; the message carries git's stderr (URLs without userinfo)."""


@dataclass
class GitSource:
    cache_dir: Path
    timeout: float = 300.0
    commands: int = 0
    # The operator's gitconfig (LONGSHOREMAN_GIT_CONFIG), or none at all.
    git_config: Path | None = None
    # Extra environment for every git process (tests: url.insteadOf rules); never credentials.
    extra_env: Mapping[str, str] = field(default_factory=dict)

    def _env(self, url: str, credential: Credential | None) -> dict[str, str]:
        home = self.cache_dir / "home"
        home.mkdir(parents=True, exist_ok=True)
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(home),
            "LC_ALL": "C",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": str(self.git_config) if self.git_config else os.devnull,
            **self.extra_env,
        }
        if credential is not None and url:
            try:
                added = credential_env(env, url, credential.username, credential.password)
            except ValueError as err:
                raise GitError(f"{credential.source or url}: {err}") from None
            env.update(added or {})
        return env

    async def _git(
        self,
        *args: str,
        cwd: Path | None = None,
        insecure: bool = False,
        url: str = "",
        credential: Credential | None = None,
    ) -> str:
        extra = ("-c", "http.sslVerify=false") if insecure else ()
        self.commands += 1
        proc = await asyncio.create_subprocess_exec(
            "git",
            *_SAFE,
            *extra,
            *args,
            cwd=cwd,
            env=self._env(url, credential),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise GitError(f"git {args[0]} timed out after {self.timeout:.0f}s") from None
        if proc.returncode != 0:
            message = err.decode(errors="replace").strip().splitlines()
            last = message[-1] if message else str(proc.returncode)
            if credential is not None:
                last = last.replace(credential.password, "***")
            failed = f"git {args[0]} failed: {last}"
            if url and credential is None and any(m in last.lower() for m in _AUTH_FAILURES):
                raise GitError(f"no credentials for {url}: {failed}")
            raise GitError(failed)
        return out.decode(errors="replace")

    async def ls_remote(
        self,
        url: str,
        *patterns: str,
        insecure: bool = False,
        credential: Credential | None = None,
    ) -> dict[str, str]:
        """ref name -> object id (``--refs``: no peeled ``^{}`` lines), as Kargo's ListRefs."""
        args = ["ls-remote", "--refs"] if patterns != ("HEAD",) else ["ls-remote"]
        out = await self._git(
            *args, "--", url, *patterns, insecure=insecure, url=url, credential=credential
        )
        refs: dict[str, str] = {}
        for line in out.splitlines():
            object_id, _, name = line.partition("\t")
            if name:
                refs[name] = object_id
        return refs

    def _mirror(self, url: str, project: str) -> Path:
        key = hashlib.sha256(f"{project}\0{url}".encode()).hexdigest()[:32]
        return self.cache_dir / "mirrors" / key

    async def _fetch(
        self, url: str, refspec: str, insecure: bool, project: str, credential: Credential | None
    ) -> Path:
        mirror = self._mirror(url, project)
        if not (mirror / "HEAD").exists():
            mirror.mkdir(parents=True, exist_ok=True)
            await self._git("init", "--bare", "--quiet", str(mirror))
        await self._git(
            "fetch", "--quiet", "--prune", "--no-tags", "--", url, refspec, cwd=mirror,
            insecure=insecure, url=url, credential=credential,
        )  # fmt: skip
        return mirror

    async def branch_commits(
        self,
        url: str,
        branch: str,
        limit: int,
        *,
        insecure: bool = False,
        skip: int = 0,
        project: str = "",
        credential: Credential | None = None,
    ) -> list[CommitFacts]:
        """Up to ``limit`` commits of the branch (the remote's default branch when empty),
        newest first (``git log``'s order), after ``skip``."""
        source = f"refs/heads/{branch}" if branch else "HEAD"
        mirror = await self._fetch(
            url, f"+{source}:refs/discovered/head", insecure, project, credential
        )
        fmt = _SEP.join(["%H", "%cI", "%s", "%an <%ae>", "%cn <%ce>"]) + _REC
        out = await self._git(
            "log", f"--format={fmt}", f"--max-count={limit}", f"--skip={skip}",
            "refs/discovered/head", "--", cwd=mirror,
        )  # fmt: skip
        commits = []
        for record in out.split(_REC):
            fields = record.strip("\n").split(_SEP)
            if len(fields) < 5:
                continue
            commits.append(
                CommitFacts(
                    fields[0], datetime.fromisoformat(fields[1]), fields[2], fields[3], fields[4]
                )
            )
        return commits

    async def tags(
        self,
        url: str,
        *,
        insecure: bool = False,
        project: str = "",
        credential: Credential | None = None,
    ) -> list[TagFacts]:
        """Every tag, newest-created first (Kargo's ``ListTags``: ``--sort=-creatordate``)."""
        mirror = await self._fetch(url, "+refs/tags/*:refs/tags/*", insecure, project, credential)
        fields = [
            "%(refname:short)",
            "%(objectname)",
            "%(*objectname)",
            "%(creatordate:iso-strict)",
            "%(subject)",
            "%(*subject)",
            "%(authorname) %(authoremail)",
            "%(*authorname) %(*authoremail)",
            "%(committername) %(committeremail)",
            "%(*committername) %(*committeremail)",
        ]
        out = await self._git(
            "for-each-ref", "--sort=-creatordate", f"--format={'%1f'.join(fields)}",
            "refs/tags", cwd=mirror,
        )  # fmt: skip
        tags = []
        for line in out.splitlines():
            f = line.split(_SEP)
            if len(f) < 10:
                continue
            annotated = bool(f[2])
            tags.append(
                TagFacts(
                    tag=f[0],
                    commit_id=f[2] if annotated else f[1],
                    creator_date=datetime.fromisoformat(f[3]),
                    subject=f[5] if annotated else f[4],
                    author=(f[7] if annotated else f[6]).strip(),
                    committer=(f[9] if annotated else f[8]).strip(),
                )
            )
        return tags

    async def changed_paths(self, url: str, commit: str, project: str = "") -> list[str]:
        """Paths a commit changed against its first parent (all its paths for a root commit)."""
        out = await self._git(
            "diff-tree", "--no-commit-id", "--name-only", "-r", "--root", "-m",
            "--first-parent", commit, cwd=self._mirror(url, project),
        )  # fmt: skip
        return [line for line in out.splitlines() if line]
