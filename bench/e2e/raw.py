"""The raw Redis ceiling: the same entries appended and drained with no terminus in between.

Append: pipelined XADDs. Drain: one task per partition, as a worker runs its partitions, each
looping XREADGROUP COUNT `batch` and XACK of what it read, with no decoding and no writes: the
two round trips per batch a worker makes (its read and commit scripts), minus all the work.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from time import perf_counter
from typing import Any, Final, cast

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from bench.common.redis_ops import ServerUsage, server_usage, xadd_all
from terminus.service.keys import GROUP
from terminus.service.redis.replies import StreamReply

CONSUMER: Final = "raw"


class RawFigures:
    """Seconds to append and to drain `events` entries, and the server's usage while draining."""

    def __init__(self, events: int, append_s: float, drain_s: float, usage: ServerUsage) -> None:
        self.events, self.append_s, self.drain_s, self.usage = events, append_s, drain_s, usage

    def report(self) -> dict[str, Any]:
        n = self.events
        return {
            "raw_xadd_events_per_s": n / self.append_s,
            "raw_events_per_s": n / self.drain_s,
            "raw_redis_cpu_us_per_event": self.usage.cpu_s * 1e6 / n,
            "raw_redis_cmd_us_per_event": self.usage.usec("xreadgroup", "xack") / n,
        }


async def drain_one(redis: Redis, stream: str, batch: int) -> int:
    """Read and ack `stream` until the group has nothing new; returns entries acked."""
    acked = 0
    while True:
        reply = cast(StreamReply, await redis.xreadgroup(GROUP, CONSUMER, {stream: ">"}, batch))
        if not reply or not reply[0][1]:
            return acked
        ids = [entry_id for entry_id, _ in reply[0][1]]
        acked += await redis.xack(stream, GROUP, *ids)


async def create_groups(redis: Redis, streams: Sequence[str]) -> None:
    for stream in streams:
        with contextlib.suppress(ResponseError):  # BUSYGROUP
            await redis.xgroup_create(stream, GROUP, id="0-0", mkstream=True)


async def measure_raw(redis: Redis, entries: Sequence[tuple[str, bytes]], batch: int) -> RawFigures:
    """Append `entries` ((stream, bytes), pre-encoded), then drain them; both timed."""
    start = perf_counter()
    tails = await xadd_all(redis, entries)
    append_s = perf_counter() - start
    await create_groups(redis, sorted(tails))
    before = await server_usage(redis)
    start = perf_counter()
    acked = await asyncio.gather(*(drain_one(redis, s, batch) for s in sorted(tails)))
    drain_s = perf_counter() - start
    usage = (await server_usage(redis)).minus(before)
    assert sum(acked) == len(entries), f"{sum(acked)} acked of {len(entries)}"
    return RawFigures(len(entries), append_s, drain_s, usage)
