"""The worker pool against a real Redis: fenced reads, takeover drain, rebalance, dead letters,
duplicates and late events (DESIGN section 5, invariants 5 and 7).

Workers run in-process; every test stops the ones it started. Events are published with explicit
seqs through `Producer.publish`, so a test can craft duplicates, gaps and regressions.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Final, Protocol, TypeVar, cast

import msgspec
import pytest
from redis.asyncio import Redis
from support.polling import until

from terminus.events.codec import encode_event
from terminus.events.inbound import (
    AttemptStarted,
    FinishStep,
    InboundEvent,
    StreamClosed,
    TextDelta,
    TextEnd,
    TextStart,
    TurnStarted,
    Usage,
)
from terminus.events.outbound import AgentMessageChunk, TextPart
from terminus.service.fold.commit import LeaseLost
from terminus.service.keys import FIELD, GROUP, Keys, keys_for_session
from terminus.service.redis.scripts import script
from terminus.service.runtime.leases import Leases, lease_value
from terminus.service.runtime.membership import assigned
from terminus.service.runtime.owner import PartitionOwner
from terminus.service.runtime.pump import Pump
from terminus.service.runtime.worker import Worker
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.views import dead_letters, session_messages, session_updates
from terminus.service.settings import Settings
from terminus.statemachines.states import TurnState
from terminus.statemachines.turn import Turn

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

PARTITIONS: Final = 4
SESSION: Final = "s-1"
MAX_DELIVERIES: Final = 3
DEADLINE_S: Final = 20.0
SNAPSHOT: Final = msgspec.msgpack.Decoder(Turn)

E = TypeVar("E", bound=InboundEvent)
Arg = str | bytes | int


class StartWorker(Protocol):
    async def __call__(self, worker_id: str | None = None, partitions: int = ...) -> Worker: ...


def settings_for(prefix: str, partitions: int = PARTITIONS) -> Settings:
    return Settings(
        prefix=prefix,
        partitions=partitions,
        block_ms=100,
        lease_ttl_ms=1000,
        max_deliveries=MAX_DELIVERIES,
    )


@pytest.fixture
async def workers(redis: Redis, prefix: str) -> AsyncIterator[StartWorker]:
    """Starts in-process workers; every one is stopped after the test."""
    started: list[tuple[Worker, asyncio.Task[None]]] = []

    async def start(worker_id: str | None = None, partitions: int = PARTITIONS) -> Worker:
        worker = Worker(redis, settings_for(prefix, partitions), worker_id)
        started.append((worker, asyncio.create_task(worker.run())))
        return worker

    yield start
    for worker, task in started:
        await worker.stop()
        await task


def event(cls: type[E], seq: int, turn: str = "t-1", **fields: Any) -> E:
    return cls(session_id=SESSION, turn_id=turn, seq=seq, **fields)


def answer(turn: str) -> list[InboundEvent]:
    """A complete one-attempt turn saying "Hello" under the ai-sdk contract (finish is proof)."""
    return [
        event(TurnStarted, 0, turn),
        event(AttemptStarted, 1, turn, provider="p", model="m"),
        event(TextStart, 2, turn, part_id="a"),
        event(TextDelta, 3, turn, part_id="a", delta="Hel"),
        event(TextDelta, 4, turn, part_id="a", delta="lo"),
        event(TextEnd, 5, turn, part_id="a"),
        event(
            FinishStep,
            6,
            turn,
            finish_reason="stop",
            raw_finish_reason="end_turn",
            usage=Usage(output_tokens=2),
        ),
    ]


def keys_of(prefix: str) -> Keys:
    return keys_for_session(SESSION, PARTITIONS, prefix)


async def snapshot(redis: Redis, prefix: str, turn_id: str) -> Turn | None:
    raw = cast("bytes | None", await redis.get(keys_of(prefix).turn(turn_id)))
    return None if raw is None else SNAPSHOT.decode(raw)


async def wait_state(redis: Redis, prefix: str, turn_id: str, state: TurnState) -> Turn:
    async def reached() -> bool:
        turn = await snapshot(redis, prefix, turn_id)
        return turn is not None and turn.state is state

    await until(reached, f"{turn_id} in {state}")
    turn = await snapshot(redis, prefix, turn_id)
    assert turn is not None
    return turn


async def texts(redis: Redis, prefix: str) -> dict[str, str]:
    """Text of every persisted message of SESSION, by turn id."""
    found = await session_messages(redis, SESSION, partitions=PARTITIONS, prefix=prefix)
    return {m.turn_id: "".join(p.text for p in m.parts if isinstance(p, TextPart)) for m in found}


async def pending(redis: Redis, keys: Keys) -> int:
    summary = await redis.xpending(keys.inbound, GROUP)
    return int(summary["pending"])


async def consumer_pending(redis: Redis, keys: Keys) -> dict[str, int]:
    rows = await redis.xpending_range(keys.inbound, GROUP, "-", "+", 100)
    counts: dict[str, int] = {}
    for row in rows:
        name = _text(row["consumer"])
        counts[name] = counts.get(name, 0) + 1
    return counts


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def add(redis: Redis, key: str, fields: dict[bytes, bytes]) -> str:
    """XADD outside the SDK (what a buggy producer might write); the new entry id."""
    return _text(await redis.xadd(key, cast("dict[Any, Any]", fields)))


async def crash_reading(redis: Redis, keys: Keys) -> None:
    """A worker that read every entry so far and died before acking any of them."""
    await redis.xreadgroup(GROUP, "crashed", {keys.inbound: ">"}, count=1000)


# (a) fenced reads


async def test_a_stale_lease_reads_claims_and_appends_nothing(redis: Redis, prefix: str) -> None:
    keys = Keys(0, prefix)
    await redis.xgroup_create(keys.inbound, GROUP, id="0-0", mkstream=True)
    ids = [await add(redis, keys.inbound, {FIELD: b"x"}) for _ in range(3)]
    leases = Leases(redis, prefix)
    assert await leases.acquire(0, "worker-a", 10_000) == 1
    assert await leases.release(0, "worker-a", 1)
    assert await leases.acquire(0, "worker-b", 10_000) == 2
    stale, current = lease_value("worker-a", 1), lease_value("worker-b", 2)
    fenced = [keys.lease, keys.inbound]

    assert await script(redis, "read")(keys=fenced, args=[stale, GROUP, "worker-a", 10]) == 0
    assert await pending(redis, keys) == 0
    read_ids, payloads, _ = await script(redis, "read")(
        keys=fenced, args=[current, GROUP, "worker-b", 10]
    )
    assert [_text(i) for i in read_ids] == ids
    assert payloads == [b"x"] * 3

    claim_args: list[Arg] = [stale, GROUP, "worker-a", "0-0", 10]
    assert await script(redis, "claim")(keys=fenced, args=claim_args) == 0
    assert await consumer_pending(redis, keys) == {"worker-b": 3}
    append_args: list[Arg] = [stale, FIELD, b"y"]
    assert await script(redis, "append_owned")(keys=fenced, args=append_args) == 0
    assert await redis.xlen(keys.inbound) == 3


async def test_an_owner_whose_lease_moved_on_stops_before_reading(
    redis: Redis, prefix: str
) -> None:
    keys = keys_of(prefix)
    await Producer(redis, partitions=PARTITIONS, prefix=prefix).publish(answer("t-1"))
    leases = Leases(redis, prefix)
    assert await leases.acquire(keys.partition, "worker-a", 10_000) == 1
    assert await leases.release(keys.partition, "worker-a", 1)
    assert await leases.acquire(keys.partition, "worker-b", 10_000) == 2
    owner = PartitionOwner(redis, settings_for(prefix), keys.partition, "worker-a", 1)
    pump = Pump(redis, settings_for(prefix))
    pump.add(owner)
    pumping = asyncio.create_task(pump.run())
    try:
        with pytest.raises(LeaseLost):
            await asyncio.wait_for(owner.ended, DEADLINE_S)
        assert pump.owners == {}
    finally:
        pump.stop()
        await pumping
    assert await pending(redis, keys) == 0
    assert await snapshot(redis, prefix, "t-1") is None


# (b) takeover drain


async def test_claim_reports_how_often_each_pending_entry_was_delivered(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(0, prefix)
    await redis.xgroup_create(keys.inbound, GROUP, id="0-0", mkstream=True)
    first, second = [await add(redis, keys.inbound, {FIELD: b"x"}) for _ in range(2)]
    await crash_reading(redis, keys)
    await admin_redis.xclaim(keys.inbound, GROUP, "crashed", 0, [first], retrycount=7)
    assert await Leases(redis, prefix).acquire(0, "worker-b", 10_000) == 1
    fenced = [keys.lease, keys.inbound]
    args: list[Arg] = [lease_value("worker-b", 1), GROUP, "worker-b", "0-0", 10]
    next_start, rows, counts = await script(redis, "claim")(keys=fenced, args=args)
    assert next_start == b"0-0"
    assert [_text(row[0]) for row in rows] == [first, second]
    assert {_text(entry_id): int(n) for entry_id, n in counts} == {first: 8, second: 2}
    assert await consumer_pending(redis, keys) == {"worker-b": 2}


async def test_takeover_applies_pending_entries_before_new_ones_and_kills_poison(
    redis: Redis, admin_redis: Redis, prefix: str, workers: StartWorker
) -> None:
    keys = keys_of(prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    await redis.xgroup_create(keys.inbound, GROUP, id="0-0", mkstream=True)
    events = answer("t-1")
    poison = event(TurnStarted, 0, "t-poison")
    old = await producer.publish([*events[:4], poison])
    await crash_reading(redis, keys)
    # Delivered MAX times before the takeover: one more is still allowed. The poison is not.
    await admin_redis.xclaim(
        keys.inbound, GROUP, "crashed", 0, [old[0]], retrycount=MAX_DELIVERIES - 1
    )
    await admin_redis.xclaim(keys.inbound, GROUP, "crashed", 0, [old[4]], retrycount=MAX_DELIVERIES)
    await producer.publish(events[4:])  # never delivered: must be applied after the pending ones

    await workers()
    await wait_state(redis, prefix, "t-1", TurnState.FINISHED)
    await until(lambda: _no_pending(redis, keys), "the pending entries to be acked")

    assert await texts(redis, prefix) == {"t-1": "Hello"}
    letters = await dead_letters(redis, partition=keys.partition, prefix=prefix)
    reason = f"delivered {MAX_DELIVERIES + 1} times (max {MAX_DELIVERIES})"
    assert [(d.source_id, d.reason, d.raw) for d in letters] == [
        (_text(old[4]), reason, encode_event(poison))
    ]
    assert await snapshot(redis, prefix, "t-poison") is None


async def test_a_dead_owner_s_batch_is_applied_by_the_next_owner_once_its_lease_expires(
    redis: Redis, prefix: str, workers: StartWorker
) -> None:
    keys = keys_of(prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    events = answer("t-1")
    await producer.publish(events[:4])
    await redis.xgroup_create(keys.inbound, GROUP, id="0-0", mkstream=True)
    assert await Leases(redis, prefix).acquire(keys.partition, "worker-dead", 300) == 1
    fenced = [keys.lease, keys.inbound]
    args: list[Arg] = [lease_value("worker-dead", 1), GROUP, "worker-dead", 100]
    read_ids, _, _ = await script(redis, "read")(keys=fenced, args=args)
    assert len(read_ids) == 4  # read, never committed: the owner died with its lease
    await producer.publish(events[4:])

    await workers("worker-b")
    await wait_state(redis, prefix, "t-1", TurnState.FINISHED)
    await until(lambda: _no_pending(redis, keys), "the dead owner's entries to be acked")
    assert _text(await redis.get(keys.lease)) == "worker-b:2"
    assert await texts(redis, prefix) == {"t-1": "Hello"}
    assert await dead_letters(redis, partitions=PARTITIONS, prefix=prefix) == []


async def _no_pending(redis: Redis, keys: Keys) -> bool:
    return await pending(redis, keys) == 0


# (c) rebalance


async def test_two_workers_split_the_partitions_and_the_survivor_takes_all(
    redis: Redis, prefix: str, workers: StartWorker
) -> None:
    partitions = 16
    a = await workers("worker-a", partitions)
    b = await workers("worker-b", partitions)
    pool = ["worker-a", "worker-b"]
    overlaps: list[set[int]] = []

    async def split() -> bool:
        overlaps.append(a.partitions & b.partitions)
        return (a.partitions, b.partitions) == (
            assigned(partitions, pool, "worker-a"),
            assigned(partitions, pool, "worker-b"),
        )

    await until(split, "the two workers to split the partitions")
    assert a.partitions | b.partitions == set(range(partitions))
    assert not any(overlaps)
    for worker in (a, b):
        for partition in worker.partitions:
            lease = _text(await redis.get(Keys(partition, prefix).lease))
            assert lease.rsplit(":", 1)[0] == worker.worker_id

    await b.stop()

    async def a_has_all() -> bool:
        return a.partitions == set(range(partitions))

    await until(a_has_all, "worker-a to take every partition")
    assert b.partitions == set()


async def test_a_tick_that_fails_with_a_redis_error_is_logged_and_the_next_one_goes_on(
    redis: Redis, prefix: str, workers: StartWorker, caplog: pytest.LogCaptureFixture
) -> None:
    """A pool key of the wrong type fails the heartbeat with WRONGTYPE, not a connection
    error: the worker logs it at every tick and joins the pool once the key is fixed (its tick
    loop used to end on it, the process still up and holding no lease)."""
    pool_key = f"{prefix}:workers"
    await redis.set(pool_key, "not a sorted set")
    worker = await workers("worker-a")

    async def failed_twice() -> bool:
        return sum("tick failed" in r.getMessage() for r in caplog.records) >= 2

    await until(failed_twice, "two failed ticks")
    assert worker.partitions == set()
    await redis.delete(pool_key)

    async def owns_all() -> bool:
        return worker.partitions == set(range(PARTITIONS))

    await until(owns_all, "the worker to take every partition once the key is fixed")


async def test_a_worker_that_joins_later_gets_about_half(
    redis: Redis, prefix: str, workers: StartWorker
) -> None:
    partitions = 16
    a = await workers("worker-a", partitions)

    async def a_has_all() -> bool:
        return a.partitions == set(range(partitions))

    await until(a_has_all, "worker-a to own every partition")
    b = await workers("worker-b", partitions)
    expected = assigned(partitions, ["worker-a", "worker-b"], "worker-b")

    async def b_has_its_share() -> bool:
        return b.partitions == expected and not a.partitions & b.partitions

    await until(b_has_its_share, "worker-b to take its share")
    assert partitions // 4 <= len(b.partitions) <= 3 * partitions // 4
    assert a.partitions == set(range(partitions)) - expected


# (d) dead letters


async def test_bad_entries_are_dead_lettered_and_the_rest_of_the_batch_applies(
    redis: Redis, prefix: str, workers: StartWorker
) -> None:
    keys = keys_of(prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    good = answer("t-good")
    wrong_type = (
        b'{"type":"text-delta","session_id":"s-1","turn_id":"t-good","seq":9,'
        b'"part_id":1,"delta":"x"}'
    )
    ghost = event(TextDelta, 3, "t-ghost", part_id="a", delta="boo")
    gap_start: list[InboundEvent] = [
        event(TurnStarted, 0, "t-gap"),
        event(AttemptStarted, 1, "t-gap"),
        event(TextStart, 2, "t-gap", part_id="a"),
    ]
    skipped_ahead = event(TextDelta, 4, "t-gap", part_id="a", delta="ahead")
    regressed = event(TextDelta, 3, "t-gap", part_id="a", delta="behind")
    gap_rest: list[InboundEvent] = [
        event(TextDelta, 5, "t-gap", part_id="a", delta="!"),
        event(TextEnd, 6, "t-gap", part_id="a"),
        event(FinishStep, 7, "t-gap", finish_reason="stop", raw_finish_reason="end_turn",
              usage=Usage(output_tokens=1)),
    ]  # fmt: skip

    await producer.publish(good[:4])
    undecodable = await add(redis, keys.inbound, {FIELD: b"{not json"})
    no_field = await add(redis, keys.inbound, {b"x": b"y"})
    mistyped = await add(redis, keys.inbound, {FIELD: wrong_type})
    ghost_id = _text((await producer.publish([ghost, *gap_start]))[0])
    gap_id, regression_id = map(_text, await producer.publish([skipped_ahead, regressed]))
    await producer.publish([*gap_rest, *good[4:]])

    await workers()
    await wait_state(redis, prefix, "t-good", TurnState.FINISHED)
    await wait_state(redis, prefix, "t-gap", TurnState.FINISHED)
    await until(lambda: _no_pending(redis, keys), "every entry to be acked")

    assert await texts(redis, prefix) == {"t-good": "Hello", "t-gap": "!"}
    letters = await dead_letters(redis, partition=keys.partition, prefix=prefix)
    assert {d.source_stream for d in letters} == {keys.inbound}
    assert [(d.source_id, d.raw) for d in letters] == [
        (undecodable, b"{not json"),
        (no_field, b'{"x":"y"}'),
        (mistyped, wrong_type),
        (ghost_id, encode_event(ghost)),
        (gap_id, encode_event(skipped_ahead)),
        (regression_id, encode_event(regressed)),
    ]
    reasons = [d.reason for d in letters]
    assert reasons[0].startswith("undecodable: malformed json")
    assert reasons[2].startswith("undecodable: ")
    assert "$.part_id" in reasons[2]
    assert [reasons[1], *reasons[3:]] == [
        "entry has no field 'e'",
        "illegal: t-ghost: event for a turn that never started",
        "illegal: t-gap: seq gap, expected 3, got 4",
        "illegal: t-gap: seq regression, 3 arrived after 4 and was never applied",
    ]


# (e) duplicates and late events


async def test_duplicates_and_late_events_are_ignored_and_counted_not_dead(
    redis: Redis, prefix: str, workers: StartWorker
) -> None:
    keys = keys_of(prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    events = answer("t-1")
    await producer.publish(events[:5])
    await producer.publish(events[2:5])  # the producer resends three events it was unsure of
    await producer.publish(events[5:])
    await workers()
    await wait_state(redis, prefix, "t-1", TurnState.FINISHED)
    late: list[InboundEvent] = [
        event(TextDelta, 7, "t-1", part_id="a", delta=" again"),
        event(StreamClosed, 8, "t-1"),
    ]
    await producer.publish(late)

    async def counted() -> bool:
        turn = await snapshot(redis, prefix, "t-1")
        return turn is not None and turn.ignored == {"duplicate": 3, "late": 2}

    await until(counted, "the duplicates and late events to be counted")
    await until(lambda: _no_pending(redis, keys), "every entry to be acked")
    assert await texts(redis, prefix) == {"t-1": "Hello"}
    frames = await session_updates(redis, SESSION, partitions=PARTITIONS, prefix=prefix)
    assert [f.delta for f in frames if isinstance(f, AgentMessageChunk)] == ["Hel", "lo"]
    assert await dead_letters(redis, partitions=PARTITIONS, prefix=prefix) == []
