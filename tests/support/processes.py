"""The server as a child process: ``python -m app serve`` started, waited for, killed.

Shared by the tests that need a real process boundary (a SIGKILL, a restart, two replicas, the
cluster suite's takeover), so each starts and cleans up its servers the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[2]

# The seeded projects subscribe to public images (examples/kargo-demo): a test server never
# polls a registry unless its test asks for discovery (and gives it a local one).
QUIET = {"LONGSHOREMAN_WAREHOUSE_DISCOVERY": "false"}


@dataclass
class ServerProcess:
    """One ``python -m app serve`` child in its own process group.

    The group matters: a SIGKILLed pod takes its git subprocesses with it, and a git left
    running after its parent died would finish work the test means to interrupt.
    """

    proc: asyncio.subprocess.Process
    log_path: Path
    url: str = ""

    @classmethod
    async def start(
        cls,
        env: Mapping[str, str],
        log_path: Path,
        started: list[ServerProcess],
        *,
        ready: bool = True,
        within: float = 30,
    ) -> ServerProcess:
        """Spawn a server (added to ``started`` at once, so it is cleaned up whatever happens)
        and wait until it serves (and, with ``ready``, until /readyz says so)."""
        with log_path.open("wb") as log:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "app", "serve", "--port", "0",
                cwd=ROOT, env={**os.environ, **QUIET, "PYTHONPATH": str(ROOT), **env},
                stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True,
            )  # fmt: skip
        server = cls(proc, log_path)
        started.append(server)
        await server._wait_serving(within)
        if ready:
            await server.wait_ready(within)
        return server

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def _wait_serving(self, within: float) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            match = re.search(r"serving .* on (http://\S+)", self.log)
            if match:
                self.url = match.group(1)
                return
            if self.proc.returncode is not None:
                raise AssertionError(f"server exited ({self.proc.returncode}):\n{self.log}")
            await asyncio.sleep(0.02)
        raise AssertionError(f"server did not start serving within {within}s:\n{self.log}")

    async def get(self, path: str) -> tuple[int, str]:
        async with aiohttp.ClientSession() as http, http.get(self.url + path) as response:
            return response.status, await response.text()

    async def wait_ready(self, within: float = 30) -> None:
        deadline = time.monotonic() + within
        status, text = 0, ""
        while time.monotonic() < deadline:
            status, text = await self.get("/readyz")
            if status == 200:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"/readyz still {status} {text!r} after {within}s:\n{self.log}")

    def kill(self) -> None:
        """SIGKILL the whole group, at once (callable from inside an API request handler)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    async def stop(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.kill()
        await self.proc.wait()


@contextlib.asynccontextmanager
async def server_processes() -> AsyncIterator[list[ServerProcess]]:
    """Collects started servers and makes sure none outlives the test."""
    started: list[ServerProcess] = []
    try:
        yield started
    finally:
        for server in started:
            server.kill()
            await server.proc.wait()
