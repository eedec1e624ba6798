"""The commit's marks (K) and trims to a mark (T), which a release applies to the transitions
and commands streams (service/fold/applier.py): a trim drops exactly the entries before the newest
mark scored below its bound, and the marks up to that one."""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis

from terminus.service.fold.commit import Batch, commit
from terminus.service.keys import Keys
from terminus.service.redis.replies import StreamEntry
from terminus.service.runtime.leases import Leases, lease_value


async def add(redis: Redis, key: str, *values: bytes) -> None:
    for value in values:
        await redis.xadd(key, {b"e": value})


async def contents(redis: Redis, key: str) -> list[bytes]:
    rows = cast("list[StreamEntry]", await redis.xrange(key))
    return [fields[b"e"] for _, fields in rows]


async def step(redis: Redis, keys: Keys, lease: str, build: Batch) -> None:
    await commit(redis, keys, lease, build)


async def test_a_trim_drops_what_came_before_the_newest_mark_below_its_bound(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(3, prefix)
    epoch = await Leases(redis, prefix).acquire(3, "worker-a", 10_000)
    assert epoch is not None
    lease, stream = lease_value("worker-a", epoch), keys.transitions
    marked = Batch()
    marked.mark(keys, stream, 100)
    await step(redis, keys, lease, marked)  # an empty stream: nothing to mark
    assert await admin_redis.exists(keys.marks(stream)) == 0
    for at_ms, values in ((100, (b"a", b"b")), (200, (b"c",)), (300, (b"d",))):
        await add(redis, stream, *values)
        marked = Batch()
        marked.mark(keys, stream, at_ms)
        await step(redis, keys, lease, marked)
    await add(redis, stream, b"e")

    early = Batch()
    early.trim_to_mark(keys, stream, 100)  # no mark below 100: nothing goes
    await step(redis, keys, lease, early)
    assert await contents(redis, stream) == [b"a", b"b", b"c", b"d", b"e"]
    trim = Batch()
    trim.trim_to_mark(keys, stream, 300)  # the newest mark below 300 is 200's, after "c"
    await step(redis, keys, lease, trim)

    assert await contents(redis, stream) == [b"d", b"e"]
    [(d_id, _), _] = cast("list[StreamEntry]", await redis.xrange(stream))
    assert await redis.zrange(keys.marks(stream), 0, -1, withscores=True) == [(d_id, 300.0)]
