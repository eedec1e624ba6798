"""The lease-fenced batch commit against a real Redis: all of a batch or nothing (invariant 7)."""

from __future__ import annotations

import asyncio
from typing import Any, Final, cast

import msgspec
import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from terminus.events.codec import decode_command, decode_frame, decode_message, decode_partial
from terminus.events.errors import LLMErrorPayload
from terminus.events.inbound import Usage
from terminus.events.outbound import (
    AgentMessageChunk,
    PartialRecord,
    PersistedMessage,
    RetryScheduled,
    SessionUpdate,
    TextPart,
    TurnFinished,
)
from terminus.service.fold.applier import Entry as AppliedEntry
from terminus.service.fold.applier import read_entries
from terminus.service.fold.commit import (
    Batch,
    LeaseLost,
    commit,
    commit_ids,
    commit_or_raise,
    encode,
)
from terminus.service.keys import FIELD, GROUP, Keys
from terminus.service.redis.scripts import script, source
from terminus.service.runtime.leases import Leases, lease_value
from terminus.statemachines.outputs import Outputs, Transition
from terminus.statemachines.states import TurnState
from terminus.statemachines.turn import Turn

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

SESSION = "s-1"
MAXLEN = 10_000
ERROR = LLMErrorPayload(type="rate_limit", message="slow down", retryable=True, status=429)
Entry = tuple[bytes, dict[bytes, bytes]]

TEXT = TextPart(part_id="p-1", text="Hello")
FRAMES: list[SessionUpdate] = [
    AgentMessageChunk(
        session_id=SESSION, turn_id="t-1", step=1, attempt=1, part_id="p-1", delta="Hel"
    ),
    TurnFinished(session_id=SESSION, turn_id="t-1", stopReason="end_turn", usage=Usage()),
]
COMMAND = RetryScheduled(
    session_id=SESSION,
    turn_id="t-1",
    step=1,
    attempt=2,
    delay_ms=500,
    not_before_ms=1_500,
    reason="rate_limit",
    error=ERROR,
)
MESSAGE = PersistedMessage(
    message_id="msg-t-1",
    session_id=SESSION,
    turn_id="t-1",
    parts=[TEXT],
    finish_reason="stop",
    usage=Usage(),
    provider="p",
    model="m",
)
PARTIAL = PartialRecord(
    session_id=SESSION, turn_id="t-1", step=1, attempt=1, parts=[TEXT], reason="failed", error=ERROR
)


def outputs() -> Outputs:
    """One of every output kind of a turn, for the session `SESSION`."""
    return Outputs(frames=list(FRAMES), commands=[COMMAND], messages=[MESSAGE], partials=[PARTIAL])


def full_batch(keys: Keys, entry_ids: list[bytes]) -> Batch:
    """`outputs()`, an open and a finished turn, a dead letter, and the acks of `entry_ids`."""
    batch = Batch()
    batch.add_outputs(outputs(), keys, MAXLEN, [1_000])
    batch.add_turn(keys, Turn(session_id=SESSION, turn_id="t-open", max_attempts=3), 61_000)
    done = Turn(session_id=SESSION, turn_id="t-done", max_attempts=3, state=TurnState.FINISHED)
    batch.add_turn(keys, done)
    batch.add_dead(keys, b"\xffnot json", "malformed json", entry_ids[-1].decode())
    batch.count(keys, COUNTS)
    batch.ack(*(i.decode() for i in entry_ids))
    return batch


COUNTS: Final = {'["frames_out"]': 2, '["events_in","outcome","applied"]': 3}


def written_keys(keys: Keys) -> list[str]:
    """Every key a full batch writes to."""
    sid = SESSION
    return [
        keys.session(sid), keys.commands, keys.messages(sid), keys.message_order(sid),
        keys.partials(sid), keys.turn("t-open"), keys.open_turns, keys.metrics, keys.dead,
    ]  # fmt: skip


async def pending_entries(redis: Redis, keys: Keys, count: int) -> list[bytes]:
    """`count` inbound entries read through the group but not acked: they sit in the PEL."""
    await redis.xgroup_create(keys.inbound, GROUP, id="0", mkstream=True)
    for n in range(count):
        await redis.xadd(keys.inbound, {FIELD: f'{{"n": {n}}}'})
    reply = await redis.xreadgroup(GROUP, "worker-a", {keys.inbound: ">"}, count=count)
    [(_, entries)] = cast("list[tuple[bytes, list[Entry]]]", reply)
    return [entry_id for entry_id, _ in entries]


