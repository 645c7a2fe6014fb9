"""The local runner's early clone: the first ``git clone`` starts before the engine has loaded.

A local run of a git Promotion spends most of its own time (not git's) loading the engine, the
model and the steps, and the clone of its first step cannot start before all of that is done
(``bench/bench_runner.py``). When the Stage's first step is a ``git-clone`` of one branch whose
config holds only plain values (or exactly ``${{ vars.NAME }}`` of a plain var, as Kargo's
examples name the repository), that clone depends on nothing the engine works out, so the
command line starts it at once, from the raw YAML, into a staging directory beside the work
directories, and loads the engine while git works.

The ``git-clone`` step stays in charge. It takes the early clone only when it would itself run
a clone with the same result (:func:`promoter.gitcmd.clone_key`: the same URL, branch,
options and environment); it then waits for it, and moves the checkout and its git directory
to where its own clone would have put them. Any other case (a different first step, config, or
``--namespace``; an expression; an error before the step; a typo on the command line) and the
early clone is killed and its staging directory removed, so what runs is exactly what would
have run without it. Values are checked before git starts, at least as strictly as the step
checks them: nothing a manifest holds can reach git early that the step would have refused.

It reads the manifests with :mod:`promoter.earlyyaml` and imports ``os`` and ``_signal`` only:
everything else, PyYAML included, loads while git clones.
"""

from __future__ import annotations

import os
import time

from promoter.earlyyaml import Unsupported, documents
from promoter.gitcmd import (
    DEFAULT_AUTHOR_EMAIL,
    DEFAULT_AUTHOR_NAME,
    SAFE_CONFIG,
    branch_clone_args,
    clone_key,
    clone_options,
    git_env,
)

# What loads before git starts is all the runner waits for: typing and collections.abc are for
# the type checker only (mypy reads this flag as typing's own).
TYPE_CHECKING = False
# CPython's signal module is _signal plus enums for its constants, and enum is most of what
# loading signal costs: a few milliseconds before git could start.
if TYPE_CHECKING:
    import signal
else:
    try:
        import _signal as signal
    except ImportError:  # another implementation
        import signal

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

STAGING_PREFIX = ".longshoreman-early-"

# The run command's options, each of which takes a value (promoter.cli.build_parser).
RUN_OPTIONS = frozenset(
    (
        "--manifests",
        "--stage",
        "--freight",
        "--namespace",
        "--var",
        "--work-dir",
        "--output",
        "--git-config",
        "--http-allow",
    )
)
# Narrower than what git-clone accepts, on purpose: only the plainest values go to git before
# the step has checked them itself (string tests, not regular expressions: re would load first).
_SCHEMES = ("https://", "http://", "ssh://", "git://")
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_HOST = _ALNUM | frozenset(".-")
_NAME = _ALNUM | frozenset("._/-")
_URL_PATH = _NAME | frozenset("~")


def _plain_url(url: str) -> bool:
    """``scheme://host[:port]/path`` in letters, digits and ``._~/-``, no ``/.``."""
    scheme = next((s for s in _SCHEMES if url.startswith(s)), None)
    if scheme is None or "/." in url:
        return False
    host, slash, path = url[len(scheme) :].partition("/")
    name, colon, port = host.partition(":")
    if not slash or not name or name[0] not in _ALNUM or not set(name) <= _HOST:
        return False
    if colon and not (port.isascii() and port.isdigit() and len(port) <= 5):
        return False
    return set(path) <= _URL_PATH


def _plain_name(text: str, first: frozenset[str]) -> bool:
    return bool(text) and text[0] in first and set(text) <= _NAME and ".." not in text


