"""The benchmark's floor (bench/floor: read, one frame per entry, ack) does the work it stands
for: every entry of the inbound logs reaches its session's stream once, byte for byte and in
order, and every entry is acked. A floor that skipped work would make terminus's light-load cost
look further above what the contract needs than it is; one that lost entries would measure a
latency of fewer frames."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections import defaultdict

import pytest
from redis.asyncio import Redis

from bench.common.redis_ops import publish_all, wait_drained
from bench.e2e.workload import sized
from bench.floor.consumer import Floor
from terminus.events.codec import encode_event
from terminus.service.keys import FIELD, GROUP, Keys, keys_for_session
from terminus.service.redis.replies import xrange
from tests.support.polling import until

PARTITIONS = 4

pytestmark = pytest.mark.skipif(
    os.environ.get("TERMINUS_TEST_REDIS_TLS") == "1", reason="the floor is benchmarked on plain TCP"
)


async def test_every_entry_reaches_its_session_once_in_order_and_is_acked(
    redis: Redis, prefix: str
) -> None:
    events = sized(3, 600, 10)
    tails = await publish_all(redis, events, PARTITIONS, prefix)
    garbage = await redis.xadd(Keys(0, prefix).inbound, {FIELD: b"\xff not an event"})
    tails[Keys(0, prefix).inbound] = garbage if isinstance(garbage, bytes) else garbage.encode()
    floor = Floor(redis, prefix, PARTITIONS, batch=64)
    await floor.start()
    running = asyncio.ensure_future(floor.loop(linger_s=0.002))
    try:
        await wait_drained(redis, tails, 30.0, lambda: None)
        wanted: dict[str, list[bytes]] = defaultdict(list)
        for event in events:
            wanted[
                keys_for_session(event.session_id, PARTITIONS, prefix).session(event.session_id)
            ].append(encode_event(event))

        async def copied() -> bool:
            lengths = [await redis.xlen(stream) for stream in wanted]
            return lengths == [len(raws) for raws in wanted.values()]

        await until(copied, "every entry copied to its session's stream")
        for stream, raws in wanted.items():
            assert [fields[FIELD] for _, fields in await xrange(redis, stream)] == raws
    finally:
        floor.stopping = True
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await floor.line.close()


async def test_the_process_serves_until_sigterm_and_exits_cleanly(
    redis: Redis, redis_url: str, prefix: str
) -> None:
    env = os.environ | {
        "REDIS_URL": redis_url,
        "TERMINUS_PREFIX": prefix,
        "TERMINUS_PARTITIONS": str(PARTITIONS),
    }
    process = subprocess.Popen([sys.executable, "-m", "bench.floor"], env=env)
    try:
        inbound = [Keys(p, prefix).inbound for p in range(PARTITIONS)]

        async def grouped() -> bool:
            try:
                return all([await redis.xinfo_groups(stream) for stream in inbound])
            except Exception:  # no such key yet
                return False

        await until(grouped, "the floor's groups on every inbound log")
        events = sized(4, 100, 5)
        tails = await publish_all(redis, events, PARTITIONS, prefix)
        await wait_drained(redis, tails, 30.0, lambda: None)
        pending = [await redis.xpending(stream, GROUP) for stream in inbound]
        assert all(p["pending"] == 0 for p in pending)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
