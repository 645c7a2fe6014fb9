"""How steps and the engine wait on the world: child processes, blocking calls, pauses, locks.

Steps are ``async`` so the server can run many Promotions on one event loop. The local runner
runs one Promotion, and for it the event loop is pure cost: importing asyncio alone takes longer
than the git commands of a small Promotion (``bench/bench_runner.py``). So steps do not call
asyncio themselves; they await this port (``ctx.services.io``), which has two implementations:

- :class:`LoopIo`, the server's (and the default): asyncio subprocesses, ``to_thread``, timers
  and per-loop locks. asyncio is imported on first use, never at import time.
- :class:`BlockingIo`, the local runner's: the same calls done in place (a child process waited
  for, a direct call, ``time.sleep``, no lock: one Promotion at a time). Every awaitable it
  returns is already done, so :func:`drive` runs a whole Promotion's coroutine to the end
  without an event loop. Its children start with ``os.posix_spawn`` where only one thread runs
  (the command line), with :mod:`subprocess` elsewhere: that module, with threading, selectors
  and locale, is a tenth of what the runner's imports cost (``bench/bench_runner.py``).

A step that awaits only this port says so (``loop_free``, see
:func:`promoter.steps.base.loop_free_of`); the runner drives a Promotion without a loop only when
every one of its steps does, and runs it under ``asyncio.run`` with :class:`LoopIo` otherwise.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path

from promoter.lean import TYPE_CHECKING, Protocol
from promoter.records import record

if TYPE_CHECKING:  # asyncio itself loads with LoopIo's first call
    import asyncio
    import weakref
    from typing import Any, TypeVar

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


# CPython's signal module is _signal plus enums of its constants: the constant is all we need.
if TYPE_CHECKING:
    from signal import SIGKILL
else:
    try:
        from _signal import SIGKILL
    except ImportError:  # another implementation
        from signal import SIGKILL


def kill_group(pid: int) -> None:
    """SIGKILL the session led by ``pid`` (a child and whatever it started), if still there."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, SIGKILL)


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

        global _LOOP_LOCKS
        if _LOOP_LOCKS is None:
            import weakref  # asyncio has loaded it already; the local runner never does

            _LOOP_LOCKS = weakref.WeakKeyDictionary()
        locks = _LOOP_LOCKS.setdefault(asyncio.get_running_loop(), {})
        return locks.setdefault(key, asyncio.Lock())


# Locks per event loop (a test suite runs many loops in one process; a lock is bound to one).
_LOOP_LOCKS: weakref.WeakKeyDictionary[Any, dict[str, asyncio.Lock]] | None = None


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
        run = _run_spawned if _one_thread() else _run_subprocess
        return run(list(args), str(cwd), env, stdin, time_limit, self._while_waiting)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return fn(*args)

    async def sleep(self, seconds: float) -> None:
        time.sleep(seconds)  # noqa: ASYNC251 (see run_process)

    def lock(self, key: str) -> contextlib.AbstractAsyncContextManager[None]:
        return _NO_LOCK


def _one_thread() -> bool:
    """Whether this process runs one thread only (no module that starts threads is loaded,
    or threading says so): then the parent may change its directory for a spawn."""
    threading = sys.modules.get("threading")
    return threading is None or threading.active_count() == 1


def _run_subprocess(
    args: list[str],
    cwd: str,
    env: dict[str, str] | None,
    stdin: bytes | None,
    time_limit: float,
    while_waiting: list[Callable[[], object]],
) -> ProcessResult:
    import subprocess

    proc = subprocess.Popen(
        args,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        while while_waiting:
            while_waiting.pop(0)()
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


def _executable(name: str, env: dict[str, str] | None) -> str:
    """The program ``name`` as subprocess finds it: on the child's ``PATH`` unless it names a
    directory. ``FileNotFoundError`` (an ``OSError``, as subprocess raises) when missing."""
    if os.path.dirname(name):
        return name
    for directory in os.get_exec_path(env):
        path = os.path.join(directory, name)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    raise FileNotFoundError(2, "No such file or directory", name)


def _run_spawned(
    args: list[str],
    cwd: str,
    env: dict[str, str] | None,
    stdin: bytes | None,
    time_limit: float,
    while_waiting: list[Callable[[], object]],
) -> ProcessResult:
    """:func:`_run_subprocess`'s contract with ``os.posix_spawn`` and a poll loop."""
    deadline = time.monotonic() + time_limit
    program = _executable(args[0], env)
    # Every descriptor Python opens is close-on-exec, ours here too: the child gets what the
    # file actions give it, and nothing else.
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe() if stdin is not None else (-1, -1)
    actions: list[tuple[Any, ...]] = [
        (os.POSIX_SPAWN_DUP2, in_r, 0)
        if stdin is not None
        else (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, out_w, 1),
        (os.POSIX_SPAWN_DUP2, err_w, 2),
    ]
    pid = None
    try:
        # posix_spawn cannot give the child another directory (Python 3.11 has no chdir
        # action): the parent goes there and back around it, which only one thread may do.
        here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.chdir(cwd)
            try:
                pid = os.posix_spawn(
                    program,
                    args,
                    os.environ if env is None else env,
                    file_actions=actions,
                    setsid=True,
                )
            finally:
                os.fchdir(here)
        finally:
            os.close(here)
        for fd in (out_w, err_w, in_r):
            if fd >= 0:
                os.close(fd)
        out_w = err_w = in_r = -1
        while while_waiting:
            while_waiting.pop(0)()
        to_child, in_w = in_w, -1  # _communicate closes it
        out, err = _communicate(out_r, err_r, to_child, stdin or b"", deadline)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        pid = None
        return ProcessResult(code, out, err)
    finally:
        for fd in (out_r, out_w, err_r, err_w, in_r, in_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        # Timed out, or Ctrl-C (KeyboardInterrupt): the child is in a session of its own,
        # so the terminal's signal never reached it; end it here.
        if pid is not None:
            kill_group(pid)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _communicate(
    out_r: int, err_r: int, in_w: int, data: bytes, deadline: float
) -> tuple[bytes, bytes]:
    """Write ``data`` to ``in_w`` (-1: no input) while reading ``out_r`` and ``err_r`` to
    their end, as ``Popen.communicate`` does; ``TimeoutError`` past ``deadline``. ``in_w`` is
    closed when written, or on the way out."""
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    poller = select.poll()
    for fd in chunks:
        poller.register(fd, select.POLLIN)
    offset = 0
    if in_w >= 0:
        if data:
            os.set_blocking(in_w, False)
            poller.register(in_w, select.POLLOUT)
        else:
            os.close(in_w)
            in_w = -1
    try:
        reading = len(chunks)
        while reading or in_w >= 0:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            for fd, event in poller.poll(left * 1000):
                if fd == in_w:
                    if event & select.POLLOUT:
                        try:
                            offset += os.write(in_w, data[offset : offset + 65536])
                        except BrokenPipeError:  # the child stopped reading: so be it
                            offset = len(data)
                    if offset >= len(data) or event & (select.POLLERR | select.POLLHUP):
                        poller.unregister(in_w)
                        os.close(in_w)
                        in_w = -1
                    continue
                block = os.read(fd, 65536)
                if block:
                    chunks[fd].append(block)
                else:
                    poller.unregister(fd)
                    reading -= 1
    finally:
        if in_w >= 0:
            os.close(in_w)
    return b"".join(chunks[out_r]), b"".join(chunks[err_r])


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
