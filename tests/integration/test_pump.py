"""The pump against a real Redis: owners stepped in lanes, scripts reloaded after SCRIPT FLUSH,
turns continued from their stored tails by the next owner, batches in hand committed on retire
(service/runtime/pump.py, service/runtime/owner.py, service/runtime/worker.py,
service/fold/snapshots.py).

Pumps are either driven round by round (`Pump.round`), so a test can act between a batch's fold
and its commit, or run inside in-process workers. Expected frames and messages come from folding
the same events with `evolve`, as `terminus simulate` does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from functools import partial
from itertools import zip_longest
from typing import Any, Final, Protocol, TypeVar, cast

import msgspec
import pytest
from redis.asyncio import Redis
from support.polling import until

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
from terminus.events.outbound import AgentMessageChunk, PersistedMessage, SessionUpdate, TextPart
from terminus.service.fold.commit import LeaseLost
from terminus.service.fold.snapshots import TailLedger
from terminus.service.keys import GROUP, Keys, partition_of, workers_key
from terminus.service.runtime.leases import Leases
from terminus.service.runtime.owner import PartitionOwner
from terminus.service.runtime.pump import Pump
from terminus.service.runtime.worker import Worker
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.views import dead_letters, session_messages, session_updates
from terminus.service.settings import Settings
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.states import TurnState
from terminus.statemachines.turn import Turn

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

PARTITIONS: Final = 4
SNAPSHOT: Final = msgspec.msgpack.Decoder(Turn)
SESSION: Final = "s-tail"

E = TypeVar("E", bound=InboundEvent)


def settings_for(prefix: str, *, lanes: int = 2, batch_size: int = 512) -> Settings:
    return Settings(
        prefix=prefix,
        partitions=PARTITIONS,
        batch_size=batch_size,
        block_ms=100,
        lanes=lanes,
        lease_ttl_ms=1000,
    )


class StartWorker(Protocol):
    async def __call__(
        self, worker_id: str, *, lanes: int = ..., batch_size: int = ...
    ) -> Worker: ...


@pytest.fixture
async def workers(redis: Redis, prefix: str) -> AsyncIterator[StartWorker]:
    """Starts in-process workers; every one still running is stopped after the test."""
    started: list[tuple[Worker, asyncio.Task[None]]] = []

    async def start(worker_id: str, *, lanes: int = 2, batch_size: int = 512) -> Worker:
        worker = Worker(redis, settings_for(prefix, lanes=lanes, batch_size=batch_size), worker_id)
        started.append((worker, asyncio.create_task(worker.run())))
        return worker

    yield start
    for worker, task in started:
        if not task.done():
            await worker.stop()
            await task


class Script:
    """One turn's events with explicit seqs: attempt 1 at seq 1, later attempts at seq 0."""

    def __init__(self, session_id: str, turn_id: str) -> None:
        self.session_id, self.turn_id = session_id, turn_id
        self.attempt, self.seq = 1, 0
        self.events: list[InboundEvent] = []
        self.emit(TurnStarted)

    def emit(self, cls: type[E], **fields: Any) -> E:
        event = cls(
            session_id=self.session_id,
            turn_id=self.turn_id,
            attempt=self.attempt,
            seq=self.seq,
            **fields,
        )
        self.seq += 1
        self.events.append(event)
        return event

    def start(self) -> None:
        if len(self.events) > 1:
            self.attempt, self.seq = self.attempt + 1, 0
        self.emit(AttemptStarted, provider="p", model="m")
        self.emit(TextStart, part_id="a")

    def deltas(self, *texts: str) -> None:
        for text in texts:
            self.emit(TextDelta, part_id="a", delta=text)

    def finish(self) -> None:
        self.emit(TextEnd, part_id="a")
        usage = Usage(output_tokens=1)
        self.emit(FinishStep, finish_reason="stop", raw_finish_reason="end_turn", usage=usage)


def words(turn_id: str, count: int) -> list[str]:
    """Deltas a JSON line must keep intact: quotes, backslashes, newlines, non-ASCII."""
    return [f'{turn_id} δ{n} "q" \\ \n' for n in range(count)]


