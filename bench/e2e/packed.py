"""The latency run's producer: XADDs packed as RESP before the run, written raw while it runs.

On a 2-core machine the benchmark shares the cores with Redis and the worker it measures. Through
redis-py's pipeline, publishing costs about 15 µs of CPU per event (each command packed in
Python, each reply parsed and awaited), most of a core at half load: the benchmark then measured
its own queueing as much as terminus's. In production the producers run elsewhere. So the latency
run sends exactly the bytes `Producer.publish` would send (the same stream, field and encoding),
packed before the clock starts, on one connection with `CLIENT REPLY OFF`: a publish is one
socket write. The SDK's own cost is reported by the drain phase (`producer_events_per_s_*`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Final
from urllib.parse import unquote, urlparse

from terminus.events.codec import encode_event
from terminus.events.inbound import InboundEvent
from terminus.service.keys import FIELD, keys_for_session

SYNC_TIMEOUT_S: Final = 30.0


def resp(*parts: bytes) -> bytes:
    """One command in RESP, the form every Redis client sends."""
    head = b"*%d\r\n" % len(parts)
    return head + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


def xadd(stream: str, raw: bytes) -> bytes:
    return resp(b"XADD", stream.encode(), b"*", FIELD, raw)


class PackedPublisher:
    """Publishes pre-packed XADDs of `events` (by identity) on its own connection."""

    def __init__(
        self, url: str, events: Sequence[InboundEvent], stream_of: Callable[[str], str]
    ) -> None:
        self.url = url
        self.packed = {id(e): xadd(stream_of(e.session_id), encode_event(e)) for e in events}
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> PackedPublisher:
        url = urlparse(self.url)
        self.reader, self.writer = await asyncio.open_connection(url.hostname, url.port or 6379)
        if url.password is not None:
            user = (unquote(url.username).encode(),) if url.username else ()
            self.writer.write(resp(b"AUTH", *user, unquote(url.password).encode()))
            await self._expect_ok()
        self.writer.write(resp(b"SELECT", (url.path.strip("/") or "0").encode()))
        await self._expect_ok()
        self.writer.write(resp(b"CLIENT", b"REPLY", b"OFF"))
        return self

    async def __call__(self, events: Sequence[InboundEvent]) -> None:
        assert self.writer is not None
        self.writer.write(b"".join(self.packed[id(e)] for e in events))
        await self.writer.drain()

    async def __aexit__(self, *exc: object) -> None:
        """Replies back on, and one PING answered: every XADD before it was served."""
        assert self.writer is not None
        self.writer.write(resp(b"CLIENT", b"REPLY", b"ON") + resp(b"PING"))
        try:
            await asyncio.wait_for(self._expect_ok(), SYNC_TIMEOUT_S)
            await asyncio.wait_for(self._expect_line(b"+PONG"), SYNC_TIMEOUT_S)
        finally:
            self.writer.close()

    async def _expect_ok(self) -> None:
        await self._expect_line(b"+OK")

    async def _expect_line(self, want: bytes) -> None:
        assert self.reader is not None
        line = (await self.reader.readline()).rstrip(b"\r\n")
        if line != want:
            raise ConnectionError(f"Redis answered {line!r}, not {want!r}")


def to_inbound(partitions: int, prefix: str) -> Callable[[str], str]:
    """A session's inbound stream: where terminus's producers append."""
    return lambda session: keys_for_session(session, partitions, prefix).inbound


def to_session(partitions: int, prefix: str) -> Callable[[str], str]:
    """A session's update stream: where the baseline appends, with no worker in between."""
    return lambda session: keys_for_session(session, partitions, prefix).session(session)
