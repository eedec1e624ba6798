"""The subscriber SDK's Redis source: a session stream read with XREAD BLOCK on a redis.asyncio
client, each entry as an `Update`. `subscribe` resumes it after a cut; `views.follow_updates` is
the same loop, its frames alone."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass, field
from typing import Final

from redis import exceptions as rx
from redis.asyncio import Redis

from terminus.service.keys import DEFAULT_PREFIX, FIELD, START, keys_for_session
from terminus.service.redis.replies import StreamReply, xread
from terminus.service.sdk.updates import (
    Interrupted,
    SubscriptionDenied,
    UnknownFrames,
    Update,
    decoded,
)
from terminus.service.shape import partitions_for_reader

READ_COUNT: Final = 512


@dataclass(frozen=True)
class RedisSource:
    """Reads the session stream with XREAD BLOCK on a `redis.asyncio.Redis` client (bytes
    replies, the default), under the deployment's key `prefix`; `partitions` None (the default)
    follows the count the deployment recorded, a set one must agree with it (service/shape.py).
    Frames of a kind this SDK does not know are passed over and counted in `unknown_frames`."""

    redis: Redis
    partitions: int | None = None
    prefix: str = DEFAULT_PREFIX
    block_ms: int = 1000
    unknown_frames: UnknownFrames = field(default_factory=UnknownFrames, compare=False)

    async def read(self, session_id: str, after: str | None) -> AsyncGenerator[Update, None]:
        with _as_subscriber_errors():
            partitions = await partitions_for_reader(self.redis, self.prefix, self.partitions)
        key = keys_for_session(session_id, partitions, self.prefix).session(session_id)
        last = after or START
        while True:
            for _, entries in await self._xread(key, last):
                for entry_id, fields in entries:
                    last = entry_id.decode()
                    update = decoded(last, fields.get(FIELD, b""), self.unknown_frames)
                    if update is not None:
                        yield update

    async def _xread(self, key: str, last: str) -> StreamReply:
        with _as_subscriber_errors():
            # A client without a socket timeout would wait forever on a silently dead socket.
            async with asyncio.timeout(self.block_ms / 1000 + 10):
                return await xread(self.redis, {key: last}, READ_COUNT, self.block_ms)


@contextlib.contextmanager
def _as_subscriber_errors() -> Iterator[None]:
    """Redis's refusals and cuts as the subscriber's errors: `subscribe` resumes after a cut."""
    try:
        yield
    except (rx.AuthenticationError, rx.AuthorizationError, rx.NoPermissionError) as exc:
        raise SubscriptionDenied(403, str(exc)) from exc
    except (rx.ConnectionError, rx.TimeoutError, OSError, TimeoutError) as exc:
        raise Interrupted(repr(exc)) from exc
