"""The ``tar`` step: make a tar or gzipped tar file from a file or directory inside the Promotion's
work directory.

``tar`` follows Kargo's ``tar`` step (``inPath``, ``outPath``, ``ignore``, ``gzip``; no outputs):
members are named relative to ``inPath`` (a file is archived under its base name), symlinks are
archived as links, Kargo's size limits apply, and the archive replaces ``outPath`` in one rename.
As in Kargo, ``.git`` is left out of an archive only when ``ignore`` is not given: rules given
replace that default.
"""

from __future__ import annotations

import asyncio
import os
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promoter.errors import ConfigRefused, StepError
from promoter.steps.base import (
    PRIVATE_DIR,
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepResult,
    succeeded,
)
from promoter.steps.workdir.files import file_target
from promoter.steps.workdir.ignore import IgnoreRules

TAR_KIND = "tar"
_TAR_KEYS = frozenset({"inPath", "outPath", "ignore", "gzip"})
# Kargo's limits for the files put into an archive (tar_creator.go).
MAX_ARCHIVED_FILE_BYTES = 50 * 1024 * 1024
MAX_ARCHIVED_BYTES = 100 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    max_file_bytes: int = MAX_ARCHIVED_FILE_BYTES
    max_bytes: int = MAX_ARCHIVED_BYTES


DEFAULT_ARCHIVE_LIMITS = ArchiveLimits()


def _archive_ignore_rules(ignore: str) -> IgnoreRules:
    """Kargo's tar rules (tar_creator.go, buildIgnoreMatcher): ``.git`` is left out only when no
    rules are given; rules replace that default (a bundle may carry a ``.git`` on purpose)."""
    return IgnoreRules(ignore, defaults=() if ignore.strip() else (".git",))


def _tar_entries(source: Path, skip: Sequence[Path], rules: IgnoreRules) -> list[tuple[Path, str]]:
    """``(path, member name)`` for everything archived, in Kargo's order (a depth-first walk in
    lexical order, as Go's ``filepath.WalkDir``).

    A file ``inPath`` is archived under its base name; a directory's content is archived
    relative to it, without an entry for the directory itself (as Kargo does, no ``.``).
    Symlinks are archived as links, never followed.
    """
    if not source.is_dir():
        return [(source, source.name)]
    entries: list[tuple[Path, str]] = []

    def walk(directory: Path, prefix: str) -> None:
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            path = Path(entry.path)
            name = prefix + entry.name
            is_dir = entry.is_dir(follow_symlinks=False)
            if path in skip or rules.ignored(name, is_dir=is_dir):
                continue
            if is_dir:
                entries.append((path, name + "/"))
                walk(path, name + "/")
            else:
                entries.append((path, name))

    walk(source, "")
    return entries


def create_archive(
    source: Path,
    target: Path,
    *,
    gzip: bool,
    ignore: str,
    skip: Sequence[Path] = (),
    limits: ArchiveLimits = DEFAULT_ARCHIVE_LIMITS,
) -> int:
    """Write ``source`` (a file or a directory) into the tar file ``target``; returns the files.

    The archive is written next to ``target`` and renamed over it once complete, so a failure
    never leaves half an archive (or removes an earlier one).
    """
    rules = _archive_ignore_rules(ignore)
    entries = _tar_entries(source, skip, rules)
    total = 0
    for path, name in entries:
        if path.is_symlink() or not path.is_file():
            continue
        size = path.stat().st_size
        if size > limits.max_file_bytes:
            raise StepError(
                f"{TAR_KIND}: file {name!r} size ({size} bytes) exceeds the maximum allowed "
                f"single file size ({limits.max_file_bytes} bytes)",
                terminal=True,
            )
        total += size
        if total > limits.max_bytes:
            raise StepError(
                f"{TAR_KIND}: total tar archive source size exceeds the maximum allowed size "
                f"({limits.max_bytes} bytes)",
                terminal=True,
            )
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    files = 0
    try:
        with os.fdopen(fd, "wb") as handle:
            with tarfile.open(fileobj=handle, mode="w:gz" if gzip else "w") as tar:
                for path, name in entries:
                    # No owner names or ids from this machine in an archive others will read.
                    info = tar.gettarinfo(str(path), arcname=name)
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    if info.isfile():
                        with open(path, "rb") as member:
                            tar.addfile(info, member)
                        files += 1
                    elif info.isdir() or info.issym():
                        tar.addfile(info)
                    # Sockets, FIFOs and devices have no place in an archive of manifests.
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return files


def _tar(
    ctx: StepContext, config: Mapping[str, Any], limits: ArchiveLimits = DEFAULT_ARCHIVE_LIMITS
) -> StepResult:
    cfg = Config(TAR_KIND, config)
    cfg.only(_TAR_KEYS)
    in_raw = cfg.str("inPath")
    out_raw = cfg.str("outPath")
    if not in_raw or not out_raw:
        raise ConfigRefused(f"{TAR_KIND}: config.inPath and config.outPath must not be empty")
    ignore = cfg.str("ignore", "")
    if "ignore" in config and not ignore:
        # Kargo's schema: minLength 1 (leave the field out for the default).
        raise ConfigRefused(f"{TAR_KIND}: config.ignore must not be empty")
    gzip = cfg.bool("gzip")
    source = ctx.path(in_raw, field_name="inPath")
    if not source.exists():
        raise StepError(f"{TAR_KIND}: input path {in_raw!r} does not exist", terminal=True)
    target = file_target(ctx, TAR_KIND, out_raw, "outPath")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise StepError(
            f"{TAR_KIND}: failed to create output directory for {out_raw!r}", terminal=True
        ) from None
    # The work directory's private files (git clone cache) never go into an archive, nor does
    # the archive itself when it is written inside inPath (as Kargo's walk could).
    skip = (ctx.work_dir.resolve() / PRIVATE_DIR, target)
    files = create_archive(source, target, gzip=gzip, ignore=ignore, skip=skip, limits=limits)
    return succeeded(message=f"archived {files} files from {in_raw} into {out_raw}")


async def tar_step(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """Run the ``tar`` step (in a worker thread: archiving is file I/O)."""
    return await asyncio.to_thread(_tar, ctx, config)


# It reads and writes the work directory only: a replay archives again.
STEPS: dict[str, Step] = {TAR_KIND: FunctionStep(tar_step, effect=Effect.LOCAL)}
