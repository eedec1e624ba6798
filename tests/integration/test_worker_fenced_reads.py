"""Fenced reads (DESIGN section 5, invariant 7): with a stale lease the read, claim and append
scripts read, claim and append nothing, and an owner whose lease moved on stops before reading."""

from __future__ import annotations

import asyncio

import pytest
from pump_support import running_pump
from redis.asyncio import Redis
from worker_support import (
    DEADLINE_S,
    PARTITIONS,
    Arg,
    add,
    answer,
    as_str,
    consumer_pending,
    keys_of,
    pending,
    settings_for,
    snapshot,
)

from terminus.service.fold.commit import LeaseLost
from terminus.service.keys import FIELD, GROUP, Keys
from terminus.service.redis.scripts import script
from terminus.service.runtime.leases import Leases, lease_value
from terminus.service.runtime.owner import PartitionOwner
from terminus.service.sdk.producer import Producer

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster


async def test_a_stale_lease_reads_claims_and_appends_nothing(redis: Redis, prefix: str) -> None:
    keys = Keys(0, prefix)
    await redis.xgroup_create(keys.inbound, GROUP, id="0-0", mkstream=True)
    ids = [await add(redis, keys.inbound, {FIELD: b"x"}) for _ in range(3)]
    leases = Leases(redis, prefix)
    assert await leases.acquire(0, "worker-a", 10_000) == 1
    assert await leases.release(0, "worker-a", 1)
    assert await leases.acquire(0, "worker-b", 10_000) == 2
    stale, current = lease_value("worker-a", 1), lease_value("worker-b", 2)
    fenced = [keys.lease, keys.inbound]

    assert await script(redis, "read")(keys=fenced, args=[stale, GROUP, "worker-a", 10]) == 0
    assert await pending(redis, keys) == 0
    read_ids, payloads, _ = await script(redis, "read")(
        keys=fenced, args=[current, GROUP, "worker-b", 10]
    )
    assert [as_str(i) for i in read_ids] == ids
    assert payloads == [b"x"] * 3

    claim_args: list[Arg] = [stale, GROUP, "worker-a", "0-0", 10]
    assert await script(redis, "claim")(keys=fenced, args=claim_args) == 0
    assert await consumer_pending(redis, keys) == {"worker-b": 3}
    append_args: list[Arg] = [stale, FIELD, b"y"]
    assert await script(redis, "append_owned")(keys=fenced, args=append_args) == 0
    assert await redis.xlen(keys.inbound) == 3


async def test_an_owner_whose_lease_moved_on_stops_before_reading(
    redis: Redis, prefix: str
) -> None:
    keys = keys_of(prefix)
    await Producer(redis, partitions=PARTITIONS, prefix=prefix).publish(answer("t-1"))
    leases = Leases(redis, prefix)
    assert await leases.acquire(keys.partition, "worker-a", 10_000) == 1
    assert await leases.release(keys.partition, "worker-a", 1)
    assert await leases.acquire(keys.partition, "worker-b", 10_000) == 2
    owner = PartitionOwner(redis, settings_for(prefix), keys.partition, "worker-a", 1)
    async with running_pump(redis, settings_for(prefix), owner) as pump:
        with pytest.raises(LeaseLost):
            await asyncio.wait_for(owner.ended, DEADLINE_S)
        assert pump.owners == {}
    assert await pending(redis, keys) == 0
    assert await snapshot(redis, prefix, "t-1") is None


async def test_a_caught_up_owner_whose_lease_moved_on_stops_at_its_next_entry(
    redis: Redis, prefix: str
) -> None:
    """An owner that knows where its log ends learns that nothing is new without asking for its
    lease (next_entries.lua, `unchanged`); the entry that comes next still meets the fence."""
    keys = keys_of(prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    leases = Leases(redis, prefix)
    assert await leases.acquire(keys.partition, "worker-a", 10_000) == 1
    owner = PartitionOwner(redis, settings_for(prefix), keys.partition, "worker-a", 1)
    async with running_pump(redis, settings_for(prefix), owner):
        await producer.publish(answer("t-1"))
        async with asyncio.timeout(DEADLINE_S):
            while await snapshot(redis, prefix, "t-1") is None or not owner.seen:
                await asyncio.sleep(0.01)
        assert await leases.release(keys.partition, "worker-a", 1)
        assert await leases.acquire(keys.partition, "worker-b", 10_000) == 2
        await asyncio.sleep(0.3)  # rounds and waits told that nothing is new
        assert not owner.done
        await producer.publish(answer("t-2"))
        with pytest.raises(LeaseLost):
            await asyncio.wait_for(owner.ended, DEADLINE_S)
    assert await pending(redis, keys) == 0
    assert await snapshot(redis, prefix, "t-2") is None


async def test_an_owner_forgets_where_its_log_ended_when_it_starts_over(
    redis: Redis, prefix: str
) -> None:
    """A restart may have lost deliveries (AOF everysec): an entry the owner read may be
    undelivered again, so where the log ended is asked anew, with the lease, in the new epoch."""
    keys = keys_of(prefix)
    await Producer(redis, partitions=PARTITIONS, prefix=prefix).publish(answer("t-1"))
    leases = Leases(redis, prefix)
    assert await leases.acquire(keys.partition, "worker-a", 10_000) == 1
    owner = PartitionOwner(redis, settings_for(prefix), keys.partition, "worker-a", 1)
    await owner.start()
    _, _, first = owner.step_call()
    fenced = [keys.lease, keys.inbound]
    entries = owner.stepped(await script(redis, "read")(keys=fenced, args=first))
    assert entries
    assert owner.seen == entries[-1].id
    assert owner.step_call()[2][-1] == owner.seen, "told where the log ends"
    owner.lost_connection(ConnectionError("cut"))
    await owner.start()
    assert owner.seen == ""
    assert len(owner.step_call()[2]) == len(first), "asked anew"
    owner.end()
