"""Load for the fault tests: turns published through the producer SDK, recorded as published.

A session's turns are published one after the other (sessions run concurrently), so the order
of a session's entries in its partition log is the order in which the producer sent them, and
the in-process fold of `RecordingProducer.published` is what the workers must produce.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from redis.asyncio import Redis

from terminus.events.inbound import (
    FinishStep,
    InboundEvent,
    StreamClosed,
    TextDelta,
    TextEnd,
    TextStart,
    Usage,
)
from terminus.service.redis.connect import TRANSIENT
from terminus.service.sdk.producer import Producer
from terminus.service.settings import Settings

E = TypeVar("E", bound=InboundEvent)
Published = dict[str, list[tuple[str, InboundEvent]]]  # session -> (entry id, event), in order


class RecordingProducer(Producer):
    """The producer SDK, retrying a publish until Redis takes it, recording what it published.
    Each event it is given is published as it is (no `coalesce_reads`): the load is the plan's,
    event for event, and `has_published` counts the plan's events."""

    def __init__(self, redis: Redis, settings: Settings, deadline_s: float = 60.0) -> None:
        super().__init__(
            redis, partitions=settings.partitions, prefix=settings.prefix, coalesce_reads=False
        )
        self.published: Published = defaultdict(list)
        self.count = 0
        self.retries = 0
        self.deadline_s = deadline_s

    async def publish(self, events: Iterable[InboundEvent]) -> list[bytes]:
        batch = list(events)
        ids = await self._publish_retrying(batch)
        for entry_id, event in zip(ids, batch, strict=True):
            self.published[event.session_id].append((entry_id.decode(), event))
        self.count += len(batch)
        return ids

    async def _publish_retrying(self, batch: list[InboundEvent]) -> list[bytes]:
        # A pipeline cut by a lost connection may have landed in part: sending it again can
        # duplicate a prefix of it in the log, which the fold recognizes by seq and ignores.
        deadline = time.monotonic() + self.deadline_s
        while True:
            try:
                return await super().publish(batch)
            except TRANSIENT:
                if time.monotonic() > deadline:
                    raise
                self.retries += 1
                await asyncio.sleep(0.05)


@dataclass(frozen=True)
class TurnPlan:
    """One turn of the load: `cut` turns lose attempt 1 to EOF and finish on attempt 2."""

    session_id: str
    turn_id: str
    cut: bool = False
    deltas: int = 46


def plan_sessions(
    sessions: int, turns: int, cut_every: int = 10, tag: str = "s"
) -> list[list[TurnPlan]]:
    """`sessions` lists of `turns` turns each; every `cut_every`-th turn is cut once."""
    return [
        [
            TurnPlan(f"{tag}{s}", f"{tag}{s}-t{t}", (s * turns + t) % cut_every == 3)
            for t in range(turns)
        ]
        for s in range(sessions)
    ]


def attempts_of(plan: TurnPlan) -> list[tuple[int, bool]]:
    """(attempt, complete) of each attempt the turn publishes."""
    return [(1, False), (2, True)] if plan.cut else [(1, True)]


def planned_events(plans: list[list[TurnPlan]]) -> int:
    """How many events `publish_sessions` publishes for `plans`: turn-started, and for each
    attempt its attempt-started and body."""
    return sum(
        1 + sum(1 + len(attempt_body(plan, a, done)) for a, done in attempts_of(plan))
        for turns in plans
        for plan in turns
    )


def stamped(cls: type[E], plan: TurnPlan, **fields: Any) -> E:
    """An event of the plan's turn for the SDK to number (step, attempt and seq)."""
    return cls(session_id=plan.session_id, turn_id=plan.turn_id, seq=-1, **fields)


def attempt_body(plan: TurnPlan, attempt: int, complete: bool) -> list[InboundEvent]:
    """One text part; a complete attempt ends with a genuine `finish-step`, a cut one with EOF."""
    part = f"{plan.turn_id}-a{attempt}"
    deltas = plan.deltas if complete else plan.deltas // 2
    body: list[InboundEvent] = [stamped(TextStart, plan, part_id=part)]
    body += [stamped(TextDelta, plan, part_id=part, delta=f"{part}:{n} ") for n in range(deltas)]
    if not complete:
        return [*body, stamped(StreamClosed, plan)]
    usage = Usage(input_tokens=17, output_tokens=deltas)
    finish = stamped(
        FinishStep, plan, finish_reason="stop", raw_finish_reason="end_turn", usage=usage
    )
    return [*body, stamped(TextEnd, plan, part_id=part), finish]


async def publish_turn(producer: Producer, plan: TurnPlan, chunk: int = 8) -> None:
    """Publish the turn through the SDK, `chunk` events per pipeline."""
    turn = producer.turn(plan.session_id, plan.turn_id)
    await turn.start()
    for attempt, complete in attempts_of(plan):
        await turn.start_attempt(attempt=attempt, provider="fault", model="m-1", contract="ai-sdk")
        body = attempt_body(plan, attempt, complete)
        for start in range(0, len(body), chunk):
            await turn.add(body[start : start + chunk])


async def publish_sessions(producer: Producer, plans: list[list[TurnPlan]]) -> None:
    """Sessions concurrently, the turns of each one after the other."""

    async def session(turns: list[TurnPlan]) -> None:
        for plan in turns:
            await publish_turn(producer, plan)

    await asyncio.gather(*(session(turns) for turns in plans))


def planned_turns(plans: list[list[TurnPlan]]) -> list[tuple[str, str]]:
    """(session, turn) of every planned turn."""
    return [(plan.session_id, plan.turn_id) for turns in plans for plan in turns]


class CapturingProducer(Producer):
    """A producer that keeps what it would publish, without Redis; event for event (as
    `RecordingProducer`) unless asked to coalesce each call's deltas."""

    def __init__(self, coalesce_reads: bool = False) -> None:
        super().__init__(cast(Redis, None), coalesce_reads=coalesce_reads)
        self.events: list[InboundEvent] = []

    async def publish(self, events: Iterable[InboundEvent]) -> list[bytes]:
        batch = list(events)
        self.events += batch
        return [b"0-0"] * len(batch)


async def numbered_events(plan: TurnPlan) -> list[InboundEvent]:
    """The events `publish_turn` publishes for `plan`, numbered by the SDK, in order."""
    capture = CapturingProducer()
    await publish_turn(capture, plan)
    return capture.events


def has_published(producer: RecordingProducer, count: int) -> Callable[[], Awaitable[bool]]:
    """A check for `wait_until`: the producer has published at least `count` events."""

    async def check() -> bool:
        return producer.count >= count

    return check
