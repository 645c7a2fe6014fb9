"""Local, hermetic git remotes for tests.

``make_remote`` creates a bare repository under a tmp path and fills branches through git's
plumbing (no working tree), with fixed identities and dates so that the same content always gives
the same commit IDs. ``git_env`` writes a gitconfig with ``url.<local>.insteadOf <public>`` rules,
so manifests naming ``https://github.com/example/repo.git`` run unchanged against a local bare
repository; its result is meant for ``GitSettings.env``.

Nothing here reads the user's ``~/.gitconfig`` or the system config: every git process gets
``GIT_CONFIG_GLOBAL``, ``GIT_CONFIG_NOSYSTEM=1`` and a private ``HOME``.

Example::

    remote = make_remote(tmp_path, files={"base/kustomization.yaml": "resources: []\\n"})
    env = git_env(tmp_path, {remote.url: "https://github.com/example/repo.git"})
    ctx = make_context(tmp_path, git_env=env)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

TEST_USER_NAME = "Longshoreman Tests"
TEST_USER_EMAIL = "tests@longshoreman.invalid"
# Fixed dates make commit IDs reproducible; each commit moves the clock by a minute so that logs
# still have an order.
_EPOCH = 1_700_000_000


def _hermetic_env(home: Path, date: int | None = None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "LC_ALL": "C",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": TEST_USER_NAME,
        "GIT_AUTHOR_EMAIL": TEST_USER_EMAIL,
        "GIT_COMMITTER_NAME": TEST_USER_NAME,
        "GIT_COMMITTER_EMAIL": TEST_USER_EMAIL,
    }
    if date is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"{date} +0000"
    return env


@dataclass
class RemoteRepo:
    """A bare repository standing in for a hosted one."""

    path: Path
    home: Path
    _clock: int = field(default=_EPOCH, repr=False)

    @property
    def url(self) -> str:
        """``file://`` URL of the repository (map a public URL to it with :func:`git_env`)."""
        return self.path.as_uri()

    def git(
        self, *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None
    ) -> str:
        """Run git in the bare repository; return stripped stdout, raise on failure."""
        return self._run(args, stdin, env).strip()

    def _run(self, args: tuple[str, ...], stdin: str | None, env: Mapping[str, str] | None) -> str:
        full_env = _hermetic_env(self.home)
        if env:
            full_env.update(env)
        result = subprocess.run(
            ["git", *args],
            cwd=self.path,
            env=full_env,
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    def commit_files(
        self,
        branch: str,
        files: Mapping[str, str | bytes | None],
        message: str = "update",
        *,
        orphan: bool = False,
        author: tuple[str, str] | None = None,
    ) -> str:
        """Commit ``files`` on top of ``branch`` (created if missing); ``None`` deletes a file.
        ``author``: (name, email) instead of the test user's.

        Returns the new commit ID.
        """
        current = self.head(branch)
        parent = None if orphan else current
        index = self.path / f"index-{branch.replace('/', '_')}"
        index.unlink(missing_ok=True)
        index_env = {"GIT_INDEX_FILE": str(index)}
        try:
            if parent:
                self.git("read-tree", parent, env=index_env)
            # One update-index for all entries: "<mode> <sha>\t<path>", mode 0 removes.
            entries = []
            for name, content in files.items():
                if content is None:
                    entries.append(f"0 {'0' * 40}\t{name}")
                    continue
                data = content.decode() if isinstance(content, bytes) else content
                blob = self.git("hash-object", "-w", "--stdin", stdin=data)
                entries.append(f"100644 {blob}\t{name}")
            self.git("update-index", "--index-info", stdin="\n".join(entries) + "\n", env=index_env)
            tree = self.git("write-tree", env=index_env)
        finally:
            index.unlink(missing_ok=True)
        self._clock += 60
        args = ["commit-tree", tree]
        if parent:
            args += ["-p", parent]
        date_env = _hermetic_env(self.home, self._clock)
        if author is not None:
            date_env["GIT_AUTHOR_NAME"], date_env["GIT_AUTHOR_EMAIL"] = author
        sha = self.git(*args, stdin=message + "\n", env=date_env)
        # The old value makes this a compare-and-swap, like a real push.
        self.git("update-ref", f"refs/heads/{branch}", sha, current or "")
        return sha

    def tag(self, name: str, target: str, message: str | None = None) -> None:
        """Create a tag (annotated when ``message`` is given) on ``target``."""
        if message is None:
            self.git("tag", name, target)
        else:
            self.git("tag", "-a", "-m", message, name, target)

    def branches(self) -> list[str]:
        """Branch names, sorted."""
        out = self.git("for-each-ref", "--format=%(refname:strip=2)", "refs/heads/")
        return sorted(out.splitlines())

    def tags(self) -> dict[str, str]:
        """Tag name -> commit it points at (peeled)."""
        out = self.git("for-each-ref", "--format=%(refname:strip=2) %(*objectname) %(objectname)",
                       "refs/tags/")  # fmt: skip
        tags = {}
        for line in out.splitlines():
            name, *objs = line.split(" ")
            tags[name] = next(o for o in objs if o)
        return tags

    def head(self, branch: str) -> str | None:
        """Commit at the tip of ``branch``, or None if it does not exist."""
        try:
            return self.git("rev-parse", "--verify", "-q", f"refs/heads/{branch}^{{commit}}")
        except RuntimeError:
            return None

    def read_file(self, branch: str, path: str) -> str | None:
        """Content of ``path`` on ``branch``, or None if either does not exist."""
        try:
            return self._run(("show", f"refs/heads/{branch}:{path}"), None, None)
        except RuntimeError:
            return None

    def files(self, branch: str) -> list[str]:
        """All file paths on ``branch``, sorted."""
        out = self.git("ls-tree", "-r", "--name-only", f"refs/heads/{branch}")
        return sorted(out.splitlines())

    def log(self, branch: str) -> list[tuple[str, str]]:
        """``(sha, subject)`` of every commit on ``branch``, newest first."""
        if self.head(branch) is None:
            return []
        out = self.git("log", "--format=%H %s", f"refs/heads/{branch}")
        return [(line[:40], line[41:]) for line in out.splitlines()]


def make_remote(
    tmp_path: Path,
    files: Mapping[str, str | bytes | None] | None = None,
    branch: str = "main",
    *,
    name: str = "remote",
    message: str = "initial",
) -> RemoteRepo:
    """A bare repository at ``tmp_path/<name>.git`` whose ``branch`` holds ``files``.

    With ``files=None`` the repository is empty (its HEAD still names ``branch``).
    """
    path = (tmp_path / f"{name}.git").resolve()
    home = (tmp_path / f"{name}-home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["git", "init", "-q", "--bare", f"--initial-branch={branch}", str(path)],
        env=_hermetic_env(home),
        check=True,
        capture_output=True,
    )
    remote = RemoteRepo(path=path, home=home)
    if files is not None:
        remote.commit_files(branch, files, message)
    return remote


def git_env(
    tmp_path: Path,
    rewrites: Mapping[str, str],
    *,
    user_name: str = TEST_USER_NAME,
    user_email: str = TEST_USER_EMAIL,
) -> dict[str, str]:
    """Write a gitconfig mapping public URLs to local ones; return env for ``GitSettings.env``.

    ``rewrites`` maps the local URL (usually ``RemoteRepo.url``) to the public URL a manifest
    names, as in git's ``url.<local>.insteadOf <public>``.
    """
    config = tmp_path / "gitconfig-longshoreman-tests"
    lines = [
        "[user]",
        f"\tname = {user_name}",
        f"\temail = {user_email}",
        "[init]",
        "\tdefaultBranch = main",
    ]
    for local, public in rewrites.items():
        lines += [f'[url "{local}"]', f"\tinsteadOf = {public}"]
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {
        "GIT_CONFIG_GLOBAL": str(config),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": user_name,
        "GIT_AUTHOR_EMAIL": user_email,
        "GIT_COMMITTER_NAME": user_name,
        "GIT_COMMITTER_EMAIL": user_email,
    }


def record_git(tmp_path: Path) -> tuple[str, Path]:
    """A PATH whose ``git`` writes each call (its directory, a tab, its arguments) to a log
    and then runs the real git: what a process under test ran, seen from outside it.

    Returns the PATH value and the log's path.
    """
    real = shutil.which("git")
    assert real is not None, "git must be installed"
    bin_dir = tmp_path / "recording-bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "git-calls.log"
    script = bin_dir / "git"
    script.write_text(
        f'#!/bin/sh\nprintf "%s\\t%s\\n" "$PWD" "$*" >> "{log}"\nexec "{real}" "$@"\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}", log