class EarlyClone:
    """A ``git clone`` of one branch started ahead of its step, in a staging directory."""

    def __init__(self, key: tuple[object, ...], staging: str, pid: int) -> None:
        self.key = key
        self.staging = staging
        self.checkout = os.path.join(staging, "out")
        self.git_dir = os.path.join(staging, "git")
        self._pid: int | None = pid
        self._interrupted = False
        self._held: Any = None

    def hold_interrupts(self) -> None:
        """Keep a Ctrl-C that comes before the Promotion exists for it (see
        :meth:`release_interrupts`), instead of breaking off the imports; a second one is
        not kept."""
        self._held = signal.signal(signal.SIGINT, self._on_interrupt)

    def _on_interrupt(self, signum: int, frame: object) -> None:
        if self._interrupted:
            self.release_interrupts()
            raise KeyboardInterrupt
        self._interrupted = True

    def release_interrupts(self) -> bool:
        """Give Ctrl-C back to Python's own handler; whether one came meanwhile (the runner
        then aborts the Promotion before its first step)."""
        if self._held is not None:
            signal.signal(signal.SIGINT, self._held)
            self._held = None
        came, self._interrupted = self._interrupted, False
        return came

    @property
    def pending(self) -> bool:
        """Whether nobody has taken or ended it yet."""
        return self._pid is not None

    def take(
        self, key: tuple[object, ...], checkout: str, git_dir: str, time_limit: float
    ) -> tuple[int, bytes, bytes] | None:
        """The clone for a step whose own clone has ``key``: waited for and, when it succeeded,
        moved to ``checkout`` (whose parent exists, itself does not) with its git directory at
        ``git_dir``. Returns git's exit code and output; None (the early clone ended, nothing
        left behind) when the key differs, it cannot be moved, or it was taken already: the step
        then clones as usual. ``TimeoutError`` when git runs past ``time_limit``."""
        pid = self._pid
        if pid is None or key != self.key:
            self.discard()
            return None
        self._pid = None
        try:
            code = _wait(pid, time_limit)
        except BaseException:  # timed out, or Ctrl-C: never leave git behind
            _kill(pid)
            self._remove()
            raise
        out, err = (self._read(name) for name in ("stdout", "stderr"))
        if code != 0:
            self._remove()
            return code, out, err
        try:
            os.rename(self.git_dir, git_dir)
            os.rename(self.checkout, checkout)
            # The checkout finds its git directory through this file; nothing else in either
            # names a path (no core.worktree with --separate-git-dir).
            with open(os.path.join(checkout, ".git"), "w", encoding="utf-8") as f:
                f.write(f"gitdir: {git_dir}\n")
        except OSError:
            # Another file system, say: leave nothing half moved, and let the step clone.
            import shutil

            for path in (git_dir, checkout):
                shutil.rmtree(path, ignore_errors=True)
            self._remove()
            return None
        self._remove()
        return code, out, err

    def discard(self) -> None:
        """End it unused: the process (and what it started) killed, the staging removed."""
        self.release_interrupts()
        pid, self._pid = self._pid, None
        if pid is not None:
            _kill(pid)
            self._remove()

    def _read(self, name: str) -> bytes:
        try:
            with open(os.path.join(self.staging, name), "rb") as f:
                return f.read()
        except OSError:
            return b""

    def _remove(self) -> None:
        # What the staging holds once git is gone (its output, an empty HOME) goes without
        # shutil, which would load bz2 and lzma with it; anything else takes shutil.rmtree.
        staging = self.staging
        try:
            for name in ("stdout", "stderr"):
                if os.path.lexists(path := os.path.join(staging, name)):
                    os.unlink(path)
            if os.path.lexists(home := os.path.join(staging, "home")):
                os.rmdir(home)
            os.rmdir(staging)
        except FileNotFoundError:
            pass
        except OSError:
            import shutil

            shutil.rmtree(staging, ignore_errors=True)


