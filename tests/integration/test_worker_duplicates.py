"""Duplicates and late events are ignored and counted in the turn's snapshot, not dead-lettered:
the text and frames are as if each event had arrived once, in time (DESIGN section 5, invariant
5)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from worker_support import (
    PARTITIONS,
    SESSION,
    StartWorker,
    answer,
    event,
    keys_of,
    no_pending,
    snapshot,
    started_workers,
    texts,
    wait_state,
)

from terminus.events.inbound import InboundEvent, StreamClosed, TextDelta
from terminus.events.outbound import AgentMessageChunk
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.views import dead_letters, session_updates
from terminus.statemachines.states import TurnState
from tests.support.polling import until

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster


@pytest.fixture
async def workers(redis: Redis, prefix: str) -> AsyncIterator[StartWorker]:
    """Starts in-process workers; every one is stopped after the test."""
    async with started_workers(redis, prefix) as start:
        yield start


async def test_duplicates_and_late_events_are_ignored_and_counted_not_dead(
    redis: Redis, prefix: str, workers: StartWorker
) -> None:
    keys = keys_of(prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    events = answer("t-1")
    await producer.publish(events[:5])
    await producer.publish(events[2:5])  # the producer resends three events it was unsure of
    await producer.publish(events[5:])
    await workers()
    await wait_state(redis, prefix, "t-1", TurnState.FINISHED)
    late: list[InboundEvent] = [
        event(TextDelta, 7, "t-1", part_id="a", delta=" again"),
        event(StreamClosed, 8, "t-1"),
    ]
    await producer.publish(late)

    async def counted() -> bool:
        turn = await snapshot(redis, prefix, "t-1")
        return turn is not None and turn.ignored == {"duplicate": 3, "late": 2}

    await until(counted, "the duplicates and late events to be counted")
    await until(lambda: no_pending(redis, keys), "every entry to be acked")
    assert await texts(redis, prefix) == {"t-1": "Hello"}
    frames = await session_updates(redis, SESSION, partitions=PARTITIONS, prefix=prefix)
    assert [f.delta for f in frames if isinstance(f, AgentMessageChunk)] == ["Hel", "lo"]
    assert await dead_letters(redis, partitions=PARTITIONS, prefix=prefix) == []
