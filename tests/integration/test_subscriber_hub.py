"""The gateway's hub gives a subscriber that joins late, while a read is in flight, its backlog
before newer frames: no frame between its cursor and the hub's read position is lost."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import cast

from redis.asyncio import Redis
from subscriber_support import PARTITIONS

from terminus.events.codec import encode_json
from terminus.events.outbound import AgentMessageChunk
from terminus.service.gateway.hub import Delivery, Hub
from terminus.service.keys import FIELD, keys_for_session
from terminus.service.redis.replies import text


async def test_the_hub_gives_a_late_joiner_its_backlog_before_newer_frames(
    redis: Redis, prefix: str
) -> None:
    """A subscriber joining behind the others while a read is in flight must not be offered
    that read, which starts after its cursor (it was, and every SSE resume under load lost the
    frames between the resume cursor and the hub's read position)."""
    key = keys_for_session("s-9", PARTITIONS, prefix).session("s-9")

    async def append(n: int) -> str:
        frame = AgentMessageChunk(
            session_id="s-9", turn_id="t-9", step=1, attempt=1, part_id="p0", delta=f"{n} "
        )
        return text(await redis.xadd(key, {FIELD: encode_json(frame)}))

    cursors = [await append(n) for n in range(5)]
    hub = Hub(redis, PARTITIONS, prefix)
    ahead = hub.subscribe("s-9")
    behind = hub.subscribe("s-9", cursors[0])
    try:
        assert [(await anext(ahead)).frame.cursor for _ in cursors] == cursors
        await asyncio.sleep(0.03)  # the hub now blocks in an XREAD after the last frame
        first = asyncio.ensure_future(anext(behind))
        await asyncio.sleep(0)  # `behind` joins while that read is in flight
        newer = await append(5)
        got = [(await first).frame.cursor]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2):
                while len(got) < 5:
                    got.append((await anext(behind)).frame.cursor)
        assert got == [*cursors[1:], newer]
    finally:
        # Closed first, as the gateway's streams are when their clients go.
        for stream in (behind, ahead):
            await cast(AsyncGenerator[Delivery, None], stream).aclose()
        await hub.close()
