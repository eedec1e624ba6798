"""The subscriber SDK over a real Redis, a running worker and the gateway served by uvicorn:
every frame once and in order, from the start or a cursor, for a consumer that leaves and
comes back at random points, and across connections cut under it (DESIGN sections 4, 7).

Each test runs over both sources: `RedisSource` (XREAD) and `GatewaySource` (SSE).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest
from redis.asyncio import Redis
from subscriber_support import (
    KINDS,
    Served,
    collect,
    frames,
    publish_tool_turn,
    serve,
    source_of,
    stored,
)

from terminus.events.outbound import AttemptDiscarded
from terminus.service.sdk.subscriber import Backoff, Update, subscribe
from tests.support.backends import at_port


class CutProxy:
    """A TCP proxy to 127.0.0.1:`upstream` whose `cut()` closes every open connection, as a
    network failure or a restarting peer would; new connections are accepted as usual."""

    def __init__(self, upstream: int) -> None:
        self.upstream, self.port = upstream, 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> CutProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self.cut()

    def cut(self) -> int:
        """Abort every open connection; how many there were."""
        open_now = list(self._writers)
        for writer in open_now:
            writer.transport.abort()
        return len(open_now) // 2

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.transport.abort()


@pytest.fixture
async def served(redis: Redis, prefix: str) -> AsyncIterator[Served]:
    """A worker and the gateway on the test's prefix."""
    async with serve(redis, prefix) as running:
        yield running


@pytest.mark.parametrize("kind", KINDS)
async def test_the_updates_are_the_session_stream_in_order(served: Served, kind: str) -> None:
    await publish_tool_turn(served.producer, "s-1", "t-1a", pause=0)
    source = source_of(kind, served, "s-1")
    live = asyncio.create_task(collect(subscribe("s-1", source=source, until_turn="t-1b")))
    await publish_tool_turn(served.producer, "s-1", "t-1b", pause=0.005)
    got = await live
    kept = await stored(served, "s-1")
    assert frames(got) == kept
    assert sum(isinstance(f, AttemptDiscarded) for f in kept) == 2
    middle = got[len(got) // 2].cursor
    tail = await collect(subscribe("s-1", middle, source=source, until_turn="t-1b"))
    assert frames(tail) == kept[len(got) // 2 + 1 :]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_consumer_leaving_at_random_points_resumes_without_gap_or_duplicate(
    served: Served, kind: str
) -> None:
    source, rng = source_of(kind, served, "s-2"), random.Random(kind)
    load = asyncio.create_task(publish_tool_turn(served.producer, "s-2", "t-2", pause=0.01))
    got: list[Update] = []
    visits = 0
    while not got or got[-1].kind != "turn_finished":
        cursor = got[-1].cursor if got else None
        updates = subscribe("s-2", cursor, source=source, until_turn="t-2")
        got += await collect(updates, limit=rng.randint(1, 9))
        visits += 1
    await load
    assert frames(got) == await stored(served, "s-2")
    assert visits >= 5


@pytest.mark.parametrize("kind", KINDS)
async def test_the_sdk_resumes_by_itself_across_cut_connections(
    served: Served, kind: str, redis_url: str
) -> None:
    upstream = urlsplit(redis_url).port or 6379
    upstream = upstream if kind == "redis" else int(served.base.rsplit(":", 1)[1])
    async with CutProxy(upstream) as proxy:
        through = Redis.from_url(at_port(redis_url, proxy.port))  # TLS and user as `redis_url`
        served_through = served._replace(redis=through)
        source = source_of(kind, served_through, "s-3", f"http://127.0.0.1:{proxy.port}")
        backoff = Backoff(initial_s=0.01, max_s=0.1)
        updates = subscribe("s-3", source=source, until_turn="t-3", backoff=backoff)
        reading = asyncio.create_task(collect(updates))
        load = asyncio.create_task(publish_tool_turn(served.producer, "s-3", "t-3", pause=0.04))
        rng, severed = random.Random(3), 0
        while not reading.done():
            await asyncio.sleep(rng.uniform(0.05, 0.2))
            severed += bool(proxy.cut()) and not reading.done()
        got = await reading
        await load
        await through.aclose()
    assert frames(got) == await stored(served, "s-3")
    assert severed >= 3, "too few connections were cut while the subscriber read"
