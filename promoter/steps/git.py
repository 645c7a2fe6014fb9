"""Kargo-compatible git steps: git-clone, git-clear, git-commit, git-tag and git-push.

Each step drives the ``git`` binary through ``ctx.services.io`` (asyncio subprocesses in the server,
plain ones in the local runner), and reads what git's own files say where that saves a process
(HEAD, the remote's URL, a new commit's tree and dates). Nothing goes through a shell and
every value that comes from a manifest is validated before any git process starts, so a value can
never turn into a git option (``--upload-pack=...``): refs are checked against git's ref-name rules
plus "no leading dash", commits must be hex, paths go through :meth:`StepContext.path` (absolute
afterwards), and free text (commit messages, sparse directories) travels on stdin.

Layout inside the Promotion's work directory, following Kargo (one clone, one worktree per
checkout; see https://docs.kargo.io/user-guide/reference-docs/promotion-steps/git-clone)::

    .longshoreman/git/<sha256(repoURL)[:16]>.git   bare clone, fetch refspec origin/*
    .longshoreman/git/<sha256(repoURL)[:16]>-<sha256(path)[:16]>.git
                                                   git directory of a checkout cloned on its own
    .longshoreman/home                             HOME for git, so ~/.gitconfig is never read
    <checkout[].path>                              `git worktree add` of the bare clone, or a
                                                   `git clone --separate-git-dir` of one branch

A ``git-clone`` of one existing branch (the common case) is one ``git clone --single-branch``
into the checkout path, its git directory kept with ours: a bare clone shared by worktrees pays
off only when it is reused (several checkouts, another git-clone of the repository, a replay),
and those take it. Either way git's files stay under ``.longshoreman/``, where no other step
writes, and a worktree is trusted only if its ``.git`` points there.

Steps discover their earlier work instead of trusting memory: ``git-clone`` reuses the bare clone
and resets a worktree it finds at its own path (a checkout cloned on its own is cloned again),
``git-commit`` entered again after it committed reports its commit (with nothing to commit it is
``Skipped``, as in Kargo), and ``git-push`` of a commit the remote already has is a no-op.

A replica that rebuilds the work directory (:mod:`promoter.engine.replay`) replays ``git-clone``,
``git-clear``, ``git-commit`` and ``git-tag`` (``Effect.LOCAL``) and never pushes: ``git-clone``
checks out the commits it recorded (not the branches' tips, which may have moved, by our own
push among others) and creates no branch; ``git-commit`` and ``git-tag`` reuse the dates they
recorded, so the same tree on the same parent gives the very same commit (and tag) ID, and a tree
that comes out different is refused. ``git-push`` (``Effect.EXTERNAL``) is only verified: the
pushed commit must still be on the branch (or the tag on the remote), and the worktree is moved to
it, as the push left it.

Credentials never come from manifests: a ``repoURL`` with userinfo is refused, and every message
built from git's output passes through :meth:`StepContext.redact` and has URL userinfo stripped.
Remotes are reached with whatever ``GitSettings.env`` configures (``url.<base>.insteadOf``, a
credential helper, ``GIT_ASKPASS``) and, for an http(s) remote, whatever the credentials port
(``GitSettings.credentials``) finds for the project and the remote: a Secret of the project or
the global credentials namespace, or the GitHub App's installation token. Git gets it from a
credential helper of our own scoped to the remote's ``scheme://host/``
(:func:`promoter.ports.gitcmd.credential_env`), configured through ``GIT_CONFIG_COUNT`` /
``GIT_CONFIG_KEY_n`` / ``GIT_CONFIG_VALUE_n`` in the git process's environment, so it is never
in a remote URL, a config file, a command line or a message.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from promoter.errors import ConfigRefused, StepError
from promoter.ports.credentials import CredentialsError, CredentialType
from promoter.ports.gitcmd import (
    SAFE_CONFIG,
    branch_clone_args,
    clone_options,
    credential_env,
    digest,
    git_env,
)
from promoter.steps.base import (
    PRIVATE_DIR,
    Config,
    Effect,
    FunctionStep,
    Replaying,
    Step,
    StepContext,
    StepResult,
    StepStatus,
    failed,
    skipped,
    succeeded,
)

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------

STATE_DIR = PRIVATE_DIR
CACHE_DIR = f"{STATE_DIR}/git"
# What each git-commit step committed in this work directory, by step (see _commit_marker).
COMMITS_DIR = f"{STATE_DIR}/commits"
HOME_DIR = f"{STATE_DIR}/home"
# One empty file per commit this Promotion's steps made (git-commit, github-push's rebase or
# merge), named by its ID: what github-push vouches for (see made_commits).
MADE_DIR = f"{STATE_DIR}/made"

GENERATED_BRANCH_PREFIX = "kargo/promotion/"
INITIAL_COMMIT_MESSAGE = "Initial commit"
# Kargo's documented default for git-push maxAttempts.
DEFAULT_PUSH_ATTEMPTS = 50
MAX_PUSH_BACKOFF_SECONDS = 2.0
# How long one git process may run: GitSettings.timeout_seconds (600s by default).

_HEX_RE = re.compile(r"^[0-9a-fA-F]{4,64}$")
# A checkout's own git directory: <sha256(repoURL)[:16]>-<sha256(path)[:16]>.git.
_CHECKOUT_REPO_RE = re.compile(r"^[0-9a-f]{16}-[0-9a-f]{16}\.git$")
_OBJECT_ID_RE = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
# git's internal date format (``--date=raw``), which GIT_AUTHOR_DATE and friends accept back.
_RAW_DATE_RE = re.compile(r"^\d{1,12} [+-]\d{4}$")
# What git-commit and git-tag record for a replay (StepResult.replay_data).
TREE_KEY = "tree"
AUTHOR_DATE_KEY = "authorDate"
COMMITTER_DATE_KEY = "committerDate"
TAGGER_DATE_KEY = "taggerDate"
_URL_USERINFO_RE = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]*@")
_SCP_LIKE_RE = re.compile(r"^(?:[A-Za-z0-9._~-]+@)?[A-Za-z0-9.-]+:(?!//)[^\s]+$")
_ALLOWED_SCHEMES = frozenset({"https", "http", "ssh", "git"})
_BAD_REF_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
_PERMANENT_ERRORS = (
    "authentication failed",
    "could not read username",
    "could not read password",
    "terminal prompts disabled",
    "permission denied",
    "repository not found",
    "does not appear to be a git repository",
    "not found",
    "the requested url returned error: 401",
    "the requested url returned error: 403",
    "the requested url returned error: 404",
)


def _rmtree(path: Path | str, ignore_errors: bool = False) -> None:
    """``shutil.rmtree``, loaded when something is to be removed: a Promotion that removes
    nothing (most local runs) never loads shutil, nor the bz2 and lzma it brings along."""
    import shutil

    shutil.rmtree(path, ignore_errors=ignore_errors)


# --------------------------------------------------------------------------------------------
# Pure helpers: validation, URL handling, naming
# --------------------------------------------------------------------------------------------


def strip_userinfo(text: str) -> str:
    """Remove ``user:password@`` from every URL in a text."""
    return _URL_USERINFO_RE.sub(r"\g<scheme>", text)


def normalize_repo_url(url: str) -> str:
    """The form Kargo compares repository URLs in: no userinfo, case, ``.git`` or trailing ``/``."""
    url = strip_userinfo(url.strip()).lower().rstrip("/")
    return url.removesuffix(".git").rstrip("/")


def generated_branch(promotion: str) -> str:
    """Kargo's ``generateTargetBranch`` name: stable per Promotion, so a re-run pushes the same."""
    return f"{GENERATED_BRANCH_PREFIX}{promotion}"


def ref_name_problem(name: str) -> str | None:
    """Why ``name`` is not acceptable as a branch or tag name, or None.

    git's check-ref-format rules, plus: no leading ``-`` (it would read as an option) and not
    ``HEAD``.
    """
    if not name:
        return "must not be empty"
    if name.startswith("-"):
        return "must not start with '-'"
    if name == "HEAD" or name == "@":
        return f"must not be {name!r}"
    if _BAD_REF_CHARS.search(name):
        return "must not contain spaces, control characters or any of ~^:?*[\\"
    if ".." in name or "@{" in name or "//" in name:
        return "must not contain '..', '@{' or '//'"
    if name.startswith("/") or name.endswith("/") or name.endswith("."):
        return "must not start or end with '/' or end with '.'"
    for component in name.split("/"):
        if component.startswith(".") or component.endswith(".lock"):
            return "must not have a component starting with '.' or ending with '.lock'"
    return None


def repo_url_problem(url: str) -> str | None:
    """Why ``url`` may not be cloned, or None. Allows https, http, ssh, git and scp-like URLs.

    ``file://`` and bare paths are refused: a manifest must not read the host's repositories.
    Tests and operators map public URLs to local ones with ``url.<base>.insteadOf`` in
    ``GitSettings.env``, which git applies after this check.
    """
    if not url:
        return "must not be empty"
    if url.startswith("-"):
        return "must not start with '-'"
    if any(c.isspace() or ord(c) < 0x20 for c in url):
        return "must not contain whitespace or control characters"
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme.lower() not in _ALLOWED_SCHEMES:
            return (
                f"uses scheme {parts.scheme!r}; allowed are "
                f"{', '.join(sorted(_ALLOWED_SCHEMES))} and scp-like user@host:path"
            )
        if parts.password is not None or (
            parts.username is not None and parts.scheme.lower() in ("https", "http")
        ):
            return (
                "must not contain credentials; configure them for the git steps "
                "(GitSettings) instead"
            )
        if not parts.hostname:
            return "has no host"
        return None
    if _SCP_LIKE_RE.match(url) and "::" not in url:
        return None
    return "is not a URL git steps accept (https://, ssh://, git:// or user@host:path)"


