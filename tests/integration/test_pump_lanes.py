"""Lanes: with any number of pumps in a worker, every turn is applied exactly, frames and messages
as folding the events gives them; the lanes in use follow the load, and owners handed from lane
to lane between rounds lose and repeat nothing (service/runtime/lanes.py)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any
from unittest.mock import patch

import pytest
from pump_support import (
    PARTITIONS,
    Script,
    StartWorker,
    answer,
    by_id,
    interleaved,
    pending,
    session_in,
    simulated,
    snapshot,
    started_workers,
    uncursored,
)
from redis.asyncio import Redis

from terminus.events.inbound import InboundEvent
from terminus.service.keys import Keys, partition_of
from terminus.service.runtime.owner import PartitionOwner
from terminus.service.runtime.pump import Pump
from terminus.service.runtime.wire import Wire
from terminus.service.runtime.worker import Worker
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.views import dead_letters, session_messages, session_updates
from terminus.statemachines.states import TurnState
from tests.support.polling import until

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster


@pytest.fixture
async def workers(redis: Redis, prefix: str) -> AsyncIterator[StartWorker]:
    """Starts in-process workers; every one still running is stopped after the test."""
    async with started_workers(redis, prefix) as start:
        yield start


def scripted(turns: int = 2) -> list[Script]:
    sessions = [session_in(p, n) for p in range(PARTITIONS) for n in range(2)]
    return [
        answer(s, f"{s}-t{t}", 4 + 3 * t, cut=2 if (i + t) % 3 == 0 else None)
        for i, s in enumerate(sessions)
        for t in range(turns)
    ]


def all_finished(redis: Redis, prefix: str, scripts: list[Script]) -> Callable[[], Awaitable[bool]]:
    async def finished() -> bool:
        for script in scripts:
            keys = Keys(partition_of(script.session_id, PARTITIONS), prefix)
            turn = await snapshot(redis, keys, script.turn_id)
            if turn is None or turn.state is not TurnState.FINISHED:
                return False
        return True

    return finished


def holders(worker: Worker) -> dict[int, int]:
    """Partition -> the lane holding its owner; a partition held twice would show as a clash."""
    held = [(p, n) for n, pump in enumerate(worker.pumps) for p in pump.owners]
    assert len(held) == len(dict(held)), f"an owner on two lanes: {held}"
    return dict(held)


@pytest.fixture
def one_request_each() -> Iterator[list[str]]:
    """Records an owner stepped while a request of its is in flight (on this lane or another),
    and one handed to another lane while it has one; yields what it recorded."""
    original_call, original_stepped = PartitionOwner.step_call, PartitionOwner.stepped
    original_release = Pump.release
    in_flight: set[int] = set()
    clashes: list[str] = []

    def step_call(owner: PartitionOwner) -> Any:
        if owner.partition in in_flight:
            clashes.append(f"partition {owner.partition} stepped twice")
        in_flight.add(owner.partition)
        return original_call(owner)

    def stepped(owner: PartitionOwner, reply: Any, seconds: float = 0.0) -> Any:
        in_flight.discard(owner.partition)
        return original_stepped(owner, reply, seconds)

    def release(pump: Pump, owner: PartitionOwner) -> None:
        if owner.partition in in_flight:
            clashes.append(f"partition {owner.partition} moved in flight")
        original_release(pump, owner)

    with (
        patch.object(PartitionOwner, "step_call", step_call),
        patch.object(PartitionOwner, "stepped", stepped),
        patch.object(Pump, "release", release),
    ):
        yield clashes


@pytest.mark.parametrize("lanes", [1, 3])
async def test_every_lane_count_applies_every_turn_exactly(
    redis: Redis, admin_redis: Redis, prefix: str, workers: StartWorker, lanes: int
) -> None:
    scripts = scripted()
    events = interleaved(scripts)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    await producer.publish(events[: len(events) // 2])
    worker = await workers("worker-a", lanes=lanes)
    await producer.publish(events[len(events) // 2 :])
    await until(all_finished(redis, prefix, scripts), "every turn to finish")
    assert len(worker.pumps) == lanes
    assert set(holders(worker)) == set(range(PARTITIONS))
    await assert_applied(redis, admin_redis, prefix, events)


async def test_lanes_spread_under_load_and_gather_once_it_passes(
    redis: Redis, admin_redis: Redis, prefix: str, workers: StartWorker, one_request_each: list[str]
) -> None:
    """A backlog makes full rounds: every lane takes a share of the partitions. Once the rounds
    are light for `settle_s`, every owner is back on the first lane."""
    scripts = scripted(turns=3)
    events = interleaved(scripts)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    await producer.publish(events)
    worker = await workers("worker-a", lanes=3, batch_size=8)  # a full round: 2 entries
    worker.lanes.settle_s = 0.3
    spread: set[int] = set()

    async def watch() -> None:
        while True:
            spread.update(holders(worker).values())
            await asyncio.sleep(0.0005)

    watching = asyncio.create_task(watch())
    try:
        await until(all_finished(redis, prefix, scripts), "every turn to finish")
    finally:
        watching.cancel()
    assert spread == {0, 1, 2}
    assert worker.lanes.moves >= PARTITIONS // 2

    async def gathered() -> bool:
        return worker.lanes.active == 1 and set(holders(worker).values()) == {0}

    await until(gathered, "every owner back on the first lane")
    assert one_request_each == []
    await assert_applied(redis, admin_redis, prefix, events)


async def test_owners_moving_between_lanes_at_every_turn_of_the_load_apply_exactly(
    redis: Redis, admin_redis: Redis, prefix: str, workers: StartWorker, one_request_each: list[str]
) -> None:
    """With no settling time the lanes spread at every full round and gather at every light
    one: owners change lanes over and over, batches in hand, while entries keep coming. Each
    round is held back up to 8 ms before it is sent, so that other lanes run their rounds while
    its owners have a request in flight."""
    scripts = scripted(turns=4)
    events = interleaved(scripts)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    original_send = Wire.send
    delays = random.Random(7)

    async def slow_send(wire: Wire, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(delays.uniform(0, 0.008))
        return await original_send(wire, *args, **kwargs)

    with patch.object(Wire, "send", slow_send):
        worker = await workers("worker-a", lanes=3, batch_size=8)
        worker.lanes.settle_s = 0.0
        for n in range(0, len(events), 37):
            await producer.publish(events[n : n + 37])
            await asyncio.sleep(0.003 * (n % 5))
        await until(all_finished(redis, prefix, scripts), "every turn to finish")
    assert worker.lanes.moves >= 2 * PARTITIONS
    assert one_request_each == []
    await assert_applied(redis, admin_redis, prefix, events)


async def assert_applied(
    redis: Redis, admin_redis: Redis, prefix: str, events: list[InboundEvent]
) -> None:
    """Frames and messages as folding `events` gives them; nothing pending, open or dead."""
    sessions = {e.session_id for e in events}
    expected = simulated(events)
    for session in sessions:
        frames = await session_updates(redis, session, partitions=PARTITIONS, prefix=prefix)
        assert uncursored(frames) == expected[session].frames
        messages = await session_messages(redis, session, partitions=PARTITIONS, prefix=prefix)
        assert by_id(messages) == by_id(expected[session].messages)
    for p in range(PARTITIONS):
        assert await pending(redis, Keys(p, prefix)) == 0
        assert await admin_redis.zcard(Keys(p, prefix).open_turns) == 0
    assert await dead_letters(redis, partitions=PARTITIONS, prefix=prefix) == []
