"""The benchmark's start gun for several workers (bench/e2e/phases.drain_phase): the log is
pre-filled but for the last entry of each partition, with the group at its end; once the pool
has split the partitions (`wait_split`) the group goes back to the start, and the held-back entries
wake the owners. A wait that returned before the split, or a gun that left entries unread, would
credit the pool with work one process did alone, or with less work than it did."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from redis.asyncio import Redis

from bench.common.redis_ops import park_groups, publish_all, rewind_groups, wait_split
from bench.e2e.phases import held_back
from bench.e2e.workload import sized
from terminus.service.keys import GROUP, Keys, partition_of
from terminus.service.redis.replies import StreamReply

PARTITIONS = 2


async def test_the_split_is_waited_for_every_process(redis: Redis, prefix: str) -> None:
    keys = [Keys(p, prefix) for p in range(PARTITIONS)]
    split = asyncio.ensure_future(wait_split(redis, prefix, PARTITIONS, 2))
    await redis.set(keys[0].lease, "host-1-a:1")
    await redis.set(keys[1].lease, "host-1-a:2")
    await asyncio.sleep(0.1)
    assert not split.done(), "one process holds every lease: not split"
    await redis.set(keys[1].lease, "host-2-b:3")
    await asyncio.wait_for(split, 5)


async def test_the_gun_holds_back_each_partition_s_last_entry_then_gives_every_entry(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    """The gun is the benchmark's, run as its admin: the service's user may not move a group."""
    events = sized(5, 2_000, 5)
    filled, held = held_back(events, PARTITIONS)
    assert sorted(map(id, filled + held)) == sorted(map(id, events))
    used = sorted({partition_of(e.session_id, PARTITIONS) for e in events})
    assert [partition_of(e.session_id, PARTITIONS) for e in held] == used, "one a partition"
    tails = await publish_all(redis, filled, PARTITIONS, prefix)
    await park_groups(admin_redis, sorted(tails))
    streams: Any = {stream: ">" for stream in sorted(tails)}
    assert await redis.xreadgroup(GROUP, "w", streams) == [], "the group starts at the end"

    await rewind_groups(admin_redis, sorted(tails))
    await publish_all(redis, held, PARTITIONS, prefix)
    reply = cast(StreamReply, await redis.xreadgroup(GROUP, "w", streams, count=10_000))
    assert sum(len(entries) for _, entries in reply) == len(events), "every entry, once"
