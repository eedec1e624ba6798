"""redis-server SIGKILLed under load and restarted on the same port and AOF: nothing is lost.

DESIGN section 5 (connections: reconnect loop; AOF). The server killed runs with `appendfsync
always`, under which it answers no write before the write is in the AOF, so the producer's
acknowledged publishes and the workers' acknowledged commits all survive and "nothing lost" is
exact. (Under `everysec`, a crash loses nothing as long as the disk keeps up, but while a
background fsync lags Redis postpones writing the AOF for up to 2 s and still answers; this test
once lost such writes on a loaded CI machine. What the workers then do is tested by
`test_rollback.py`.) The producer retries a publish cut by the crash (possibly duplicating a
prefix of it, which the fold ignores by seq); the workers reconnect by themselves.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from redis.asyncio import Redis

from terminus.service.keys import Keys
from terminus.service.redis.cluster import LocalCluster
from terminus.service.redis.embedded import EmbeddedRedis
from tests.support.backends import Target
from tests.support.faults.expect import assert_all_well, started_turns
from tests.support.faults.harness import (
    StartRedis,
    Workers,
    fault_settings,
    final_turns,
    wait_owned,
    wait_quiet,
    wait_until,
)
from tests.support.faults.load import (
    RecordingProducer,
    plan_sessions,
    planned_events,
    planned_turns,
    publish_sessions,
)

PLANS = plan_sessions(sessions=24, turns=15, tag="restart")
TURNS = planned_turns(PLANS)


async def test_redis_restart_under_load(private_redis: StartRedis, tmp_path: Path) -> None:
    server = private_redis()
    await restart_under_load(Target(server.url, cluster=False), server, tmp_path)


async def test_a_cluster_primary_restart_under_load(tmp_path: Path) -> None:
    """The same on a cluster: the primary of partition 0 SIGKILLed and restarted before the
    cluster would fail it over (a long node timeout), so its AOF is what comes back."""
    with LocalCluster(tmp_path / "cluster", node_timeout_ms=60_000) as cluster:
        settings = fault_settings(cluster.url, redis_cluster=True)
        victim = cluster.primary_of(Keys(0, settings.prefix).root)
        await restart_under_load(Target(cluster.url, cluster=True), victim, tmp_path)


async def restart_under_load(target: Target, server: EmbeddedRedis, tmp_path: Path) -> None:
    """Load, SIGKILL `server` once a tenth of the turns are final, restart it, check all."""
    settings = fault_settings(target.url, redis_cluster=target.cluster)
    redis = target.client()
    victim = Redis.from_url(server.url)
    await victim.config_set("appendfsync", "always")  # see the module's docstring
    await victim.aclose()
    try:
        with Workers(settings, tmp_path) as workers:
            for _ in range(2):
                workers.start()
            await wait_owned(redis, settings, workers=2)
            producer = RecordingProducer(redis, settings)
            load = asyncio.create_task(publish_sessions(producer, PLANS))

            async def underway() -> bool:
                return await final_turns(redis, settings, TURNS) >= len(TURNS) // 10

            await wait_until(underway, "a tenth of the turns final", timeout=60)
            assert not load.done(), "the load ended before the crash"
            server.kill()

            async def cut_off() -> bool:
                return producer.retries > 0

            await wait_until(cut_off, "the producer to see the crash", timeout=30)
            await asyncio.to_thread(server.start)  # same port, same AOF
            await load
            await wait_quiet(redis, settings, started_turns(producer.published))
            assert producer.count == planned_events(PLANS)
            await assert_all_well(redis, settings, producer.published, workers, duplicates=True)
    finally:
        await redis.aclose()
