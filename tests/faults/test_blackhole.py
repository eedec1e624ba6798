"""A network blackhole between the workers and Redis: connections stay open, nothing flows.

DESIGN section 5 (connections): socket timeouts above the block time, so a blocking read on a
silent socket never hangs a worker; the reconnect loop and the lease take it from there. The
workers reach Redis through a proxy that forwards nothing, either way, for 10 s in the middle of
the load (longer than the socket timeout and the lease TTL); afterwards the pool makes progress
again by itself and every session ends exactly as the in-process fold says.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
from expect import assert_exact, assert_replay_clean, started_turns
from harness import (
    StartRedis,
    Workers,
    dead_letters,
    fault_settings,
    final_turns,
    wait_owned,
    wait_quiet,
    wait_until,
)
from load import (
    RecordingProducer,
    plan_sessions,
    planned_events,
    planned_turns,
    publish_sessions,
)
from proxy import BlackholeProxy
from redis.asyncio import Redis

PLANS = plan_sessions(sessions=16, turns=12, tag="hole")
TURNS = planned_turns(PLANS)
BLACKHOLE_S = 10.0
TIMED_OUT = "Timeout reading from"  # redis-py's message when a socket read times out


async def test_blackholed_connection_resumes(private_redis: StartRedis, tmp_path: Path) -> None:
    server = private_redis()
    redis = Redis.from_url(server.url)  # the producer and the checks go straight to Redis
    try:
        async with BlackholeProxy(server.port) as proxy:
            settings = fault_settings(server.url)
            worker_settings = msgspec.structs.replace(settings, redis_url=proxy.url)
            with Workers(worker_settings, tmp_path) as workers:
                for _ in range(2):
                    workers.start()
                await wait_owned(redis, settings)
                producer = RecordingProducer(redis, settings)
                load = asyncio.create_task(publish_sessions(producer, PLANS))

                async def underway() -> bool:
                    return await final_turns(redis, settings, TURNS) >= len(TURNS) // 5

                await wait_until(underway, "a fifth of the turns final", timeout=60)
                assert not load.done(), "the load ended before the blackhole"
                await proxy.blackhole(BLACKHOLE_S)
                healed = await final_turns(redis, settings, TURNS)
                assert healed < len(TURNS), "work was left for after the blackhole"
                await load
                await wait_quiet(redis, settings, started_turns(producer.published))
                assert producer.count == planned_events(PLANS)
                assert any(TIMED_OUT in workers.log(p) for p in workers.processes)
                assert await assert_exact(redis, settings, producer.published) == {}
                assert await dead_letters(redis, settings) == {}
                await assert_replay_clean(redis, settings)
                assert workers.crashed() == []
    finally:
        await redis.aclose()