def sparse_dir_problem(path: str) -> str | None:
    """Why ``path`` is not a repository-relative directory for a sparse checkout, or None."""
    if not path or path.strip() != path:
        return "must be a non-empty path without surrounding spaces"
    if "\n" in path or "\r" in path or "\0" in path:
        return "must not contain line breaks"
    if path.startswith("/") or path.startswith("-"):
        return "must be relative to the repository root"
    if any(part == ".." for part in path.split("/")):
        return "must not contain '..'"
    if any(c in path for c in "*?[!"):
        return "must be a directory, not a pattern"
    return None


def commit_url(repo_url: str, sha: str, provider: str | None = None) -> str | None:
    """The web URL of a commit, for the providers Kargo knows, or None if not derivable."""
    url = strip_userinfo(repo_url.strip())
    if "://" in url:
        parts = urlsplit(url)
        host, path = parts.hostname or "", parts.path
    elif _SCP_LIKE_RE.match(url):
        host_part, _, path = url.partition(":")
        host = host_part.rpartition("@")[2]
    else:
        return None
    path = path.strip("/").removesuffix(".git").strip("/")
    if not host or not path:
        return None
    host = host.lower()
    if provider is None:
        if "github" in host:
            provider = "github"
        elif "gitlab" in host:
            provider = "gitlab"
        elif host == "bitbucket.org":
            provider = "bitbucket"
        elif host.endswith("dev.azure.com"):
            provider = "azure"
        else:
            return None
    base = f"https://{host}/{path}"
    suffix = {
        "github": "/commit/",
        "gitea": "/commit/",
        "azure": "/commit/",
        "gitlab": "/-/commit/",
        "bitbucket": "/commits/",
    }.get(provider)
    return f"{base}{suffix}{sha}" if suffix else None


def _is_permanent(stderr: str) -> bool:
    lowered = stderr.lower()
    return any(marker in lowered for marker in _PERMANENT_ERRORS)


# --------------------------------------------------------------------------------------------
# Running git
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GitRun:
    """Result of one git process."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @classmethod
    def decoded(cls, returncode: int, stdout: bytes, stderr: bytes) -> GitRun:
        return cls(returncode, stdout.decode(errors="replace"), stderr.decode(errors="replace"))


class _Git:
    """Runs git for one step: the environment, redaction and error wording live here."""

    def __init__(self, ctx: StepContext, kind: str) -> None:
        self.ctx = ctx
        self.kind = kind
        self.env = _git_env(ctx)
        # Credentials handed out for this step's remote: redacted like GitSettings.secrets.
        self.secrets: list[str] = []
        _clear_stale_locks(ctx)

    async def authenticate(self, repo_url: str) -> None:
        """Ask ``GitSettings.credentials`` for ``repo_url`` and give git what it returns.

        Called before the commands that reach the remote; the provider caches (and renews)
        tokens itself, so asking on every step is cheap and never uses an expired one.
        """
        provider = self.ctx.services.git.credentials
        if provider is None:
            return
        try:
            credential = await provider.get(self.ctx.project, CredentialType.GIT, repo_url)
        except StepError as e:
            raise StepError(
                f"{self.kind}: {self.redact(e.message)}",
                terminal=e.terminal,
                retry_after=e.retry_after,
            ) from None
        except CredentialsError as e:
            raise StepError(
                f"{self.kind}: {self.redact(str(e))}",
                terminal=e.retry_after is None,
                retry_after=e.retry_after,
            ) from None
        if credential is None:
            return
        try:
            added = credential_env(self.env, repo_url, credential.username, credential.password)
        except ValueError as e:
            raise StepError(f"{self.kind}: {credential.source or repo_url}: {e}") from None
        if added is None:
            return
        self.secrets.append(credential.password)
        self.env.update(added)

    def redact(self, text: str) -> str:
        """Remove configured secrets and this step's credentials from ``text``."""
        text = self.ctx.redact(text)
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text

    def clean(self, text: str) -> str:
        """Text safe for messages: secrets redacted, URL userinfo removed, trimmed."""
        text = strip_userinfo(self.redact(text)).strip()
        lines = [
            line for line in text.splitlines() if line.strip() and not line.startswith("hint:")
        ]
        return " / ".join(lines[-4:])[:800]

    def error(
        self, what: str, run: GitRun | None = None, *, terminal: bool | None = None
    ) -> StepError:
        detail = self.clean(run.stderr or run.stdout) if run is not None else ""
        if terminal is None:
            terminal = run is not None and _is_permanent(run.stderr)
        message = f"{self.kind}: {what}" + (f": {detail}" if detail else "")
        return StepError(message, terminal=terminal)

    async def try_run(self, *args: str, cwd: Path, stdin: str | None = None) -> GitRun:
        """Run git; return its result whatever the exit code."""
        started = time.perf_counter()
        timeout = self.ctx.services.git.timeout_seconds
        try:
            done = await self.ctx.services.io.run_process(
                ["git", *SAFE_CONFIG, *args],
                cwd=cwd,
                env=self.env,
                stdin=stdin.encode() if stdin is not None else None,
                time_limit=timeout,
            )
        except TimeoutError:
            raise self.timed_out(args[0]) from None
        except OSError as exc:
            # No git binary on PATH, or the directory vanished under us.
            raise StepError(f"{self.kind}: could not start git {args[0]}: {exc.strerror}") from None
        finally:
            # Two perf_counter reads per call, nothing more (longshoreman_git_command_*).
            self.ctx.services.telemetry.git_call(args[0], time.perf_counter() - started)
        return GitRun.decoded(done.returncode, done.stdout, done.stderr)

    def timed_out(self, command: str) -> StepError:
        return StepError(
            f"{self.kind}: git {command} did not finish within "
            f"{self.ctx.services.git.timeout_seconds:g}s"
        )

    async def run(self, *args: str, cwd: Path, stdin: str | None = None, what: str = "") -> str:
        """Run git; raise a redacted StepError unless it exits 0. Returns stripped stdout."""
        result = await self.try_run(*args, cwd=cwd, stdin=stdin)
        if not result.ok:
            raise self.error(what or f"git {args[0]} failed", result)
        return result.stdout.strip()


def _git_env(ctx: StepContext) -> dict[str, str]:
    home = ctx.work_dir / HOME_DIR
    home.mkdir(parents=True, exist_ok=True)
    # Our http.<url>.extraHeader entries are added by _Git.authenticate; config entries from
    # the process environment are never inherited (only PATH is).
    settings = ctx.services.git
    return git_env(str(home), settings.env, settings.author_name, settings.author_email)


def _cache_root(ctx: StepContext) -> Path:
    return (ctx.work_dir / CACHE_DIR).resolve()


def _clear_stale_locks(ctx: StepContext) -> None:
    """Remove what a git killed mid-command (a SIGKILLed pod) left in this Promotion's clones.

    Such a git leaves ``*.lock`` files that make every later command fail, and a half-made
    ``git worktree add`` leaves its worktree locked ("initializing"), which ``worktree prune``
    then skips and whose half-written HEAD breaks ``git fetch``. Only this Promotion's steps
    run git here, one at a time, so any lock found when a step starts is stale.
    """
    # os.scandir and os.walk, not pathlib's glob: this runs before every git step, and the
    # globs cost ~0.6 ms a step on a fresh clone (bench/bench_runner.py).
    for repo in _entries(str(_cache_root(ctx)), ".git", dirs=True):
        stale = _entries(repo, ".lock")
        worktrees = _entries(os.path.join(repo, "worktrees"), "", dirs=True)
        for worktree in worktrees:
            stale += _entries(worktree, ".lock")
        for sub in ("refs", "logs"):
            for top, _, names in os.walk(os.path.join(repo, sub)):
                stale += [os.path.join(top, name) for name in names if name.endswith(".lock")]
        for path in stale:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        for worktree in worktrees:
            with contextlib.suppress(OSError):
                marker = Path(worktree, "locked")
                if marker.read_text(errors="replace").strip() == "initializing":
                    # Half made (even its HEAD may be empty, which breaks fetch): drop it; the
                    # checkout path, if any, is then recognised as ours and reset.
                    _rmtree(worktree)


def _entries(folder: str, suffix: str, *, dirs: bool = False) -> list[str]:
    """The paths of ``folder``'s files (or directories) whose names end with ``suffix``
    (none when ``folder`` is missing)."""
    try:
        with os.scandir(folder) as found:
            return [
                e.path
                for e in found
                if e.name.endswith(suffix) and e.is_dir(follow_symlinks=False) == dirs
            ]
    except OSError:
        return []


def _repo_dir(ctx: StepContext, repo_url: str) -> Path:
    return _cache_root(ctx) / f"{digest(repo_url)}.git"


