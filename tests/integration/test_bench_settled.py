"""The benchmark's settled drain (bench/common/redis_ops.wait_settled): it waits until the pool
holds every lease with as many processes as it started, and counts what is left to ack then
(never read, and read but not acked). A wait that returned early, or miscounted, would credit the
pool with work one process did alone."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest
from redis.asyncio import Redis

from bench.common.redis_ops import wait_settled
from terminus.service.keys import GROUP, Keys
from terminus.service.redis.replies import StreamEntry

PARTITIONS = 2


async def test_it_waits_for_every_process_and_counts_what_is_left(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    info = await admin_redis.info("server")
    if int(str(info["redis_version"]).split(".")[0]) < 7:
        pytest.skip("no lag in XINFO GROUPS before Redis 7: no settled rate on 6.2")
    keys = [Keys(p, prefix) for p in range(PARTITIONS)]
    for k in keys:
        for n in range(3):
            await redis.xadd(k.inbound, {"e": str(n)})
        await redis.xgroup_create(k.inbound, GROUP, id="0-0")
    # Two entries delivered on partition 0, one of them acked: 6 - 1 left.
    reply = await redis.xreadgroup(GROUP, "w", {keys[0].inbound: ">"}, count=2)
    [(_, [(first_id, _), _])] = cast("list[tuple[bytes, list[StreamEntry]]]", reply)
    await redis.xack(keys[0].inbound, GROUP, first_id)

    settling = asyncio.ensure_future(wait_settled(redis, prefix, PARTITIONS, 2))
    await redis.set(keys[0].lease, "host-1-a:1")
    await redis.set(keys[1].lease, "host-1-a:2")
    await asyncio.sleep(0.1)
    assert not settling.done(), "one process holds every lease: not settled"
    await redis.set(keys[1].lease, "host-2-b:3")
    settled = await asyncio.wait_for(settling, 5)
    assert settled is not None
    _, left = settled
    assert left == 5
