"""What the worker pool tests share: their settings, in-process workers stopped when a test
ends, events with explicit seqs (so a test can craft duplicates, gaps and regressions), and
readers of what the workers stored and left pending."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, Final, Protocol, TypeVar, cast

import msgspec
from redis.asyncio import Redis

from terminus.events.inbound import (
    AttemptStarted,
    FinishStep,
    InboundEvent,
    TextDelta,
    TextEnd,
    TextStart,
    TurnStarted,
    Usage,
)
from terminus.events.outbound import TextPart
from terminus.service.keys import GROUP, Keys, keys_for_session
from terminus.service.runtime.worker import Worker
from terminus.service.sdk.views import session_messages
from terminus.service.settings import Settings
from terminus.statemachines.states import TurnState
from terminus.statemachines.turn import Turn
from tests.support.polling import until

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


@contextlib.asynccontextmanager
async def started_workers(redis: Redis, prefix: str) -> AsyncIterator[StartWorker]:
    """Starts in-process workers; every one is stopped when the block ends."""
    started: list[tuple[Worker, asyncio.Task[None]]] = []

    async def start(worker_id: str | None = None, partitions: int = PARTITIONS) -> Worker:
        worker = Worker(redis, settings_for(prefix, partitions), worker_id)
        started.append((worker, asyncio.create_task(worker.run())))
        return worker

    try:
        yield start
    finally:
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
        name = as_str(row["consumer"])
        counts[name] = counts.get(name, 0) + 1
    return counts


def as_str(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def add(redis: Redis, key: str, fields: dict[bytes, bytes]) -> str:
    """XADD outside the SDK (what a buggy producer might write); the new entry id."""
    return as_str(await redis.xadd(key, cast("dict[Any, Any]", fields)))


async def crash_reading(redis: Redis, keys: Keys) -> None:
    """A worker that read every entry so far and died before acking any of them."""
    await redis.xreadgroup(GROUP, "crashed", {keys.inbound: ">"}, count=1000)


async def no_pending(redis: Redis, keys: Keys) -> bool:
    return await pending(redis, keys) == 0
