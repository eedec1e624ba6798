"""Rebalance (DESIGN section 5): two workers split the partitions without overlap and the
survivor takes all, a worker that joins later gets about half, and a tick that fails with a
Redis error is logged while the next one goes on."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from worker_support import PARTITIONS, StartWorker, as_str, started_workers

from terminus.service.keys import Keys
from terminus.service.runtime.membership import assigned
from tests.support.polling import until

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster


@pytest.fixture
async def workers(redis: Redis, prefix: str) -> AsyncIterator[StartWorker]:
    """Starts in-process workers; every one is stopped after the test."""
    async with started_workers(redis, prefix) as start:
        yield start


async def test_two_workers_split_the_partitions_and_the_survivor_takes_all(
    redis: Redis, prefix: str, workers: StartWorker
) -> None:
    partitions = 16
    a = await workers("worker-a", partitions)
    b = await workers("worker-b", partitions)
    pool = ["worker-a", "worker-b"]
    overlaps: list[set[int]] = []

    async def split() -> bool:
        overlaps.append(a.partitions & b.partitions)
        return (a.partitions, b.partitions) == (
            assigned(partitions, pool, "worker-a"),
            assigned(partitions, pool, "worker-b"),
        )

    await until(split, "the two workers to split the partitions")
    assert a.partitions | b.partitions == set(range(partitions))
    assert not any(overlaps)
    for worker in (a, b):
        for partition in worker.partitions:
            lease = as_str(await redis.get(Keys(partition, prefix).lease))
            assert lease.rsplit(":", 1)[0] == worker.worker_id

    await b.stop()

    async def a_has_all() -> bool:
        return a.partitions == set(range(partitions))

    await until(a_has_all, "worker-a to take every partition")
    assert b.partitions == set()


async def test_a_tick_that_fails_with_a_redis_error_is_logged_and_the_next_one_goes_on(
    redis: Redis, prefix: str, workers: StartWorker, caplog: pytest.LogCaptureFixture
) -> None:
    """A pool key of the wrong type fails the heartbeat with WRONGTYPE, not a connection
    error: the worker logs it at every tick and joins the pool once the key is fixed (its tick
    loop used to end on it, the process still up and holding no lease)."""
    pool_key = f"{prefix}:workers"
    await redis.set(pool_key, "not a sorted set")
    worker = await workers("worker-a")

    async def failed_twice() -> bool:
        return sum("tick failed" in r.getMessage() for r in caplog.records) >= 2

    await until(failed_twice, "two failed ticks")
    assert worker.partitions == set()
    await redis.delete(pool_key)

    async def owns_all() -> bool:
        return worker.partitions == set(range(PARTITIONS))

    await until(owns_all, "the worker to take every partition once the key is fixed")


async def test_a_worker_that_joins_later_gets_about_half(
    redis: Redis, prefix: str, workers: StartWorker
) -> None:
    partitions = 16
    a = await workers("worker-a", partitions)

    async def a_has_all() -> bool:
        return a.partitions == set(range(partitions))

    await until(a_has_all, "worker-a to own every partition")
    b = await workers("worker-b", partitions)
    expected = assigned(partitions, ["worker-a", "worker-b"], "worker-b")

    async def b_has_its_share() -> bool:
        return b.partitions == expected and not a.partitions & b.partitions

    await until(b_has_its_share, "worker-b to take its share")
    assert partitions // 4 <= len(b.partitions) <= 3 * partitions // 4
    assert a.partitions == set(range(partitions)) - expected