def _wait(pid: int, time_limit: float) -> int:
    """Wait for child ``pid`` to end; its exit code. ``TimeoutError`` after ``time_limit``."""
    try:
        handle = os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux 5.3+: look every few milliseconds
        deadline, pause = time.monotonic() + time_limit, 0.001
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() >= deadline:
                raise TimeoutError from None
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
    import select

    try:
        ready, _, _ = select.select([handle], [], [], time_limit)
    finally:
        os.close(handle)
    if not ready:
        raise TimeoutError
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _kill(pid: int) -> None:
    """Kill git and what it started (a session of its own), and reap it."""
    # Loaded here, not before git starts: io_port brings subprocess along.
    from promoter.io_port import kill_group

    kill_group(pid)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def run_options(argv: Sequence[str]) -> dict[str, list[str]] | None:
    """The ``run`` command's options as argparse reads them (each option's values in order),
    or None for anything this plain reading might get wrong: abbreviations, help, another
    command, a positional word, or a value after its option that begins with ``-`` (argparse
    may read that as an option). :func:`promoter.cli.plain_run_args` builds on it too."""
    if not argv or argv[0] != "run":
        return None
    found: dict[str, list[str]] = {}
    i = 1
    while i < len(argv):
        name, eq, value = argv[i].partition("=")
        if name not in RUN_OPTIONS:
            return None
        if not eq:
            i += 1
            if i >= len(argv) or argv[i].startswith("-"):
                return None
            value = argv[i]
        found.setdefault(name, []).append(value)
        i += 1
    return found


def _first_clone(
    docs: Sequence[Any], stage: str, namespace: str | None, cli_vars: Sequence[str]
) -> tuple[Mapping[str, Any], dict[str, Any]]:
    """The config of the Stage's first step if it is a ``git-clone`` (or an empty mapping),
    and the Promotion's vars as the builder orders them: the Stage's, the template's, then
    the command line's (``NAME=VALUE``), later ones winning."""
    found = [
        d
        for d in docs
        if isinstance(d, dict)
        and d.get("kind") == "Stage"
        and isinstance(d.get("metadata"), dict)
        and d["metadata"].get("name") == stage
        and (namespace is None or d["metadata"].get("namespace") in (None, namespace))
    ]
    if len(found) != 1:
        return {}, {}
    spec = found[0].get("spec")
    template = spec.get("promotionTemplate") if isinstance(spec, dict) else None
    inner = template.get("spec") if isinstance(template, dict) else None
    steps = inner.get("steps") if isinstance(inner, dict) else None
    if not isinstance(steps, list) or not steps or not isinstance(steps[0], dict):
        return {}, {}
    step = steps[0]
    if step.get("uses") != "git-clone" or set(step) - {"uses", "as", "config"}:
        return {}, {}
    config = step.get("config")
    known: dict[str, Any] = {}
    for holder in (spec, inner):
        listed = holder.get("vars") if isinstance(holder, dict) else None
        for var in listed if isinstance(listed, list) else ():
            if isinstance(var, dict) and isinstance(var.get("name"), str):
                known[var["name"]] = var.get("value")
    for text in cli_vars:
        name, _, value = text.partition("=")
        known[name.strip()] = value
    return (config if isinstance(config, dict) else {}), known


def _plain(value: Any, known: Mapping[str, Any]) -> str | None:
    """A config string as the engine would render it, when that needs no more than a plain
    value or exactly ``${{ vars.NAME }}`` of a plain var (Kargo's usual repoURL); else None."""
    if not isinstance(value, str):
        return None
    if "${{" not in value:
        return value
    if not (value.startswith("${{") and value.endswith("}}")):
        return None
    ref = value[3:-2].strip()
    if not ref.startswith("vars.") or not ref[5:].isidentifier():
        return None
    resolved = known.get(ref[5:])
    return resolved if isinstance(resolved, str) and "${{" not in resolved else None


def _plain_branch_clone(
    config: Mapping[str, Any], known: Mapping[str, Any]
) -> tuple[str, str] | None:
    """(repoURL, branch) when ``config`` is a clone of one branch in plain values (or plain
    vars, ``known``) only."""
    if set(config) - {"repoURL", "checkout"}:
        return None
    url, checkout = _plain(config.get("repoURL"), known), config.get("checkout")
    if url is None or not _plain_url(url):
        return None
    if not isinstance(checkout, list) or len(checkout) != 1 or not isinstance(checkout[0], dict):
        return None
    item = checkout[0]
    branch, path = _plain(item.get("branch"), known), item.get("path")
    if set(item) - {"branch", "path", "as"} or branch is None:
        return None
    if not isinstance(path, str) or not _plain_name(path, _ALNUM | frozenset("_.")):
        return None
    if not _plain_name(branch, _ALNUM | frozenset("_")) or "//" in branch:
        return None
    if branch.endswith(("/", ".", ".lock")) or "/." in branch or ".lock/" in branch:
        return None
    return url, branch


