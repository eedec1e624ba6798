"""A commit delayed in the network past the worker's socket timeout must not land after its redo.

DESIGN section 5 and invariant 7. The worker sends a batch's commit; the network holds that one
request (the connection stays open, nothing flows on it) for longer than the socket timeout, but
less than the lease TTL, as a congested or partitioned link that heals would. The worker times
out, drops its memory and starts over from the drain: it claims the batch again, folds it again
and commits it again on a new connection, then goes on. When the link heals, the first commit
reaches Redis. It must be refused; every frame must still appear exactly once.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import msgspec
from expect import assert_exact
from harness import (
    StartRedis,
    Workers,
    busy_partitions,
    dead_letters,
    fault_settings,
    final_turns,
    wait_owned,
    wait_until,
)
from load import RecordingProducer, plan_sessions, planned_turns, publish_sessions
from proxy import BlackholeProxy
from redis.asyncio import Redis

from service.scripts import source

PLANS = plan_sessions(sessions=6, turns=8, tag="delayed")
TURNS = planned_turns(PLANS)
COMMIT = hashlib.sha1(source("commit").encode()).hexdigest().encode()  # what EVALSHA carries
HOLD_S = 8.0  # above the workers' socket timeout (block time + 5 s), below the lease TTL


async def test_commit_delayed_past_the_socket_timeout_is_fenced(
    private_redis: StartRedis, tmp_path: Path
) -> None:
    server = private_redis()
    settings = fault_settings(server.url, partitions=1, batch_size=50, lease_ttl_ms=30_000)
    redis = Redis.from_url(server.url)
    try:
        async with BlackholeProxy(server.port) as proxy:
            worker_settings = msgspec.structs.replace(settings, redis_url=proxy.url)
            with Workers(worker_settings, tmp_path) as workers:
                workers.start()
                await wait_owned(redis, settings)
                producer = RecordingProducer(redis, settings)
                load = asyncio.create_task(publish_sessions(producer, PLANS))

                async def underway() -> bool:
                    return await final_turns(redis, settings, TURNS) >= len(TURNS) // 10

                await wait_until(underway, "a tenth of the turns final", timeout=60)
                proxy.hold_next(COMMIT, HOLD_S)
                await asyncio.wait_for(proxy.delivered.wait(), timeout=60)
                await load

                async def applied() -> bool:  # every entry acked: every turn final, if exact
                    return not await busy_partitions(redis, settings)

                await wait_until(applied, "every entry applied and acked", timeout=60)
                assert await assert_exact(redis, settings, producer.published) == {}
                assert await dead_letters(redis, settings) == {}
                assert workers.crashed() == []
    finally:
        await redis.aclose()
