"""Optional JSON snapshot of the store so an embedded API server survives a restart.

Writes are debounced (a burst of changes costs one write) and atomic (temp file + rename), so
a crash mid-write leaves the previous snapshot intact.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
from pathlib import Path

from app.apiserver.store import Store

logger = logging.getLogger(__name__)


def load_state(path: Path, store: Store) -> bool:
    """Restore ``store`` from ``path`` if it exists; returns whether anything was loaded."""
    if not path.exists():
        return False
    with path.open(encoding="utf-8") as handle:
        store.restore(json.load(handle))
    return True


def write_state(path: Path, store: Store) -> None:
    """Write the snapshot atomically next to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(store.snapshot(), separators=(",", ":"))
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


class StateFile:
    """Debounced writer: ``mark_dirty()`` on change, ``flush()`` on shutdown."""

    def __init__(self, path: Path, store: Store, *, debounce: float = 0.05) -> None:
        self.path = path
        self.store = store
        self.debounce = debounce
        self._pending: asyncio.Task[None] | None = None
        self._dirty = False

    def mark_dirty(self) -> None:
        self._dirty = True
        if self._pending is None or self._pending.done():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                # Changes made before the loop runs (start-up loading) are flushed later.
                return
            self._pending = loop.create_task(self._write_later())

    async def _write_later(self) -> None:
        await asyncio.sleep(self.debounce)
        self._write_now()

    def _write_now(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        try:
            write_state(self.path, self.store)
        except OSError:
            logger.exception("could not write API server state", extra={"path": str(self.path)})

    async def flush(self) -> None:
        if self._pending is not None and not self._pending.done():
            self._pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pending
        self._write_now()
