"""What the file steps share: reading a file a config names, writing one atomically, the
Freight's name, and running a step's file I/O off the event loop.

Every config path goes through :meth:`StepContext.path`, so absolute paths, ``..`` and symlinks
leading out of the work directory are refused with a terminal error naming the field. File I/O
runs in a worker thread in the server (``ctx.services.io``, :func:`in_thread`) so a large copy or
glob never blocks the event loop. Config fields and outputs of the steps follow Kargo's reference
docs (docs/50-user-guide/60-reference-docs/30-promotion-steps/*.md); deviations are called out
where they are made.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from promoter.errors import ConfigRefused, StepError
from promoter.steps.base import (
    StepContext,
    StepFunction,
    StepResult,
)

# --------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------


def existing_file(ctx: StepContext, kind: str, raw: str, field_name: str = "path") -> Path:
    path = ctx.path(raw, field_name=field_name)
    if not path.exists():
        raise StepError(
            f"{kind}: config.{field_name} {raw!r} does not exist in the work directory",
            terminal=True,
        )
    if not path.is_file():
        raise StepError(f"{kind}: config.{field_name} {raw!r} is not a regular file", terminal=True)
    return path


def leaf_path(ctx: StepContext, raw: str, field_name: str) -> Path:
    """Confine ``raw`` to the work directory without following a symlink at its last component.

    ``delete`` must remove a symlink itself, not whatever it points at (which ``ctx.path`` would
    resolve to), so only the parent directory is resolved.
    """
    if not isinstance(raw, str) or raw == "" or os.path.isabs(raw):
        return ctx.path(raw, field_name=field_name)  # raises with the standard message
    normal = os.path.normpath(raw)
    if normal == ".." or normal.startswith(".." + os.sep):
        return ctx.path(raw, field_name=field_name)  # raises with the standard message
    head, tail = os.path.split(normal)
    parent = ctx.path(head or ".", field_name=field_name)
    return parent if tail in ("", ".") else parent / tail


def ensure_inside(ctx: StepContext, path: Path, kind: str, field_name: str) -> None:
    root = ctx.work_dir.resolve()
    resolved = path.resolve()
    if resolved != root and root not in resolved.parents:
        raise ConfigRefused(
            f"{kind}: config.{field_name}: {path.relative_to(root)} is a symlink leading outside "
            "the Promotion's work directory"
        )


def read_text(path: Path, kind: str, raw: str, field_name: str = "path") -> str:
    try:
        # Bytes, not read_text(): universal newlines would silently turn CRLF files into LF.
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise StepError(
            f"{kind}: config.{field_name} {raw!r} is not UTF-8 text", terminal=True
        ) from None
    except OSError as err:
        raise StepError(f"{kind}: could not read {raw!r}: {err.strerror}") from None


def _create_beside(path: Path) -> tuple[int, str]:
    """A new file of our own (mode 0600) beside ``path``, as ``tempfile.mkstemp`` makes one:
    tempfile (with shutil, random, bz2 and lzma) costs more to import than the whole edit of
    an image tag takes (``bench/bench_runner.py``)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{os.urandom(6).hex()}")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def write_text_atomic(path: Path, text: str) -> None:
    """Replace a file's content in one rename, so a crash never leaves half a file behind.

    A retried step then sees either the old or the new content, both of which it handles.
    """
    fd, tmp = _create_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        if path.exists():
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))  # shutil.copymode's doing
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def scalar_text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def one_line(err: Exception) -> str:
    return " ".join(str(err).split())


def freight_name(ctx: StepContext) -> str:
    metadata = ctx.freight.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else ctx.freight.get("name")
    return str(name) if name else "(unnamed)"


def file_target(ctx: StepContext, kind: str, raw: str, field_name: str) -> Path:
    """Where a step may write the file ``config.<field_name>`` names: inside the work
    directory, not inside a ``.git`` directory, and not an existing directory."""
    if ".git" in Path(os.path.normpath(raw)).parts:
        # A file under .git/hooks would run on the next git step.
        raise ConfigRefused(
            f"{kind}: config.{field_name} {raw!r}: writing inside a .git directory is refused"
        )
    target = ctx.path(raw, field_name=field_name)
    if target.is_dir():
        # Kargo: Errored, not a refusal (the work directory, not the config, is in the way).
        raise StepError(f"{kind}: config.{field_name} {raw!r} is a directory", terminal=True)
    return target


def in_thread(fn: Callable[[StepContext, Mapping[str, Any]], StepResult]) -> StepFunction:
    """A step that runs ``fn`` on ``ctx.services.io``'s worker thread."""

    async def run(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
        return await ctx.services.io.call(fn, ctx, config)

    run.__name__ = fn.__name__.lstrip("_")
    return run
