"""Malformed ops in the commit script's blob are refused and nothing of the batch is written:
each kind of bad op, an op on the lease, two ops wanting different types of one key; a blob
built by hand with every op in range commits."""

from __future__ import annotations

from typing import Final

import msgspec
import pytest
from commit_support import (
    SESSION,
    Packed,
    entries,
    held_lease,
    pel,
    pending_entries,
)
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from terminus.service.keys import GROUP, Keys
from terminus.service.redis.scripts import script

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

MALFORMED: Final[dict[str, list[Packed]]] = {
    "unknown opcode": ["Q", 3, "v"],
    "opcode not a string": [83, 3, "v"],
    "set without a value": ["S", 3],
    "set with two values": ["S", 3, "v", "w"],
    "append without a value": ["A", 3],
    "delete with a value": ["D", 3, "v"],
    "hset without a value": ["H", 3, "f"],
    "hdel without a field": ["E", 3],
    "drop-if-last without a frame": ["L", 3],
    "hincrby without an increment": ["I", 3, "f"],
    "hincrby with two increments": ["I", 3, "f", "1", "2"],
    "zadd without a member": ["Z", 3, "1"],
    "xadd without fields": ["X", 3, "0"],
    "xadd with a field and no value": ["F", 3, "0", "e"],
    "key index past the end": ["S", 5, "v"],
    "key index zero": ["S", 0, "v"],
    "mark without a marks key": ["K", 4, "1"],
    "mark with a score not an integer": ["K", 4, "soon", 5],
    "mark kept in the inbound log": ["K", 4, "1", 2],
    "trim to a mark in no key": ["T", 4, "1", 9],
    "drop-if-last with two frames": ["L", 4, "x", "y", "z"],
    "key index not a number": ["S", "three", "v"],
}


@pytest.mark.parametrize("bad", MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_malformed_op_is_refused_and_nothing_is_written(
    redis: Redis, admin_redis: Redis, prefix: str, bad: list[Packed]
) -> None:
    keys = Keys(14, prefix)
    entry_ids = await pending_entries(redis, keys, 2)
    lease = await held_lease(redis, keys, "worker-a")
    written = keys.turn("t-1")
    ops: list[list[Packed]] = [["S", 3, "before"], ["F", 4, "0", "e", "x"], bad, ["A", 3, "after"]]
    blob = msgspec.msgpack.encode([[i.decode() for i in entry_ids], ops])
    names = [keys.lease, keys.inbound, written, keys.session(SESSION)]
    with pytest.raises(ResponseError, match="terminus commit: malformed op 3"):
        await script(redis, "commit")(keys=names, args=[lease, GROUP, "worker-a", 0, blob])
    assert await admin_redis.exists(written, keys.session(SESSION)) == 0
    assert await pel(redis, keys) == entry_ids


async def test_a_well_formed_blob_built_by_hand_commits(redis: Redis, prefix: str) -> None:
    """The control case of the malformed ops above: the same blob, every op in range."""
    keys = Keys(15, prefix)
    entry_ids = await pending_entries(redis, keys, 2)
    lease = await held_lease(redis, keys, "worker-a")
    ops: list[list[Packed]] = [["S", 3, "before"], ["F", 4, "0", "e", "x"], ["A", 3, "after"]]
    blob = msgspec.msgpack.encode([[i.decode() for i in entry_ids], ops])
    names = [keys.lease, keys.inbound, keys.turn("t-1"), keys.session(SESSION)]
    reply = await script(redis, "commit")(keys=names, args=[lease, GROUP, "worker-a", 0, blob])
    [frame_id] = reply[0]
    assert reply[1:] == [[], [], b""]
    assert await redis.get(keys.turn("t-1")) == b"beforeafter"
    assert await entries(redis, keys.session(SESSION)) == [(frame_id, {b"e": b"x"})]
    assert await pel(redis, keys) == []


async def test_an_op_on_the_lease_is_refused(redis: Redis, prefix: str) -> None:
    keys = Keys(16, prefix)
    lease = await held_lease(redis, keys, "worker-a")
    blob = msgspec.msgpack.encode([[], [["S", 1, "worker-z:99"]]])
    with pytest.raises(ResponseError, match="malformed op 1"):
        await script(redis, "commit")(
            keys=[keys.lease, keys.inbound], args=[lease, GROUP, "worker-a", 0, blob]
        )
    assert await redis.get(keys.lease) == lease.encode()


async def test_two_ops_wanting_different_types_of_one_key_write_nothing(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(19, prefix)
    lease = await held_lease(redis, keys, "worker-a")
    blob = msgspec.msgpack.encode([[], [["S", 3, "x"], ["H", 3, "f", "v"]]])
    names = [keys.lease, keys.inbound, keys.turn("t-1")]
    with pytest.raises(ResponseError, match="both a string and a hash"):
        await script(redis, "commit")(keys=names, args=[lease, GROUP, "worker-a", 0, blob])
    assert await admin_redis.exists(keys.turn("t-1")) == 0
