"""How the git steps start git, as plain data: the forced config, the environment, the clone.

Kept apart from :mod:`promoter.steps.git` so that the rules every git process obeys (the config
it is forced to take, the environment it may see) read in one place.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from hashlib import sha256
from urllib.parse import urlsplit

# The identity GitSettings gives commits when nothing else does (promoter.steps.base).
DEFAULT_AUTHOR_NAME = "Longshoreman"
DEFAULT_AUTHOR_EMAIL = "longshoreman@localhost"

# Config forced on every git process. A work directory is written by other steps too, so we
# refuse the ways a repository can make git run programs (hooks, fsmonitor, the ext:: transport)
# and keep git from forking background maintenance into it.
SAFE_CONFIG: tuple[str, ...] = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "protocol.ext.allow=never",
    "-c", "remote.origin.uploadpack=git-upload-pack",
    "-c", "remote.origin.receivepack=git-receive-pack",
    "-c", "commit.gpgSign=false",
    "-c", "tag.gpgSign=false",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
    "-c", "advice.detachedHead=false",
)  # fmt: skip

# Identity comes from GitSettings and the manifest, never from stray variables in
# GitSettings.env, so that the precedence (step author > clone author > settings) holds.
IDENTITY_VARS = frozenset(
    {
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_DATE",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_COMMITTER_DATE",
    }
)
# Variables that would point git at another repository than the one a step names.
REPOSITORY_VARS = frozenset(
    {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY"}
)


def digest(text: str, length: int = 16) -> str:
    """The first ``length`` hex digits of ``text``'s SHA-256: the names of the git steps' own
    directories and files, and the replay's config digests."""
    return sha256(text.encode()).hexdigest()[:length]


def git_env(
    home: str, settings_env: Mapping[str, str], committer_name: str, committer_email: str
) -> dict[str, str]:
    """The whole environment of a git process: ``home`` as HOME (so ~/.gitconfig is never
    read), GitSettings' variables and its identity as the committer.

    Only PATH is inherited: the process environment may hold credentials or a GIT_DIR that
    must not leak into promotions; everything else is explicit.
    """
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": home, "LC_ALL": "C"}
    for key, value in settings_env.items():
        if key not in IDENTITY_VARS and key not in REPOSITORY_VARS:
            env[key] = value
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_COMMITTER_NAME"] = committer_name
    env["GIT_COMMITTER_EMAIL"] = committer_email
    return env


def clone_options(
    author_name: str, author_email: str, *, insecure: bool = False, blobless: bool = False
) -> list[str]:
    """What every clone of a git-clone step carries: the author of the commits made in the
    checkout, and the transport choices (``insecureSkipTLSVerify``, ``blobless``)."""
    options = ["-c", f"user.name={author_name}", "-c", f"user.email={author_email}"]
    if insecure:
        options += ["-c", "http.sslVerify=false"]
    if blobless:
        options.append("--filter=blob:none")
    return options


def branch_clone_args(branch: str, options: Sequence[str], git_dir: str) -> list[str]:
    """git's arguments (after ``git`` and :data:`SAFE_CONFIG`, before ``-- <url> <path>``) for
    a clone of one branch with its git directory kept apart (``--separate-git-dir``).

    Tags come along by git's auto-following (those in the branch's history), so git-tag still
    sees a tag name taken there; one elsewhere is refused when git-push pushes it.
    """
    return [
        "clone", "-q", "--single-branch", "--branch", branch,
        f"--separate-git-dir={git_dir}", *options,
    ]  # fmt: skip


# Our own credential helper: git runs it (through the shell, as it runs every ``!`` helper) when
# a server asks for credentials, and it answers ``get`` with the two variables below, which only
# that git process's environment holds. Nothing is stored, so ``store``/``erase`` do nothing.
CREDENTIAL_HELPER = (
    '!f() { test "$1" = get || exit 0; '
    'printf "username=%s\\npassword=%s\\n" '
    '"$LONGSHOREMAN_GIT_USERNAME" "$LONGSHOREMAN_GIT_PASSWORD"; '
    "}; f"
)
USERNAME_VAR = "LONGSHOREMAN_GIT_USERNAME"
PASSWORD_VAR = "LONGSHOREMAN_GIT_PASSWORD"


def credential_env(
    env: Mapping[str, str], repo_url: str, username: str, password: str
) -> dict[str, str] | None:
    """Environment entries that give git ``username``/``password`` for ``repo_url``'s server
    through :data:`CREDENTIAL_HELPER`; None for a remote that is not http(s).

    The helper is configured for ``scheme://host[:port]/`` only (``credential.<url>.helper``):
    git asks it when that server answers 401, never another host (a redirect elsewhere, a URL
    an ``insteadOf`` rule rewrote the remote to). An empty ``helper`` first empties the list for
    that server, so the operator's own helpers (``LONGSHOREMAN_GIT_CONFIG``) do not answer
    before ours; for every other server they still do. The credentials travel in the
    environment of that one git process: never in a URL, a command line or a file.
    ``GIT_CONFIG_COUNT`` entries already in ``env`` (an operator's) are kept; ours go after.
    Raises ValueError for a value git's credential protocol cannot carry (a line break).
    """
    parts = urlsplit(repo_url.strip())
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return None
    if any(c in value for value in (username, password) for c in "\n\r\0"):
        raise ValueError("the credential contains a line break, which git cannot be given")
    host = parts.hostname.lower() + (f":{parts.port}" if parts.port else "")
    try:
        index = max(0, int(env.get("GIT_CONFIG_COUNT", "0")))
    except ValueError:
        index = 0
    key = f"credential.{scheme}://{host}/.helper"
    return {
        f"GIT_CONFIG_KEY_{index}": key,
        f"GIT_CONFIG_VALUE_{index}": "",
        f"GIT_CONFIG_KEY_{index + 1}": key,
        f"GIT_CONFIG_VALUE_{index + 1}": CREDENTIAL_HELPER,
        "GIT_CONFIG_COUNT": str(index + 2),
        USERNAME_VAR: username,
        PASSWORD_VAR: password,
    }
