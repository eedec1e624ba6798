"""A turn taken over mid-stream, from a worker stopped or crashed, continues from its stored
tail and ends with its whole text, stored whole with no tail left (service/runtime/owner.py,
service/fold/snapshots.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from functools import partial

import pytest
from pump_support import (
    PARTITIONS,
    SESSION,
    StartWorker,
    answer,
    as_str,
    chunks,
    message_text,
    settings_for,
    simulated,
    snapshot,
    started_workers,
    text_of,
    uncursored,
    words,
)
from redis.asyncio import Redis

from terminus.service.keys import Keys, partition_of
from terminus.service.runtime.worker import Worker
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.views import dead_letters, session_updates
from terminus.statemachines.states import TurnState
from tests.support.polling import until

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster


@pytest.fixture
async def workers(redis: Redis, prefix: str) -> AsyncIterator[StartWorker]:
    """Starts in-process workers; every one still running is stopped after the test."""
    async with started_workers(redis, prefix) as start:
        yield start


@pytest.mark.parametrize("first_worker_ends", ["stopped", "crashed"])
async def test_a_turn_taken_over_mid_stream_ends_with_its_whole_text(
    redis: Redis, admin_redis: Redis, prefix: str, workers: StartWorker, first_worker_ends: str
) -> None:
    keys = Keys(partition_of(SESSION, PARTITIONS), prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    script = answer(SESSION, "t-1", 9)
    text = words("t-1", 9)
    opened = len(script.events) - len(text) - 2  # up to the text-start
    delta_events = script.events[opened : opened + len(text)]

    a = Worker(redis, settings_for(prefix), "worker-a")
    running_a = asyncio.create_task(a.run())
    await producer.publish(script.events[:opened])
    for n in (3, 6):  # two batches at least: the tail is written, then appended to
        await producer.publish(delta_events[n - 3 : n])
        await until(partial(_chunks_are, redis, prefix, n), f"{n} deltas to be committed")
    assert await text_of(redis, keys, "t-1") == "".join(text[:6])
    base = await snapshot(redis, keys, "t-1")
    assert base is not None
    assert base.current is not None
    assert base.current.texts["a"].chunks == [], "the text so far is in the tail alone"

    if first_worker_ends == "stopped":
        await a.stop()
        await running_a
        assert await redis.get(keys.lease) is None
    else:  # the task dies: no last commit, no release; the lease and heartbeat expire
        running_a.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running_a

    b = await workers("worker-b")
    await producer.publish(delta_events[6:])
    await until(lambda: _chunks_are(redis, prefix, 9), "worker-b to commit the last deltas")
    assert await text_of(redis, keys, "t-1") == "".join(text)
    await producer.publish(script.events[opened + len(text) :])

    async def finished() -> bool:
        turn = await snapshot(redis, keys, "t-1")
        return turn is not None and turn.state is TurnState.FINISHED

    await until(finished, "t-1 to finish")
    assert keys.partition in b.partitions
    assert as_str(await redis.get(keys.lease)).startswith("worker-b:")
    assert await message_text(redis, prefix, SESSION, "t-1") == "".join(text)
    assert await admin_redis.exists(keys.tail("t-1")) == 0, "a final turn keeps no tail"
    final = await snapshot(redis, keys, "t-1")
    assert final is not None
    assert final.current is not None
    assert "".join(final.current.texts["a"].chunks) == "".join(text), "stored whole"
    frames = await session_updates(redis, SESSION, partitions=PARTITIONS, prefix=prefix)
    assert uncursored(frames) == simulated(script.events)[SESSION].frames
    assert await dead_letters(redis, partitions=PARTITIONS, prefix=prefix) == []


async def _chunks_are(redis: Redis, prefix: str, count: int) -> bool:
    return await chunks(redis, SESSION, prefix) == count
