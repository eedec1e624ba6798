"""The live view (`LiveSession`) never shows a discarded attempt: each update applies once, the
text shown is the kept attempts' deltas, and the final text is the persisted message's
(DESIGN section 7). Over both sources: `RedisSource` (XREAD) and `GatewaySource` (SSE)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from subscriber_support import (
    DEADLINE_S,
    KINDS,
    Served,
    publish_tool_turn,
    serve,
    source_of,
)

from terminus.events.outbound import AgentMessageChunk, AttemptDiscarded, TextPart
from terminus.service.sdk.subscriber import LiveSession, subscribe
from terminus.service.sdk.views import session_messages


@pytest.fixture
async def served(redis: Redis, prefix: str) -> AsyncIterator[Served]:
    """A worker and the gateway on the test's prefix."""
    async with serve(redis, prefix) as running:
        yield running


async def persisted_text(served: Served, session: str, turn_id: str) -> str:
    settings = served.settings
    found = await session_messages(
        served.redis, session, partitions=settings.partitions, prefix=settings.prefix
    )
    (message,) = [m for m in found if m.turn_id == turn_id]
    return "".join(p.text for p in message.parts if isinstance(p, TextPart))


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
