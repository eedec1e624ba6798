"""One lane's broken connection makes every lane of the worker start over (`pump.Breaks`): a
Redis that restarted may have lost writes that the owners of a lane with a sound connection
remember as well, and that lane may never use a broken connection of its own to learn it (an
owner handed over to a lane that already reconnected, a cluster's re-read slot map)."""

from __future__ import annotations

import asyncio
from typing import Any

from pump_support import settings_for
from redis.asyncio import Redis

from terminus.service.redis.connect import connect
from terminus.service.runtime.leases import Leases
from terminus.service.runtime.owner import PartitionOwner
from terminus.service.runtime.pump import Breaks, Pump

DEADLINE_S = 10.0


async def test_a_break_on_one_lane_makes_every_lane_start_over(
    redis: Redis, redis_url: str, admin_redis: Redis, prefix: str
) -> None:
    settings = settings_for(prefix)
    name = f"{prefix}-lane-a"
    lane_a = connect(redis_url, client_name=name)  # its connections can be told apart, and cut
    leases = Leases(redis, prefix)
    breaks = Breaks()
    pumps = [Pump(lane_a, settings, breaks=breaks), Pump(redis, settings, breaks=breaks)]
    owners: list[PartitionOwner] = []
    for partition, (pump, client) in enumerate(zip(pumps, [lane_a, redis], strict=True)):
        epoch = await leases.acquire(partition, "worker-a", 10_000)
        assert epoch is not None
        owners.append(PartitionOwner(client, settings, partition, "worker-a", epoch))
        pump.add(owners[-1])
    first_epochs = [o.epoch for o in owners]
    running = [asyncio.create_task(p.run()) for p in pumps]
    try:
        async with asyncio.timeout(DEADLINE_S):
            while not all(o.idle for o in owners):
                await asyncio.sleep(0.01)
        clients: list[dict[str, Any]] = await admin_redis.client_list()
        cut = [c["id"] for c in clients if c.get("name") == name]
        assert cut, "lane a's connections"
        for client_id in cut:
            await admin_redis.client_kill_filter(_id=client_id)
        async with asyncio.timeout(DEADLINE_S):
            while any(o.epoch == e for o, e in zip(owners, first_epochs, strict=True)):
                await asyncio.sleep(0.01)
        assert not any(o.done for o in owners), "started over, not ended"
    finally:
        for pump in pumps:
            pump.stop()
        await asyncio.gather(*running)
        await lane_a.aclose()
