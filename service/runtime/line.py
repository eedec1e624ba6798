"""A pump's own connection to one Redis, for its rounds: commands written and replies read on it
directly, not through redis-py's `Pipeline`.

Why: at light load a round carries a few entries, and its cost is mostly the round trip itself.
Through a `Pipeline`, one cost the worker 200-285 µs of CPU on the 2-core benchmark machine (a
pipeline object, a connection taken from the pool and given back, a task for the socket timeout
of every write and a timeout context for every read), and 128-154 µs on a connection of its own
with one deadline for the whole round (`python -m bench.e2e.round_trip`; docs/performance.md,
"A connection of its own, uvloop, and a leaner fold"). Commands are packed by
service/redis/resp.py, at a quarter of redis-py's cost.

The connection is redis-py's, made as its pool makes them (`connection_class` and
`connection_kwargs`: TLS, the ACL user, the database, the client name, the health check), with
the socket timeout replaced by one deadline per round. Replies are what the server sent (no
response callbacks): callers read them as such. An error reply stands in its command's place; any
other failure, the deadline included, drops the connection (the next round opens a new one) and
is raised, as a `Pipeline` would raise it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from terminus.service.redis.resp import pack_commands

Command = tuple[Any, ...]


class Line:
    """Runs batches of commands on a connection of its own, one batch at a time."""

    def __init__(self, redis: Redis, deadline_s: float) -> None:
        self.redis = redis
        self.deadline_s = deadline_s
        self._connection: AbstractConnection | None = None

    async def run(self, commands: Sequence[Command]) -> list[Any]:
        """Each command's reply, in order; an error reply as its exception, in its place."""
        connection = self._connection or self._open()
        try:
            async with asyncio.timeout(self.deadline_s):
                await connection.send_packed_command(pack_commands(commands))
                return [await _reply(connection) for _ in commands]
        except TimeoutError as exc:
            await self._drop(connection)
            raise RedisTimeoutError(f"no reply within {self.deadline_s:.1f}s") from exc
        except BaseException:
            # Unknown how much of the batch was read: what is left would answer the next one.
            await self._drop(connection)
            raise

    async def close(self) -> None:
        if self._connection is not None:
            await self._drop(self._connection)

    def _open(self) -> AbstractConnection:
        pool = self.redis.connection_pool
        options = {**pool.connection_kwargs, "socket_timeout": None}  # the round's deadline
        self._connection = pool.connection_class(**options)
        return self._connection

    async def _drop(self, connection: AbstractConnection) -> None:
        if self._connection is connection:
            self._connection = None
        await connection.disconnect(nowait=True)


async def _reply(connection: AbstractConnection) -> Any:
    try:
        return await connection.read_response()
    except ResponseError as exc:  # read whole: the connection stays in step
        return exc
