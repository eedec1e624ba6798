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
import pytest

from terminus.service.redaction import SecretUrl
from terminus.service.redis.scripts import source
from tests.support.faults.expect import assert_exact
from tests.support.faults.harness import (
    StartRedis,
    Workers,
    busy_partitions,
    dead_letters,
    fault_settings,
    final_turns,
    wait_owned,
    wait_until,
)
from tests.support.faults.load import (
    RecordingProducer,
    plan_sessions,
    planned_turns,
    publish_sessions,
)
from tests.support.faults.proxied import behind_proxies

PLANS = plan_sessions(sessions=6, turns=8, tag="delayed")
TURNS = planned_turns(PLANS)
COMMIT = hashlib.sha1(source("commit").encode()).hexdigest().encode()  # what EVALSHA carries
HOLD_S = 8.0  # above the workers' socket timeout (block time + 5 s), below the lease TTL


@pytest.mark.cluster  # on a cluster, redis-py's cluster client also retries the timed-out commit
async def test_commit_delayed_past_the_socket_timeout_is_fenced(
    on_cluster: bool, private_redis: StartRedis, tmp_path: Path
) -> None:
    async with behind_proxies(on_cluster, private_redis, tmp_path) as network:
        settings = fault_settings(
            network.direct.url,
            partitions=1,
            batch_size=50,
            lease_ttl_ms=30_000,
            redis_cluster=on_cluster,
        )
        redis = network.direct.client()
        try:
            worker_settings = msgspec.structs.replace(
                settings, redis_url=SecretUrl(network.workers.url)
            )
            with Workers(worker_settings, tmp_path) as workers:
                workers.start()
                await wait_owned(redis, settings)
                producer = RecordingProducer(redis, settings)
                load = asyncio.create_task(publish_sessions(producer, PLANS))

                async def underway() -> bool:
                    return await final_turns(redis, settings, TURNS) >= len(TURNS) // 10

                await wait_until(underway, "a tenth of the turns final", timeout=60)
                for proxy in network.proxies:  # the one in front of partition 0's primary holds
                    proxy.hold_next(COMMIT, HOLD_S)
                delivered = [asyncio.create_task(p.delivered.wait()) for p in network.proxies]
                done, _ = await asyncio.wait(delivered, timeout=60, return_when="FIRST_COMPLETED")
                for task in delivered:
                    task.cancel()
                assert done, "no commit was held and then delivered"
                await load

                async def applied() -> bool:  # every entry acked: every turn final, if exact
                    return not await busy_partitions(redis, settings)

                await wait_until(applied, "every entry applied and acked", timeout=60)
                assert await assert_exact(redis, settings, producer.published) == {}
                assert await dead_letters(redis, settings) == {}
                assert workers.crashed() == []
        finally:
            await redis.aclose()
