"""Lanes: with any number of pumps in a worker, each partition is stepped by its lane and every
turn is applied exactly, frames and messages as folding the events gives them
(service/runtime/worker.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pump_support import (
    PARTITIONS,
    StartWorker,
    answer,
    by_id,
    interleaved,
    pending,
    session_in,
    simulated,
    snapshot,
    started_workers,
    uncursored,
)
from redis.asyncio import Redis

from terminus.service.keys import Keys, partition_of
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.views import dead_letters, session_messages, session_updates
from terminus.statemachines.states import TurnState
from tests.support.polling import until

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster


@pytest.fixture
async def workers(redis: Redis, prefix: str) -> AsyncIterator[StartWorker]:
    """Starts in-process workers; every one still running is stopped after the test."""
    async with started_workers(redis, prefix) as start:
        yield start


@pytest.mark.parametrize("lanes", [1, 3])
async def test_every_lane_count_applies_every_turn_exactly(
    redis: Redis, admin_redis: Redis, prefix: str, workers: StartWorker, lanes: int
) -> None:
    sessions = [session_in(p, n) for p in range(PARTITIONS) for n in range(2)]
    scripts = [
        answer(s, f"{s}-t{t}", 4 + 3 * t, cut=2 if (i + t) % 3 == 0 else None)
        for i, s in enumerate(sessions)
        for t in range(2)
    ]
    events = interleaved(scripts)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    await producer.publish(events[: len(events) // 2])
    worker = await workers("worker-a", lanes=lanes)
    await producer.publish(events[len(events) // 2 :])

    async def all_finished() -> bool:
        for script in scripts:
            keys = Keys(partition_of(script.session_id, PARTITIONS), prefix)
            turn = await snapshot(redis, keys, script.turn_id)
            if turn is None or turn.state is not TurnState.FINISHED:
                return False
        return True

    await until(all_finished, "every turn to finish")
    assert len(worker.pumps) == lanes
    assert {p: n for n, pump in enumerate(worker.pumps) for p in pump.owners} == {
        p: p % lanes for p in range(PARTITIONS)
    }
    expected = simulated(events)
    for session in sessions:
        frames = await session_updates(redis, session, partitions=PARTITIONS, prefix=prefix)
        assert uncursored(frames) == expected[session].frames
        messages = await session_messages(redis, session, partitions=PARTITIONS, prefix=prefix)
        assert by_id(messages) == by_id(expected[session].messages)
    for p in range(PARTITIONS):
        assert await pending(redis, Keys(p, prefix)) == 0
        assert await admin_redis.zcard(Keys(p, prefix).open_turns) == 0
    assert await dead_letters(redis, partitions=PARTITIONS, prefix=prefix) == []
