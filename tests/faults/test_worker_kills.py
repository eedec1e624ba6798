"""Worker processes SIGKILLed under load: what the pool wrote is exactly the in-process fold.

DESIGN section 5 (one atomic commit per batch, drain before read, fencing) and invariants 4 and 5:
redelivery after a crash never duplicates a frame, never loses one, and replay agrees.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from terminus.service.settings import Settings
from tests.support.backends import Target
from tests.support.faults.expect import assert_all_well, started_turns
from tests.support.faults.harness import (
    Workers,
    fault_settings,
    kill_busy_and_replace,
    wait_owned,
    wait_quiet,
    wait_until,
)
from tests.support.faults.load import (
    RecordingProducer,
    plan_sessions,
    planned_events,
    publish_sessions,
)

PLANS = plan_sessions(sessions=50, turns=20)  # 1,000 turns; 100 of them cut once, then retried
KILL_AT = (0.1, 0.25, 0.4, 0.55, 0.7)  # fractions of the load published


async def kill_during(
    load: asyncio.Task[None], producer: RecordingProducer, workers: Workers, settings: Settings
) -> list[int]:
    """SIGKILL a random worker (and start a replacement) as the load passes each mark; returns
    how many entries each victim left pending, read but not committed."""
    rng, left, total = random.Random(20240607), [], planned_events(PLANS)
    for mark in KILL_AT:

        async def passed(mark: float = mark) -> bool:
            return load.done() or producer.count >= mark * total

        await wait_until(passed, f"{mark:.0%} of the load published", timeout=120)
        if load.done():
            break
        left.append(await kill_busy_and_replace(producer.redis, settings, workers, rng))
    return left


@pytest.mark.cluster
async def test_sigkill_workers_under_load(fault_target: Target, tmp_path: Path) -> None:
    settings = fault_settings(fault_target.url, redis_cluster=fault_target.cluster)
    redis = fault_target.client()
    try:
        with Workers(settings, tmp_path) as workers:
            for _ in range(3):
                workers.start()
            await wait_owned(redis, settings, workers=3)
            producer = RecordingProducer(redis, settings)
            load = asyncio.create_task(publish_sessions(producer, PLANS))
            left_pending = await kill_during(load, producer, workers, settings)
            await load
            await wait_quiet(redis, settings, started_turns(producer.published))
            assert len(left_pending) >= 3, "the load ended before three workers were killed"
            assert sum(left_pending) > 0, "no worker was killed with a batch in hand"
            assert producer.count == planned_events(PLANS) >= 50_000
            await assert_all_well(redis, settings, producer.published, workers)
    finally:
        await redis.aclose()
