"""Redis comes back holding less than it acknowledged: the workers start over from what it holds.

DESIGN section 5 (connections). A redis-server SIGKILLed with `appendfsync everysec` loses the
writes whose AOF write was postponed behind a slow fsync, though it had answered them; a replica
promoted on a failover lacks what it had not received. Either way a worker may remember more
than Redis holds: a partition position past entries that are back in the log, and folded turns
whose snapshots are gone. A worker that kept that memory across the broken connection waited for
entries after its old position for ever, and its fold would have dropped the entries as already
applied (`test_redis_restart_under_load` hung on it once in CI, its partitions never quiet).

Here a worker processes a first load, the test snapshots the partitions' keys, the worker
processes a second load, and then, in one transaction, the keys go back to the snapshot with the
second load's entries appended again undelivered, and every other client is disconnected: what a
restart that lost the worker's commits but kept the producer's entries leaves. The worker must
process the second load again, exactly once in what Redis holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from redis.asyncio import Redis

from terminus.service.keys import Keys
from terminus.service.redis.replies import StreamEntry
from terminus.service.settings import Settings
from tests.support.faults.expect import assert_all_well, started_turns
from tests.support.faults.harness import StartRedis, Workers, fault_settings, wait_owned, wait_quiet
from tests.support.faults.load import RecordingProducer, plan_sessions, publish_sessions

BEFORE = plan_sessions(sessions=8, turns=2, tag="before")
AFTER = plan_sessions(sessions=8, turns=2, tag="after")

Snapshot = dict[bytes, tuple[int, bytes]]  # key -> (PTTL or 0, DUMP)


async def data_keys(redis: Redis, settings: Settings) -> list[bytes]:
    """Every key of the partitions but their leases, which a restart keeps or loses alike."""
    fencing = {
        k.encode() for p in range(settings.partitions) for k in (Keys(p, settings.prefix).lease,)
    } | {Keys(p, settings.prefix).epoch.encode() for p in range(settings.partitions)}
    keys = [k async for k in redis.scan_iter(match=f"{settings.prefix}:{{*}}:*", count=1000)]
    return [cast(bytes, k) for k in keys if k not in fencing]


async def snapshot(redis: Redis, settings: Settings) -> Snapshot:
    taken: Snapshot = {}
    for key in await data_keys(redis, settings):
        ttl, dump = await redis.pttl(key), await redis.dump(key)
        if dump is not None:
            taken[key] = (max(int(ttl), 0), dump)
    return taken


async def appended_since(
    redis: Redis, settings: Settings, before: Snapshot
) -> dict[str, list[StreamEntry]]:
    """Each partition's inbound entries that the snapshot does not hold."""
    appended: dict[str, list[StreamEntry]] = {}
    for partition in range(settings.partitions):
        inbound = Keys(partition, settings.prefix).inbound
        last = b"0-0"
        if inbound.encode() in before:
            probe = f"{inbound}-probe"
            ttl, dump = before[inbound.encode()]
            await redis.restore(probe, ttl, dump, replace=True)
            tail = cast(list[StreamEntry], await redis.xrevrange(probe, count=1))
            await redis.delete(probe)
            last = tail[0][0] if tail else last
        entries = cast(list[StreamEntry], await redis.xrange(inbound, min=b"(" + last))
        if entries:
            appended[inbound] = entries
    return appended


async def roll_back(
    redis: Redis, settings: Settings, to: Snapshot, appended: dict[str, list[StreamEntry]]
) -> None:
    """In one transaction: the keys as in `to`, `appended` added again with their ids, and every
    other client's connection closed, as a restart closes them."""
    pipe = redis.pipeline(transaction=True)
    for key in await data_keys(redis, settings):
        pipe.delete(key)
    for key, (ttl, dump) in to.items():
        pipe.restore(key, ttl, dump, replace=True)
    for stream, entries in appended.items():
        for entry_id, fields in entries:
            pipe.xadd(stream, cast(Any, fields), id=entry_id)
    pipe.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    await pipe.execute()


async def test_redis_rolled_back_under_a_worker(private_redis: StartRedis, tmp_path: Path) -> None:
    server = private_redis()
    settings = fault_settings(server.url, partitions=4)
    redis = Redis.from_url(server.url)
    try:
        with Workers(settings, tmp_path) as workers:
            workers.start()
            await wait_owned(redis, settings)
            producer = RecordingProducer(redis, settings)
            await publish_sessions(producer, BEFORE)
            await wait_quiet(redis, settings, started_turns(producer.published), timeout=30)
            before = await snapshot(redis, settings)

            await publish_sessions(producer, AFTER)
            await wait_quiet(redis, settings, started_turns(producer.published), timeout=30)
            appended = await appended_since(redis, settings, before)
            assert sum(map(len, appended.values())) > 0
            await roll_back(redis, settings, before, appended)

            await wait_quiet(redis, settings, started_turns(producer.published), timeout=30)
            await assert_all_well(redis, settings, producer.published, workers)
    finally:
        await redis.aclose()
