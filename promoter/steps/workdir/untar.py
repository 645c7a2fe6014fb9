"""The ``untar`` step: extract a tar or gzipped tar file inside the Promotion's work directory
(its inverse is :mod:`promoter.steps.workdir.tar`).

Follows Kargo's ``untar`` step (docs/.../30-promotion-steps/untar.md): ``inPath``, ``outPath``,
``stripComponents`` (like ``tar --strip-components``) and ``ignore`` (``.gitignore``-style rules,
the same subset ``copy`` accepts; ``.git`` is always ignored, so an archive cannot plant git
hooks). gzip is detected from the file's first bytes. No outputs.

An archive is untrusted input, so extraction is refused as a whole (a terminal error naming the
member) for an absolute member name, a ``..`` component, a symlink or hard link leading outside
``outPath``, and device, FIFO or other special files; the total size of the files and the number
of members are capped (:data:`MAX_EXTRACTED_BYTES`, :data:`MAX_MEMBERS`), which also defuses
compression bombs. Members are extracted into a staging directory next to ``outPath`` and moved
into place only when the whole archive passed, so a refused archive leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import shutil
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from promoter.errors import ConfigRefused, StepError
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepResult,
    succeeded,
)
from promoter.steps.workdir.ignore import IgnoreRules

KIND = "untar"

# Generous for Helm charts and manifest bundles; small enough that a bomb cannot fill the disk.
MAX_EXTRACTED_BYTES = 512 * 1024 * 1024
MAX_MEMBERS = 20_000

_KNOWN_KEYS = frozenset({"inPath", "outPath", "stripComponents", "ignore"})
_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    max_bytes: int = MAX_EXTRACTED_BYTES
    max_members: int = MAX_MEMBERS


DEFAULT_LIMITS = Limits()


def _refuse(member: str, problem: str) -> StepError:
    return StepError(
        f"{KIND}: archive member {member!r} {problem}; nothing extracted", terminal=True
    )


def member_path(name: str, strip: int) -> str | None:
    """The relative POSIX path a member is extracted to, or None when stripping removes it.

    Raises a terminal :class:`StepError` for absolute names and ``..`` components.
    """
    if name.startswith("/") or (len(name) > 1 and name[1] == ":") or "\\" in name:
        raise _refuse(name, "has an absolute or non-POSIX path")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise _refuse(name, "has a '..' component")
    parts = parts[strip:]
    return "/".join(parts) if parts else None


def _ignored(rules: IgnoreRules, relative: str, *, is_dir: bool) -> bool:
    # Like git, nothing under an ignored directory comes back: judge every ancestor first.
    parts = relative.split("/")
    for depth in range(1, len(parts)):
        if rules.ignored("/".join(parts[:depth]), is_dir=True):
            return True
    return rules.ignored(relative, is_dir=is_dir)


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _copy_limited(source: IO[bytes], target: Path, budget: list[int], name: str) -> None:
    with open(target, "wb") as handle:
        while chunk := source.read(_CHUNK):
            budget[0] -= len(chunk)
            if budget[0] < 0:
                raise _refuse(name, "takes the archive over the extraction size limit")
            handle.write(chunk)


def extract(archive: Path, staging: Path, strip: int, ignore: str, limits: Limits) -> int:
    """Extract ``archive`` into the empty directory ``staging``; returns the files written.

    Pure apart from the file system: every check that can refuse the archive runs here.
    """
    root = os.path.realpath(staging)
    rules = IgnoreRules(ignore)
    budget = [limits.max_bytes]
    members = 0
    files = 0
    with open(archive, "rb") as raw:
        compressed = raw.read(2) == _GZIP_MAGIC
        raw.seek(0)
        try:
            # Stream mode: members are read in order, no index of a huge archive is built.
            with tarfile.open(fileobj=raw, mode="r|gz" if compressed else "r|") as tar:
                for member in tar:
                    members += 1
                    if members > limits.max_members:
                        raise StepError(
                            f"{KIND}: the archive has more than {limits.max_members} members; "
                            "nothing extracted",
                            terminal=True,
                        )
                    files += _extract_member(tar, member, root, strip, rules, budget)
        except tarfile.TarError as exc:
            raise StepError(
                f"{KIND}: config.inPath is not a valid tar or gzipped tar file: {exc}",
                terminal=True,
            ) from None
        except (EOFError, OSError) as exc:
            raise StepError(
                f"{KIND}: could not read the archive: {type(exc).__name__}: {exc}", terminal=True
            ) from None
    return files


def _extract_member(
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    root: str,
    strip: int,
    rules: IgnoreRules,
    budget: list[int],
) -> int:
    name = member.name
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise _refuse(name, "is a device, FIFO or other special file")
    relative = member_path(name, strip)
    if relative is None or _ignored(rules, relative, is_dir=member.isdir()):
        return 0
    target = os.path.join(root, *relative.split("/"))
    parent = os.path.dirname(target)
    # Earlier symlink members may stand in the way: judge where the write really lands.
    if not _inside(root, os.path.realpath(parent)):
        raise _refuse(name, "would be written through a symlink leading outside outPath")
    os.makedirs(parent, exist_ok=True)
    if os.path.lexists(target) and not (member.isdir() and os.path.isdir(target)):
        if os.path.isdir(target) or os.path.islink(target) or member.issym() or member.islnk():
            raise _refuse(name, "replaces an earlier member of a different kind")
    if member.isdir():
        os.makedirs(target, exist_ok=True)
        return 0
    if member.issym():
        link = member.linkname
        lexical = posixpath.normpath(posixpath.join(posixpath.dirname(relative), link))
        real = os.path.realpath(os.path.join(parent, link))
        if posixpath.isabs(link) or lexical.split("/")[0] == ".." or not _inside(root, real):
            raise _refuse(name, f"is a symlink to {link!r}, outside outPath")
        os.symlink(link, target)
        return 0
    if member.islnk():
        # A hard link names another member of the archive; it is copied, never linked, so it
        # cannot tie a file here to one elsewhere.
        linked = member_path(member.linkname, strip)
        source = os.path.join(root, *linked.split("/")) if linked else ""
        if not linked or not _inside(root, os.path.realpath(source)) or not os.path.isfile(source):
            raise _refuse(name, f"is a hard link to {member.linkname!r}, not an extracted file")
        with open(source, "rb") as handle:
            _copy_limited(handle, Path(target), budget, name)
        return 1
    if member.size > budget[0]:
        raise _refuse(name, "takes the archive over the extraction size limit")
    data = tar.extractfile(member)
    if data is None:  # pragma: no cover - regular members always have data
        return 0
    _copy_limited(data, Path(target), budget, name)
    # Keep the owner's read/write and any executable bits; never setuid, group or world write.
    os.chmod(target, (member.mode & 0o755) | 0o600)
    return 1


def _merge(staging: Path, out: Path) -> None:
    """Move the staged tree into ``out`` (created when missing), replacing same-named files."""
    if not out.exists():
        os.replace(staging, out)
        return
    for directory, dirnames, filenames in os.walk(staging):
        relative = Path(directory).relative_to(staging)
        (out / relative).mkdir(parents=True, exist_ok=True)
        for name in filenames:
            os.replace(Path(directory) / name, out / relative / name)
        for name in list(dirnames):
            source = Path(directory) / name
            if source.is_symlink():
                os.replace(source, out / relative / name)
                dirnames.remove(name)


def _check_staged_fits(staging: Path, out: Path, out_raw: str) -> None:
    """Refuse before moving anything when a staged entry would replace an existing directory
    with a file, or a file or symlink with a directory, or land outside ``out``."""
    root = out.resolve()
    for directory, dirnames, filenames in os.walk(staging):
        relative = Path(directory).relative_to(staging)
        staged_files = filenames + [n for n in dirnames if (Path(directory) / n).is_symlink()]
        for name in staged_files:
            destination = out / relative / name
            if destination.is_dir() and not destination.is_symlink():
                raise StepError(
                    f"{KIND}: {out_raw}/{relative / name} exists and is a directory",
                    terminal=True,
                )
        for name in dirnames:
            if (Path(directory) / name).is_symlink():
                continue
            destination = out / relative / name
            if destination.is_symlink() or (destination.exists() and not destination.is_dir()):
                raise StepError(
                    f"{KIND}: {out_raw}/{relative / name} exists and is not a directory",
                    terminal=True,
                )
            if destination.exists() and not _inside(str(root), str(destination.resolve())):
                raise StepError(
                    f"{KIND}: {out_raw}/{relative / name} leads outside outPath", terminal=True
                )


def _untar(
    ctx: StepContext, config: Mapping[str, Any], limits: Limits = DEFAULT_LIMITS
) -> StepResult:
    cfg = Config(KIND, config)
    cfg.only(_KNOWN_KEYS)
    in_raw = cfg.str("inPath")
    out_raw = cfg.str("outPath")
    strip = cfg.int("stripComponents", 0)
    if strip < 0:
        raise ConfigRefused(f"{KIND}: config.stripComponents must not be negative")
    ignore = cfg.str("ignore", "")
    archive = ctx.path(in_raw, field_name="inPath")
    if not archive.is_file():
        raise ConfigRefused(f"{KIND}: config.inPath {in_raw!r} is not a file in the work directory")
    if ".git" in Path(os.path.normpath(out_raw)).parts:
        raise ConfigRefused(
            f"{KIND}: config.outPath {out_raw!r}: writing inside a .git directory is refused"
        )
    out = ctx.path(out_raw, field_name="outPath")
    if out.exists() and not out.is_dir():
        raise StepError(f"{KIND}: config.outPath {out_raw!r} is not a directory", terminal=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".untar", dir=out.parent))
    try:
        files = extract(archive, staging, strip, ignore, limits)
        _check_staged_fits(staging, out, out_raw)
        _merge(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return succeeded(message=f"extracted {files} files from {in_raw} into {out_raw}")


async def untar_step(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """Run the ``untar`` step (in a worker thread: extraction is file I/O)."""
    return await asyncio.to_thread(_untar, ctx, config)


# It reads and writes the work directory only: a replay extracts again.
STEPS: dict[str, Step] = {KIND: FunctionStep(untar_step, effect=Effect.LOCAL)}
