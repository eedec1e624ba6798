"""A Redis Cluster primary SIGKILLed under load: its replica is promoted, the workers go on alone.

Replication is asynchronous, so the promoted replica may lack the primary's last writes: entries
a producer saw acknowledged, and commits. What must hold whatever was lost: what survived is
consistent. Every session's frames, messages and snapshots are exactly the fold of the inbound
log that survived (no frame duplicated or out of order, no commit without its entries: the
replication stream is ordered, so a surviving commit implies its entries survived), every entry
is acknowledged, replay --verify agrees, and no worker crashed. How many acknowledged entries
were lost is measured and printed (`-rP` shows it), not asserted: it depends on timing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from redis.asyncio import Redis

from terminus.service.keys import Keys
from terminus.service.redis.cluster import ClusterNode, LocalCluster
from terminus.service.redis.connect import connect
from terminus.service.redis.embedded import EmbeddedRedisError
from terminus.service.settings import Settings
from tests.support.faults.expect import (
    assert_replay_clean,
    assert_session,
    fold_session,
    logs_by_session,
)
from tests.support.faults.harness import (
    Workers,
    busy_partitions,
    fault_settings,
    wait_owned,
    wait_until,
)
from tests.support.faults.load import (
    RecordingProducer,
    has_published,
    plan_sessions,
    planned_events,
    publish_sessions,
)

PLANS = plan_sessions(sessions=24, turns=10, tag="failover")


async def promoted(cluster: LocalCluster, key: str, victim: ClusterNode) -> bool:
    """Whether a node other than `victim` serves `key`'s slot as a primary now."""
    try:
        return await asyncio.to_thread(cluster.primary_of, key) is not victim
    except (EmbeddedRedisError, OSError):
        return False


async def test_workers_go_on_after_a_primary_fails_over(tmp_path: Path) -> None:
    with LocalCluster(tmp_path / "cluster") as cluster:
        settings = fault_settings(cluster.url, redis_cluster=True)
        redis = connect(cluster.url, cluster=True)
        try:
            with Workers(settings, tmp_path) as workers:
                for _ in range(2):
                    workers.start()
                await wait_owned(redis, settings, workers=2)
                producer = RecordingProducer(redis, settings)
                load = asyncio.create_task(publish_sessions(producer, PLANS))
                third = has_published(producer, planned_events(PLANS) // 3)
                await wait_until(third, "a third of the load published", timeout=60)
                key = Keys(0, settings.prefix).root
                victim = cluster.primary_of(key)
                victim.kill()
                await wait_until(lambda: promoted(cluster, key, victim), "a promotion", 30)
                await load
                await wait_until(
                    lambda: _quiet(redis, settings), "every log delivered and acked", 120
                )
                logs = await logs_by_session(redis, settings)
                for session_id, logged in logs.items():
                    folded = fold_session(logged, settings.core())
                    await assert_session(redis, settings, session_id, folded, folded)
                await assert_replay_clean(redis, settings)
                assert workers.crashed() == []
                lost = sum(
                    len({i for i, _ in acked} - {i for i, _ in logs.get(session_id, [])})
                    for session_id, acked in producer.published.items()
                )
                print(
                    f"failover: {producer.count} entries acknowledged, {lost} of them lost; "
                    f"{producer.retries} publish retries"
                )
                assert lost < producer.count
        finally:
            await redis.aclose()


async def _quiet(redis: Redis, settings: Settings) -> bool:
    return not await busy_partitions(redis, settings)
