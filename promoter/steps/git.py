"""What the Kargo-compatible git steps share: the safe ``git`` runner, the work directory's
layout, URL and ref checks, and what git's own files say. The steps are one module each:
:mod:`~promoter.steps.git_clone`, :mod:`~promoter.steps.git_clear`,
:mod:`~promoter.steps.git_commit`, :mod:`~promoter.steps.git_tag` and
:mod:`~promoter.steps.git_push`; :mod:`~promoter.steps.github_push` uses this module too.

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
import os
import re
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from promoter.errors import ConfigRefused, StepError
from promoter.ports.credentials import CredentialsError, CredentialType
from promoter.ports.gitcmd import (
    SAFE_CONFIG,
    credential_env,
    digest,
    git_env,
)
from promoter.steps.base import (
    PRIVATE_DIR,
    Config,
    Replaying,
    StepContext,
)
from promoter.urls import SCP_LIKE_RE, without_credentials

# --------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------

STATE_DIR = PRIVATE_DIR
CACHE_DIR = f"{STATE_DIR}/git"
HOME_DIR = f"{STATE_DIR}/home"
# One empty file per commit this Promotion's steps made (git-commit, github-push's rebase or
# merge), named by its ID: what github-push vouches for (see made_commits).
MADE_DIR = f"{STATE_DIR}/made"

GENERATED_BRANCH_PREFIX = "kargo/promotion/"
MAX_PUSH_BACKOFF_SECONDS = 2.0
# A checkout's own git directory: <sha256(repoURL)[:16]>-<sha256(path)[:16]>.git.
CHECKOUT_REPO_RE = re.compile(r"^[0-9a-f]{16}-[0-9a-f]{16}\.git$")
OBJECT_ID_RE = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
# git's internal date format (``--date=raw``), which GIT_AUTHOR_DATE and friends accept back.
RAW_DATE_RE = re.compile(r"^\d{1,12} [+-]\d{4}$")
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


def rmtree(path: Path | str, ignore_errors: bool = False) -> None:
    """``shutil.rmtree``, loaded when something is to be removed: a Promotion that removes
    nothing (most local runs) never loads shutil, nor the bz2 and lzma it brings along."""
    import shutil

    shutil.rmtree(path, ignore_errors=ignore_errors)


# --------------------------------------------------------------------------------------------
# Pure helpers: validation, URL handling, naming
# --------------------------------------------------------------------------------------------


def normalize_repo_url(url: str) -> str:
    """The form Kargo compares repository URLs in: no userinfo, case, ``.git`` or trailing ``/``."""
    url = without_credentials(url.strip()).lower().rstrip("/")
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


def commit_url(repo_url: str, sha: str, provider: str | None = None) -> str | None:
    """The web URL of a commit, for the providers Kargo knows, or None if not derivable."""
    url = without_credentials(repo_url.strip())
    if "://" in url:
        parts = urlsplit(url)
        host, path = parts.hostname or "", parts.path
    elif SCP_LIKE_RE.match(url):
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


class Git:
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
        text = without_credentials(self.redact(text)).strip()
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
    # Our http.<url>.extraHeader entries are added by Git.authenticate; config entries from
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
                    rmtree(worktree)


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


def repo_dir(ctx: StepContext, repo_url: str) -> Path:
    return _cache_root(ctx) / f"{digest(repo_url)}.git"


def checkout_repo_dir(ctx: StepContext, repo_url: str, path: Path) -> Path:
    """The git directory of a checkout cloned on its own (see :mod:`promoter.steps.git_clone`)."""
    return _cache_root(ctx) / f"{digest(repo_url)}-{digest(str(path))}.git"


def owning_repo(ctx: StepContext, worktree: Path) -> Path | None:
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
    # <cache>/<digest>-<digest>.git, a checkout's own (see git_clone.py)
    if gitdir.parent == cache and CHECKOUT_REPO_RE.match(gitdir.name):
        return gitdir
    # <cache>/<digest>.git/worktrees/<name>
    if gitdir.parent.name != "worktrees" or gitdir.parent.parent.parent != cache:
        return None
    return gitdir.parent.parent


def git_dirs(worktree: Path) -> tuple[Path, Path] | None:
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


def head_from_files(worktree: Path) -> tuple[str, str | None] | None:
    """HEAD's commit and branch (None when detached) in a worktree git-clone made, read from
    git's files instead of asking a git process; None when they are not plain files (another
    ref storage, a packed or missing ref), and the caller asks git.

    Only our own git directories are read (the caller has checked the worktree with
    :func:`owning_repo`), and a value is used only if it is a well-formed object ID.
    """
    dirs = git_dirs(worktree)
    if dirs is None:
        return None
    gitdir, common = dirs
    try:
        head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
        if OBJECT_ID_RE.match(head):
            return head, None
        ref = head.removeprefix("ref: ")
        if ref == head or not ref.startswith("refs/heads/") or ref_name_problem(ref) is not None:
            return None
        sha = (common / ref).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not OBJECT_ID_RE.match(sha):
        return None
    return sha, ref.removeprefix("refs/heads/")


def _remote_url_from_files(worktree: Path) -> str | None:
    """``remote.origin.url`` as git-clone wrote it into the config of a worktree's repository;
    None when the file holds anything this plain reading could get wrong (includes, quoting,
    escapes, comments after a value, more than one URL): the caller asks git."""
    dirs = git_dirs(worktree)
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


def commit_from_files(worktree: Path, sha: str) -> tuple[str, str, str] | None:
    """A new commit's tree and its raw author and committer dates (``git log --date=raw``'s
    ``<seconds> <zone>``), read from its loose object; None when it is not a loose commit
    object of the expected shape (packed already), and the caller asks git."""
    dirs = git_dirs(worktree)
    if dirs is None or not OBJECT_ID_RE.match(sha):
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
    if not OBJECT_ID_RE.match(tree) or author.count(" ") != 1 or committer.count(" ") != 1:
        return None
    return tree, author, committer


def resolve_path(ctx: StepContext, kind: str, relative: str, field_name: str = "path") -> Path:
    """:meth:`StepContext.path`, with the step kind in front of its message."""
    try:
        return ctx.path(relative, field_name=field_name)
    except StepError as exc:
        raise exc.with_message(f"{kind}: {exc.message}") from None


def open_worktree(ctx: StepContext, kind: str, config: Config) -> Path:
    """Resolve ``config.path`` and check that it is a worktree git-clone created.

    Running git in a directory whose ``.git`` another step could have written would let a
    manifest choose the repository, and with it the config git obeys; only our own clones are
    trusted.
    """
    path = resolve_path(ctx, kind, config.str("path"))
    if not path.is_dir():
        raise StepError(f"{kind}: config.path {config.str('path')!r} does not exist", terminal=True)
    if owning_repo(ctx, path) is None:
        raise StepError(
            f"{kind}: config.path {config.str('path')!r} is not a working tree checked out by "
            "a git-clone step",
            terminal=True,
        )
    return path


def identity_of(kind: str, cfg: Config) -> tuple[str | None, str | None]:
    name = cfg.opt_str("name")
    email = cfg.opt_str("email")
    for label, value in (("name", name), ("email", email)):
        if value is not None and (any(c in value for c in "<>\n\r\0") or value.strip() == ""):
            raise ConfigRefused(
                f"{kind}: {cfg.prefix}.{label} must not be blank or contain <, > or line breaks"
            )
    return name, email


def recorded_date(replaying: Replaying | None, key: str) -> str | None:
    value = replaying.data.get(key) if replaying is not None else None
    return value if value and RAW_DATE_RE.match(value) else None


def note_made(ctx: StepContext, shas: Sequence[str]) -> None:
    """Record commits this Promotion's own steps made, in its private state (no manifest can
    write there, see :meth:`StepContext.path`)."""
    folder = ctx.work_dir / MADE_DIR
    for sha in shas:
        if OBJECT_ID_RE.match(sha):
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
        return frozenset(n for n in os.listdir(ctx.work_dir / MADE_DIR) if OBJECT_ID_RE.match(n))
    except OSError:
        return frozenset()


async def read_head(git: Git, path: Path) -> tuple[str, str | None]:
    """The commit checked out at ``path`` and its branch (None when detached)."""
    found = head_from_files(path)
    if found is not None:
        return found
    # One process for both the commit and the branch HEAD is on ("HEAD" when detached).
    head, symbolic = (
        await git.run("rev-parse", "HEAD", "--symbolic-full-name", "HEAD", cwd=path)
    ).splitlines()
    return head, symbolic.removeprefix("refs/heads/") if symbolic != "HEAD" else None


async def read_remote_url(git: Git, path: Path) -> str:
    found = _remote_url_from_files(path)
    if found is not None:
        return found
    result = await git.try_run("config", "--get", "remote.origin.url", cwd=path)
    return result.stdout.strip()
