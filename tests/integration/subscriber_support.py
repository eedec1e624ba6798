"""What the subscriber tests share: a worker and the gateway served by uvicorn on the test's
prefix, a source of either kind (`RedisSource`, XREAD, or `GatewaySource`, SSE), a two-step turn
with a discarded attempt published in bursts, and collecting what a subscription yields."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Final, NamedTuple

from redis.asyncio import Redis
from serving import running_worker, serving

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
from terminus.events.outbound import SessionUpdate
from terminus.service.gateway.routes import Limits, create_gateway
from terminus.service.gateway.tokens import mint
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.subscriber import GatewaySource, RedisSource, Source, Update
from terminus.service.sdk.views import session_updates
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


@contextlib.asynccontextmanager
async def serve(redis: Redis, prefix: str) -> AsyncIterator[Served]:
    """A worker and the gateway on `prefix`, until the block ends."""
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
    tool = ToolCall(
        session_id=session,
        turn_id=turn_id,
        seq=-1,
        tool_call_id="c1",
        tool_name="lookup",
        input={"q": 1},
    )
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