def _checkout_repo_dir(ctx: StepContext, repo_url: str, path: Path) -> Path:
    """The git directory of a checkout cloned on its own (see :func:`_clone_checkout`)."""
    return _cache_root(ctx) / f"{digest(repo_url)}-{digest(str(path))}.git"


def _owning_repo(ctx: StepContext, worktree: Path) -> Path | None:
    """The repository a worktree at ``worktree`` belongs to, if git-clone made it: the bare
    clone it is a ``git worktree`` of, or the checkout's own git directory."""
    marker = worktree / ".git"
    if marker.is_symlink() or not marker.is_file():
        return None
    try:
        content = marker.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if not content.startswith("gitdir:"):
        return None
    gitdir = Path(content.removeprefix("gitdir:").strip())
    if not gitdir.is_absolute():
        gitdir = worktree / gitdir
    gitdir = gitdir.resolve()
    cache = _cache_root(ctx)
    # <cache>/<digest>-<digest>.git, a checkout's own (see _clone_checkout)
    if gitdir.parent == cache and _CHECKOUT_REPO_RE.match(gitdir.name):
        return gitdir
    # <cache>/<digest>.git/worktrees/<name>
    if gitdir.parent.name != "worktrees" or gitdir.parent.parent.parent != cache:
        return None
    return gitdir.parent.parent


def _git_dirs(worktree: Path) -> tuple[Path, Path] | None:
    """The git directory of a worktree git-clone made and the common one (where branches,
    objects and the config live: the bare clone's for a linked worktree, the same otherwise)."""
    try:
        marker = (worktree / ".git").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    gitdir = Path(marker.removeprefix("gitdir:").strip())
    if not gitdir.is_absolute():
        gitdir = worktree / gitdir
    common = gitdir
    try:
        common = gitdir / (gitdir / "commondir").read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError):
        return None
    return gitdir, common


def _head_from_files(worktree: Path) -> tuple[str, str | None] | None:
    """HEAD's commit and branch (None when detached) in a worktree git-clone made, read from
    git's files instead of asking a git process; None when they are not plain files (another
    ref storage, a packed or missing ref), and the caller asks git.

    Only our own git directories are read (the caller has checked the worktree with
    :func:`_owning_repo`), and a value is used only if it is a well-formed object ID.
    """
    dirs = _git_dirs(worktree)
    if dirs is None:
        return None
    gitdir, common = dirs
    try:
        head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
        if _OBJECT_ID_RE.match(head):
            return head, None
        ref = head.removeprefix("ref: ")
        if ref == head or not ref.startswith("refs/heads/") or ref_name_problem(ref) is not None:
            return None
        sha = (common / ref).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not _OBJECT_ID_RE.match(sha):
        return None
    return sha, ref.removeprefix("refs/heads/")


def _remote_url_from_files(worktree: Path) -> str | None:
    """``remote.origin.url`` as git-clone wrote it into the config of a worktree's repository;
    None when the file holds anything this plain reading could get wrong (includes, quoting,
    escapes, comments after a value, more than one URL): the caller asks git."""
    dirs = _git_dirs(worktree)
    if dirs is None:
        return None
    try:
        text = (dirs[1] / "config").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    section = ""
    urls: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line
            if line.lower().startswith("[include"):
                return None
            continue
        if section == '[remote "origin"]':
            key, _, value = line.partition("=")
            if key.strip().lower() == "url":
                urls.append(value.strip())
    if len(urls) != 1 or not urls[0] or any(c in urls[0] for c in '"\\;#'):
        return None
    return urls[0]


def _commit_from_files(worktree: Path, sha: str) -> tuple[str, str, str] | None:
    """A new commit's tree and its raw author and committer dates (``git log --date=raw``'s
    ``<seconds> <zone>``), read from its loose object; None when it is not a loose commit
    object of the expected shape (packed already), and the caller asks git."""
    dirs = _git_dirs(worktree)
    if dirs is None or not _OBJECT_ID_RE.match(sha):
        return None
    try:
        data = zlib.decompress((dirs[1] / "objects" / sha[:2] / sha[2:]).read_bytes())
    except (OSError, zlib.error):
        return None
    header, _, body = data.partition(b"\0")
    if not header.startswith(b"commit "):
        return None
    found: dict[bytes, str] = {}
    for line in body.split(b"\n"):
        if not line:
            break  # the end of the headers: the message follows
        name, _, value = line.partition(b" ")
        if name == b"tree":
            found[name] = value.decode("ascii", errors="replace")
        elif name in (b"author", b"committer"):
            # "<name> <<email>> <seconds> <zone>"
            found[name] = " ".join(value.decode(errors="replace").rsplit(" ", 2)[1:])
    tree, author, committer = (found.get(k, "") for k in (b"tree", b"author", b"committer"))
    if not _OBJECT_ID_RE.match(tree) or author.count(" ") != 1 or committer.count(" ") != 1:
        return None
    return tree, author, committer


def _resolve(ctx: StepContext, kind: str, relative: str, field_name: str = "path") -> Path:
    """:meth:`StepContext.path`, with the step kind in front of its message."""
    try:
        return ctx.path(relative, field_name=field_name)
    except StepError as exc:
        raise exc.with_message(f"{kind}: {exc.message}") from None


def _open_worktree(ctx: StepContext, kind: str, config: Config) -> Path:
    """Resolve ``config.path`` and check that it is a worktree git-clone created.

    Running git in a directory whose ``.git`` another step could have written would let a
    manifest choose the repository, and with it the config git obeys; only our own clones are
    trusted.
    """
    path = _resolve(ctx, kind, config.str("path"))
    if not path.is_dir():
        raise StepError(f"{kind}: config.path {config.str('path')!r} does not exist", terminal=True)
    if _owning_repo(ctx, path) is None:
        raise StepError(
            f"{kind}: config.path {config.str('path')!r} is not a working tree checked out by "
            "a git-clone step",
            terminal=True,
        )
    return path


# --------------------------------------------------------------------------------------------
# git-clone
# --------------------------------------------------------------------------------------------


CheckoutKind = Literal["branch", "tag", "commit", "default"]


@dataclass(frozen=True, slots=True)
class CheckoutPlan:
    """One validated ``checkout[]`` entry."""

    key: str
    rel_path: str
    path: Path
    kind: CheckoutKind
    ref: str
    create: bool = False
    sparse: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClonePlan:
    """A validated ``git-clone`` config: deciding what to do touches no git."""

    repo_url: str
    insecure_skip_tls_verify: bool
    blobless: bool
    recurse_submodules: bool
    author_name: str | None
    author_email: str | None
    checkouts: tuple[CheckoutPlan, ...]


def _freight_commit(
    ctx: StepContext, kind: str, repo_url: str, origin: Mapping[str, Any]
) -> tuple[CheckoutKind, str]:
    if origin:
        actual = ctx.freight.get("origin") or {}
        if actual and (
            actual.get("kind", "Warehouse") != origin.get("kind", "Warehouse")
            or actual.get("name") != origin.get("name")
        ):
            raise StepError(
                f"{kind}: the target Freight comes from {actual.get('kind', 'Warehouse')} "
                f"{actual.get('name')!r}, not from fromOrigin {origin.get('name')!r}",
                terminal=True,
            )
    wanted = normalize_repo_url(repo_url)
    for commit in ctx.freight.get("commits") or []:
        if not isinstance(commit, Mapping):
            continue
        if normalize_repo_url(str(commit.get("repoURL", ""))) != wanted:
            continue
        sha = str(commit.get("id") or "")
        if sha:
            if not _HEX_RE.match(sha):
                raise StepError(
                    f"{kind}: the Freight's commit id {sha!r} is not a commit ID", terminal=True
                )
            return "commit", sha.lower()
        tag = str(commit.get("tag") or "")
        if tag and ref_name_problem(tag) is None:
            return "tag", tag
    raise StepError(
        f"{kind}: the target Freight has no commit from {strip_userinfo(repo_url)}",
        terminal=True,
    )