async def pel(redis: Redis, keys: Keys) -> list[bytes]:
    rows = await redis.xpending_range(keys.inbound, GROUP, min="-", max="+", count=10_000)
    return [cast(bytes, row["message_id"]) for row in rows]


async def entries(redis: Redis, key: str) -> list[Entry]:
    return cast("list[Entry]", await redis.xrange(key))


async def value(redis: Redis, key: str, field: str | None = None) -> bytes:
    """A string key's value, or a hash field's when `field` is given; it must exist."""
    raw = await (redis.get(key) if field is None else redis.hget(key, field))
    assert isinstance(raw, bytes)
    return raw


async def held_lease(redis: Redis, keys: Keys, worker: str, ttl_ms: int = 10_000) -> str:
    epoch = await Leases(redis, keys.prefix).acquire(keys.partition, worker, ttl_ms)
    assert epoch is not None
    return lease_value(worker, epoch)


async def assert_written(
    redis: Redis, keys: Keys, frame_ids: list[str], dead_source: bytes
) -> None:
    """Every write of `full_batch` is in place, byte for byte."""
    stream = await entries(redis, keys.session(SESSION))
    assert [i.decode() for i, _ in stream] == frame_ids
    assert [decode_frame(fields[FIELD]) for _, fields in stream] == FRAMES
    [(_, command)] = await entries(redis, keys.commands)
    assert decode_command(command[FIELD]) == COMMAND
    message = await value(redis, keys.messages(SESSION), "msg-t-1")
    assert decode_message(message) == MESSAGE
    assert decode_partial(await value(redis, keys.partials(SESSION), "t-1")) == PARTIAL
    snapshot = msgspec.msgpack.decode(await value(redis, keys.turn("t-open")), type=Turn)
    assert snapshot == Turn(session_id=SESSION, turn_id="t-open", max_attempts=3)
    done = msgspec.msgpack.decode(await value(redis, keys.turn("t-done")), type=Turn)
    assert done.state is TurnState.FINISHED, (
        "a final turn's snapshot stays, to recognize late events"
    )
    assert await redis.zrange(keys.open_turns, 0, -1, withscores=True) == [(b"t-open", 61_000.0)]
    assert await redis.zrange(keys.message_order(SESSION), 0, -1, withscores=True) == [
        (b"msg-t-1", 1_000.0)
    ]
    [(_, dead)] = await entries(redis, keys.dead)
    source = {b"source_stream": keys.inbound.encode(), b"source_id": dead_source}
    assert dead == {b"raw": b"\xffnot json", b"reason": b"malformed json", **source}
    assert await redis.hgetall(keys.metrics) == {k.encode(): b"%d" % n for k, n in COUNTS.items()}


async def test_a_valid_lease_commits_every_write_and_acks(redis: Redis, prefix: str) -> None:
    keys = Keys(5, prefix)
    entry_ids = await pending_entries(redis, keys, 3)
    await redis.set(keys.turn("t-done"), b"old snapshot")
    await redis.zadd(keys.open_turns, {"t-done": 5})
    lease = await held_lease(redis, keys, "worker-a")
    frame_ids = await commit_or_raise(redis, keys, lease, full_batch(keys, entry_ids))
    await assert_written(redis, keys, frame_ids, entry_ids[-1])
    assert await pel(redis, keys) == []


