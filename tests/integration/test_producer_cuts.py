"""A provider stream cut anywhere, published through the producer SDK to a real worker: the attempt
is discarded and retried as soon as the SDK closes it, never by the stall timer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import pytest
from redis.asyncio import Redis
from serving import running_worker

from terminus.events.outbound import AgentMessageChunk, AttemptDiscarded, Retrying, TurnFinished
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.subscriber import RedisSource, Update, subscribe
from terminus.service.settings import Settings

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

PARTITIONS: Final = 4
FIXTURES = Path(__file__).parent.parent / "fixtures" / "provider-streams"
TEXT = FIXTURES / "anthropic/text-recorded-fantasy.sse"
BEDROCK = FIXTURES / "bedrock/anthropic-invoke-with-response-stream-recorded-fantasy.eventstream"
# Far beyond the test's own deadline: a retry seen at all was not the stall timer's.
STALL_MS: Final = 600_000


@pytest.fixture
async def producer(redis: Redis, prefix: str) -> AsyncIterator[Producer]:
    settings = Settings(
        prefix=prefix, partitions=PARTITIONS, block_ms=100, stall_timeout_ms=STALL_MS
    )
    async with running_worker(redis, settings):
        yield Producer(redis, partitions=PARTITIONS, prefix=prefix)


def mid_line_cut(raw: bytes) -> bytes:
    """The body cut inside the data line of its `message_delta`, before any terminal."""
    at = raw.index(b'"message_delta"')
    return raw[: at + 5]


def mid_frame_cut(raw: bytes) -> bytes:
    """The body cut in half, inside one of its event stream frames."""
    return raw[: len(raw) // 2]


async def updates_until(redis: Redis, prefix: str, session: str, turn_id: str) -> list[Update]:
    source = RedisSource(redis, partitions=PARTITIONS, prefix=prefix)
    seen: list[Update] = []
    async with asyncio.timeout(30):
        async for update in subscribe(session, source=source, until_turn=turn_id):
            seen.append(update)
    return seen


async def publish_cut_then_whole(
    producer: Producer, session: str, provider: str, cut: bytes, whole: bytes, as_text: bool
) -> None:
    turn = producer.turn(session, "t-1")
    await turn.start()
    for attempt, body in ((1, cut), (2, whole)):
        await turn.start_attempt(attempt=attempt, provider=provider)
        if as_text:
            await turn.feed_sse(body.decode())
        else:
            for start in range(0, len(body), 7):  # small chunks split lines and characters
                await turn.feed_bytes(body[start : start + 7])
        await turn.close_attempt()


@pytest.mark.parametrize(
    ("provider", "path", "cut", "as_text"),
    [
        pytest.param("anthropic", TEXT, mid_line_cut, True, id="sse-text-mid-line"),
        pytest.param("anthropic", TEXT, mid_line_cut, False, id="sse-bytes-mid-line"),
        pytest.param("bedrock", BEDROCK, mid_frame_cut, False, id="eventstream-mid-frame"),
    ],
)
async def test_a_cut_attempt_is_discarded_and_retried_when_the_sdk_closes_it(
    redis: Redis,
    prefix: str,
    producer: Producer,
    provider: str,
    path: Path,
    cut: object,
    as_text: bool,
) -> None:
    raw = path.read_bytes()
    assert callable(cut)
    session = f"s-{provider}-{as_text}"
    await publish_cut_then_whole(producer, session, provider, cut(raw), raw, as_text)
    frames = [u.frame for u in await updates_until(redis, prefix, session, "t-1")]
    discarded = [f for f in frames if isinstance(f, AttemptDiscarded)]
    retrying = [f for f in frames if isinstance(f, Retrying)]
    assert [(d.attempt, d.reason) for d in discarded] == [(1, "missing_terminal")]
    assert [(r.attempt, r.reason) for r in retrying] == [(2, "missing_terminal")]
    assert frames.index(discarded[0]) < frames.index(retrying[0])
    assert isinstance(frames[-1], TurnFinished)
    kept = [f for f in frames if isinstance(f, AgentMessageChunk) and f.attempt == 2]
    assert kept, "the second attempt's text reached the session"
