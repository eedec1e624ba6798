"""The subscriber SDK's Redis source: a session stream read with XREAD BLOCK on a redis.asyncio
client, each entry as an `Update`. `subscribe` resumes it after a cut; `views.follow_updates` is
the same loop, its frames alone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
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

READ_COUNT: Final = 512


@dataclass(frozen=True)
class RedisSource:
    """Reads the session stream with XREAD BLOCK on a `redis.asyncio.Redis` client (bytes
    replies, the default), under the deployment's `partitions` and key `prefix`. Frames of a
    kind this SDK does not know are passed over and counted in `unknown_frames`."""

    redis: Redis
    partitions: int = 16
    prefix: str = DEFAULT_PREFIX
    block_ms: int = 1000
    unknown_frames: UnknownFrames = field(default_factory=UnknownFrames, compare=False)

    async def read(self, session_id: str, after: str | None) -> AsyncGenerator[Update, None]:
        key = keys_for_session(session_id, self.partitions, self.prefix).session(session_id)
        last = after or START
        while True:
            for _, entries in await self._xread(key, last):
                for entry_id, fields in entries:
                    last = entry_id.decode()
                    update = decoded(last, fields.get(FIELD, b""), self.unknown_frames)
                    if update is not None:
                        yield update

    async def _xread(self, key: str, last: str) -> StreamReply:
        try:
            # A client without a socket timeout would wait forever on a silently dead socket.
            async with asyncio.timeout(self.block_ms / 1000 + 10):
                return await xread(self.redis, {key: last}, READ_COUNT, self.block_ms)
        except (rx.AuthenticationError, rx.AuthorizationError, rx.NoPermissionError) as exc:
            raise SubscriptionDenied(403, str(exc)) from exc
        except (rx.ConnectionError, rx.TimeoutError, OSError, TimeoutError) as exc:
            raise Interrupted(repr(exc)) from exc
