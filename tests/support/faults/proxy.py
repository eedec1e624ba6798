"""A TCP proxy to a Redis that can blackhole connections: open, silent, then flowing again.

`blackhole(seconds)` silences every connection, old or new (new ones are accepted, as a kernel
would, but stay silent). `hold_next(marker, seconds)` silences only the connection on which the
client next sends bytes containing `marker`, as a network that delays one request past the
client's timeout. `lose_next_reply(marker)` passes the request carrying `marker` on to Redis and
drops the connection when the reply comes back, as a network cut after Redis ran a command and
before its reply arrived. Silenced, a connection reads and writes nothing in either direction: bytes
wait in buffers as on a partitioned network, and reach their peer once it heals.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Self


class _Link:
    """One proxied connection, whether bytes may flow on it, and whether its next reply is lost."""

    def __init__(self, flowing: bool) -> None:
        self.flowing = asyncio.Event()
        self.lose_reply = False
        if flowing:
            self.flowing.set()


class BlackholeProxy:
    """Forwards 127.0.0.1:`port` to 127.0.0.1:`upstream_port` until closed."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self.held = asyncio.Event()  # `hold_next` caught its connection
        self.delivered = asyncio.Event()  # and then passed the held request on to Redis
        self._caught: _Link | None = None
        self._silent = False
        self._marker: bytes | None = None
        self._lose_marker: bytes | None = None
        self.lost = asyncio.Event()  # `lose_next_reply` dropped its connection
        self._hold_s = 0.0
        self._links: set[_Link] = set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.close()
        for link in self._links:
            link.flowing.set()
        for writer in list(self._writers):
            writer.close()  # each pump then sees EOF or an error and ends
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def blackhole(self, seconds: float) -> None:
        """Forward nothing on any connection for `seconds`, keeping them all open; then resume."""
        self._silent = True
        for link in self._links:
            link.flowing.clear()
        try:
            await asyncio.sleep(seconds)
        finally:
            self._silent = False
            for link in self._links:
                link.flowing.set()

    def hold_next(self, marker: bytes, seconds: float) -> None:
        """Silence, for `seconds`, the connection that next carries `marker` to Redis."""
        self._marker, self._hold_s = marker, seconds

    def lose_next_reply(self, marker: bytes) -> None:
        """Let the next request carrying `marker` reach Redis; drop its connection on the reply."""
        self._lose_marker = marker

    def _catch(self, link: _Link, data: bytes) -> None:
        if self._lose_marker is not None and self._lose_marker in data:
            self._lose_marker, link.lose_reply = None, True
        if self._marker is None or self._marker not in data:
            return
        self._marker, self._caught = None, link
        link.flowing.clear()
        asyncio.get_running_loop().call_later(self._hold_s, link.flowing.set)
        self.held.set()

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        link = _Link(flowing=not self._silent)
        try:
            upstream_r, upstream_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            await _close(client_w)
            return
        self._links.add(link)
        self._writers.update((client_w, upstream_w))
        try:
            await asyncio.gather(
                self._pump(client_r, upstream_w, link, to_redis=True),
                self._pump(upstream_r, client_w, link, to_redis=False),
            )
        finally:
            self._tasks.discard(task)
            self._links.discard(link)
            for writer in (client_w, upstream_w):
                self._writers.discard(writer)
                await _close(writer)

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        link: _Link,
        to_redis: bool,
    ) -> None:
        try:
            while True:
                await link.flowing.wait()
                data = await reader.read(65536)
                if not data:
                    break
                if to_redis:
                    self._catch(link, data)
                elif link.lose_reply:
                    self.lost.set()
                    break  # the reply goes nowhere; `finally` closes both ends
                await link.flowing.wait()  # read just before the silence began: hold it too
                writer.write(data)
                await writer.drain()
                if to_redis and link is self._caught:
                    self.delivered.set()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError, OSError):
        await writer.wait_closed()
