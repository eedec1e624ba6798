"""What the pump tests share: their settings, in-process workers stopped when a test ends, turns
scripted with explicit seqs, what folding them without Redis gives, and readers of what a pump
stored (snapshots with their tails, messages, pending entries, frames).

Expected frames and messages come from folding the same events with `evolve`, as
`terminus simulate` does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from itertools import zip_longest
from typing import Any, Final, Protocol, TypeVar, cast

import msgspec
from redis.asyncio import Redis

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
from terminus.service.fold.snapshots import TailLedger
from terminus.service.keys import GROUP, Keys, partition_of
from terminus.service.runtime.leases import Leases
from terminus.service.runtime.owner import PartitionOwner
from terminus.service.runtime.pump import Pump
from terminus.service.runtime.worker import Worker
from terminus.service.sdk.views import session_messages, session_updates
from terminus.service.settings import Settings
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.turn import Turn

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


@contextlib.asynccontextmanager
async def started_workers(redis: Redis, prefix: str) -> AsyncIterator[StartWorker]:
    """Starts in-process workers; every one still running is stopped when the block ends."""
    started: list[tuple[Worker, asyncio.Task[None]]] = []

    async def start(worker_id: str, *, lanes: int = 2, batch_size: int = 512) -> Worker:
        worker = Worker(redis, settings_for(prefix, lanes=lanes, batch_size=batch_size), worker_id)
        started.append((worker, asyncio.create_task(worker.run())))
        return worker

    try:
        yield start
    finally:
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


def as_str(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@contextlib.asynccontextmanager
async def stepped_pump(redis: Redis, settings: Settings) -> AsyncIterator[Pump]:
    """A pump the test steps (`round()`) rather than runs: its own connection, which `run` would
    close when it ends, is closed when the test is done with it."""
    pump = Pump(redis, settings)
    try:
        yield pump
    finally:
        await pump.wire.close()


@contextlib.asynccontextmanager
async def running_pump(
    redis: Redis, settings: Settings, *owners: PartitionOwner
) -> AsyncIterator[Pump]:
    """A pump running `owners` while the test uses it, stopped (and waited for) after."""
    pump = Pump(redis, settings)
    for owner in owners:
        pump.add(owner)
    running = asyncio.create_task(pump.run())
    try:
        yield pump
    finally:
        pump.stop()
        await running
