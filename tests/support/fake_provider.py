"""A provider's HTTP endpoint on a loopback port, answering each request with the next scripted
reply: a status, headers and a body, sent whole, cut after some bytes, or held open.

A raw asyncio server rather than an ASGI app, because the replies that matter are the ones an
HTTP framework will not send: a body closed cleanly mid-line (no length, no chunking, so the
client cannot tell the cut from an end), and a stream that stops sending without closing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field

from terminus.service.redis.embedded import free_port

REASONS = {
    200: "OK",
    402: "Payment Required",
    429: "Too Many Requests",
    503: "Service Unavailable",
    529: "Overloaded",
}


@dataclass
class Reply:
    """One scripted answer. `cut_at`: close the connection after that many body bytes;
    `hold`: send the body, then keep the connection open without ending it. `parts`, if set, is
    the body instead, made as it is sent (a body too large to hold), until the client leaves."""

    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    cut_at: int | None = None
    hold: bool = False
    chunk: int = 64  # body bytes per write, so the client reads the stream in pieces
    parts: Iterable[bytes] | None = None


@dataclass
class FakeProvider:
    """Serves `replies` in order, one per request; records every request's body."""

    replies: list[Reply]
    requests: list[bytes] = field(default_factory=list)
    heads: list[bytes] = field(default_factory=list)  # each request's line and headers
    url: str = ""
    _held: list[asyncio.StreamWriter] = field(default_factory=list)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.heads.append(head)
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        self.requests.append(await reader.readexactly(length))
        reply = self.replies.pop(0) if self.replies else Reply(500, b'{"error":"no reply left"}')
        lines = [f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, 'Status')}"]
        lines += [f"{k}: {v}" for k, v in reply.headers.items()]
        lines += ["Connection: close", "", ""]
        writer.write("\r\n".join(lines).encode())
        body = reply.body if reply.cut_at is None else reply.body[: reply.cut_at]
        try:
            for part in reply.parts or ():
                writer.write(part)
                await writer.drain()
            for start in range(0, len(body), reply.chunk):
                writer.write(body[start : start + reply.chunk])
                await writer.drain()
                await asyncio.sleep(0.001)
        except ConnectionError:
            return  # the client went away (a runner whose attempt the workers had decided)
        if reply.hold:
            self._held.append(writer)
            return
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()

    def release(self) -> None:
        """Close the connections held open."""
        for writer in self._held:
            writer.close()
        self._held.clear()


@contextlib.asynccontextmanager
async def fake_provider(replies: list[Reply]) -> AsyncIterator[FakeProvider]:
    """Serve the replies until the block ends; `url` is the server's base URL."""
    provider = FakeProvider(list(replies))
    port = free_port()
    server = await asyncio.start_server(provider._serve, "127.0.0.1", port)
    provider.url = f"http://127.0.0.1:{port}"
    try:
        yield provider
    finally:
        provider.release()
        server.close()
        await server.wait_closed()
