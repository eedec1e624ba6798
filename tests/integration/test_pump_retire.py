"""Retiring and stopping commit what was folded and release the leases: a busy pump commits its
batch in hand, an idle one leaves its entries pending for the next owner, a lost lease writes
nothing, and a stopped worker leaves nothing pending (service/runtime/pump.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from pump_support import (
    PARTITIONS,
    SESSION,
    StartWorker,
    answer,
    as_str,
    chunks,
    interleaved,
    message_text,
    owned,
    pending,
    session_in,
    settings_for,
    simulated,
    snapshot,
    started_workers,
    stepped_pump,
    uncursored,
    whole_turn,
    words,
)
from redis.asyncio import Redis

from terminus.service.fold.commit import LeaseLost
from terminus.service.keys import Keys, partition_of, workers_key
from terminus.service.runtime.leases import Leases
from terminus.service.runtime.owner import PartitionOwner
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


async def test_retire_commits_the_batch_in_hand(redis: Redis, prefix: str) -> None:
    keys = Keys(partition_of(SESSION, PARTITIONS), prefix)
    settings = settings_for(prefix, batch_size=3)
    script = answer(SESSION, "t-1", 12)
    await Producer(redis, partitions=PARTITIONS, prefix=prefix).publish(script.events)
    epoch = await Leases(redis, prefix).acquire(keys.partition, "worker-a", 30_000)
    assert epoch is not None
    owner = PartitionOwner(redis, settings, keys.partition, "worker-a", epoch)
    async with stepped_pump(redis, settings) as pump:
        pump.add(owner)
        await pump.round()
        assert owner.batch is not None
        assert await pending(redis, keys) == 3, "read, folded, not committed"

        running = asyncio.create_task(pump.run())
        await asyncio.sleep(0)  # the loop runs: retire now waits for it to commit, then end
        assert pump.running
        await pump.retire(keys.partition)
        pump.stop()
        await running
        assert owner.done
        assert owner.ended.exception() is None
        assert pump.owners == {}
        assert await pending(redis, keys) == 0
        groups = await redis.xinfo_groups(keys.inbound)
        last_read = as_str(groups[0]["last-delivered-id"])
        ids = [
            as_str(i) for i, _ in cast("list[tuple[bytes, Any]]", await redis.xrange(keys.inbound))
        ]
        read = ids.index(last_read) + 1
        assert 3 <= read < len(ids), "stopped before the end of the log"
        turn = await whole_turn(redis, keys, "t-1")
        assert turn is not None
        assert turn.last_seq == script.events[read - 1].seq, "every entry read was committed"


async def test_retire_of_an_idle_pump_ends_the_owner_and_leaves_its_entries_pending(
    redis: Redis, prefix: str
) -> None:
    """With no loop to commit it, the batch in hand is dropped: its entries stay pending for the
    next owner's drain, which applies them."""
    keys = Keys(partition_of(SESSION, PARTITIONS), prefix)
    script = answer(SESSION, "t-1", 2)
    await Producer(redis, partitions=PARTITIONS, prefix=prefix).publish(script.events)
    first = await owned(redis, prefix, keys.partition, "worker-a")
    async with stepped_pump(redis, settings_for(prefix)) as pump:
        pump.add(first)
        await pump.round()
        assert first.batch is not None
        await pump.retire(keys.partition)
        assert first.done
        assert await pending(redis, keys) == len(script.events)
        assert await snapshot(redis, keys, "t-1") is None
        await Leases(redis, prefix).release(keys.partition, "worker-a", first.epoch)

        second = await owned(redis, prefix, keys.partition, "worker-b")
        pump.add(second)
        await pump.round()  # the drain claims and commits them
        assert await pending(redis, keys) == 0
        assert await message_text(redis, prefix, SESSION, "t-1") == "".join(words("t-1", 2))


async def test_a_commit_in_hand_on_a_lost_lease_writes_nothing_and_ends_the_owner(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(partition_of(SESSION, PARTITIONS), prefix)
    await Producer(redis, partitions=PARTITIONS, prefix=prefix).publish(
        answer(SESSION, "t-1", 2).events
    )
    owner = await owned(redis, prefix, keys.partition, "worker-a")
    async with stepped_pump(redis, settings_for(prefix)) as pump:
        pump.add(owner)
        await pump.round()
        assert owner.batch is not None
        leases = Leases(redis, prefix)
        assert await leases.release(keys.partition, "worker-a", owner.epoch)
        assert await leases.acquire(keys.partition, "worker-b", 30_000) == owner.epoch + 1
        await pump.round()
        assert owner.done
        assert isinstance(owner.ended.exception(), LeaseLost)
        assert owner.fold.turns == {}
        assert pump.owners == {}
        assert await snapshot(redis, keys, "t-1") is None
        assert await admin_redis.exists(keys.session(SESSION)) == 0
        assert await pending(redis, keys) > 0, "left for the new owner's drain"


async def test_stopping_a_busy_worker_leaves_nothing_pending_and_releases_every_lease(
    redis: Redis, admin_redis: Redis, prefix: str, workers: StartWorker
) -> None:
    sessions = [session_in(p) for p in range(PARTITIONS)]
    scripts = [answer(s, f"{s}-t", 1_000) for s in sessions]
    events = interleaved(scripts)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    a = await workers("worker-a", batch_size=16)

    async def publish() -> None:  # in bursts, so that worker-a is busy when it is stopped
        for start in range(0, len(events), 64):
            await producer.publish(events[start : start + 64])

    publishing = asyncio.create_task(publish())

    async def started() -> bool:
        return await chunks(redis, sessions[0], prefix) > 0

    await until(started, "the first frames to be committed")
    await a.stop()
    await publishing
    for p in range(PARTITIONS):
        keys = Keys(p, prefix)
        assert await pending(redis, keys) == 0
        assert await redis.get(keys.lease) is None
    assert await admin_redis.zscore(workers_key(prefix), "worker-a") is None
    assert a.partitions == set()

    await workers("worker-b")  # the rest, exactly once, from where worker-a stopped

    async def all_finished() -> bool:
        for script in scripts:
            keys = Keys(partition_of(script.session_id, PARTITIONS), prefix)
            turn = await snapshot(redis, keys, script.turn_id)
            if turn is None or turn.state is not TurnState.FINISHED:
                return False
        return True

    await until(all_finished, "worker-b to finish every turn")
    expected = simulated(events)
    for session in sessions:
        frames = await session_updates(redis, session, partitions=PARTITIONS, prefix=prefix)
        assert uncursored(frames) == expected[session].frames
    assert await dead_letters(redis, partitions=PARTITIONS, prefix=prefix) == []
