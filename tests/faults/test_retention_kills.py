"""Worker processes with retention on (TERMINUS_RETAIN_MS), SIGKILLed under load: every
published entry ends up in the archive or the live log, exactly once, every turn is released,
and `replay --verify` over archive plus log finds no difference (service/retention/archiver.py)
once the workers are gone (SIGKILLed too: their archivers stop wherever they are). A running
archiver moves entries from the log to the archive while a replay reads them: verify a stopped pool.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Final

import pytest
from redis.asyncio import Redis

from terminus.service.cli.replay import replay
from terminus.service.fold.releases import TOMBSTONE, id_key
from terminus.service.keys import FIELD, Keys
from terminus.service.redis.replies import xrange
from terminus.service.retention.archive import LocalArchive, partition_prefix
from terminus.service.retention.records import unpack_segment
from terminus.service.settings import Settings
from tests.support.backends import Target
from tests.support.faults.expect import started_turns
from tests.support.faults.harness import (
    Workers,
    busy_partitions,
    dead_letters,
    fault_settings,
    keys_of,
    kill_busy_and_replace,
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

PLANS = plan_sessions(sessions=20, turns=10, tag="r")  # 200 turns; 20 cut once, then retried
RETAIN_MS: Final = 2_000  # the least TERMINUS_RETAIN_MS takes
KILL_AT: Final = (0.3, 0.6)


async def released(redis: Redis, settings: Settings, turns: list[tuple[str, str]]) -> bool:
    """Every turn's snapshot is a tombstone, or gone (forgotten): all of them archived."""
    if await busy_partitions(redis, settings):
        return False
    keys = [keys_of(settings, session).turn(turn) for session, turn in turns]
    found = [await redis.get(key) for key in keys]
    return all(raw in (None, TOMBSTONE) for raw in found)


async def events_kept(redis: Redis, settings: Settings, archive: LocalArchive) -> int:
    """Inbound entries holding an event, in the archive and in the live logs."""
    count = 0
    for partition in range(settings.partitions):
        end = (0, -1)  # where the archive ends: a worker killed between its put and its trim
        for key in archive.list(partition_prefix(settings.prefix, partition)):
            entries = unpack_segment(archive.get(key)).entries()
            # Segments may overlap (one written by an archiver that lost its lease): count
            # each entry once, as replay reads it (service/cli/replay.py).
            kept = [e for e in entries if id_key(e.id) > end]
            count += sum(1 for e in kept if dict(e.fields).get(FIELD) is not None)
            end = max([end, *(id_key(e.id) for e in kept)])
        live = await xrange(redis, Keys(partition, settings.prefix).inbound)
        # leaves the segment's entries in the log too: count those once
        count += sum(1 for i, f in live if FIELD in f and id_key(i.decode()) > end)
    return count


@pytest.mark.cluster
async def test_sigkilled_workers_with_retention_lose_nothing(
    fault_target: Target, tmp_path: Path
) -> None:
    archive_dir = str(tmp_path / "archive")
    settings = fault_settings(
        fault_target.url,
        archive_dir=archive_dir,
        retain_ms=RETAIN_MS,
        redis_cluster=fault_target.cluster,
    )
    redis = fault_target.client()
    try:
        with Workers(settings, tmp_path) as workers:
            workers.env |= {
                "TERMINUS_RETAIN_MS": str(RETAIN_MS),
                "TERMINUS_ARCHIVE_DIR": archive_dir,
            }
            for _ in range(3):
                workers.start()
            await wait_owned(redis, settings, workers=3)
            producer = RecordingProducer(redis, settings)
            load = asyncio.create_task(publish_sessions(producer, PLANS))
            rng = random.Random(20261124)
            for mark in KILL_AT:
                published = has_published(producer, int(mark * planned_events(PLANS)))
                await wait_until(published, f"{mark:.0%} of the load published", timeout=120)
                await kill_busy_and_replace(redis, settings, workers, rng)
            await load
            turns = started_turns(producer.published)
            await wait_until(lambda: released(redis, settings, turns), "every turn archived", 120)
            assert workers.crashed() == []
            for process in workers.running():  # wherever their archivers are: a crash too
                workers.kill(process)

            archive = LocalArchive(archive_dir)
            assert await events_kept(redis, settings, archive) == producer.count
            assert await dead_letters(redis, settings) == {}
            report = await replay(redis, settings, verify=True, archive=archive)
            assert report.differences == [], report.differences[:5]
    finally:
        await redis.aclose()