def plan_clone(ctx: StepContext, config: Mapping[str, Any] | None) -> ClonePlan:
    """Validate a git-clone config completely, before any git runs."""
    kind = "git-clone"
    cfg = Config(kind, config)
    repo_url = cfg.str("repoURL").strip()
    problem = repo_url_problem(repo_url)
    if problem:
        raise ConfigRefused(f"{kind}: config.repoURL {problem}")
    author = cfg.map("author")
    author_name = author_email = None
    if author:
        a = Config(kind, author, "config.author")
        if a.has("signingKey"):
            raise ConfigRefused(
                f"{kind}: config.author.signingKey: signed commits are not supported"
            )
        author_name, author_email = _identity(kind, a)

    checkouts: list[CheckoutPlan] = []
    seen_keys: set[str] = set()
    seen_branches: set[str] = set()
    items = cfg.items("checkout", required=True)
    if not items:
        raise ConfigRefused(f"{kind}: config.checkout must name at least one checkout")
    # Our clones and HOME live here; a checkout inside would let git-clear delete them.
    state = (ctx.work_dir / STATE_DIR).resolve()
    item: Config
    for i, item in enumerate(items):
        field_prefix = f"checkout[{i}]"
        rel_path: str = item.str("path")
        path = _resolve(ctx, kind, rel_path, f"{field_prefix}.path")
        if path == ctx.work_dir.resolve() or path == state or state in path.parents:
            raise ConfigRefused(
                f"{kind}: config.{field_prefix}.path {rel_path!r} must be a directory of its own "
                f"inside the work directory, outside {STATE_DIR}/"
            )
        chosen = [
            name for name in ("branch", "tag", "commit") if item.has(name) and item.str(name) != ""
        ]
        from_freight: bool = item.bool("fromFreight") or item.has("fromOrigin")
        if from_freight:
            chosen.append("fromFreight")
        if len(chosen) > 1:
            raise ConfigRefused(
                f"{kind}: config.{field_prefix}: {' and '.join(chosen)} are mutually exclusive"
            )
        ck_kind: CheckoutKind = "default"
        ref = ""
        if "branch" in chosen:
            ck_kind, ref = "branch", item.str("branch")
        elif "tag" in chosen:
            ck_kind, ref = "tag", item.str("tag")
        elif "commit" in chosen:
            ck_kind, ref = "commit", item.str("commit")
        elif from_freight:
            ck_kind, ref = _freight_commit(ctx, kind, repo_url, item.map("fromOrigin"))
        if ck_kind in ("branch", "tag"):
            problem = ref_name_problem(ref)
            if problem:
                raise ConfigRefused(f"{kind}: config.{field_prefix}.{ck_kind} {problem}")
        if ck_kind == "commit" and not _HEX_RE.match(ref):
            raise ConfigRefused(
                f"{kind}: config.{field_prefix}.commit must be a commit ID (hex), got {ref!r}"
            )
        create: bool = item.bool("create")
        if create and ck_kind != "branch":
            raise ConfigRefused(f"{kind}: config.{field_prefix}.create needs a branch")
        if ck_kind == "branch":
            # git cannot check one branch out in two worktrees.
            if ref in seen_branches:
                raise ConfigRefused(
                    f"{kind}: config.{field_prefix}.branch {ref!r} is checked out twice; git "
                    "cannot check out one branch in two working trees"
                )
            seen_branches.add(ref)
        sparse: list[str] = []
        raw_entry: Any
        for j, raw_entry in enumerate(item.list("sparse")):
            if not isinstance(raw_entry, str):
                raise ConfigRefused(f"{kind}: config.{field_prefix}.sparse[{j}] must be a string")
            entry = raw_entry.rstrip("/")
            problem = sparse_dir_problem(entry)
            if problem:
                raise ConfigRefused(f"{kind}: config.{field_prefix}.sparse[{j}] {problem}")
            sparse.append(entry)
        key: str = item.str("as", "") or rel_path
        if key in seen_keys:
            raise ConfigRefused(f"{kind}: config.{field_prefix}: duplicate checkout key {key!r}")
        seen_keys.add(key)
        for other in checkouts:
            if other.path == path or other.path in path.parents or path in other.path.parents:
                raise ConfigRefused(
                    f"{kind}: config.{field_prefix}.path {rel_path!r} overlaps {other.rel_path!r}"
                )
        checkouts.append(CheckoutPlan(key, rel_path, path, ck_kind, ref, create, tuple(sparse)))
    return ClonePlan(
        repo_url=repo_url,
        insecure_skip_tls_verify=cfg.bool("insecureSkipTLSVerify"),
        blobless=cfg.bool("blobless") or all(c.sparse for c in checkouts),
        recurse_submodules=cfg.bool("recurseSubmodules"),
        author_name=author_name,
        author_email=author_email,
        checkouts=tuple(checkouts),
    )


def _identity(kind: str, cfg: Config) -> tuple[str | None, str | None]:
    name = cfg.opt_str("name")
    email = cfg.opt_str("email")
    for label, value in (("name", name), ("email", email)):
        if value is not None and (any(c in value for c in "<>\n\r\0") or value.strip() == ""):
            raise ConfigRefused(
                f"{kind}: {cfg.prefix}.{label} must not be blank or contain <, > or line breaks"
            )
    return name, email


def _clone_options(plan: ClonePlan, ctx: StepContext) -> list[str]:
    """:func:`promoter.ports.gitcmd.clone_options` for ``plan``."""
    return clone_options(
        plan.author_name or ctx.services.git.author_name,
        plan.author_email or ctx.services.git.author_email,
        insecure=plan.insecure_skip_tls_verify,
        blobless=plan.blobless,
    )


async def _ensure_clone(git: _Git, plan: ClonePlan) -> tuple[Path, bool]:
    """The bare clone for ``plan.repo_url``: cloned now, or fetched if an earlier run made it."""
    ctx = git.ctx
    repo = _repo_dir(ctx, plan.repo_url)
    repo.parent.mkdir(parents=True, exist_ok=True)
    if repo.is_dir():
        if plan.insecure_skip_tls_verify:
            await git.run("config", "http.sslVerify", "false", cwd=repo)
        # Tags come along by git's auto-following; an explicit tag refspec would make --prune
        # delete tags a git-tag step created but has not pushed yet.
        fetch = ("fetch", "-q", "--prune", "origin", "+refs/heads/*:refs/remotes/origin/*")
        await git.try_run("worktree", "prune", cwd=repo)
        fetched = await git.try_run(*fetch, cwd=repo)
        if not fetched.ok:
            # A process killed mid-checkout can leave a worktree whose HEAD names an object
            # that never arrived, and git then refuses to fetch ("bad object worktrees/..").
            # This step re-creates its checkouts anyway: drop the worktree bookkeeping and
            # try again; failing that, start over from a fresh clone below.
            await git.ctx.services.io.call(_rmtree, repo / "worktrees", True)
            fetched = await git.try_run(*fetch, cwd=repo)
        if fetched.ok:
            return repo, False
        log.warning(
            "git-clone: the clone cache for %s is unusable (%s); cloning again",
            strip_userinfo(plan.repo_url),
            git.clean(fetched.stderr)[:200],
        )
        await git.ctx.services.io.call(_rmtree, repo, True)
    args = [
        "clone", "--bare", "-q",
        # Remote-tracking refs (not the mirror-like refs/heads/* a bare clone has) so that a
        # later fetch never fights with a branch some worktree has checked out.
        "-c", "remote.origin.fetch=+refs/heads/*:refs/remotes/origin/*",
    ]  # fmt: skip
    args += _clone_options(plan, ctx)
    # Clone next to the final place and rename: a crash mid-clone never leaves a half repository
    # that a re-run would mistake for a finished one.
    tmp = repo.with_name(f"{repo.name}.tmp-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        await git.run(
            *args, "--", plan.repo_url, str(tmp),
            cwd=repo.parent, what=f"could not clone {strip_userinfo(plan.repo_url)}",
        )  # fmt: skip
        tmp.rename(repo)
    finally:
        if tmp.exists():
            _rmtree(tmp, ignore_errors=True)
    return repo, True


def _forget_worktree(repo: Path, path: Path) -> None:
    """Drop the cache's bookkeeping of any worktree registered at ``path``."""
    admin = repo / "worktrees"
    if not admin.is_dir():
        return
    target = (path / ".git").resolve()
    for entry in admin.iterdir():
        gitdir = entry / "gitdir"
        try:
            registered = Path(gitdir.read_text().strip()).resolve()
        except OSError:
            continue
        if registered == target:
            _rmtree(entry, ignore_errors=True)


async def _remote_refs(git: _Git, repo: Path) -> dict[str, str]:
    """refname -> commit (tags peeled) for origin's branches and all tags."""
    out = await git.run(
        "for-each-ref", "--format=%(objectname) %(*objectname) %(refname)",
        "refs/remotes/origin/", "refs/tags/", cwd=repo,
    )  # fmt: skip
    refs: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split(" ")
        if len(parts) == 3:
            obj, peeled, name = parts
            refs[name] = peeled or obj
    return refs


async def _create_branch(git: _Git, repo: Path, branch: str, repo_url: str) -> str:
    """Kargo's ``create: true``: push an empty orphan "Initial commit" so the branch exists.

    Pushed at clone time, as Kargo does, so that every later step (and a concurrent Promotion)
    sees one shared root instead of competing root commits.
    """
    empty_tree = await git.run("mktree", cwd=repo, stdin="")
    sha = await git.run("commit-tree", empty_tree, cwd=repo, stdin=INITIAL_COMMIT_MESSAGE + "\n")
    push = await git.try_run(
        "push", "--porcelain", "origin", f"{sha}:refs/heads/{branch}", cwd=repo
    )
    if push.ok:
        await git.run("update-ref", f"refs/remotes/origin/{branch}", sha, cwd=repo)
        return sha
    # Somebody created the branch since our fetch: use theirs.
    fetched = await git.try_run(
        "fetch", "-q", "origin", f"+refs/heads/{branch}:refs/remotes/origin/{branch}", cwd=repo
    )
    if not fetched.ok:
        raise git.error(f"could not create branch {branch!r} in {strip_userinfo(repo_url)}", push)
    return await git.run(
        "rev-parse", "--verify", "-q", f"refs/remotes/origin/{branch}^{{commit}}", cwd=repo
    )


