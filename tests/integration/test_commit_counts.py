"""Counters in a commit: successive increments add up; a malformed increment, a field holding no
integer, a hash and counters on one key, or a key of another type write nothing of the batch."""

from __future__ import annotations

from typing import Final

import msgspec
import pytest
from commit_support import Packed, held_lease, pel, pending_entries
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from bench.common.redis_ops import server_usage
from terminus.service.fold.commit import Batch, commit
from terminus.service.keys import GROUP, Keys
from terminus.service.redis.scripts import script

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster


async def test_counts_of_successive_commits_add_up(redis: Redis, prefix: str) -> None:
    keys = Keys(20, prefix)
    lease = await held_lease(redis, keys, "worker-a")
    for n in (3, 4, -2):
        batch = Batch()
        batch.count(keys, {'["frames_out"]': n, '["a","k","v"]': 1})
        assert await commit(redis, keys, lease, batch) == []
    assert await redis.hgetall(keys.metrics) == {b'["frames_out"]': b"5", b'["a","k","v"]': b"3"}


BAD_INCREMENTS: Final[dict[str, list[Packed]]] = {
    "a fraction": ["I", 4, "f", "1.5"],
    "not a number": ["I", 4, "f", "x"],
    "empty": ["I", 4, "f", ""],
    "19 digits": ["I", 4, "f", "1" * 19],
    "a msgpack integer": ["I", 4, "f", 1],
    "a field that is no string": ["I", 4, 7, "1"],
}


@pytest.mark.parametrize("bad", BAD_INCREMENTS.values(), ids=BAD_INCREMENTS.keys())
async def test_a_malformed_increment_is_refused_and_nothing_is_written(
    redis: Redis, admin_redis: Redis, prefix: str, bad: list[Packed]
) -> None:
    keys = Keys(21, prefix)
    entry_ids = await pending_entries(redis, keys, 1)
    lease = await held_lease(redis, keys, "worker-a")
    ops: list[list[Packed]] = [["S", 3, "before"], ["I", 4, "f", "1"], bad, ["I", 4, "g", "1"]]
    blob = msgspec.msgpack.encode([[i.decode() for i in entry_ids], ops])
    names = [keys.lease, keys.inbound, keys.turn("t-1"), keys.metrics]
    with pytest.raises(ResponseError, match="terminus commit: malformed op 3"):
        await script(redis, "commit")(keys=names, args=[lease, GROUP, "worker-a", 0, blob])
    assert await admin_redis.exists(keys.turn("t-1"), keys.metrics) == 0
    assert await pel(redis, keys) == entry_ids


async def test_an_increment_of_a_field_holding_no_integer_writes_nothing(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(22, prefix)
    lease = await held_lease(redis, keys, "worker-a")
    await redis.hset(keys.metrics, mapping={"f": "1", "g": "one"})
    batch = Batch()
    batch.ops.append(("S", keys.turn("t-1"), (b"x",)))
    batch.count(keys, {"f": 1, "g": 1})
    with pytest.raises(ResponseError, match=r"field g of .* holds no integer"):
        await commit(redis, keys, lease, batch)
    assert await admin_redis.exists(keys.turn("t-1")) == 0
    assert await redis.hgetall(keys.metrics) == {b"f": b"1", b"g": b"one"}


async def test_hset_and_hincrby_on_one_key_in_one_batch_write_nothing(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(23, prefix)
    lease = await held_lease(redis, keys, "worker-a")
    blob = msgspec.msgpack.encode([[], [["H", 3, "f", "x"], ["I", 3, "f", "1"]]])
    names = [keys.lease, keys.inbound, keys.metrics]
    with pytest.raises(ResponseError, match="both a hash and a counters"):
        await script(redis, "commit")(keys=names, args=[lease, GROUP, "worker-a", 0, blob])
    assert await admin_redis.exists(keys.metrics) == 0


async def test_an_increment_of_a_key_of_another_type_writes_nothing(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(24, prefix)
    lease = await held_lease(redis, keys, "worker-a")
    await redis.set(keys.metrics, "a string")
    batch = Batch()
    batch.ops.append(("S", keys.turn("t-1"), (b"x",)))
    batch.count(keys, {"f": 1})
    with pytest.raises(ResponseError, match=r"WRONGTYPE .* holds a string, not a hash"):
        await commit(redis, keys, lease, batch)
    assert await admin_redis.exists(keys.turn("t-1")) == 0


async def test_a_commit_checks_its_counter_fields_in_one_hmget_and_its_log_once(
    redis: Redis, admin_redis: Redis, prefix: str, on_cluster: bool
) -> None:
    """Calls are most of a light-load commit's cost (docs/performance.md): every counter field of
    one hash is checked in one HMGET, and the log, which the resend check's XPENDING already
    proves a stream, is not asked its TYPE again."""
    if on_cluster:
        pytest.skip("counts the commands of one server")
    keys = Keys(25, prefix)
    entry_ids = await pending_entries(redis, keys, 2)
    lease = await held_lease(redis, keys, "worker-a")
    await redis.hset(keys.metrics, mapping={"f": "1", "g": "2"})
    batch = Batch()
    batch.ack(*(i.decode() for i in entry_ids))
    batch.ops.append(("S", keys.turn("t-1"), (b"x",)))
    batch.count(keys, {"f": 1, "g": 1, "h": 1})
    before = await server_usage(admin_redis)
    await commit(redis, keys, lease, batch, "worker-a")
    ran = (await server_usage(admin_redis)).minus(before).commands
    calls = {name: n for name, (n, _) in ran.items() if n and name not in ("info", "evalsha")}
    assert calls["hmget"] == 1
    assert "hget" not in calls
    assert calls["type"] == 2, "the turn and the metrics hash; not the log"
    assert await redis.hgetall(keys.metrics) == {b"f": b"2", b"g": b"3", b"h": b"1"}
    assert await pel(redis, keys) == []


async def test_a_field_holding_no_integer_past_the_first_thousand_writes_nothing(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    """The fields of one hash are checked a thousand per HMGET (Lua's unpack has a limit): a bad
    one in a later slice refuses the batch as surely as one in the first."""
    keys = Keys(26, prefix)
    lease = await held_lease(redis, keys, "worker-a")
    await redis.hset(keys.metrics, mapping={**{f"f{n}": "1" for n in range(2500)}, "f2100": "one"})
    batch = Batch()
    batch.ops.append(("S", keys.turn("t-1"), (b"x",)))
    batch.count(keys, {f"f{n}": 1 for n in range(2500)})
    with pytest.raises(ResponseError, match=r"field f2100 of .* holds no integer"):
        await commit(redis, keys, lease, batch)
    assert await admin_redis.exists(keys.turn("t-1")) == 0
    assert await redis.hget(keys.metrics, "f0") == b"1"
