"""The soak's steady load: `sessions` lanes, each publishing one session after another, each
session a few turns of a realistic mix, streamed in chunks as a provider would stream them.

Shapes of a turn: a plain answer; a stream cut by EOF and retried; a tool step followed by a
second step; a 429 rate limit (with `retry-after`) retried after the wait; a 401 that fails the
turn. The attempts come from bench/common/workload.py; publishing goes through the fault tests'
`RecordingProducer`, which retries a publish cut by a Redis restart. Every chunk is folded in
process as soon as Redis acknowledges it (`Watch.published`), for the checker and the latency.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from bench.common.workload import BASE_TS_MS, PROVIDERS, Attempt, Provider, attempt_events, plan_of
from bench.soak.check import FrameReader, Watch
from bench.soak.series import Series
from terminus.events.inbound import AttemptStarted, InboundEvent, StreamError, TurnStarted
from tests.support.faults.load import RecordingProducer

Plan = list[tuple[tuple[int, int], str]]
RATE_LIMIT_WAIT_S: Final = 1.0
PLANS: Final[dict[str, Plan]] = {
    "answer": plan_of(truncated=False, tool=False),
    "cut_retried": plan_of(truncated=True, tool=False),
    "tool_step": plan_of(truncated=False, tool=True),
    "rate_limited": [((1, 1), "rate_limit"), ((1, 2), "stop")],
    "failed": [((1, 1), "auth")],
}
WEIGHTS: Final = {"answer": 55, "cut_retried": 12, "tool_step": 13, "rate_limited": 12, "failed": 8}


@dataclass(frozen=True)
class LoadShape:
    """How much load: lanes in parallel, turns per session, deltas per attempt, pace."""

    sessions: int = 32
    turns_per_session: int = 3
    deltas: int = 20
    chunk_ms: float = 100.0
    max_chunk: int = 8


def error_attempt(a: Attempt, provider: Provider, kind: str) -> list[InboundEvent]:
    """An attempt refused before any output: a 429 with retry-after, or a 401."""
    a.add(AttemptStarted, provider=provider.name, model=provider.model, contract=provider.contract)
    if kind == "rate_limit":
        headers = {"retry-after": f"{RATE_LIMIT_WAIT_S:g}"}
        a.add(StreamError, status=429, headers=headers, message="rate limited")
    else:
        a.add(StreamError, status=401, message="invalid api key")
    return a.events


def turn_attempts(
    rng: random.Random, session_id: str, turn_id: str, shape: str, deltas: int
) -> list[list[InboundEvent]]:
    """The turn's events, attempt by attempt (the first list starts with `turn-started`)."""
    started = TurnStarted(session_id=session_id, turn_id=turn_id, seq=0, ts_ms=BASE_TS_MS)
    provider = rng.choice(PROVIDERS)
    attempts: list[list[InboundEvent]] = []
    for (step, number), kind in PLANS[shape]:
        a = Attempt(rng, started, step, number)
        if kind in ("rate_limit", "auth"):
            attempts.append(error_attempt(a, provider, kind))
        else:
            attempts.append(attempt_events(a, provider, kind, deltas))
    attempts[0].insert(0, started)
    return attempts


class Load:
    """Publishes sessions in `shape.sessions` lanes until `stop` is set."""

    def __init__(
        self,
        producer: RecordingProducer,
        reader: FrameReader,
        series: Series,
        shape: LoadShape,
        seed: int,
    ) -> None:
        self.producer, self.reader, self.series, self.shape = producer, reader, series, shape
        self.rng = random.Random(seed)
        self.stop = asyncio.Event()
        self.turns: dict[str, int] = dict.fromkeys(PLANS, 0)
        self.sessions = 0

    async def run(self) -> None:
        """Every lane finishes the session it is in after `stop` is set."""
        await asyncio.gather(*(self._lane(n) for n in range(self.shape.sessions)))

    async def _lane(self, lane: int) -> None:
        await asyncio.sleep(self.rng.uniform(0, self.shape.chunk_ms / 1000 * 5))  # stagger
        number = 0
        while not self.stop.is_set():
            await self.session(f"soak-{lane}-{number}")
            number += 1

    async def session(self, session_id: str) -> None:
        """Publish the session's turns one after the other, then hand it to the checker."""
        watch = self.reader.watch(session_id)
        self.sessions += 1
        try:
            for n in range(self.shape.turns_per_session):
                shape = self.rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
                self.turns[shape] += 1
                attempts = turn_attempts(
                    self.rng, session_id, f"{session_id}-t{n}", shape, self.shape.deltas
                )
                for events in attempts:
                    await self._stream(watch, events)
                    if shape == "rate_limited" and events is attempts[0]:
                        await asyncio.sleep(RATE_LIMIT_WAIT_S)
                await asyncio.sleep(self.rng.uniform(0.1, 0.5))  # the user reads, then asks
        finally:
            watch.closed = True
            self.producer.published.pop(session_id, None)  # folded already: keep memory flat

    async def _stream(self, watch: Watch, events: Sequence[InboundEvent]) -> None:
        start = 0
        while start < len(events):
            size = self.rng.randint(1, self.shape.max_chunk)
            await self.publish(watch, events[start : start + size])
            start += size
            await asyncio.sleep(self.rng.uniform(0.5, 1.5) * self.shape.chunk_ms / 1000)

    async def publish(self, watch: Watch, events: Sequence[InboundEvent]) -> None:
        """Publish through the recording producer and fold what Redis acknowledged."""
        ids = await self.producer.publish(events)
        now = time.perf_counter()
        self.series.add_published(len(ids), now)
        watch.published(list(zip(ids, events, strict=True)), now)