async def test_a_lost_lease_writes_nothing_and_acks_nothing(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(6, prefix)
    entry_ids = await pending_entries(redis, keys, 3)
    stale = await held_lease(redis, keys, "worker-a", ttl_ms=30)
    await asyncio.sleep(0.1)
    await held_lease(redis, keys, "worker-b")
    batch = full_batch(keys, entry_ids)
    assert not await commit(redis, keys, stale, batch)
    with pytest.raises(LeaseLost) as lost:
        await commit_or_raise(redis, keys, stale, batch)
    assert lost.value.partition == 6
    assert lost.value.lease_value == stale
    assert await admin_redis.exists(*written_keys(keys)) == 0
    assert await pel(redis, keys) == entry_ids


async def test_an_expired_lease_nobody_took_commits_nothing(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(7, prefix)
    entry_ids = await pending_entries(redis, keys, 2)
    stale = await held_lease(redis, keys, "worker-a", ttl_ms=30)
    await asyncio.sleep(0.1)
    assert not await commit(redis, keys, stale, full_batch(keys, entry_ids))
    assert await admin_redis.exists(*written_keys(keys)) == 0
    assert await pel(redis, keys) == entry_ids


async def test_a_batch_that_would_fail_halfway_writes_nothing(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(8, prefix)
    entry_ids = await pending_entries(redis, keys, 2)
    await redis.set(keys.dead, "not a stream")
    lease = await held_lease(redis, keys, "worker-a")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await commit(redis, keys, lease, full_batch(keys, entry_ids))
    assert await admin_redis.exists(*written_keys(keys)[:-1]) == 0
    assert await pel(redis, keys) == entry_ids


async def test_a_thousand_frames_commit_in_one_call(
    redis: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = Keys(9, prefix)
    entry_ids = await pending_entries(redis, keys, 1_000)
    batch = Batch()
    for n in range(1_000):
        frame = AgentMessageChunk(
            session_id=SESSION, turn_id="t-1", step=1, attempt=1, part_id="p", delta=str(n)
        )
        batch.add_frame(keys, frame, MAXLEN)
    batch.ack(*(i.decode() for i in entry_ids))
    lease = await held_lease(redis, keys, "worker-a")
    calls = await count_evalsha(redis, monkeypatch)
    ids = await commit_or_raise(redis, keys, lease, batch)
    assert len(calls) == 1
    assert len(ids) == batch.frame_count == 1_000
    assert await redis.xlen(keys.session(SESSION)) == 1_000
    assert await pel(redis, keys) == []


async def count_evalsha(redis: Redis, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Load the commit script, then record the sha of every EVALSHA `redis` sends."""
    await redis.script_load(source("commit"))
    calls: list[str] = []
    original = redis.evalsha

    async def counting(sha: str, numkeys: int, *args: Any) -> Any:
        calls.append(sha)
        return await original(sha, numkeys, *args)

    monkeypatch.setattr(redis, "evalsha", counting)
    return calls


async def test_an_empty_batch_only_checks_the_lease(redis: Redis, prefix: str) -> None:
    keys = Keys(10, prefix)
    assert await commit_ids(redis, keys, await held_lease(redis, keys, "worker-a"), Batch()) == []
    assert await commit_ids(redis, keys, "worker-z:9", Batch()) is None


# One MessagePack blob of ops: binary values, APPEND, malformed ops, the read that follows


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
    ids = await commit_or_raise(redis, keys, await held_lease(redis, keys, "worker-a"), batch)
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
    assert await commit_ids(redis, keys, lease, first) == []
    assert await redis.get(keys.tail("t-2")) == binary(300)
    assert await commit_ids(redis, keys, lease, second) == []
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


Packed = str | int | list[Any]

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
    assert read_entries([plain, other], [b"\x00\xff", [b"x", b"y"]]) == [
        AppliedEntry(plain.decode(), {FIELD: b"\x00\xff"}),
        AppliedEntry(other.decode(), {b"x": b"y"}),
    ]


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


async def test_counts_of_successive_commits_add_up(redis: Redis, prefix: str) -> None:
    keys = Keys(20, prefix)
    lease = await held_lease(redis, keys, "worker-a")
    for n in (3, 4, -2):
        batch = Batch()
        batch.count(keys, {'["frames_out"]': n, '["a","k","v"]': 1})
        assert await commit(redis, keys, lease, batch)
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


def test_a_commit_writes_its_state_changes_before_its_frames() -> None:
    # A script may span a millisecond: frames written first could get ids older than the state
    # changes that caused them, and the timeline would show the consequence first.
    change = Transition(session_id=SESSION, turn_id="t-1", step=1, attempt=1, source="streaming",
                        dest="truncated", trigger="truncate")  # fmt: skip
    keys = Keys(0, "order")
    batch = Batch()
    batch.add_outputs(Outputs(frames=list(FRAMES), transitions=[change]), keys, MAXLEN)
    written = [key for _, key, _ in batch.ops]
    assert written == [keys.transitions, *[keys.session(SESSION)] * len(FRAMES)]
