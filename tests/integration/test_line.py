"""The pump's own connection (service/runtime/line.py) against a real Redis: replies in order with
an error reply in its place, the pool's connection options (in the TLS + ACL pass: its
certificate and user), and a round past its deadline drops the connection, so that its late
reply never answers the next round."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from terminus.service.redis.connect import TRANSIENT
from terminus.service.runtime.line import Line


@contextlib.asynccontextmanager
async def line_on(redis: Redis, deadline_s: float = 5) -> AsyncIterator[Line]:
    line = Line(redis, deadline_s)
    try:
        yield line
    finally:
        await line.close()


async def test_replies_come_in_order_with_an_error_in_its_place(redis: Redis, prefix: str) -> None:
    key = f"{prefix}:line"
    async with line_on(redis) as line:
        set_, wrong, get = await line.run([("SET", key, "a"), ("INCR", key), ("GET", key)])
        assert (set_, get) == (b"OK", b"a")
        assert isinstance(wrong, ResponseError), "INCR of a non-integer: its error, in its place"
        # The same connection goes on in step: an error reply was read whole.
        assert await line.run([("APPEND", key, "b"), ("GET", key)]) == [2, b"ab"]
        assert await redis.get(key) == b"ab", "the pool's database, not another"


async def test_a_round_past_its_deadline_is_dropped_with_its_connection(
    redis: Redis, prefix: str
) -> None:
    stream, key = f"{prefix}:line-stream", f"{prefix}:line-key"
    await redis.set(key, "value")
    async with line_on(redis, deadline_s=0.2) as line:
        blocked = [("XREAD", "BLOCK", 0, "STREAMS", stream, "$")]
        with pytest.raises(RedisTimeoutError) as raised:
            await line.run(blocked)
        assert isinstance(raised.value, TRANSIENT), "the pump starts over on it, as on a cut"
        # Were the connection kept, the XREAD's reply to this entry would answer the GET.
        await redis.xadd(stream, {"e": b"late"})
        await asyncio.sleep(0.05)
        assert await line.run([("GET", key)]) == [b"value"]


async def test_a_closed_line_opens_a_new_connection_when_used_again(
    redis: Redis, prefix: str
) -> None:
    key = f"{prefix}:line-again"
    async with line_on(redis) as line:
        assert await line.run([("SET", key, "1")]) == [b"OK"]
        await line.close()
        assert await line.run([("GET", key)]) == [b"1"]
