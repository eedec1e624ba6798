"""The subscriber SDK over a real Redis, a running worker and the gateway served by uvicorn:
every frame once and in order across disconnects, the live view, errors (DESIGN sections 4, 7).

Each test that reads runs over both sources: `RedisSource` (XREAD) and `GatewaySource` (SSE).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Final, NamedTuple, cast
from urllib.parse import urlsplit

import httpx
import pytest
from backends import as_user, at_port
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from serving import running_worker, serving
from support.polling import until

from terminus.events.codec import encode_json
from terminus.events.inbound import (
    FinishStep,
    InboundEvent,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolResult,
    Usage,
)
from terminus.events.outbound import AgentMessageChunk, AttemptDiscarded, SessionUpdate, TextPart
from terminus.service.gateway.hub import Delivery, Hub
from terminus.service.gateway.routes import Limits, create_gateway
from terminus.service.gateway.tokens import mint
from terminus.service.keys import FIELD, keys_for_session
from terminus.service.redis.embedded import free_port
from terminus.service.redis.replies import text
from terminus.service.sdk.gateway_source import retry_after
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.subscriber import (
    Backoff,
    GatewaySource,
    LiveSession,
    RedisSource,
    Source,
    SourceUnavailable,
    SubscriptionDenied,
    Update,
    subscribe,
)
from terminus.service.sdk.views import session_messages, session_updates
from terminus.service.settings import Settings

PARTITIONS: Final = 4
SECRET: Final = b"subscriber-test-secret-0123456789"
DEADLINE_S: Final = 30.0
KINDS: Final = ("redis", "gateway")


class Served(NamedTuple):
    base: str
    redis: Redis
    settings: Settings
    producer: Producer


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
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=200)
    limits = Limits(stream_opens=1000, stream_window_s=60.0)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    app = create_gateway(redis, settings, SECRET, limits)
    async with running_worker(redis, settings), serving(app) as base:
        yield Served(base, redis, settings, producer)


def token(session: str, ttl: int = 600) -> str:
    return mint(SECRET, session, int(time.time()) + ttl)


def source_of(kind: str, served: Served, session: str, base: str | None = None) -> Source:
    if kind == "redis":
        return RedisSource(served.redis, PARTITIONS, served.settings.prefix, block_ms=200)
    return GatewaySource(base or served.base, token(session))


async def publish_tool_turn(producer: Producer, session: str, turn_id: str, pause: float) -> None:
    """Step 1: text and a tool call; step 2: attempt 1 cut by EOF, attempt 2 finished. Every
    text part is called "p0", so only (step, attempt, part) tells them apart."""
    turn = producer.turn(session, turn_id)

    def text(word: str, n: int) -> list[InboundEvent]:
        deltas: list[InboundEvent] = [stamp(TextDelta, delta=f"{word}{i} ") for i in range(n)]
        return [stamp(TextStart), *deltas]

    def stamp(cls: type[InboundEvent], **fields: object) -> InboundEvent:
        part = {"part_id": "p0"} if cls in (TextStart, TextDelta, TextEnd) else {}
        return cls(session_id=session, turn_id=turn_id, seq=-1, **part, **fields)  # type: ignore[arg-type]

    async def send(events: list[InboundEvent]) -> None:
        for start in range(0, len(events), 4):
            await turn.add(events[start : start + 4])
            await asyncio.sleep(pause)

    await turn.start()
    await turn.start_attempt(provider="p", model="m")
    tool = ToolCall(session_id=session, turn_id=turn_id, seq=-1, tool_call_id="c1",
                    tool_name="lookup", input={"q": 1})  # fmt: skip
    await send(
        [*text("first", 12), stamp(TextEnd), tool, stamp(FinishStep, finish_reason="tool-calls")]
    )
    await turn.emit(ToolResult, tool_call_id="c1", output="42")
    await turn.start_attempt(step=2, attempt=1, provider="p", model="m")
    await send(text("lost", 16))
    await turn.close_attempt()
    await turn.start_attempt(step=2, attempt=2, provider="p", model="m")
    usage = Usage(output_tokens=20)
    await send(
        [*text("kept", 20), stamp(TextEnd), stamp(FinishStep, finish_reason="stop", usage=usage)]
    )
    await turn.close_attempt()


async def stored(served: Served, session: str) -> list[SessionUpdate]:
    settings = served.settings
    return await session_updates(
        served.redis, session, partitions=settings.partitions, prefix=settings.prefix
    )


def frames(updates: list[Update]) -> list[SessionUpdate]:
    assert all(u.frame.cursor == u.cursor for u in updates)
    return [u.frame for u in updates]


async def collect(updates: AsyncIterator[Update], limit: int | None = None) -> list[Update]:
    got: list[Update] = []
    async with asyncio.timeout(DEADLINE_S):
        async for update in updates:
            got.append(update)
            if limit is not None and len(got) >= limit:
                break
    return got


async def persisted_text(served: Served, session: str, turn_id: str) -> str:
    settings = served.settings
    found = await session_messages(
        served.redis, session, partitions=settings.partitions, prefix=settings.prefix
    )
    (message,) = [m for m in found if m.turn_id == turn_id]
    return "".join(p.text for p in message.parts if isinstance(p, TextPart))


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


@pytest.mark.parametrize("kind", KINDS)
async def test_the_live_view_never_shows_a_discarded_attempt(served: Served, kind: str) -> None:
    source = source_of(kind, served, "s-4")
    load = asyncio.create_task(publish_tool_turn(served.producer, "s-4", "t-4", pause=0.005))
    view = LiveSession()
    chunks: list[tuple[int, int, str]] = []  # step, attempt, delta
    gone: set[tuple[int, int]] = set()
    async with asyncio.timeout(DEADLINE_S):
        async for update in subscribe("s-4", source=source, until_turn="t-4"):
            frame, before = update.frame, view.text("t-4")
            assert view.apply(update)
            assert not view.apply(update), "an update applied twice"
            if isinstance(frame, AgentMessageChunk):
                chunks.append((frame.step, frame.attempt, frame.delta))
            if isinstance(frame, AttemptDiscarded):
                assert "lost" in before, "the discarded attempt was never shown"
                gone.add((frame.step, frame.attempt))
            shown = view.text("t-4")
            assert shown == "".join(d for s, a, d in chunks if (s, a) not in gone)
            assert not gone or "lost" not in shown
    await load
    assert gone == {(2, 1)}
    final = view.text("t-4")
    assert final == await persisted_text(served, "s-4", "t-4")
    assert final.startswith("first0 ")
    assert "kept19 " in final
    turn = view.turns["t-4"]
    assert turn.status == "finished"
    assert [p.part_id for p in turn.parts.values() if p.kind == "tool"] == ["c1"]


async def test_bad_tokens_raise_without_retrying(served: Served) -> None:
    await publish_tool_turn(served.producer, "s-5", "t-5", pause=0)
    forged = GatewaySource(served.base, "v1.s-czU.99999999999.forged")
    foreign = GatewaySource(served.base, token("s-other"))
    started = time.monotonic()
    with pytest.raises(SubscriptionDenied) as unauthorized:
        await collect(subscribe("s-5", source=forged))
    with pytest.raises(SubscriptionDenied) as forbidden:
        await collect(subscribe("s-5", source=foreign))
    assert (unauthorized.value.status, forbidden.value.status) == (401, 403)
    assert forbidden.value.reason == "token is not for this session"
    assert time.monotonic() - started < 2


async def test_redis_credentials_and_acl_refusals_raise(
    served: Served, redis_url: str, admin_redis: Redis
) -> None:
    user = f"sub-{served.settings.prefix}"
    await admin_redis.acl_setuser(user, enabled=True, passwords=["+right-password"],
                                  commands=["+ping"], keys=[])  # fmt: skip
    clients = [
        Redis.from_url(as_user(redis_url, user, "wrong-password")),
        Redis.from_url(as_user(redis_url, user, "right-password")),
    ]
    try:
        for client in clients:
            source = RedisSource(client, PARTITIONS, served.settings.prefix)
            with pytest.raises(SubscriptionDenied):
                await collect(subscribe("s-6", source=source))
    finally:
        for client in clients:
            await client.aclose()
        await admin_redis.acl_deluser(user)


async def test_a_429_is_waited_out_for_its_retry_after(served: Served) -> None:
    await publish_tool_turn(served.producer, "s-7", "t-7", pause=0)
    await until(lambda: _finished(served, "s-7"), "the turn's end")
    answers: list[tuple[float, int, str | None]] = []

    async def record(response: httpx.Response) -> None:
        answers.append(
            (time.monotonic(), response.status_code, response.headers.get("retry-after"))
        )

    limits = Limits(stream_opens=1, stream_window_s=2.0)
    async with (
        serving(create_gateway(served.redis, served.settings, SECRET, limits)) as base,
        httpx.AsyncClient(event_hooks={"response": [record]}, timeout=DEADLINE_S) as client,
    ):
        source = GatewaySource(base, token("s-7"), client=client)
        first = await collect(subscribe("s-7", source=source, until_turn="t-7"), limit=5)
        rest = await collect(subscribe("s-7", first[-1].cursor, source=source, until_turn="t-7"))
    assert frames(first + rest) == await stored(served, "s-7")
    statuses = [status for _, status, _ in answers]
    assert statuses == [200, 429, 200]
    waited = answers[2][0] - answers[1][0]
    assert waited >= int(answers[1][2] or 0) - 0.05


async def test_a_source_down_for_longer_than_the_backoff_allows_raises() -> None:
    dead = Redis(host="127.0.0.1", port=free_port(), retry=Retry(NoBackoff(), 0))
    backoff = Backoff(initial_s=0.01, max_s=0.05, give_up_after_s=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(SourceUnavailable) as raised:
            await collect(subscribe("s-8", "5-0", source=RedisSource(dead), backoff=backoff))
    finally:
        await dead.aclose()
    assert raised.value.cursor == "5-0"
    assert 0.5 <= time.monotonic() - started < 3


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = 1_700_000_000.0
    assert retry_after("3", now) == 3.0
    assert retry_after(email.utils.formatdate(now + 7, usegmt=True), now) == 7.0
    assert retry_after(email.utils.formatdate(now - 7, usegmt=True), now) == 0.0
    assert retry_after("soon", now) is None
    assert retry_after(None, now) is None


async def _finished(served: Served, session: str) -> bool:
    kept = await stored(served, session)
    return bool(kept) and type(kept[-1]).__struct_config__.tag == "turn_finished"


async def test_the_hub_gives_a_late_joiner_its_backlog_before_newer_frames(
    redis: Redis, prefix: str
) -> None:
    """A subscriber joining behind the others while a read is in flight must not be offered
    that read, which starts after its cursor (it was, and every SSE resume under load lost the
    frames between the resume cursor and the hub's read position)."""
    key = keys_for_session("s-9", PARTITIONS, prefix).session("s-9")

    async def append(n: int) -> str:
        frame = AgentMessageChunk(session_id="s-9", turn_id="t-9", step=1, attempt=1,
                                  part_id="p0", delta=f"{n} ")  # fmt: skip
        return text(await redis.xadd(key, {FIELD: encode_json(frame)}))

    cursors = [await append(n) for n in range(5)]
    hub = Hub(redis, PARTITIONS, prefix)
    ahead = hub.subscribe("s-9")
    behind = hub.subscribe("s-9", cursors[0])
    try:
        assert [(await anext(ahead)).frame.cursor for _ in cursors] == cursors
        await asyncio.sleep(0.03)  # the hub now blocks in an XREAD after the last frame
        first = asyncio.ensure_future(anext(behind))
        await asyncio.sleep(0)  # `behind` joins while that read is in flight
        newer = await append(5)
        got = [(await first).frame.cursor]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2):
                while len(got) < 5:
                    got.append((await anext(behind)).frame.cursor)
        assert got == [*cursors[1:], newer]
    finally:
        # Closed first, as the gateway's streams are when their clients go.
        for stream in (behind, ahead):
            await cast(AsyncGenerator[Delivery, None], stream).aclose()
        await hub.close()