def answer(session_id: str, turn_id: str, count: int, *, cut: int | None = None) -> Script:
    """A finished turn saying `words(turn_id, count)`; with `cut`, a first attempt closed after
    `cut` deltas comes before it and is retried."""
    script = Script(session_id, turn_id)
    if cut is not None:
        script.start()
        script.deltas(*[f"lost {n}" for n in range(cut)])
        script.emit(StreamClosed)
    script.start()
    script.deltas(*words(turn_id, count))
    script.finish()
    return script


def simulated(events: Iterable[InboundEvent]) -> dict[str, Outputs]:
    """Outputs per session of folding `events` in order, turn by turn, with no Redis."""
    turns: dict[str, Turn] = {}
    outputs: dict[str, Outputs] = {}
    for event in events:
        out = outputs.setdefault(event.session_id, Outputs())
        turns[event.turn_id], _ = evolve(turns.get(event.turn_id), event, out=out)
    return outputs


def interleaved(scripts: list[Script]) -> list[InboundEvent]:
    """Every turn's events, one of each turn in turn, each turn's in order."""
    rounds = zip_longest(*(s.events for s in scripts))
    return [e for burst in rounds for e in burst if e is not None]


def uncursored(frames: list[SessionUpdate]) -> list[SessionUpdate]:
    return [msgspec.structs.replace(f, cursor=None) for f in frames]


def by_id(messages: list[PersistedMessage]) -> dict[str, PersistedMessage]:
    """The last version of each message (a message is rewritten as its steps commit)."""
    return {m.message_id: m for m in messages}


async def snapshot(redis: Redis, keys: Keys, turn_id: str) -> Turn | None:
    raw = cast("bytes | None", await redis.get(keys.turn(turn_id)))
    return None if raw is None else SNAPSHOT.decode(raw)


async def whole_turn(redis: Redis, keys: Keys, turn_id: str) -> Turn | None:
    """The snapshot with its tail's text put back, as a reader assembles it."""
    base, tail = cast(
        "list[bytes | None]", await redis.mget(keys.turn(turn_id), keys.tail(turn_id))
    )
    return None if base is None else TailLedger().load(base, tail)


async def text_of(redis: Redis, keys: Keys, turn_id: str) -> str:
    turn = await whole_turn(redis, keys, turn_id)
    assert turn is not None
    assert turn.current is not None
    return "".join(turn.current.texts["a"].chunks)


async def message_text(redis: Redis, prefix: str, session_id: str, turn_id: str) -> str:
    found = await session_messages(redis, session_id, partitions=PARTITIONS, prefix=prefix)
    [message] = [m for m in found if m.turn_id == turn_id]
    return "".join(p.text for p in message.parts if isinstance(p, TextPart))


async def pending(redis: Redis, keys: Keys) -> int:
    with contextlib.suppress(Exception):  # no log or no group yet: nothing was read
        return int((await redis.xpending(keys.inbound, GROUP))["pending"])
    return 0


async def chunks(redis: Redis, session_id: str, prefix: str) -> int:
    frames = await session_updates(redis, session_id, partitions=PARTITIONS, prefix=prefix)
    return sum(isinstance(f, AgentMessageChunk) for f in frames)


def session_in(partition: int, n: int = 0) -> str:
    """The `n`th session id (s-0, s-1, ...) that belongs to `partition`."""
    found = (f"s-{i}" for i in range(10_000) if partition_of(f"s-{i}", PARTITIONS) == partition)
    for _ in range(n):
        next(found)
    return next(found)


async def owned(redis: Redis, prefix: str, partition: int, worker_id: str) -> PartitionOwner:
    """An owner of `partition` holding a fresh lease for `worker_id`."""
    epoch = await Leases(redis, prefix).acquire(partition, worker_id, 30_000)
    assert epoch is not None
    return PartitionOwner(redis, settings_for(prefix), partition, worker_id, epoch)


# (a) the pump reloads its scripts when the server lost them


