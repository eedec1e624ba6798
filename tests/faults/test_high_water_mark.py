"""Regression: the high-water mark after a crash. A new owner applies what a dead reader left
pending before anything read after it.

DESIGN section 5. An earlier design let a new owner read new entries while a crashed owner's
batch was still pending, and deduplicated with a per-turn high-water mark (the highest seq
applied). Once the new owner had applied later events of a turn, the crashed batch, redelivered
afterwards, fell under the mark and was dropped as "already seen": with two readers of one
stream, 200-600 of 50,000 events were silently lost. Now dedup is exact, by (turn, step,
attempt, seq), order comes from single ownership, and on taking a partition its owner first
claims and applies every pending entry (`PartitionOwner.drain`), then reads new ones.

Here a reader named "crashed-worker" takes the first entries of every turn with XREADGROUP and
dies without acking them; the rest of each turn arrives after them. A worker process then takes
the partition. Were the drain skipped, it would read the later events first (dead-lettered as
events of turns that never started, or seq gaps) and the dead reader's entries would stay
pending for ever.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest
from redis.asyncio import Redis

from terminus.events.inbound import InboundEvent
from terminus.service.keys import GROUP, Keys
from terminus.service.redis.replies import StreamEntry, StreamReply
from tests.support.backends import Target
from tests.support.faults.expect import assert_all_well, started_turns
from tests.support.faults.harness import (
    Workers,
    fault_settings,
    wait_quiet,
)
from tests.support.faults.load import RecordingProducer, numbered_events, plan_sessions

PLANS = plan_sessions(sessions=10, turns=3, tag="hwm", cut_every=4)
CHUNK = 6  # events per publish, turn after turn in round robin


async def xread_as(redis: Redis, consumer: str, stream: str, count: int) -> list[StreamEntry]:
    """Read `count` new entries of `stream` as `consumer` of the workers' group."""
    reply = cast(StreamReply, await redis.xreadgroup(GROUP, consumer, {stream: ">"}, count))
    return reply[0][1]


def round_robin(turns: list[list[InboundEvent]]) -> list[list[InboundEvent]]:
    """Chunks of every turn in turn, so that the turns interleave in the log."""
    chunks: list[list[InboundEvent]] = []
    for start in range(0, max(map(len, turns)), CHUNK):
        chunks += [events[start : start + CHUNK] for events in turns if events[start:]]
    return chunks


@pytest.mark.cluster
async def test_high_water_mark_after_a_crash(fault_target: Target, tmp_path: Path) -> None:
    settings = fault_settings(fault_target.url, partitions=1, redis_cluster=fault_target.cluster)
    inbound = Keys(0, settings.prefix).inbound
    redis = fault_target.client()
    try:
        turns = [await numbered_events(plan) for sessions in PLANS for plan in sessions]
        producer = RecordingProducer(redis, settings)
        await redis.xgroup_create(inbound, GROUP, id="0-0", mkstream=True)
        for chunk in round_robin([events[: len(events) // 2] for events in turns]):
            await producer.publish(chunk)
        count = producer.count * 3 // 5
        taken = await xread_as(redis, "crashed-worker", inbound, count)  # and never acked
        assert (await redis.xpending(inbound, GROUP))["pending"] == len(taken) == count
        for chunk in round_robin([events[len(events) // 2 :] for events in turns]):
            await producer.publish(chunk)

        with Workers(settings, tmp_path) as workers:
            workers.start()
            await wait_quiet(redis, settings, started_turns(producer.published), timeout=30)
            await assert_all_well(redis, settings, producer.published, workers)
    finally:
        await redis.aclose()
