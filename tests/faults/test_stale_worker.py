"""A worker frozen past its lease (SIGSTOP) with a batch in hand commits nothing when it wakes.

DESIGN section 5 and invariant 7: every read and commit checks the lease, whose value carries an
epoch, so a worker that lost it can never write. The frozen worker holds entries it read but did
not commit; its successor claims them, applies them and finishes the turns. When the old worker
resumes and tries to commit that batch, the commit is refused: not one key under the prefix
changes, and every frame appears exactly once.
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
from pathlib import Path
from typing import cast

import pytest
from redis.asyncio import Redis

from terminus.service.keys import Keys, worker_metrics_key
from terminus.service.settings import Settings
from tests.support.backends import Target, mget_any
from tests.support.faults.expect import assert_all_well, started_turns
from tests.support.faults.harness import (
    Workers,
    fault_settings,
    pending_of,
    wait_quiet,
    wait_until,
)
from tests.support.faults.load import (
    RecordingProducer,
    has_published,
    plan_sessions,
    planned_events,
    publish_sessions,
)

PLANS = plan_sessions(sessions=8, turns=12, tag="stale")
LATER = plan_sessions(sessions=4, turns=3, tag="later")
FREEZE_TRIES_S = 30.0
# What a worker logs once a partition it owned is no longer its own, whichever way it finds out.
GONE = re.compile(r"(?:lost|released) partition (\d+)|partition (\d+) ended: LeaseLost")


async def freeze_with_batch_in_hand(
    redis: Redis, settings: Settings, workers: Workers, worker: subprocess.Popen[bytes]
) -> int:
    """SIGSTOP the worker at a moment it holds read, uncommitted entries; returns how many.

    A worker that keeps up with the load waits idle most of the time, the more so on a loaded
    machine where the producer is slow: keep trying for as long as the load may take."""
    deadline = asyncio.get_running_loop().time() + FREEZE_TRIES_S
    while asyncio.get_running_loop().time() < deadline:
        workers.signal(worker, signal.SIGSTOP)
        # A request the worker wrote just before it stopped may be served after our next one:
        # one round trip first, so that the count below is final.
        await redis.ping()
        held = await pending_of(redis, settings, worker.pid)
        if held:
            return held
        workers.signal(worker, signal.SIGCONT)
        await asyncio.sleep(0.02)  # let it take its next batch
    raise AssertionError("the worker never held a batch when stopped")


async def lease_epochs(redis: Redis, settings: Settings) -> list[int | None]:
    """The epoch in each partition's lease, None where no lease is held."""
    keys = [Keys(p, settings.prefix).lease for p in range(settings.partitions)]
    values = await mget_any(redis, keys)
    return [None if v is None else int(v.rsplit(b":", 1)[1]) for v in values]


async def last_epochs(redis: Redis, settings: Settings) -> list[int]:
    keys = [Keys(p, settings.prefix).epoch for p in range(settings.partitions)]
    return [int(v) for v in cast("list[bytes]", await mget_any(redis, keys))]


async def dump(redis: Redis, settings: Settings) -> dict[bytes, object]:
    """Every key under the prefix with its contents, but for the pool's own bookkeeping and
    each worker's own process metrics (a fenced worker still reports its commit timings: they are
    about the process, not the partitions, and no commit writes them)."""
    found: dict[bytes, object] = {}
    process_metrics = worker_metrics_key("", settings.prefix).encode()
    async for key in redis.scan_iter(match=f"{settings.prefix}:*", count=1000):
        if key.endswith((b":lease", b":epoch", b":workers")) or key.startswith(process_metrics):
            continue
        match cast(bytes, await redis.type(key)).decode():
            case "stream":
                found[key] = await redis.xrange(key)
            case "string":
                found[key] = await redis.get(key)
            case "hash":
                found[key] = await redis.hgetall(key)
            case _:
                found[key] = await redis.zrange(key, 0, -1, withscores=True)
    return found


def partitions_given_up(log: str) -> set[int]:
    return {int(a or b) for a, b in GONE.findall(log)}


async def freeze_past_its_lease(
    redis: Redis, settings: Settings, workers: Workers, worker: subprocess.Popen[bytes]
) -> list[int | None]:
    """Freeze the worker with a batch in hand until its leases expire; returns their epochs."""
    held = await freeze_with_batch_in_hand(redis, settings, workers, worker)
    epochs = await lease_epochs(redis, settings)
    assert None not in epochs, "the frozen worker owned every partition"

    async def expired() -> bool:
        return set(await lease_epochs(redis, settings)) == {None}

    await wait_until(expired, "the frozen worker's leases to expire", timeout=30)
    assert await pending_of(redis, settings, worker.pid) == held, "its batch still in hand"
    return epochs


async def resume(workers: Workers, worker: subprocess.Popen[bytes], partitions: int) -> None:
    """SIGCONT the worker; return once it has given up every partition it thought it owned."""
    workers.signal(worker, signal.SIGCONT)

    async def settled() -> bool:
        return partitions_given_up(workers.log(worker)) == set(range(partitions))

    await wait_until(settled, "the resumed worker to find its leases gone", timeout=30)


@pytest.mark.cluster
async def test_sigstopped_worker_past_its_lease_commits_nothing(
    fault_target: Target, tmp_path: Path
) -> None:
    settings = fault_settings(
        fault_target.url, partitions=2, batch_size=50, redis_cluster=fault_target.cluster
    )
    redis = fault_target.client()
    try:
        with Workers(settings, tmp_path) as workers:
            stale = workers.start()
            producer = RecordingProducer(redis, settings)
            load = asyncio.create_task(publish_sessions(producer, PLANS))
            quarter = has_published(producer, planned_events(PLANS) // 4)
            await wait_until(quarter, "a quarter of the load published", timeout=60)
            stale_epochs = await freeze_past_its_lease(redis, settings, workers, stale)
            workers.start()
            await load
            await wait_quiet(redis, settings, started_turns(producer.published))
            assert await pending_of(redis, settings, stale.pid) == 0, "the successor claimed them"
            before = await dump(redis, settings)

            await resume(workers, stale, settings.partitions)
            assert await dump(redis, settings) == before, "the stale worker changed something"
            assert await pending_of(redis, settings, stale.pid) == 0
            epochs = await last_epochs(redis, settings)
            assert all(new > (old or 0) for new, old in zip(epochs, stale_epochs, strict=True))

            await publish_sessions(producer, LATER)  # the pool, old worker included, goes on
            await wait_quiet(redis, settings, started_turns(producer.published))
            await assert_all_well(redis, settings, producer.published, workers)
    finally:
        await redis.aclose()
