"""A TCP proxy on 127.0.0.1 whose connections a test can cut, like a network partition.

    async with tcp_proxy("https://127.0.0.1:6443") as proxy:
        client.configuration.host = proxy.url_for("https://127.0.0.1:6443")
        proxy.cut()      # every open connection is reset; new ones are refused ...
        proxy.resume()   # ... until now

It forwards bytes and understands nothing, so TLS passes through untouched and the same proxy
serves the emulator (HTTP) and kube-apiserver (HTTPS).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit


class TcpProxy:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or (443 if parts.scheme == "https" else 80)
        self.port = 0
        self.open = True
        self._writers: set[asyncio.StreamWriter] = set()
        self.connections = 0

    def url_for(self, url: str) -> str:
        return f"{urlsplit(url).scheme}://127.0.0.1:{self.port}"

    def cut(self) -> None:
        """Reset every open connection and refuse new ones until ``resume()``."""
        self.open = False
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def resume(self) -> None:
        self.open = True

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.open:
            writer.transport.abort()
            return
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(
                self.upstream_host, self.upstream_port
            )
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            self._writers.discard(writer)
            self._writers.discard(up_writer)


@asynccontextmanager
async def tcp_proxy(upstream: str) -> AsyncIterator[TcpProxy]:
    proxy = TcpProxy(upstream)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
    proxy.port = server.sockets[0].getsockname()[1]
    try:
        yield proxy
    finally:
        proxy.cut()
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2)