async def _resolve_commit(
    git: _Git, repo: Path, sha: str, repo_url: str, *, recorded_for: str | None = None
) -> str:
    found = await git.try_run("rev-parse", "--verify", "-q", f"{sha}^{{commit}}", cwd=repo)
    if found.ok:
        return found.stdout.strip()
    if len(sha) in (40, 64):
        # Not reachable from any branch or tag (e.g. a pull request head): ask for it directly.
        await git.try_run("fetch", "-q", "origin", sha, cwd=repo)
        found = await git.try_run("rev-parse", "--verify", "-q", f"{sha}^{{commit}}", cwd=repo)
        if found.ok:
            return found.stdout.strip()
    if recorded_for is not None:
        raise StepError(
            f"git-clone: commit {sha}, which checkout {recorded_for!r} had when this step first "
            f"ran, is no longer in {strip_userinfo(repo_url)} (its history was rewritten?), so "
            "the checkout cannot be made as it was",
            terminal=True,
        )
    raise StepError(
        f"git-clone: commit {sha} was not found in {strip_userinfo(repo_url)}", terminal=True
    )


async def _clear_checkout_path(git: _Git, checkout: CheckoutPlan) -> None:
    """Make ``checkout.path`` fit for ``git worktree add``, resetting our own earlier checkout."""
    path = checkout.path
    if path.is_symlink():
        raise StepError(
            f"git-clone: checkout path {checkout.rel_path!r} is a symbolic link", terminal=True
        )
    if not path.exists():
        return
    if not path.is_dir():
        raise StepError(
            f"git-clone: checkout path {checkout.rel_path!r} exists and is not a directory",
            terminal=True,
        )
    owner = _owning_repo(git.ctx, path)
    if owner is not None:
        # Re-entry: an earlier attempt (maybe in another process) checked out here.
        await git.ctx.services.io.call(_rmtree, path)
        if _CHECKOUT_REPO_RE.match(owner.name):
            # The checkout's own clone: nothing else uses it.
            await git.ctx.services.io.call(_rmtree, owner, True)
        elif owner.is_dir():
            await git.run("worktree", "prune", cwd=owner)
        return
    if any(path.iterdir()):
        raise StepError(
            f"git-clone: checkout path {checkout.rel_path!r} already exists and is not empty",
            terminal=True,
        )


async def _default_branch(git: _Git, repo: Path) -> str:
    head = await git.try_run("symbolic-ref", "-q", "HEAD", cwd=repo)
    name = head.stdout.strip().removeprefix("refs/heads/")
    if not head.ok or not name:
        raise StepError("git-clone: the repository has no default branch", terminal=True)
    return name


async def _checkout(
    git: _Git,
    repo: Path,
    plan: ClonePlan,
    ck: CheckoutPlan,
    refs: dict[str, str],
    pinned: str | None = None,
    *,
    fresh: bool = False,
) -> str:
    """Add the worktree for one checkout and return the commit it has checked out.

    ``pinned`` (a replay): check out that commit, on the branch if the checkout names one,
    instead of resolving the ref; nothing is created on the remote.
    """
    branch: str | None = None
    if ck.kind in ("branch", "default"):
        branch = ck.ref if ck.kind == "branch" else await _default_branch(git, repo)
    if pinned is not None:
        sha = await _resolve_commit(git, repo, pinned, plan.repo_url, recorded_for=ck.key)
    elif branch is not None:
        tip = refs.get(f"refs/remotes/origin/{branch}")
        if tip is None:
            if not ck.create:
                raise StepError(
                    f"git-clone: branch {branch!r} does not exist in "
                    f"{strip_userinfo(plan.repo_url)}; set create: true to create it",
                    terminal=True,
                )
            tip = await _create_branch(git, repo, branch, plan.repo_url)
        sha = tip
    elif ck.kind == "tag":
        tagged = refs.get(f"refs/tags/{ck.ref}")
        if tagged is not None:
            sha = tagged
        else:
            await git.try_run(
                "fetch", "-q", "origin", f"+refs/tags/{ck.ref}:refs/tags/{ck.ref}", cwd=repo
            )
            found = await git.try_run(
                "rev-parse", "--verify", "-q", f"refs/tags/{ck.ref}^{{commit}}", cwd=repo
            )
            if not found.ok:
                raise StepError(
                    f"git-clone: tag {ck.ref!r} does not exist in {strip_userinfo(plan.repo_url)}",
                    terminal=True,
                )
            sha = found.stdout.strip()
    else:
        sha = await _resolve_commit(git, repo, ck.ref, plan.repo_url)

    await _clear_checkout_path(git, ck)
    ck.path.parent.mkdir(parents=True, exist_ok=True)
    if not fresh:
        # A checkout registered by an attempt that was killed before it finished still "has"
        # its branch checked out (and may be locked "initializing"); forget it so the branch
        # can be checked out here again. A clone made just now has no worktrees to forget.
        await git.ctx.services.io.call(_forget_worktree, repo, ck.path)
        await git.try_run("worktree", "prune", cwd=repo)
    args = ["worktree", "add", "-q"]
    if ck.sparse:
        args.append("--no-checkout")
    if branch is not None:
        # -B resets a local branch left by an earlier attempt to what the remote has now.
        args += ["--no-track", "-B", branch]
    else:
        args.append("--detach")
    await git.run(*args, str(ck.path), sha, cwd=repo, what=f"could not check out {ck.rel_path!r}")
    if ck.sparse:
        await git.run(
            "sparse-checkout", "set", "--cone", "--stdin",
            cwd=ck.path, stdin="\n".join(ck.sparse) + "\n",
        )  # fmt: skip
        await git.run("reset", "-q", "--hard", sha, cwd=ck.path)
    if plan.recurse_submodules:
        await git.run(
            "submodule", "update", "--init", "--recursive", "-q",
            cwd=ck.path, what=f"could not update submodules in {ck.rel_path!r}",
        )  # fmt: skip
    return sha


def _pinned_commits(ctx: StepContext, plan: ClonePlan) -> dict[str, str] | None:
    """In a replay, the commit each checkout had, from the recorded output; else None."""
    if ctx.replay is None:
        return None
    recorded = ctx.replay.output.get("commits")
    pinned: dict[str, str] = {}
    for ck in plan.checkouts:
        sha = recorded.get(ck.key) if isinstance(recorded, Mapping) else None
        if not isinstance(sha, str) or not _HEX_RE.match(sha):
            raise StepError(
                f"git-clone: the recorded output names no commit for checkout {ck.key!r}, so "
                "the checkout cannot be made as it was",
                terminal=True,
            )
        pinned[ck.key] = sha.lower()
    return pinned


def _clone_on_its_own(ctx: StepContext, plan: ClonePlan, pinned: dict[str, str] | None) -> bool:
    """Whether ``plan`` is one branch checked out and nothing more: then one ``git clone`` of
    that branch does the work of a bare clone, ``for-each-ref``, ``worktree prune`` and
    ``worktree add`` (a third of the time of a Promotion of clone, edit, commit and push).

    The bare clone shared by worktrees pays off only when it is reused: several checkouts,
    or another git-clone of the same repository in this work directory (which finds it). A
    replay checks out recorded commits and a sparse checkout or submodules need more than
    ``git clone`` does, so those take the shared clone too.
    """
    if pinned is not None or len(plan.checkouts) != 1 or plan.recurse_submodules:
        return False
    ck = plan.checkouts[0]
    if ck.kind != "branch" or ck.sparse:
        return False
    return not _repo_dir(ctx, plan.repo_url).exists()


async def _clone_checkout(git: _Git, plan: ClonePlan, ck: CheckoutPlan) -> str | None:
    """Clone ``ck``'s branch straight into its path, the git directory kept in our cache
    (``--separate-git-dir``), and return the commit checked out; None if the branch does not
    exist, for the shared clone to create it (``create: true``) or say so.

    Every run starts over: an earlier attempt's checkout and git directory are removed first,
    so a clone killed half-way is never taken for a finished one.
    """
    ctx = git.ctx
    gitdir = _checkout_repo_dir(ctx, plan.repo_url, ck.path)
    await _clear_checkout_path(git, ck)
    if gitdir.exists():
        await git.ctx.services.io.call(_rmtree, gitdir, True)
    gitdir.parent.mkdir(parents=True, exist_ok=True)
    options = _clone_options(plan, ctx)
    args = branch_clone_args(ck.ref, options, str(gitdir))
    cloned = await git.try_run(*args, "--", plan.repo_url, str(ck.path), cwd=gitdir.parent)
    if not cloned.ok:
        # git removes what it made when a clone fails; be sure, so the next try starts clean.
        await git.ctx.services.io.call(_rmtree, gitdir, True)
        if "not found in upstream" not in cloned.stderr.lower():
            raise git.error(f"could not clone {strip_userinfo(plan.repo_url)}", cloned)
        # No such branch: the shared clone creates it (create: true) or says it is missing.
        return None
    found = _head_from_files(ck.path)
    if found is not None:
        return found[0]
    return await git.run("rev-parse", "HEAD", cwd=ck.path)


