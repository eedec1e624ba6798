"""A commit that reads: the script acks the batch's entries and returns the next ones for the
consumer (or the log's tail when there are none), and reads nothing on a lost lease."""

from __future__ import annotations

from typing import Any, cast

import pytest
from commit_support import (
    FRAMES,
    MAXLEN,
    SESSION,
    entries,
    held_lease,
    pel,
    pending_entries,
)
from redis.asyncio import Redis

from terminus.service.fold.applier import Entry as AppliedEntry
from terminus.service.fold.applier import read_entries
from terminus.service.fold.commit import Batch, encode
from terminus.service.keys import FIELD, GROUP, Keys
from terminus.service.redis.scripts import script

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster


async def xadd(redis: Redis, key: str, fields: dict[bytes, bytes]) -> bytes:
    return cast(bytes, await redis.xadd(key, cast("dict[Any, Any]", fields)))


async def test_a_commit_with_a_read_returns_the_next_entries(redis: Redis, prefix: str) -> None:
    keys = Keys(17, prefix)
    entry_ids = await pending_entries(redis, keys, 1)
    plain = await xadd(redis, keys.inbound, {FIELD: b"\x00\xff"})
    other = await xadd(redis, keys.inbound, {b"x": b"y"})
    extra = await xadd(redis, keys.inbound, {FIELD: b"a", b"f": b"b"})
    reordered = await xadd(redis, keys.inbound, {b"f": b"b", FIELD: b"a"})
    lease = await held_lease(redis, keys, "worker-a")
    run = script(redis, "commit")

    async def commit_and_read(batch: Batch, count: int) -> list[Any]:
        names, args = encode(batch, keys, lease, "worker-a", count)
        return cast("list[Any]", await run(keys=names, args=args))

    first = Batch()
    first.add_frame(keys, FRAMES[0], MAXLEN)
    first.ack(entry_ids[0].decode())
    frame_ids, ids, payloads, tail = await commit_and_read(first, 2)
    assert [i.decode() for i in frame_ids] == [
        i.decode() for i, _ in await entries(redis, keys.session(SESSION))
    ]
    assert (ids, payloads, tail) == ([plain, other], [b"\x00\xff", [b"x", b"y"]], b"")
    assert await pel(redis, keys) == [plain, other], "read for the consumer, not yet acked"

    second = Batch()
    second.ack(plain.decode(), other.decode())
    assert await commit_and_read(second, 5) == [
        [],
        [extra, reordered],
        [[FIELD, b"a", b"f", b"b"], [b"f", b"b", FIELD, b"a"]],
        b"",
    ]
    third = Batch()
    third.ack(extra.decode(), reordered.decode())
    assert await commit_and_read(third, 5) == [[], [], [], reordered], "nothing new: the tail"
    assert await pel(redis, keys) == []
    read = read_entries([plain, other], [b"\x00\xff", [b"x", b"y"]])
    assert read == [  # field e's value as it came, not wrapped in a mapping again
        AppliedEntry(plain.decode(), b"\x00\xff"),
        AppliedEntry(other.decode(), {b"x": b"y"}),
    ]
    assert [e.fields() for e in read] == [{FIELD: b"\x00\xff"}, {b"x": b"y"}]


async def test_a_commit_with_a_read_on_a_lost_lease_reads_nothing(
    redis: Redis, prefix: str
) -> None:
    keys = Keys(18, prefix)
    await redis.xgroup_create(keys.inbound, GROUP, id="0", mkstream=True)
    await redis.xadd(keys.inbound, {FIELD: b"x"})
    await held_lease(redis, keys, "worker-b")
    names, args = encode(Batch(), keys, "worker-a:1", "worker-a", 10)
    assert await script(redis, "commit")(keys=names, args=args) == 0
    assert await pel(redis, keys) == []


async def test_a_read_told_where_the_log_ends_answers_at_once_until_the_log_grows(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(19, prefix)
    await redis.xgroup_create(keys.inbound, GROUP, id="0", mkstream=True)
    lease = await held_lease(redis, keys, "worker-a")
    run, fenced = script(redis, "read"), [keys.lease, keys.inbound]

    async def read(seen: str, holder: str = lease) -> Any:
        return await run(keys=fenced, args=[holder, GROUP, "worker-a", 10, seen])

    assert await read("0-0", "worker-z:9") == [[], [], b"0-0"], "an empty log ends at 0-0"
    first = await xadd(redis, keys.inbound, {FIELD: b"a"})
    assert await read("0-0", "worker-z:9") == 0, "the log grew: past the answer, to the fence"
    assert await read("") == [[first], [b"a"], b""]
    # Told where the log ends, nothing moves: the lease is not even asked for.
    assert await read(first.decode(), "worker-z:9") == [[], [], first]
    second = await xadd(redis, keys.inbound, {FIELD: b"b"})
    assert await read(first.decode()) == [[second], [b"b"], b""]
    assert await pel(redis, keys) == [first, second]

    names, args = encode(Batch(), keys, lease, "worker-a", 10, second.decode())
    commit = script(redis, "commit")
    assert await commit(keys=names, args=args) == [[], [], [], second]
    third = await xadd(redis, keys.inbound, {FIELD: b"c"})
    assert await commit(keys=names, args=args) == [[], [third], [b"c"], b""]
    # The last entry deleted: still nothing after it, and nothing to read.
    await admin_redis.xdel(keys.inbound, third)  # no code path of the service deletes one
    assert await read(third.decode(), "worker-z:9") == [[], [], third]
    # The largest id a stream can hold, which XRANGE cannot start after: nothing follows it.
    last = "18446744073709551615-18446744073709551615"
    await redis.xadd(keys.inbound, {FIELD: b"d"}, id=last)
    assert await read(third.decode()) == [[last.encode()], [b"d"], b""]
    assert await read(last, "worker-z:9") == [[], [], last.encode()]
