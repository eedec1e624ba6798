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
import pytest

from terminus.service.redaction import SecretUrl
from tests.support.faults.expect import assert_exact, assert_replay_clean, started_turns
from tests.support.faults.harness import (
    StartRedis,
    Workers,
    dead_letters,
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
from tests.support.faults.proxied import behind_proxies

PLANS = plan_sessions(sessions=16, turns=12, tag="hole")
TURNS = planned_turns(PLANS)
BLACKHOLE_S = 10.0
TIMED_OUT = "network:TimeoutError"  # service/runtime/owner.py, when a read or commit times out
LOST = "lost partition"  # service/runtime/worker.py, when the lease expired under the worker


@pytest.mark.cluster  # its own client is cut off too on a cluster (tests/support/faults/proxied.py)
async def test_blackholed_connection_resumes(
    on_cluster: bool, private_redis: StartRedis, tmp_path: Path
) -> None:
    async with behind_proxies(on_cluster, private_redis, tmp_path) as network:
        redis = network.direct.client()  # the producer and the checks
        try:
            settings = fault_settings(network.direct.url, redis_cluster=on_cluster)
            worker_settings = msgspec.structs.replace(
                settings, redis_url=SecretUrl(network.workers.url)
            )
            with Workers(worker_settings, tmp_path) as workers:
                for _ in range(2):
                    workers.start()
                await wait_owned(redis, settings, workers=2)
                producer = RecordingProducer(redis, settings)
                load = asyncio.create_task(publish_sessions(producer, PLANS))

                async def underway() -> bool:
                    return await final_turns(redis, settings, TURNS) >= len(TURNS) // 5

                await wait_until(underway, "a fifth of the turns final", timeout=60)
                assert not load.done(), "the load ended before the blackhole"
                await network.blackhole(BLACKHOLE_S)
                healed = await final_turns(redis, settings, TURNS)
                assert healed < len(TURNS), "work was left for after the blackhole"
                await load
                await wait_quiet(redis, settings, started_turns(producer.published))
                assert producer.count == planned_events(PLANS)
                # The cut reached the workers. On a cluster, redis-py's cluster client retries a
                # timed-out command on a new connection itself, which may outlast the cut: the
                # worker then never sees the timeout, only its leases expiring.
                signs = (TIMED_OUT, LOST) if on_cluster else (TIMED_OUT,)
                logs = [workers.log(p) for p in workers.processes]
                assert any(sign in log for sign in signs for log in logs)
                # On the cluster the producer is behind the proxies too: a publish it retried
                # after a timeout may repeat a prefix of a batch, which the fold ignores by seq.
                exact = await assert_exact(
                    redis, settings, producer.published, duplicates=on_cluster
                )
                assert exact == {}
                assert await dead_letters(redis, settings) == {}
                await assert_replay_clean(redis, settings)
                assert workers.crashed() == []
        finally:
            await redis.aclose()
