"""Typed wrappers for the redis-py replies terminus reads (its stubs type them loosely).

Every client terminus creates returns bytes (no `decode_responses`), so these casts hold. A leaf:
the subscriber SDK imports it, so it must not import the fold (or the core) with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from redis.asyncio import Redis

from terminus.service.keys import START

Fields = dict[bytes, bytes]
StreamEntry = tuple[bytes, Fields]
StreamReply = list[tuple[bytes, list[StreamEntry]]]


def text(value: object) -> str:
    """A reply value as text: bytes decoded, None as ""."""
    if isinstance(value, bytes):
        return value.decode()
    return "" if value is None else str(value)


async def xrange(
    redis: Redis, key: str, start: str = "-", end: str = "+", count: int | None = None
) -> list[StreamEntry]:
    return cast("list[StreamEntry]", await redis.xrange(key, start, end, count))


async def xrevrange(
    redis: Redis, key: str, end: str = "+", start: str = "-", count: int | None = None
) -> list[StreamEntry]:
    return cast("list[StreamEntry]", await redis.xrevrange(key, end, start, count))


async def mget(redis: Redis, keys: list[str]) -> list[bytes | None]:
    return cast("list[bytes | None]", await redis.mget(keys))


async def xread(
    redis: Redis, cursors: Mapping[str, str], count: int, block: int | None = None
) -> StreamReply:
    """XREAD after each cursor; [] when nothing arrived within `block` ms."""
    streams = cast("dict[bytes | str | memoryview, int | bytes | str | memoryview]", cursors)
    return cast(StreamReply, await redis.xread(streams, count, block) or [])


async def last_id(redis: Redis, key: str) -> str:
    """The id of the stream's last entry, START ("0-0") if it is empty or missing."""
    last = cast("list[StreamEntry]", await redis.xrevrange(key, count=1))
    return last[0][0].decode() if last else START
