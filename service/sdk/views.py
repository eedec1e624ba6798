"""What frontends and operators read: session updates, persisted messages and dead letters.

Every function takes a `redis.asyncio.Redis` client speaking RESP2 with `decode_responses=False`
(both the defaults): dead letters keep their raw bytes. Key names come from `terminus.service.keys`
only.

`partitions` None (the default) is the count the deployment recorded; a set one must agree with
it, else `ShapeMismatch` (service/shape.py).

A cursor is the stream id of a frame in its session stream; reading "after" a cursor is exclusive,
so a reader that passes the last cursor it saw gets every later frame exactly once. Session
streams are capped (MAXLEN ~): a cursor older than the oldest kept frame resumes at that frame.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable, Sequence
from typing import Final, cast

import msgspec
from redis.asyncio import Redis

from terminus.events.codec import decode_message
from terminus.events.outbound import PersistedMessage, SessionUpdate
from terminus.service.keys import DEFAULT_PREFIX, FIELD, Keys, keys_for_session
from terminus.service.redis.connect import execute
from terminus.service.redis.replies import StreamEntry, text, xrange
from terminus.service.sdk.redis_source import RedisSource
from terminus.service.sdk.updates import frame_at
from terminus.service.shape import partitions_for_reader

REQUEUED_FROM: Final = b"requeued_from"


class DeadLetter(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of a partition's dead stream: the inbound entry that could not be applied."""

    partition: int
    id: str
    source_stream: str
    source_id: str
    reason: str
    raw: bytes


async def session_updates(
    redis: Redis,
    session_id: str,
    *,
    after: str | None = None,
    count: int | None = None,
    partitions: int | None = None,
    prefix: str = DEFAULT_PREFIX,
) -> list[SessionUpdate]:
    """Frames of the session after cursor `after` (exclusive; None: from the first), oldest
    first, at most `count`, each with `cursor` set to its stream id."""
    partitions = await partitions_for_reader(redis, prefix, partitions)
    key = keys_for_session(session_id, partitions, prefix).session(session_id)
    low = "-" if after is None else f"({after}"
    return [frame_of(entry) for entry in await xrange(redis, key, low, "+", count)]


async def follow_updates(
    redis: Redis,
    session_id: str,
    *,
    after: str | None = None,
    block_ms: int = 1000,
    partitions: int | None = None,
    prefix: str = DEFAULT_PREFIX,
) -> AsyncGenerator[SessionUpdate, None]:
    """The frames after `after` that exist, then each new one as it is committed; forever.

    The SDK's `RedisSource` read loop, its frames alone: one XREAD loop from the last id yielded
    serves both, so there is no gap between the backlog and the live tail and no frame is
    yielded twice. A broken connection ends it with `Interrupted`; `subscribe` resumes instead.
    """
    source = RedisSource(redis, partitions=partitions, prefix=prefix, block_ms=block_ms)
    async for update in source.read(session_id, after):
        yield update.frame


async def session_messages(
    redis: Redis,
    session_id: str,
    *,
    partitions: int | None = None,
    prefix: str = DEFAULT_PREFIX,
) -> list[PersistedMessage]:
    """The session's persisted messages in commit order (first commit of each message)."""
    keys = keys_for_session(
        session_id, await partitions_for_reader(redis, prefix, partitions), prefix
    )
    order = await redis.zrange(keys.message_order(session_id), 0, -1)
    if not order:
        return []
    # One commit writes a message and its order entry together, so every id listed is found.
    values = await redis.hmget(keys.messages(session_id), cast(list[bytes | str], order))
    return [decode_message(value) for value in values if value is not None]


async def dead_letters(
    redis: Redis,
    *,
    partition: int | None = None,
    partitions: int | None = None,
    prefix: str = DEFAULT_PREFIX,
) -> list[DeadLetter]:
    """Dead letters of one partition, or of every partition in partition order, oldest first."""
    partitions = await partitions_for_reader(redis, prefix, partitions)
    chosen = range(partitions) if partition is None else [partition]
    async with redis.pipeline(transaction=False) as pipe:
        for number in chosen:
            pipe.xrange(Keys(number, prefix).dead)
        replies: list[list[StreamEntry]] = await execute(pipe)
    return [_letter(n, e) for n, entries in zip(chosen, replies, strict=True) for e in entries]


async def requeue(redis: Redis, letters: Iterable[DeadLetter]) -> list[str]:
    """Append each letter's raw bytes to its source stream as a new entry (field `e`, plus
    `requeued_from` = the dead letter id); the new entry ids, in order.

    The dead letters stay: replay re-derives the dead stream from the inbound log, where the
    failed entry still is, so deleting them here would make live and replay differ.
    """
    async with redis.pipeline(transaction=False) as pipe:
        for letter in letters:
            pipe.xadd(letter.source_stream, {FIELD: letter.raw, REQUEUED_FROM: letter.id})
        ids: Sequence[bytes | str] = await execute(pipe)
    return [text(i) for i in ids]


def frame_of(entry: StreamEntry) -> SessionUpdate:
    """A session stream entry as its frame, `cursor` set to the entry id."""
    entry_id, fields = entry
    return frame_at(text(entry_id), (fields or {})[FIELD])


def _letter(partition: int, entry: StreamEntry) -> DeadLetter:
    entry_id, fields = entry
    fields = fields or {}
    return DeadLetter(
        partition=partition,
        id=text(entry_id),
        source_stream=text(fields.get(b"source_stream")),
        source_id=text(fields.get(b"source_id")),
        reason=text(fields.get(b"reason")),
        raw=_bytes(fields.get(b"raw")),
    )


def _bytes(value: bytes | str | None) -> bytes:
    return value.encode() if isinstance(value, str) else value or b""
