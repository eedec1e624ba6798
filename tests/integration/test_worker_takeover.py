"""The takeover drain (DESIGN section 5, invariant 5): claim reports how often each pending entry
was delivered; the next owner applies pending entries before new ones and dead-letters the
poison, and applies a dead owner's batch once its lease expires."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from worker_support import (
    MAX_DELIVERIES,
    PARTITIONS,
    Arg,
    StartWorker,
    add,
    answer,
    as_str,
    consumer_pending,
    crash_reading,
    event,
    keys_of,
    no_pending,
    snapshot,
    started_workers,
    texts,
    wait_state,
)

from terminus.events.codec import encode_event
from terminus.events.inbound import TurnStarted
from terminus.service.keys import FIELD, GROUP, Keys
from terminus.service.redis.scripts import script
from terminus.service.runtime.leases import Leases, lease_value
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.views import dead_letters
from terminus.statemachines.states import TurnState
from tests.support.polling import until

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster


@pytest.fixture
async def workers(redis: Redis, prefix: str) -> AsyncIterator[StartWorker]:
    """Starts in-process workers; every one is stopped after the test."""
    async with started_workers(redis, prefix) as start:
        yield start


async def test_claim_reports_how_often_each_pending_entry_was_delivered(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(0, prefix)
    await redis.xgroup_create(keys.inbound, GROUP, id="0-0", mkstream=True)
    first, second = [await add(redis, keys.inbound, {FIELD: b"x"}) for _ in range(2)]
    await crash_reading(redis, keys)
    await admin_redis.xclaim(keys.inbound, GROUP, "crashed", 0, [first], retrycount=7)
    assert await Leases(redis, prefix).acquire(0, "worker-b", 10_000) == 1
    fenced = [keys.lease, keys.inbound]
    args: list[Arg] = [lease_value("worker-b", 1), GROUP, "worker-b", "0-0", 10]
    next_start, rows, counts = await script(redis, "claim")(keys=fenced, args=args)
    assert next_start == b"0-0"
    assert [as_str(row[0]) for row in rows] == [first, second]
    assert {as_str(entry_id): int(n) for entry_id, n in counts} == {first: 8, second: 2}
    assert await consumer_pending(redis, keys) == {"worker-b": 2}


async def test_takeover_applies_pending_entries_before_new_ones_and_kills_poison(
    redis: Redis, admin_redis: Redis, prefix: str, workers: StartWorker
) -> None:
    keys = keys_of(prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    await redis.xgroup_create(keys.inbound, GROUP, id="0-0", mkstream=True)
    events = answer("t-1")
    poison = event(TurnStarted, 0, "t-poison")
    old = await producer.publish([*events[:4], poison])
    await crash_reading(redis, keys)
    # Delivered MAX times before the takeover: one more is still allowed. The poison is not.
    await admin_redis.xclaim(
        keys.inbound, GROUP, "crashed", 0, [old[0]], retrycount=MAX_DELIVERIES - 1
    )
    await admin_redis.xclaim(keys.inbound, GROUP, "crashed", 0, [old[4]], retrycount=MAX_DELIVERIES)
    await producer.publish(events[4:])  # never delivered: must be applied after the pending ones

    await workers()
    await wait_state(redis, prefix, "t-1", TurnState.FINISHED)
    await until(lambda: no_pending(redis, keys), "the pending entries to be acked")

    assert await texts(redis, prefix) == {"t-1": "Hello"}
    letters = await dead_letters(redis, partition=keys.partition, prefix=prefix)
    reason = f"delivered {MAX_DELIVERIES + 1} times (max {MAX_DELIVERIES})"
    assert [(d.source_id, d.reason, d.raw) for d in letters] == [
        (as_str(old[4]), reason, encode_event(poison))
    ]
    assert await snapshot(redis, prefix, "t-poison") is None


async def test_a_dead_owner_s_batch_is_applied_by_the_next_owner_once_its_lease_expires(
    redis: Redis, prefix: str, workers: StartWorker
) -> None:
    keys = keys_of(prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    events = answer("t-1")
    await producer.publish(events[:4])
    await redis.xgroup_create(keys.inbound, GROUP, id="0-0", mkstream=True)
    assert await Leases(redis, prefix).acquire(keys.partition, "worker-dead", 300) == 1
    fenced = [keys.lease, keys.inbound]
    args: list[Arg] = [lease_value("worker-dead", 1), GROUP, "worker-dead", 100]
    read_ids, _, _ = await script(redis, "read")(keys=fenced, args=args)
    assert len(read_ids) == 4  # read, never committed: the owner died with its lease
    await producer.publish(events[4:])

    await workers("worker-b")
    await wait_state(redis, prefix, "t-1", TurnState.FINISHED)
    await until(lambda: no_pending(redis, keys), "the dead owner's entries to be acked")
    assert as_str(await redis.get(keys.lease)) == "worker-b:2"
    assert await texts(redis, prefix) == {"t-1": "Hello"}
    assert await dead_letters(redis, partitions=PARTITIONS, prefix=prefix) == []
