"""How steps and the engine wait on the world: child processes, blocking calls, pauses, locks.

Steps do not call asyncio themselves; they await this port (``ctx.services.io``), so a test can
give a step another implementation and every step kills what it started the same way.
:class:`LoopIo` is the one the server and the local runner use: asyncio subprocesses,
``to_thread``, timers and per-loop locks.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ProcessResult:
    returncode: int
    stdout: bytes
    stderr: bytes


class IoPort(Protocol):
    async def run_process(
        self,
        args: Sequence[str],
        *,
        cwd: Path,
        env: dict[str, str] | None,
        stdin: bytes | None,
        time_limit: float,
    ) -> ProcessResult:
        """Run a program to its end and collect its output.

        The child gets a session of its own, so a timeout (``TimeoutError``) or a cancellation
        also kills what it started (git's remote helpers hold pipes open). ``OSError`` when it
        cannot be started.
        """
        ...

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Call a blocking function (file system work) without holding up other Promotions."""
        ...

    async def sleep(self, seconds: float) -> None: ...

    def lock(self, key: str) -> contextlib.AbstractAsyncContextManager[None]:
        """A lock per key for this process: Promotions pushing to one branch take turns."""
        ...


def kill_group(pid: int) -> None:
    """SIGKILL the session led by ``pid`` (a child and whatever it started), if still there."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class LoopIo:
    """The port on the running asyncio loop (the server, and any async caller)."""

    async def run_process(
        self,
        args: Sequence[str],
        *,
        cwd: Path,
        env: dict[str, str] | None,
        stdin: bytes | None,
        time_limit: float,
    ) -> ProcessResult:
        pipe = asyncio.subprocess.PIPE
        proc = await asyncio.create_subprocess_exec(
            *args,
            cwd=str(cwd),
            env=env,
            stdin=pipe if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=pipe,
            stderr=pipe,
            start_new_session=True,
        )
        try:
            async with asyncio.timeout(time_limit):
                out, err = await proc.communicate(stdin)
        finally:
            # Cancelled or timed out: never leave a process behind (it may hold repository
            # locks).
            if proc.returncode is None:
                kill_group(proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                with contextlib.suppress(Exception):
                    await proc.wait()
        assert proc.returncode is not None
        return ProcessResult(proc.returncode, out, err)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def lock(self, key: str) -> contextlib.AbstractAsyncContextManager[None]:
        locks = _LOOP_LOCKS.setdefault(asyncio.get_running_loop(), {})
        return locks.setdefault(key, asyncio.Lock())


# Locks per event loop (a test suite runs many loops in one process; a lock is bound to one).
_LOOP_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


LOOP_IO = LoopIo()
