"""The soak's live reads of many streams at once, on one Redis or a Redis Cluster.

One Redis: one blocking XREAD over every stream. A cluster refuses an XREAD whose streams span
slots, and each partition is its own slot (`{p}` in every key). Blocking reads per slot would each
hold a connection and end one by one, so on a cluster the soak polls instead: one non-blocking
XREAD per slot, all in one cluster pipeline (one round trip per node, concurrently), then a short
pause when nothing came. The pause adds at most `POLL_MS` to the latencies a cluster run reports.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, Final, cast

from redis.asyncio import Redis

from terminus.service.redis.connect import execute, is_cluster
from terminus.service.redis.replies import StreamReply, xread

POLL_MS: Final = 20


def hash_tag(key: str) -> str:
    """The part of `key` a cluster hashes: its first non-empty `{...}`, else all of it."""
    start = key.find("{")
    end = key.find("}", start + 1)
    return key[start + 1 : end] if start >= 0 and end > start + 1 else key


async def read_streams(
    redis: Redis, cursors: Mapping[str, str], count: int, block_ms: int
) -> StreamReply:
    """What `cursors`' streams hold after their cursors; [] when nothing came within `block_ms`."""
    if not is_cluster(redis):
        return await xread(redis, cursors, count, block_ms)
    by_slot: dict[str, dict[str, str]] = defaultdict(dict)
    for key, cursor in cursors.items():
        by_slot[hash_tag(key)][key] = cursor
    waited = 0
    while True:
        pipe = redis.pipeline(transaction=False)
        for streams in by_slot.values():
            pipe.xread(cast(Any, streams), count=count)
        replies = await execute(pipe)
        found: StreamReply = [item for reply in replies for item in reply or []]
        if found or waited >= block_ms:
            return found
        await asyncio.sleep(POLL_MS / 1000)
        waited += POLL_MS
