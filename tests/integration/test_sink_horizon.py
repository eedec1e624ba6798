"""A sink's horizon (service/sinks/source.py) when the workers ack between its two reads: the
group's info said entries were pending, XPENDING then finds none. The horizon is then the last
entry delivered, never an empty id (which made XRANGE fail and the sink's follower die, seen in
the soak)."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from terminus.service.keys import GROUP, Keys
from terminus.service.redis.replies import text
from terminus.service.sinks.source import horizon


async def test_entries_acked_between_the_info_and_the_pending_read_are_committed(
    redis: Redis, prefix: str
) -> None:
    keys = Keys(0, prefix)
    first = text(await redis.xadd(keys.inbound, {"e": b"1"}))
    last = text(await redis.xadd(keys.inbound, {"e": b"2"}))
    await redis.xgroup_create(keys.inbound, GROUP, id="0")
    await redis.xreadgroup(GROUP, "w", {keys.inbound: ">"})
    assert await horizon(redis, keys) == "(" + first, "the oldest pending bounds it"

    read_pending = redis.xpending

    async def acked_meanwhile(name: Any, group: Any) -> Any:
        await redis.xack(keys.inbound, GROUP, first, last)
        return await read_pending(name, group)

    redis.xpending = acked_meanwhile  # type: ignore[method-assign,assignment]
    try:
        assert await horizon(redis, keys) == last
    finally:
        del redis.xpending
