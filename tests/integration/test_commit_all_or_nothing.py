"""The lease-fenced batch commit against a real Redis: with a valid lease every write of a batch
lands and its entries are acked, in one script call however many; with a lost or expired lease,
or a write that would fail halfway, nothing is written and nothing acked (invariant 7)."""

from __future__ import annotations

import asyncio
from typing import Any, Final

import msgspec
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

from terminus.events.codec import decode_command, decode_frame, decode_message, decode_partial
from terminus.events.errors import LLMErrorPayload
from terminus.events.inbound import Usage
from terminus.events.outbound import (
    AgentMessageChunk,
    PartialRecord,
    PersistedMessage,
    RetryScheduled,
    TextPart,
)
from terminus.service.fold.commit import (
    Batch,
    LeaseLost,
    commit,
)
from terminus.service.keys import FIELD, Keys
from terminus.service.redis.scripts import source
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.states import TurnState
from terminus.statemachines.turn import Turn

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

ERROR = LLMErrorPayload(type="rate_limit", message="slow down", retryable=True, status=429)

TEXT = TextPart(part_id="p-1", text="Hello")
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
        keys.session(sid),
        keys.commands,
        keys.messages(sid),
        keys.message_order(sid),
        keys.partials(sid),
        keys.turn("t-open"),
        keys.open_turns,
        keys.metrics,
        keys.dead,
    ]


async def value(redis: Redis, key: str, field: str | None = None) -> bytes:
    """A string key's value, or a hash field's when `field` is given; it must exist."""
    raw = await (redis.get(key) if field is None else redis.hget(key, field))
    assert isinstance(raw, bytes)
    return raw


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
    frame_ids = await commit(redis, keys, lease, full_batch(keys, entry_ids))
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
    with pytest.raises(LeaseLost) as lost:
        await commit(redis, keys, stale, batch)
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
    with pytest.raises(LeaseLost):
        await commit(redis, keys, stale, full_batch(keys, entry_ids))
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
    ids = await commit(redis, keys, lease, batch)
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
    assert await commit(redis, keys, await held_lease(redis, keys, "worker-a"), Batch()) == []
    with pytest.raises(LeaseLost):
        await commit(redis, keys, "worker-z:9", Batch())


@pytest.mark.parametrize("acked", [True, False], ids=["with acks", "without acks"])
async def test_a_log_that_is_no_stream_fails_the_commit_before_any_write(
    redis: Redis, admin_redis: Redis, prefix: str, acked: bool
) -> None:
    """With acks, the resend check's XPENDING on the log fails first; without, the log's own
    type check: either way before the first write."""
    keys = Keys(11 if acked else 12, prefix)
    await redis.set(keys.inbound, "not a stream")
    lease = await held_lease(redis, keys, "worker-a")
    batch = full_batch(keys, [b"1-1"])
    if not acked:
        batch.acks.clear()
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await commit(redis, keys, lease, batch, "worker-a")
    assert await admin_redis.exists(*written_keys(keys)) == 0
    assert await redis.get(keys.inbound) == b"not a stream"
