"""What the commit script writes from its one MessagePack blob of ops: binary values byte for
byte through SET and XADD, APPEND that extends or creates a string (and writes nothing on a key
of another type), and a batch's state changes before its frames."""

from __future__ import annotations

from typing import Final

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
from redis.exceptions import ResponseError

from terminus.service.fold.commit import Batch, commit
from terminus.service.keys import FIELD, Keys
from terminus.statemachines.outputs import Outputs, Transition

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster


def binary(size: int) -> bytes:
    """`size` bytes running through every value 0..255, shifted by `size` so sizes differ."""
    return bytes((size + n) % 256 for n in range(size))


# Around each msgpack str header: fixstr (<32), str 8 (<256), str 16 (<65536), str 32.
SIZES: Final = (0, 1, 31, 32, 255, 256, 65_535, 65_536, 70_000)


async def test_binary_values_round_trip_through_set_and_xadd(redis: Redis, prefix: str) -> None:
    keys = Keys(11, prefix)
    batch = Batch()
    for size in SIZES:
        batch.ops.append(("S", keys.turn(f"bin-{size}"), (binary(size),)))
        batch.ops.append(("F", keys.session(SESSION), (MAXLEN, 1, FIELD, binary(size))))
    batch.ops.append(("F", keys.session(SESSION), (MAXLEN, 1, bytes(range(256)), b"key")))
    ids = await commit(redis, keys, await held_lease(redis, keys, "worker-a"), batch)
    for size in SIZES:
        assert await redis.get(keys.turn(f"bin-{size}")) == binary(size)
    stream = await entries(redis, keys.session(SESSION))
    assert [i.decode() for i, _ in stream] == ids
    assert [fields for _, fields in stream] == [
        *({FIELD: binary(size)} for size in SIZES),
        {bytes(range(256)): b"key"},
    ]


async def test_append_extends_a_string_and_creates_a_missing_one(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(12, prefix)
    lease = await held_lease(redis, keys, "worker-a")
    first, second = Batch(), Batch()
    first.ops.append(("S", keys.tail("t-1"), (b"[1,1]\n",)))
    first.ops.append(("A", keys.tail("t-1"), (b'["a","x"]\n',)))
    first.ops.append(("A", keys.tail("t-2"), (binary(300),)))
    second.ops.append(("A", keys.tail("t-1"), (b'["a","\\u0000y"]\n',)))
    second.ops.append(("D", keys.tail("t-2"), ()))
    assert await commit(redis, keys, lease, first) == []
    assert await redis.get(keys.tail("t-2")) == binary(300)
    assert await commit(redis, keys, lease, second) == []
    assert await redis.get(keys.tail("t-1")) == b'[1,1]\n["a","x"]\n["a","\\u0000y"]\n'
    assert await admin_redis.exists(keys.tail("t-2")) == 0


async def test_append_to_a_key_of_another_type_writes_nothing(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(13, prefix)
    entry_ids = await pending_entries(redis, keys, 1)
    await redis.hset(keys.tail("t-1"), "f", "v")
    batch = Batch()
    batch.ops.append(("S", keys.turn("t-1"), (b"base",)))
    batch.ops.append(("A", keys.tail("t-1"), (b"line\n",)))
    batch.ack(entry_ids[0].decode())
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await commit(redis, keys, await held_lease(redis, keys, "worker-a"), batch)
    assert await admin_redis.exists(keys.turn("t-1")) == 0
    assert await pel(redis, keys) == entry_ids


def test_a_commit_writes_its_state_changes_before_its_frames() -> None:
    # A script may span a millisecond: frames written first could get ids older than the state
    # changes that caused them, and the timeline would show the consequence first.
    change = Transition(
        session_id=SESSION,
        turn_id="t-1",
        step=1,
        attempt=1,
        source="streaming",
        dest="truncated",
        trigger="truncate",
    )
    keys = Keys(0, "order")
    batch = Batch()
    batch.add_outputs(Outputs(frames=list(FRAMES), transitions=[change]), keys, MAXLEN)
    written = [key for _, key, _ in batch.ops]
    assert written == [keys.transitions, *[keys.session(SESSION)] * len(FRAMES)]
