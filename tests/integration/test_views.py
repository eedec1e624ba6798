"""The read side against a real Redis: cursors, follow, messages in commit order, dead letters."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import msgspec
import pytest
from redis.asyncio import Redis

from terminus.events.codec import encode_json
from terminus.events.inbound import Usage
from terminus.events.outbound import AgentMessageChunk, PersistedMessage, SessionUpdate, TextPart
from terminus.service.fold.commit import Batch, commit
from terminus.service.keys import Keys, keys_for_session
from terminus.service.runtime.leases import Leases, lease_value
from terminus.service.sdk.views import (
    DeadLetter,
    dead_letters,
    follow_updates,
    requeue,
    session_messages,
    session_updates,
)

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

P = 4
SESSION = "s-views"
MAXLEN = 10_000
TIMEOUT = 5.0


def chunk(n: int, session: str = SESSION) -> AgentMessageChunk:
    return AgentMessageChunk(
        session_id=session, turn_id="t-1", step=1, attempt=1, part_id="p-1", delta=f"d{n}"
    )


def message(message_id: str, text: str) -> PersistedMessage:
    return PersistedMessage(
        message_id=message_id,
        session_id=SESSION,
        turn_id=f"turn-{message_id}",
        parts=[TextPart(part_id="p-1", text=text)],
        finish_reason="stop",
        usage=Usage(),
        provider="anthropic",
        model="m",
    )


async def lease(redis: Redis, keys: Keys) -> str:
    epoch = await Leases(redis, keys.prefix).acquire(keys.partition, "worker-a", 10_000)
    assert epoch is not None
    return lease_value("worker-a", epoch)


async def commit_frames(redis: Redis, prefix: str, frames: list[SessionUpdate]) -> list[str]:
    """Commit `frames` as one batch the way a worker does; their stream ids."""
    keys = keys_for_session(SESSION, P, prefix)
    batch = Batch()
    for frame in frames:
        batch.add_frame(keys, frame, MAXLEN)
    return await commit(redis, keys, await lease(redis, keys), batch)


async def commit_dead(redis: Redis, keys: Keys, raw: bytes, reason: str) -> None:
    batch = Batch()
    batch.add_dead(keys, raw, reason, "1-1")
    await commit(redis, keys, await lease(redis, keys), batch)


def uncursored(frames: list[SessionUpdate]) -> list[SessionUpdate]:
    return [msgspec.structs.replace(f, cursor=None) for f in frames]


async def test_updates_carry_their_stream_id_as_cursor(redis: Redis, prefix: str) -> None:
    frames: list[SessionUpdate] = [chunk(n) for n in range(3)]
    ids = await commit_frames(redis, prefix, frames)
    read = await session_updates(redis, SESSION, partitions=P, prefix=prefix)
    assert [f.cursor for f in read] == ids
    assert uncursored(read) == frames


async def test_resuming_from_each_cursor_is_gapless_and_without_duplicates(
    redis: Redis, prefix: str
) -> None:
    frames: list[SessionUpdate] = [chunk(n) for n in range(7)]
    ids: list[str] = []
    for part in (frames[:3], frames[3:4], frames[4:]):
        ids += await commit_frames(redis, prefix, part)
    seen: list[SessionUpdate] = []
    cursor: str | None = None
    while page := await session_updates(
        redis, SESSION, after=cursor, count=2, partitions=P, prefix=prefix
    ):
        seen.extend(page)
        cursor = page[-1].cursor
    assert [f.cursor for f in seen] == ids
    assert uncursored(seen) == frames
    tail = await session_updates(redis, SESSION, after=ids[4], partitions=P, prefix=prefix)
    assert [f.cursor for f in tail] == ids[5:]


async def test_a_session_without_frames_reads_empty(redis: Redis, prefix: str) -> None:
    assert await session_updates(redis, "nobody", partitions=P, prefix=prefix) == []


async def take(updates: AsyncIterator[SessionUpdate], count: int) -> list[SessionUpdate]:
    return [await asyncio.wait_for(anext(updates), TIMEOUT) for _ in range(count)]


async def test_follow_yields_the_backlog_then_new_frames(redis: Redis, prefix: str) -> None:
    first = await commit_frames(redis, prefix, [chunk(0), chunk(1), chunk(2)])
    follow = follow_updates(
        redis, SESSION, after=first[0], block_ms=50, partitions=P, prefix=prefix
    )
    try:
        backlog = await take(follow, 2)
        waiting = asyncio.ensure_future(take(follow, 2))
        await asyncio.sleep(0.1)  # the reader is now blocked in XREAD
        later = await commit_frames(redis, prefix, [chunk(3), chunk(4)])
        live = await waiting
    finally:
        await follow.aclose()
    assert [f.cursor for f in backlog + live] == first[1:] + later
    assert uncursored(backlog + live) == [chunk(n) for n in range(1, 5)]


async def test_follow_from_the_start_reads_everything(redis: Redis, prefix: str) -> None:
    ids = await commit_frames(redis, prefix, [chunk(0), chunk(1)])
    follow = follow_updates(redis, SESSION, block_ms=50, partitions=P, prefix=prefix)
    try:
        assert [f.cursor for f in await take(follow, 2)] == ids
    finally:
        await follow.aclose()


async def test_messages_come_in_commit_order(redis: Redis, prefix: str) -> None:
    keys = keys_for_session(SESSION, P, prefix)
    committed = [message("m-c", "first"), message("m-a", "second"), message("m-b", "third")]
    for at_ms, msg in enumerate(committed, start=1_000):
        await redis.hset(keys.messages(SESSION), msg.message_id, encode_json(msg))
        await redis.zadd(keys.message_order(SESSION), {msg.message_id: at_ms})
    assert await session_messages(redis, SESSION, partitions=P, prefix=prefix) == committed
    assert await session_messages(redis, "nobody", partitions=P, prefix=prefix) == []


async def test_dead_letters_are_listed_across_partitions(redis: Redis, prefix: str) -> None:
    await commit_dead(redis, Keys(3, prefix), b"\xff\x00bad", "malformed json")
    await commit_dead(redis, Keys(0, prefix), b"{}", "missing field")
    everything = await dead_letters(redis, partitions=P, prefix=prefix)
    assert [(d.partition, d.raw, d.reason) for d in everything] == [
        (0, b"{}", "missing field"),
        (3, b"\xff\x00bad", "malformed json"),
    ]
    assert everything[1].source_stream == Keys(3, prefix).inbound
    assert everything[1].source_id == "1-1"
    only = await dead_letters(redis, partition=3, partitions=P, prefix=prefix)
    assert only == everything[1:]


async def test_requeue_appends_the_raw_bytes_and_keeps_the_letter(
    redis: Redis, prefix: str
) -> None:
    keys = Keys(2, prefix)
    raw = b"\xff\xfe not utf-8 \x00"
    await commit_dead(redis, keys, raw, "malformed json")
    [letter] = await dead_letters(redis, partitions=P, prefix=prefix)
    [new_id] = await requeue(redis, [letter])
    appended = await redis.xrange(keys.inbound)
    assert appended is not None
    [(entry_id, fields)] = appended
    assert entry_id == new_id.encode()
    assert fields == {b"e": raw, b"requeued_from": letter.id.encode()}
    assert await dead_letters(redis, partitions=P, prefix=prefix) == [letter]
    assert await requeue(redis, list[DeadLetter]()) == []