async def test_a_commit_in_hand_lands_after_script_flush(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(partition_of(SESSION, PARTITIONS), prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    script = answer(SESSION, "t-1", 6)
    opened = 6  # up to the third delta
    await producer.publish(script.events[:opened])
    owner = await owned(redis, prefix, keys.partition, "worker-a")
    pump = Pump(redis, settings_for(prefix))
    pump.add(owner)

    await pump.round()  # the drain, then the read: the batch is folded, not committed
    assert owner.batch is not None
    await admin_redis.script_flush()
    await pump.round()  # commit-and-read: NOSCRIPT, loaded, sent again
    assert owner.batch is None
    assert not owner.done
    assert await pending(redis, keys) == 0
    assert await text_of(redis, keys, "t-1") == "".join(words("t-1", 6)[:3])

    await admin_redis.script_flush()
    await producer.publish(script.events[opened:])
    for _ in range(10):  # the wait (XREAD) wakes it, then a read (NOSCRIPT again)
        await pump.round()
        if owner.batch is not None:
            break
    assert owner.batch is not None
    await pump.round()
    assert not owner.done
    turn = await snapshot(redis, keys, "t-1")
    assert turn is not None
    assert turn.state is TurnState.FINISHED
    assert await message_text(redis, prefix, SESSION, "t-1") == "".join(words("t-1", 6))
    assert owner.epoch == 1, "the owner went on: no new epoch, no restart"


async def test_a_running_worker_goes_on_after_script_flush(
    redis: Redis, admin_redis: Redis, prefix: str, workers: StartWorker
) -> None:
    keys = Keys(partition_of(SESSION, PARTITIONS), prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    worker = await workers("worker-a")
    await producer.publish(answer(SESSION, "t-1", 3).events)

    async def finished(turn_id: str) -> bool:
        turn = await snapshot(redis, keys, turn_id)
        return turn is not None and turn.state is TurnState.FINISHED

    await until(lambda: finished("t-1"), "t-1 to finish")
    await until(lambda: _owns_all(worker), "the worker to own every partition")
    owners = dict(worker.owners)
    await admin_redis.script_flush()
    await producer.publish(answer(SESSION, "t-2", 3).events)
    await until(lambda: finished("t-2"), "t-2 to finish after SCRIPT FLUSH")
    assert await message_text(redis, prefix, SESSION, "t-2") == "".join(words("t-2", 3))
    assert worker.owners == owners, "the same owners: none ended and was taken again"
    assert not any(owner.done for owner in owners.values())
    assert await dead_letters(redis, partitions=PARTITIONS, prefix=prefix) == []


async def _owns_all(worker: Worker) -> bool:
    return worker.partitions == set(range(PARTITIONS))


# (b) lanes: any number of pumps applies every turn exactly


@pytest.mark.parametrize("lanes", [1, 3])
async def test_every_lane_count_applies_every_turn_exactly(
    redis: Redis, admin_redis: Redis, prefix: str, workers: StartWorker, lanes: int
) -> None:
    sessions = [session_in(p, n) for p in range(PARTITIONS) for n in range(2)]
    scripts = [
        answer(s, f"{s}-t{t}", 4 + 3 * t, cut=2 if (i + t) % 3 == 0 else None)
        for i, s in enumerate(sessions)
        for t in range(2)
    ]
    events = interleaved(scripts)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    await producer.publish(events[: len(events) // 2])
    worker = await workers("worker-a", lanes=lanes)
    await producer.publish(events[len(events) // 2 :])

    async def all_finished() -> bool:
        for script in scripts:
            keys = Keys(partition_of(script.session_id, PARTITIONS), prefix)
            turn = await snapshot(redis, keys, script.turn_id)
            if turn is None or turn.state is not TurnState.FINISHED:
                return False
        return True

    await until(all_finished, "every turn to finish")
    assert len(worker.pumps) == lanes
    assert {p: n for n, pump in enumerate(worker.pumps) for p in pump.owners} == {
        p: p % lanes for p in range(PARTITIONS)
    }
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


# (c) a turn taken over mid-stream continues from its stored tail


@pytest.mark.parametrize("first_worker_ends", ["stopped", "crashed"])
async def test_a_turn_taken_over_mid_stream_ends_with_its_whole_text(
    redis: Redis, admin_redis: Redis, prefix: str, workers: StartWorker, first_worker_ends: str
) -> None:
    keys = Keys(partition_of(SESSION, PARTITIONS), prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    script = answer(SESSION, "t-1", 9)
    text = words("t-1", 9)
    opened = len(script.events) - len(text) - 2  # up to the text-start
    delta_events = script.events[opened : opened + len(text)]

    a = Worker(redis, settings_for(prefix), "worker-a")
    running_a = asyncio.create_task(a.run())
    await producer.publish(script.events[:opened])
    for n in (3, 6):  # two batches at least: the tail is written, then appended to
        await producer.publish(delta_events[n - 3 : n])
        await until(partial(_chunks_are, redis, prefix, n), f"{n} deltas to be committed")
    assert await text_of(redis, keys, "t-1") == "".join(text[:6])
    base = await snapshot(redis, keys, "t-1")
    assert base is not None
    assert base.current is not None
    assert base.current.texts["a"].chunks == [], "the text so far is in the tail alone"

    if first_worker_ends == "stopped":
        await a.stop()
        await running_a
        assert await redis.get(keys.lease) is None
    else:  # the task dies: no last commit, no release; the lease and heartbeat expire
        running_a.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running_a

    b = await workers("worker-b")
    await producer.publish(delta_events[6:])
    await until(lambda: _chunks_are(redis, prefix, 9), "worker-b to commit the last deltas")
    assert await text_of(redis, keys, "t-1") == "".join(text)
    await producer.publish(script.events[opened + len(text) :])

    async def finished() -> bool:
        turn = await snapshot(redis, keys, "t-1")
        return turn is not None and turn.state is TurnState.FINISHED

    await until(finished, "t-1 to finish")
    assert keys.partition in b.partitions
    assert _text(await redis.get(keys.lease)).startswith("worker-b:")
    assert await message_text(redis, prefix, SESSION, "t-1") == "".join(text)
    assert await admin_redis.exists(keys.tail("t-1")) == 0, "a final turn keeps no tail"
    final = await snapshot(redis, keys, "t-1")
    assert final is not None
    assert final.current is not None
    assert "".join(final.current.texts["a"].chunks) == "".join(text), "stored whole"
    frames = await session_updates(redis, SESSION, partitions=PARTITIONS, prefix=prefix)
    assert uncursored(frames) == simulated(script.events)[SESSION].frames
    assert await dead_letters(redis, partitions=PARTITIONS, prefix=prefix) == []


async def _chunks_are(redis: Redis, prefix: str, count: int) -> bool:
    return await chunks(redis, SESSION, prefix) == count


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# (d) retiring and stopping commit what was folded and release the leases


async def test_retire_commits_the_batch_in_hand(redis: Redis, prefix: str) -> None:
    keys = Keys(partition_of(SESSION, PARTITIONS), prefix)
    settings = settings_for(prefix, batch_size=3)
    script = answer(SESSION, "t-1", 12)
    await Producer(redis, partitions=PARTITIONS, prefix=prefix).publish(script.events)
    epoch = await Leases(redis, prefix).acquire(keys.partition, "worker-a", 30_000)
    assert epoch is not None
    owner = PartitionOwner(redis, settings, keys.partition, "worker-a", epoch)
    pump = Pump(redis, settings)
    pump.add(owner)
    await pump.round()
    assert owner.batch is not None
    assert await pending(redis, keys) == 3, "read, folded, not committed"

    running = asyncio.create_task(pump.run())
    await asyncio.sleep(0)  # the loop runs: retire now waits for it to commit, then end
    assert pump.running
    await pump.retire(keys.partition)
    pump.stop()
    await running
    assert owner.done
    assert owner.ended.exception() is None
    assert pump.owners == {}
    assert await pending(redis, keys) == 0
    groups = await redis.xinfo_groups(keys.inbound)
    last_read = _text(groups[0]["last-delivered-id"])
    ids = [_text(i) for i, _ in cast("list[tuple[bytes, Any]]", await redis.xrange(keys.inbound))]
    read = ids.index(last_read) + 1
    assert 3 <= read < len(ids), "stopped before the end of the log"
    turn = await whole_turn(redis, keys, "t-1")
    assert turn is not None
    assert turn.last_seq == script.events[read - 1].seq, "every entry read was committed"


async def test_retire_of_an_idle_pump_ends_the_owner_and_leaves_its_entries_pending(
    redis: Redis, prefix: str
) -> None:
    """With no loop to commit it, the batch in hand is dropped: its entries stay pending for the
    next owner's drain, which applies them."""
    keys = Keys(partition_of(SESSION, PARTITIONS), prefix)
    script = answer(SESSION, "t-1", 2)
    await Producer(redis, partitions=PARTITIONS, prefix=prefix).publish(script.events)
    first = await owned(redis, prefix, keys.partition, "worker-a")
    pump = Pump(redis, settings_for(prefix))
    pump.add(first)
    await pump.round()
    assert first.batch is not None
    await pump.retire(keys.partition)
    assert first.done
    assert await pending(redis, keys) == len(script.events)
    assert await snapshot(redis, keys, "t-1") is None
    await Leases(redis, prefix).release(keys.partition, "worker-a", first.epoch)

    second = await owned(redis, prefix, keys.partition, "worker-b")
    pump.add(second)
    await pump.round()  # the drain claims and commits them
    assert await pending(redis, keys) == 0
    assert await message_text(redis, prefix, SESSION, "t-1") == "".join(words("t-1", 2))


async def test_a_commit_in_hand_on_a_lost_lease_writes_nothing_and_ends_the_owner(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = Keys(partition_of(SESSION, PARTITIONS), prefix)
    await Producer(redis, partitions=PARTITIONS, prefix=prefix).publish(
        answer(SESSION, "t-1", 2).events
    )
    owner = await owned(redis, prefix, keys.partition, "worker-a")
    pump = Pump(redis, settings_for(prefix))
    pump.add(owner)
    await pump.round()
    assert owner.batch is not None
    leases = Leases(redis, prefix)
    assert await leases.release(keys.partition, "worker-a", owner.epoch)
    assert await leases.acquire(keys.partition, "worker-b", 30_000) == owner.epoch + 1
    await pump.round()
    assert owner.done
    assert isinstance(owner.ended.exception(), LeaseLost)
    assert owner.fold.turns == {}
    assert pump.owners == {}
    assert await snapshot(redis, keys, "t-1") is None
    assert await admin_redis.exists(keys.session(SESSION)) == 0
    assert await pending(redis, keys) > 0, "left for the new owner's drain"


async def test_stopping_a_busy_worker_leaves_nothing_pending_and_releases_every_lease(
    redis: Redis, admin_redis: Redis, prefix: str, workers: StartWorker
) -> None:
    sessions = [session_in(p) for p in range(PARTITIONS)]
    scripts = [answer(s, f"{s}-t", 1_000) for s in sessions]
    events = interleaved(scripts)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    a = await workers("worker-a", batch_size=16)

    async def publish() -> None:  # in bursts, so that worker-a is busy when it is stopped
        for start in range(0, len(events), 64):
            await producer.publish(events[start : start + 64])

    publishing = asyncio.create_task(publish())

    async def started() -> bool:
        return await chunks(redis, sessions[0], prefix) > 0

    await until(started, "the first frames to be committed")
    await a.stop()
    await publishing
    for p in range(PARTITIONS):
        keys = Keys(p, prefix)
        assert await pending(redis, keys) == 0
        assert await redis.get(keys.lease) is None
    assert await admin_redis.zscore(workers_key(prefix), "worker-a") is None
    assert a.partitions == set()

    await workers("worker-b")  # the rest, exactly once, from where worker-a stopped

    async def all_finished() -> bool:
        for script in scripts:
            keys = Keys(partition_of(script.session_id, PARTITIONS), prefix)
            turn = await snapshot(redis, keys, script.turn_id)
            if turn is None or turn.state is not TurnState.FINISHED:
                return False
        return True

    await until(all_finished, "worker-b to finish every turn")
    expected = simulated(events)
    for session in sessions:
        frames = await session_updates(redis, session, partitions=PARTITIONS, prefix=prefix)
        assert uncursored(frames) == expected[session].frames
    assert await dead_letters(redis, partitions=PARTITIONS, prefix=prefix) == []
