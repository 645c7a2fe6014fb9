"""How steps and the engine wait on the world: child processes, blocking calls, pauses, locks.

Steps are ``async`` so the server can run many Promotions on one event loop. The local runner
runs one Promotion, and for it the event loop is pure cost: importing asyncio alone takes longer
than the git commands of a small Promotion (``bench/bench_runner.py``). So steps do not call
asyncio themselves; they await this port (``ctx.services.io``), which has two implementations:

- :class:`LoopIo`, the server's (and the default): asyncio subprocesses, ``to_thread``, timers
  and per-loop locks. asyncio is imported on first use, never at import time.
- :class:`BlockingIo`, the local runner's: the same calls done in place (``subprocess``, a direct
  call, ``time.sleep``, no lock: one Promotion at a time). Every awaitable it returns is already
  done, so :func:`drive` runs a whole Promotion's coroutine to the end without an event loop.

A step that awaits only this port says so (``loop_free``, see
:func:`promoter.steps.base.loop_free_of`); the runner drives a Promotion without a loop only when
every one of its steps does, and runs it under ``asyncio.run`` with :class:`LoopIo` otherwise.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import weakref
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from promoter.records import record

if TYPE_CHECKING:  # asyncio itself loads with LoopIo's first call
    import asyncio

T = TypeVar("T")


@record
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
        import asyncio

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
        import asyncio

        return await asyncio.to_thread(fn, *args)

    async def sleep(self, seconds: float) -> None:
        import asyncio

        await asyncio.sleep(seconds)

    def lock(self, key: str) -> contextlib.AbstractAsyncContextManager[None]:
        import asyncio

        locks = _LOOP_LOCKS.setdefault(asyncio.get_running_loop(), {})
        return locks.setdefault(key, asyncio.Lock())


# Locks per event loop (a test suite runs many loops in one process; a lock is bound to one).
_LOOP_LOCKS: weakref.WeakKeyDictionary[Any, dict[str, asyncio.Lock]] = weakref.WeakKeyDictionary()


class BlockingIo:
    """The port done in place, for :func:`drive` (the local runner: one Promotion, no loop).

    ``while_waiting``: work to do in the time the first processes run (the runner imports the
    later steps' modules while git clones): done in this thread, after the child has started,
    so the child runs on another core meanwhile. Its output waits in the pipes until then.
    """

    def __init__(self, while_waiting: Sequence[Callable[[], object]] = ()) -> None:
        self._while_waiting = list(while_waiting)

    async def run_process(
        self,
        args: Sequence[str],
        *,
        cwd: Path,
        env: dict[str, str] | None,
        stdin: bytes | None,
        time_limit: float,
    ) -> ProcessResult:
        # Blocking on purpose: BlockingIo is for drive(), where nothing else could run.
        proc = subprocess.Popen(  # noqa: ASYNC220
            list(args),
            cwd=str(cwd),
            env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            while self._while_waiting:
                self._while_waiting.pop(0)()
            out, err = proc.communicate(stdin, timeout=time_limit)
        except subprocess.TimeoutExpired:
            raise TimeoutError from None
        finally:
            # Timed out, or Ctrl-C (KeyboardInterrupt): the child is in a session of its own,
            # so the terminal's signal never reached it; end it here.
            if proc.returncode is None:
                kill_group(proc.pid)
                proc.kill()
                proc.wait()
        return ProcessResult(proc.returncode, out, err)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return fn(*args)

    async def sleep(self, seconds: float) -> None:
        time.sleep(seconds)  # noqa: ASYNC251 (see run_process)

    def lock(self, key: str) -> contextlib.AbstractAsyncContextManager[None]:
        return _NO_LOCK


class _NoLock(contextlib.AbstractAsyncContextManager[None]):
    async def __aexit__(self, *exc: object) -> None:
        return None


_NO_LOCK = _NoLock()
LOOP_IO = LoopIo()


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end without an event loop.

    Possible because everything it awaits is already done (:class:`BlockingIo`, and steps that
    await nothing else): the first ``send`` runs it through. Anything that does suspend is a
    step that should not have said it was ``loop_free``; it is closed and named.
    """
    try:
        suspended = coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError(f"a loop-free run awaited {suspended!r}, which needs an event loop")