def _read_documents(manifests: str) -> list[Any]:
    """The documents of a manifest file, or of the ``*.yaml``/``*.yml`` files under a directory
    (those :mod:`promoter.earlyyaml` cannot read are left out: the Stage is looked for in the
    others, and the engine reads them all anyway)."""
    if os.path.isfile(manifests):
        paths = [manifests]
    else:
        paths = sorted(
            os.path.join(top, name)
            for top, _, names in os.walk(manifests)
            for name in names
            if name.endswith((".yaml", ".yml"))
        )
    docs: list[Any] = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                docs += documents(f.read())
        except (Unsupported, OSError, UnicodeDecodeError):
            continue
    return docs


def start(argv: Sequence[str]) -> EarlyClone | None:
    """Start the first git-clone of ``longshoreman run ...`` now, if it can be told from the
    command line and the manifests alone; None otherwise (and on any trouble: the run then goes
    as without it, and reports what it finds itself)."""
    try:
        return _start(argv)
    except Exception:  # YAML it does not read, say: the engine reads it and says what it finds
        return None


def _start(argv: Sequence[str]) -> EarlyClone | None:
    options = run_options(argv)
    if options is None or "--manifests" not in options or "--stage" not in options:
        return None
    # argparse keeps the last of an option given twice (--var gathers them all).
    last = {name: values[-1] for name, values in options.items()}
    git_config = last.get("--git-config")
    if git_config is not None and not os.path.isfile(git_config):
        return None
    docs = _read_documents(last["--manifests"])
    cli_vars = options.get("--var", [])
    config, known = _first_clone(docs, last["--stage"], last.get("--namespace"), cli_vars)
    plan = _plain_branch_clone(config, known)
    if plan is None:
        return None
    url, branch = plan
    # Beside the work directories, on their file system, so that the step can move it in.
    root = last.get("--work-dir")
    if root is not None:
        os.makedirs(root, exist_ok=True)  # as the runner would, a moment later
    else:
        # Where tempfile would make the runner's own work directory.
        environ = os.environ
        root = environ.get("TMPDIR") or environ.get("TEMP") or environ.get("TMP") or "/tmp"
    if not os.path.isdir(root):
        return None
    staging = os.path.join(os.path.realpath(root), STAGING_PREFIX + os.urandom(8).hex())
    os.mkdir(staging, 0o700)
    try:
        home = os.path.join(staging, "home")
        os.mkdir(home)
        settings_env = {}
        if git_config is not None:
            settings_env["GIT_CONFIG_GLOBAL"] = os.path.realpath(git_config)
        env = git_env(home, settings_env, DEFAULT_AUTHOR_NAME, DEFAULT_AUTHOR_EMAIL)
        # GitSettings' identity, as the step's own clone has it (no author in the config).
        carried = clone_options(DEFAULT_AUTHOR_NAME, DEFAULT_AUTHOR_EMAIL)
        args = [
            # -C: no repository around the command line's directory is looked at.
            "git", "-C", staging, *SAFE_CONFIG,
            *branch_clone_args(branch, carried, os.path.join(staging, "git")),
            "--", url, os.path.join(staging, "out"),
        ]  # fmt: skip
        # posix_spawn, not subprocess: that module and what it loads would delay git's start
        # by a few milliseconds (git's output goes to files: nobody reads a pipe meanwhile).
        write = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        pid = os.posix_spawnp(
            "git",
            args,
            env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, os.path.join(staging, "stdout"), write, 0o600),
                (os.POSIX_SPAWN_OPEN, 2, os.path.join(staging, "stderr"), write, 0o600),
            ],
            setsid=True,
        )
    except BaseException:
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
        raise
    early = EarlyClone(clone_key(url, branch, carried, env), staging, pid)
    early.hold_interrupts()
    return early