async def git_clone(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """``git-clone``: one bare clone of ``repoURL``, one worktree per ``checkout[]`` entry.

    Output: ``{"commits": {<as or path>: <sha checked out>}}`` (Kargo's output).
    """
    plan = plan_clone(ctx, config)
    pinned = _pinned_commits(ctx, plan)
    git = _Git(ctx, "git-clone")
    await git.authenticate(plan.repo_url)
    if _clone_on_its_own(ctx, plan, pinned):
        ck = plan.checkouts[0]
        sha = await _clone_checkout(git, plan, ck)
        if sha is not None:
            return succeeded({"commits": {ck.key: sha}})
    repo, fresh = await _ensure_clone(git, plan)
    if not fresh and (plan.author_name or plan.author_email):
        if plan.author_name:
            await git.run("config", "user.name", plan.author_name, cwd=repo)
        if plan.author_email:
            await git.run("config", "user.email", plan.author_email, cwd=repo)
    refs = await _remote_refs(git, repo)
    commits: dict[str, str] = {}
    for ck in plan.checkouts:
        commits[ck.key] = await _checkout(
            git, repo, plan, ck, refs, pinned[ck.key] if pinned is not None else None, fresh=fresh
        )
    return succeeded({"commits": commits})


# --------------------------------------------------------------------------------------------
# git-clear
# --------------------------------------------------------------------------------------------


def _remove_all_but_git(path: Path) -> None:
    for entry in path.iterdir():
        if entry.name == ".git":
            continue
        # Symlinks are unlinked, never followed: a link may point outside the work directory.
        if entry.is_dir() and not entry.is_symlink():
            _rmtree(entry)
        else:
            entry.unlink()


async def git_clear(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """``git-clear``: delete everything in a worktree except ``.git`` (staged by git-commit)."""
    path = _open_worktree(ctx, "git-clear", Config("git-clear", config))
    await ctx.services.io.call(_remove_all_but_git, path)
    return succeeded()


# --------------------------------------------------------------------------------------------
# git-commit
# --------------------------------------------------------------------------------------------


def _commit_message(ctx: StepContext, cfg: Config) -> str:
    message = cfg.opt_str("message")
    from_steps = cfg.list("messageFromSteps")
    if message is not None and from_steps:
        raise ConfigRefused(
            "git-commit: config.message and config.messageFromSteps are mutually exclusive"
        )
    if message is None and from_steps:
        # Deprecated in Kargo; kept because it is one line: join the steps' commitMessage outputs.
        parts = []
        for alias in from_steps:
            output = ctx.state.get(str(alias))
            if isinstance(output, Mapping) and output.get("commitMessage"):
                parts.append(str(output["commitMessage"]))
        message = "\n\n".join(parts) if parts else None
    if message is None or not message.strip():
        raise ConfigRefused("git-commit: config.message is required")
    return message


def _recorded_date(replaying: Replaying | None, key: str) -> str | None:
    value = replaying.data.get(key) if replaying is not None else None
    return value if value and _RAW_DATE_RE.match(value) else None


async def git_commit(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """``git-commit``: stage everything and commit; with nothing to commit, Skipped with HEAD.

    Output: ``{"commit": <sha>}``. Author: ``config.author`` > git-clone's ``author`` >
    GitSettings; the committer is always GitSettings' identity. Recorded for a replay: the
    commit's tree and its author and committer dates.
    """
    cfg = Config("git-commit", config)
    path = _open_worktree(ctx, "git-commit", cfg)
    message = _commit_message(ctx, cfg)
    name, email = _identity("git-commit", Config("git-commit", cfg.map("author"), "config.author"))
    git = _Git(ctx, "git-commit")
    if name:
        git.env["GIT_AUTHOR_NAME"] = name
    if email:
        git.env["GIT_AUTHOR_EMAIL"] = email
    # Replaying: the recorded dates make the same tree on the same parent the same commit ID.
    for variable, key in (
        ("GIT_AUTHOR_DATE", AUTHOR_DATE_KEY),
        ("GIT_COMMITTER_DATE", COMMITTER_DATE_KEY),
    ):
        date = _recorded_date(ctx.replay, key)
        if date:
            git.env[variable] = date
    # HEAD before the commit, from git's files. Whether there is anything to commit is the
    # commit's own answer (exit code 1, "nothing to commit"), so no status runs before it.
    parent = await _head_commit(git, path) or "-"
    marker = _commit_marker(ctx)
    before = _read_marker(marker)
    if ctx.replay is None and before is None:
        # HEAD before the commit, noted first: a kill after the commit but before the step's
        # status is written leaves it behind, and the next attempt, finding nothing to commit,
        # knows the commit HEAD has moved on to is its own (see below).
        _write_marker(marker, parent)
    # `commit -a` stages what `add -A` would, but for files git does not track yet: one git
    # process instead of two when there are none (a step that only edits files).
    commit = ["commit", "-q", "--no-verify", "--cleanup=whitespace", "-F", "-"]
    if await git.ctx.services.io.call(_has_untracked, path):
        await git.run("add", "-A", cwd=path, what="could not stage the working tree")
    else:
        commit.insert(1, "-a")
    committed = await git.try_run(*commit, cwd=path, stdin=message)
    nothing = not committed.ok and "nothing to commit" in committed.stdout
    if not committed.ok and not nothing:
        raise git.error("git commit failed", committed)
    if nothing and ctx.replay is None and parent != "-" and before in (None, parent):
        # Kargo: nothing committed is Skipped (with HEAD as the output), so later steps can
        # say `if: ${{ status('commit') != 'Skipped' }}`.
        return skipped("nothing to commit", {"commit": parent})
    head = await _head_commit(git, path) or ""
    found = _commit_from_files(path, head)
    if found is not None:
        tree, author_date, committer_date = found
    else:
        head, tree, author_date, committer_date = (
            await git.run("log", "-1", "--date=raw", "--format=%H%n%T%n%ad%n%cd", "HEAD", cwd=path)
        ).splitlines()
    data = {TREE_KEY: tree, AUTHOR_DATE_KEY: author_date, COMMITTER_DATE_KEY: committer_date}
    if ctx.replay is not None:
        replayed = await _replayed_commit(git, path, ctx.replay, head, tree)
        note_made(ctx, [str(replayed.output.get("commit") or "")])
        return replayed
    # Committed now, or by an attempt of this same step that was killed before its status was
    # written (HEAD moved on from what it noted): either way this step's commit.
    note_made(ctx, [head])
    return StepResult(StepStatus.SUCCEEDED, "", {"commit": head}, replay_data=data)


def _index_paths(index: bytes) -> set[bytes] | None:
    """The paths in a git index of version 2 or 3, or None for anything else (version 4's
    compressed paths, a split index, a file this reading does not recognise)."""
    if len(index) < 12 or index[:4] != b"DIRC":
        return None
    version = int.from_bytes(index[4:8], "big")
    count = int.from_bytes(index[8:12], "big")
    if version not in (2, 3):
        return None
    paths: set[bytes] = set()
    offset = 12
    for _ in range(count):
        flags_at = offset + 60
        if flags_at + 2 > len(index):
            return None
        flags = int.from_bytes(index[flags_at : flags_at + 2], "big")
        name_at = flags_at + 2 + (2 if version == 3 and flags & 0x4000 else 0)
        end = index.find(b"\0", name_at)
        if end < 0:
            return None
        paths.add(index[name_at:end])
        # Entries are NUL-padded to a multiple of eight bytes (at least one NUL).
        offset += (end - offset + 8) & ~7
    # Extensions follow, each a signature and a size, then the checksum.
    while offset + 8 <= len(index) - 20:
        if index[offset : offset + 4] == b"link":
            return None  # a split index: most entries live in another file
        offset += 8 + int.from_bytes(index[offset + 4 : offset + 8], "big")
    return paths


def _has_untracked(worktree: Path) -> bool:
    """Whether the worktree holds a file its index does not list (ignored ones included);
    True too when the index cannot be read plainly, so that the caller stages with
    ``add -A``, which decides for itself."""
    dirs = _git_dirs(worktree)
    if dirs is None:
        return True
    try:
        tracked = _index_paths((dirs[0] / "index").read_bytes())
    except OSError:
        return True
    if tracked is None:
        return True
    # Directories that hold tracked paths (a submodule is a tracked path itself).
    parents: set[bytes] = set()
    for tracked_path in tracked:
        cut = tracked_path.rfind(b"/")
        while cut > 0 and tracked_path[:cut] not in parents:
            parents.add(tracked_path[:cut])
            cut = tracked_path.rfind(b"/", 0, cut)
    pending = [b""]
    while pending:
        prefix = pending.pop()
        try:
            with os.scandir(os.path.join(os.fsencode(worktree), prefix)) as entries:
                for entry in entries:
                    name = prefix + entry.name
                    if name == b".git":
                        continue
                    if name in tracked:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        if name not in parents:
                            return True  # nothing tracked below: new files, or a repository
                        pending.append(name + b"/")
                    else:
                        return True
        except OSError:
            return True
    return False


def note_made(ctx: StepContext, shas: Sequence[str]) -> None:
    """Record commits this Promotion's own steps made, in its private state (no manifest can
    write there, see :meth:`StepContext.path`)."""
    folder = ctx.work_dir / MADE_DIR
    for sha in shas:
        if _OBJECT_ID_RE.match(sha):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / sha).touch()


def made_commits(ctx: StepContext) -> frozenset[str]:
    """The commits :func:`note_made` recorded in this work directory.

    Longshoreman signs no commits; this record plays the part of Kargo's trusted signing key
    for ``github-push``: a commit in it was made here, by Longshoreman, so the App may vouch for
    it (GitHub then signs it); any other commit (one fetched from the remote) keeps its own
    author and committer.
    """
    try:
        return frozenset(n for n in os.listdir(ctx.work_dir / MADE_DIR) if _OBJECT_ID_RE.match(n))
    except OSError:
        return frozenset()


def _commit_marker(ctx: StepContext) -> Path:
    """Where this git-commit step notes HEAD just before it commits, in the work directory.

    Nothing to commit on entering the step is either Kargo's Skipped or, when an earlier attempt
    of the same step committed and was killed before its status was written, that commit. The
    note tells them apart, and goes wherever the work directory goes (a rebuild clears it).
    """
    return ctx.work_dir / COMMITS_DIR / digest(f"{ctx.promotion}\n{ctx.alias}")


def _read_marker(marker: Path) -> str | None:
    try:
        return marker.read_text().strip() or None
    except OSError:
        return None


def _write_marker(marker: Path, head: str) -> None:
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(head)


async def _replayed_commit(
    git: _Git, path: Path, replaying: Replaying, head: str, tree: str
) -> StepResult:
    """Judge a replayed commit against the one recorded: the same, the same content, or refused.

    The same ID is the rule (same parent, tree, message, identity and dates). Otherwise the tree
    must be the recorded one (from the replay data, or from the recorded commit itself when the
    remote has it); then HEAD moves to the recorded commit when it exists (it was pushed, so
    its ID matters), and the new commit replaces it when it does not (it was never pushed, so
    no one has seen its ID).
    """
    recorded = str(replaying.output.get("commit") or "").lower()
    if head == recorded:
        return succeeded({"commit": head})
    known = (
        bool(_OBJECT_ID_RE.match(recorded))
        and (await git.try_run("cat-file", "-e", f"{recorded}^{{commit}}", cwd=path)).ok
    )
    expected = replaying.data.get(TREE_KEY) or (
        await git.run("rev-parse", f"{recorded}^{{tree}}", cwd=path) if known else ""
    )
    if expected and expected != tree:
        raise StepError(
            f"git-commit: the rebuilt working tree (tree {tree[:12]}) is not the one it "
            f"committed before as {recorded[:12]} (tree {expected[:12]}); the files came out "
            "differently, and another commit is not what was recorded",
            terminal=True,
        )
    if known:
        await git.run("reset", "-q", "--soft", recorded, cwd=path)
        return succeeded({"commit": recorded}, message=f"{recorded[:12]} has the same tree")
    return StepResult(
        StepStatus.SUCCEEDED,
        message=f"committed again as {head[:12]}: {recorded[:12] or 'the recorded commit'} was "
        "never pushed",
        output={"commit": head},
        replaces_output=True,
    )


# --------------------------------------------------------------------------------------------
# git-tag
# --------------------------------------------------------------------------------------------


async def git_tag(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """``git-tag``: an annotated tag on HEAD. Re-running with the tag already on HEAD is a no-op.

    Output: ``{"tag": <name>, "commit": <sha>}``.
    """
    cfg = Config("git-tag", config)
    path = _open_worktree(ctx, "git-tag", cfg)
    tag = cfg.str("tag")
    problem = ref_name_problem(tag)
    if problem:
        raise ConfigRefused(f"git-tag: config.tag {problem}")
    signer = cfg.map("signer")
    if signer.get("signingKey"):
        raise ConfigRefused("git-tag: config.signer.signingKey: signed tags are not supported")
    message = str(signer.get("signingMessage") or cfg.opt_str("message") or tag)
    git = _Git(ctx, "git-tag")
    if signer:
        name, email = _identity("git-tag", Config("git-tag", signer, "config.signer"))
        if name:
            git.env["GIT_COMMITTER_NAME"] = name
        if email:
            git.env["GIT_COMMITTER_EMAIL"] = email
    # Replaying: the recorded date makes the same tag object, which a pushed tag must be.
    date = _recorded_date(ctx.replay, TAGGER_DATE_KEY)
    if date:
        git.env["GIT_COMMITTER_DATE"] = date
    head = await git.run("rev-parse", "HEAD", cwd=path)
    existing = await git.try_run(
        "rev-parse", "--verify", "-q", f"refs/tags/{tag}^{{commit}}", cwd=path
    )
    if existing.ok:
        if existing.stdout.strip() == head:
            return succeeded({"tag": tag, "commit": head}, message="tag already exists")
        raise StepError(f"git-tag: tag {tag!r} already exists on another commit", terminal=True)
    await git.run("tag", "-a", "-F", "-", tag, head, cwd=path, stdin=message)
    tagged = await git.run(
        "for-each-ref", "--format=%(taggerdate:raw)", f"refs/tags/{tag}", cwd=path
    )
    return StepResult(
        StepStatus.SUCCEEDED,
        output={"tag": tag, "commit": head},
        replay_data={TAGGER_DATE_KEY: tagged} if _RAW_DATE_RE.match(tagged) else None,
    )


# --------------------------------------------------------------------------------------------
# git-push
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PushPlan:
    """A validated ``git-push`` config."""

    target_branch: str | None
    tag: str | None
    force: bool
    max_attempts: int
    provider: str | None


def plan_push(ctx: StepContext, cfg: Config) -> PushPlan:
    kind = "git-push"
    target = cfg.opt_str("targetBranch")
    generate = cfg.bool("generateTargetBranch")
    tag = cfg.opt_str("tag")
    chosen = [
        n
        for n, v in (("targetBranch", target), ("generateTargetBranch", generate), ("tag", tag))
        if v
    ]
    if len(chosen) > 1:
        raise ConfigRefused(f"{kind}: config.{' and config.'.join(chosen)} are mutually exclusive")
    force = cfg.bool("force")
    if generate:
        # Kargo force-pushes generated branches: the name is unique to the Promotion, so the only
        # way it already exists is an earlier attempt of this very Promotion.
        target, force = generated_branch(ctx.promotion), True
    for label, value in (("targetBranch", target), ("tag", tag)):
        if value is not None:
            problem = ref_name_problem(value)
            if problem:
                what = (
                    "the generated branch name"
                    if generate and label == "targetBranch"
                    else f"config.{label}"
                )
                raise ConfigRefused(f"{kind}: {what} {problem}")
    attempts = cfg.int("maxAttempts", DEFAULT_PUSH_ATTEMPTS)
    if attempts < 1:
        raise ConfigRefused(f"{kind}: config.maxAttempts must be at least 1")
    provider = cfg.opt_str("provider")
    if provider is not None and provider not in ("azure", "bitbucket", "gitea", "github", "gitlab"):
        raise ConfigRefused(f"{kind}: config.provider {provider!r} is not one Kargo knows")
    return PushPlan(target, tag, force, attempts, provider)


@dataclass(frozen=True, slots=True)
class _PushOutcome:
    ok: bool
    non_fast_forward: bool
    run: GitRun


async def _push_ref(git: _Git, path: Path, refspec: str) -> _PushOutcome:
    result = await git.try_run("push", "--porcelain", "origin", refspec, cwd=path)
    rejected = [line for line in result.stdout.splitlines() if line.startswith("!")]
    non_ff = any(
        "[rejected]" in line
        and ("fetch first" in line or "non-fast-forward" in line or "stale info" in line)
        for line in rejected
    )
    return _PushOutcome(result.ok, non_ff, result)


async def _integrate(git: _Git, path: Path, branch: str) -> StepResult | bool:
    """Fetch ``branch`` and bring HEAD up to date with it.

    Returns True if the remote already contains HEAD (an earlier attempt pushed it), False after a
    successful rebase (push again), or a Failed result when the changes conflict.
    """
    await git.run(
        "fetch", "-q", "origin", f"+refs/heads/{branch}:refs/remotes/origin/{branch}",
        cwd=path, what=f"could not fetch branch {branch!r}",
    )  # fmt: skip
    contained = await git.try_run(
        "merge-base", "--is-ancestor", "HEAD", f"refs/remotes/origin/{branch}", cwd=path
    )
    if contained.ok:
        return True
    # A commit whose change the remote already has (same patch, other SHA) is dropped by the
    # rebase, so a re-run never pushes a duplicate.
    rebase = await git.try_run("rebase", "-q", f"refs/remotes/origin/{branch}", cwd=path)
    if rebase.ok:
        return False
    conflicts = await git.try_run("diff", "--name-only", "--diff-filter=U", cwd=path)
    await git.try_run("rebase", "--abort", cwd=path)
    files = [f for f in conflicts.stdout.splitlines() if f]
    if files or "conflict" in (rebase.stdout + rebase.stderr).lower():
        shown = ", ".join(files[:10]) + (" ..." if len(files) > 10 else "")
        return failed(
            f"git-push: branch {branch!r} changed on the remote and the changes conflict with "
            f"this Promotion's commit{(' in ' + shown) if shown else ''}; resolve by hand"
        )
    raise git.error(f"could not rebase onto branch {branch!r}", rebase)


async def _head(git: _Git, path: Path) -> tuple[str, str | None]:
    """The commit checked out at ``path`` and its branch (None when detached)."""
    found = _head_from_files(path)
    if found is not None:
        return found
    # One process for both the commit and the branch HEAD is on ("HEAD" when detached).
    head, symbolic = (
        await git.run("rev-parse", "HEAD", "--symbolic-full-name", "HEAD", cwd=path)
    ).splitlines()
    return head, symbolic.removeprefix("refs/heads/") if symbolic != "HEAD" else None


async def _head_commit(git: _Git, path: Path) -> str | None:
    """The commit checked out at ``path``; None on a branch with no commit yet."""
    found = _head_from_files(path)
    if found is not None:
        return found[0]
    result = await git.try_run("rev-parse", "--verify", "-q", "HEAD", cwd=path)
    head = result.stdout.strip()
    return head if result.ok and _OBJECT_ID_RE.match(head) else None


async def _remote_url(git: _Git, path: Path) -> str:
    found = _remote_url_from_files(path)
    if found is not None:
        return found
    result = await git.try_run("config", "--get", "remote.origin.url", cwd=path)
    return result.stdout.strip()


async def git_push(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """``git-push``: push HEAD to a branch, rebasing onto remote changes and retrying.

    Output: ``{"branch", "commit", "commitURL"?}`` (``commitURL`` when the host is a provider
    Kargo knows); a tag push adds ``"tag"``.
    """
    cfg = Config("git-push", config)
    path = _open_worktree(ctx, "git-push", cfg)
    plan = plan_push(ctx, cfg)
    git = _Git(ctx, "git-push")
    head, current_branch = await _head(git, path)
    repo_url = await _remote_url(git, path)
    await git.authenticate(repo_url)

    if plan.tag is not None:
        return await _push_tag(git, path, plan, current_branch, repo_url)

    branch = plan.target_branch or current_branch
    if branch is None:
        raise ConfigRefused(
            "git-push: the working tree is not on a branch (a commit or tag checkout); "
            "set config.targetBranch or config.generateTargetBranch"
        )
    refspec = f"{'+' if plan.force else ''}HEAD:refs/heads/{branch}"
    # One lock per (repository, branch) in this process, as Kargo has: concurrent Promotions
    # here take turns instead of rebasing against each other; other processes are handled by
    # the fetch-rebase-retry loop.
    async with ctx.services.io.lock(f"{normalize_repo_url(repo_url)}#{branch}"):
        for attempt in range(1, plan.max_attempts + 1):
            outcome = await _push_ref(git, path, refspec)
            if outcome.ok:
                break
            if not outcome.non_fast_forward or plan.force:
                raise git.error(f"could not push to branch {branch!r}", outcome.run)
            if attempt == plan.max_attempts:
                raise git.error(
                    f"branch {branch!r} kept moving; gave up after {attempt} attempts",
                    outcome.run,
                    terminal=False,
                )
            integrated = await _integrate(git, path, branch)
            if isinstance(integrated, StepResult):
                return integrated
            if integrated:
                break
            head = await git.run("rev-parse", "HEAD", cwd=path)
            if attempt > 1:
                # Spread competing pushers apart; the first retry goes at once (fetch and
                # rebase already took a moment).
                delay = min(MAX_PUSH_BACKOFF_SECONDS, 0.05 * 2 ** (attempt - 2))
                import random

                await ctx.services.io.sleep(delay * random.uniform(0.5, 1.0))
    output: dict[str, Any] = {"branch": branch, "commit": head}
    url = commit_url(repo_url, head, plan.provider)
    if url:
        output["commitURL"] = url
    return succeeded(output)


async def _push_tag(
    git: _Git, path: Path, plan: PushPlan, current_branch: str | None, repo_url: str
) -> StepResult:
    """Push one tag. Kargo has no retry loop for tags; a tag already on the remote fails, unless
    it is this very tag (an earlier attempt pushed it)."""
    assert plan.tag is not None
    tag = plan.tag
    local = await git.try_run("rev-parse", "--verify", "-q", f"refs/tags/{tag}", cwd=path)
    if not local.ok:
        raise StepError(
            f"git-push: tag {tag!r} does not exist; create it with git-tag", terminal=True
        )
    outcome = await _push_ref(git, path, f"refs/tags/{tag}:refs/tags/{tag}")
    if not outcome.ok:
        remote = await git.try_run("ls-remote", "origin", f"refs/tags/{tag}", cwd=path)
        remote_obj = remote.stdout.split("\t", 1)[0].strip() if remote.ok else ""
        if remote_obj != local.stdout.strip():
            if remote_obj:
                raise StepError(
                    f"git-push: tag {tag!r} already exists in the remote repository", terminal=True
                )
            raise git.error(f"could not push tag {tag!r}", outcome.run)
    commit = await git.run("rev-parse", f"refs/tags/{tag}^{{commit}}", cwd=path)
    output: dict[str, Any] = {"tag": tag, "commit": commit}
    if current_branch:
        output["branch"] = current_branch
    url = commit_url(repo_url, commit, plan.provider)
    if url:
        output["commitURL"] = url
    return succeeded(output)


async def verify_push(ctx: StepContext, config: Mapping[str, Any]) -> None:
    """In a replay: check the recorded push is on the remote, and put the worktree where the push
    left it (at the pushed commit, which a rebase onto others' work may have made). Never pushes.
    """
    assert ctx.replay is not None
    cfg = Config("git-push", config)
    path = _open_worktree(ctx, "git-push", cfg)
    plan = plan_push(ctx, cfg)
    recorded = ctx.replay.output
    commit = str(recorded.get("commit") or "").lower()
    if not _OBJECT_ID_RE.match(commit):
        raise StepError(
            "git-push: the recorded output names no pushed commit to look for", terminal=True
        )
    git = _Git(ctx, "git-push")
    repo_url = await _remote_url(git, path)
    where = strip_userinfo(repo_url)
    await git.authenticate(repo_url)
    if plan.tag is not None:
        tag = plan.tag
        listed = await git.try_run(
            "ls-remote", "origin", f"refs/tags/{tag}", f"refs/tags/{tag}^{{}}", cwd=path
        )
        if not listed.ok:
            raise git.error(f"could not read tag {tag!r} from {where}", listed)
        found: dict[str, str] = {}
        for line in listed.stdout.splitlines():
            sha, _, ref = line.partition("\t")
            found[ref.strip()] = sha.strip()
        peeled = found.get(f"refs/tags/{tag}^{{}}") or found.get(f"refs/tags/{tag}")
        if peeled != commit:
            raise StepError(
                f"git-push: tag {tag!r} in {where} "
                + (f"is on {peeled[:12]}" if peeled else "is gone")
                + f", not on {commit[:12]} where this step pushed it; not pushing again",
                terminal=True,
            )
        return
    branch = str(recorded.get("branch") or plan.target_branch or "")
    if ref_name_problem(branch) is not None:
        raise StepError("git-push: the recorded output names no branch to look at", terminal=True)
    fetched = await git.try_run(
        "fetch", "-q", "origin", f"+refs/heads/{branch}:refs/remotes/origin/{branch}", cwd=path
    )
    if not fetched.ok:
        if "couldn't find remote ref" in fetched.stderr.lower():
            raise StepError(
                f"git-push: branch {branch!r}, where this step pushed {commit[:12]}, is gone from "
                f"{where}; not pushing again",
                terminal=True,
            )
        raise git.error(f"could not fetch branch {branch!r}", fetched)
    contained = await git.try_run(
        "merge-base", "--is-ancestor", commit, f"refs/remotes/origin/{branch}", cwd=path
    )
    if not contained.ok:
        raise StepError(
            f"git-push: branch {branch!r} of {where} no longer contains {commit[:12]}, which this "
            "step pushed (it was rewritten since); not pushing again",
            terminal=True,
        )
    head = await git.run("rev-parse", "HEAD", cwd=path)
    if head == commit:
        return
    # The push rebased the commit onto what others had pushed meanwhile: the pushed commit must
    # then be this one's rebase (the same change), or already contain it.
    ancestor = await git.try_run("merge-base", "--is-ancestor", head, commit, cwd=path)
    if not ancestor.ok and not await _same_change(git, path, head, commit):
        raise StepError(
            f"git-push: the rebuilt commit {head[:12]} is not the change this step pushed as "
            f"{commit[:12]}; the work directory cannot be rebuilt as the push left it",
            terminal=True,
        )
    await git.run("reset", "-q", "--hard", commit, cwd=path)


async def _same_change(git: _Git, path: Path, a: str, b: str) -> bool:
    """Whether two commits make the same change: git's stable patch IDs, which a rebase keeps."""
    ids = []
    for commit in (a, b):
        diff = await git.run("diff-tree", "-p", "--no-commit-id", "--root", commit, cwd=path)
        listed = await git.run("patch-id", "--stable", cwd=path, stdin=diff + "\n")
        ids.append(listed.split(" ", 1)[0])
    return bool(ids[0]) and ids[0] == ids[1]


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------

STEPS: dict[str, Step] = {
    # Local: they change the Promotion's clone and worktrees only. git-clone's `create: true`
    # pushes an empty branch the first time, never in a replay (the branch exists by then).
    "git-clone": FunctionStep(git_clone, effect=Effect.LOCAL),
    "git-clear": FunctionStep(git_clear, effect=Effect.LOCAL),
    "git-commit": FunctionStep(git_commit, effect=Effect.LOCAL),
    "git-tag": FunctionStep(git_tag, effect=Effect.LOCAL),
    "git-push": FunctionStep(git_push, effect=Effect.EXTERNAL, verify=verify_push),
}

__all__: Sequence[str] = [
    "STEPS",
    "CheckoutPlan",
    "ClonePlan",
    "PushPlan",
    "commit_url",
    "credential_env",
    "generated_branch",
    "normalize_repo_url",
    "plan_clone",
    "plan_push",
    "ref_name_problem",
    "repo_url_problem",
    "strip_userinfo",
]
