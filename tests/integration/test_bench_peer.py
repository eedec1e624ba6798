"""The benchmark's peer (bench/peer: the FastStream subscriber a user would write instead) does
the work it is compared on: every frame the core makes of the workload reaches the session
streams and every entry is acked. A peer that skipped
work would make terminus look slower than it is."""

from __future__ import annotations

import asyncio
import contextlib
import os

import pytest
from redis.asyncio import Redis

from bench.common.redis_ops import publish_all, wait_drained
from bench.e2e.workload import expected_frames, sized
from bench.peer.app import build
from terminus.service.keys import keys_for_session
from tests.support.polling import until

PARTITIONS = 4


@pytest.mark.skipif(
    os.environ.get("TERMINUS_TEST_REDIS_TLS") == "1", reason="the peer is benchmarked on plain TCP"
)
async def test_the_peer_writes_every_frame_the_core_makes(
    redis: Redis, redis_url: str, prefix: str
) -> None:
    events = sized(3, 400, 10)
    tails = await publish_all(redis, events, PARTITIONS, prefix)
    app = build(redis_url, prefix, PARTITIONS)
    running = asyncio.ensure_future(app.run())
    try:
        await wait_drained(redis, tails, 30.0, lambda: None)
        sessions = sorted({e.session_id for e in events})
        streams = [keys_for_session(s, PARTITIONS, prefix).session(s) for s in sessions]

        async def every_frame() -> bool:
            return sum([await redis.xlen(s) for s in streams]) == expected_frames(events)

        await until(every_frame, "every frame the core makes of the workload")
    finally:
        await app.stop()
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
