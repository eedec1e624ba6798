"""The pump reloads its scripts when the server lost them: a commit in hand lands after SCRIPT
FLUSH, and a running worker goes on with the same owners (service/runtime/pump.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pump_support import (
    PARTITIONS,
    SESSION,
    StartWorker,
    answer,
    message_text,
    owned,
    pending,
    settings_for,
    snapshot,
    started_workers,
    stepped_pump,
    text_of,
    words,
)
from redis.asyncio import Redis

from terminus.service.keys import Keys, partition_of
from terminus.service.runtime.worker import Worker
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.views import dead_letters
from terminus.statemachines.states import TurnState
from tests.support.polling import until

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster


@pytest.fixture
async def workers(redis: Redis, prefix: str) -> AsyncIterator[StartWorker]:
    """Starts in-process workers; every one still running is stopped after the test."""
    async with started_workers(redis, prefix) as start:
        yield start


async def test_a_commit_in_hand_lands_after_script_flush(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(partition_of(SESSION, PARTITIONS), prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    script = answer(SESSION, "t-1", 6)
    opened = 6  # up to the third delta
    await producer.publish(script.events[:opened])
    owner = await owned(redis, prefix, keys.partition, "worker-a")
    async with stepped_pump(redis, settings_for(prefix)) as pump:
        pump.add(owner)

        await pump.round()  # the drain, then the read: the batch is folded, not committed
        assert owner.batch is not None
        await admin_redis.script_flush()
        await pump.round()  # commit-and-read: NOSCRIPT, loaded, sent again
        assert owner.batch is None
        assert not owner.done
        assert await pending(redis, keys) == 0
        assert await text_of(redis, keys, "t-1") == "".join(words("t-1", 6)[:3])

        await admin_redis.script_flush()
        await producer.publish(script.events[opened:])
        for _ in range(10):  # the wait (XREAD) wakes it, then a read (NOSCRIPT again)
            await pump.round()
            if owner.batch is not None:
                break
        assert owner.batch is not None
        await pump.round()
        assert not owner.done
        turn = await snapshot(redis, keys, "t-1")
        assert turn is not None
        assert turn.state is TurnState.FINISHED
        assert await message_text(redis, prefix, SESSION, "t-1") == "".join(words("t-1", 6))
        assert owner.epoch == 1, "the owner went on: no new epoch, no restart"


async def test_a_running_worker_goes_on_after_script_flush(
    redis: Redis, admin_redis: Redis, prefix: str, workers: StartWorker
) -> None:
    keys = Keys(partition_of(SESSION, PARTITIONS), prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    worker = await workers("worker-a")
    await producer.publish(answer(SESSION, "t-1", 3).events)

    async def finished(turn_id: str) -> bool:
        turn = await snapshot(redis, keys, turn_id)
        return turn is not None and turn.state is TurnState.FINISHED

    await until(lambda: finished("t-1"), "t-1 to finish")
    await until(lambda: _owns_all(worker), "the worker to own every partition")
    owners = dict(worker.owners)
    await admin_redis.script_flush()
    await producer.publish(answer(SESSION, "t-2", 3).events)
    await until(lambda: finished("t-2"), "t-2 to finish after SCRIPT FLUSH")
    assert await message_text(redis, prefix, SESSION, "t-2") == "".join(words("t-2", 3))
    assert worker.owners == owners, "the same owners: none ended and was taken again"
    assert not any(owner.done for owner in owners.values())
    assert await dead_letters(redis, partitions=PARTITIONS, prefix=prefix) == []


async def _owns_all(worker: Worker) -> bool:
    return worker.partitions == set(range(PARTITIONS))
