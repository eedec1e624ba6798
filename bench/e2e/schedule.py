"""The realistic workload placed in time (bench/e2e/arrivals.py draws the turns): what is
published before the clock, and each turn's publishes after it, one per network read.

A session holds one turn at a time, as a chat does: a turn takes the session that has been
free longest, or a new one. Every delta published after the clock carries a marker `~n~`, n its
index in `Schedule.events`, so a reader matches each frame to the moment it was published
(bench/e2e/latency.py).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator
from typing import NamedTuple

import msgspec

from bench.common.workload import BASE_TS_MS, PROVIDERS, Provider
from bench.e2e.arrivals import (
    HORIZON_S,
    PART,
    DeltasOf,
    Model,
    Shape,
    draw_shape,
    mean_length_s,
    one_delta_per_token,
)
from terminus.events.inbound import (
    AttemptStarted,
    FinishStep,
    InboundEvent,
    ProviderTerminal,
    TextDelta,
    TextEnd,
    TextStart,
    TurnStarted,
    Usage,
)


class Publish(NamedTuple):
    """One publish after the clock: when (seconds), its events in `Schedule.events` and the
    provider tokens they carry."""

    at_s: float
    first: int
    size: int
    tokens: int


class Schedule(NamedTuple):
    """Everything a run publishes, and what the report divides by."""

    model: Model
    prelude: list[InboundEvent]  # the turns under way at 0: what they published before it
    events: list[InboundEvent]  # published after the clock, deltas marked
    turns: list[list[Publish]]  # each turn's publishes after the clock, in order
    sessions: list[str]
    tokens: int  # provider tokens published after the clock
    prelude_tokens: int  # provider tokens the prelude published
    reads: int  # network reads published after the clock
    concurrency: float  # turns in flight, on average over [0, seconds)
    started: int  # turns started after the clock


class Batch(NamedTuple):
    """One publish of a turn, before it is placed in `Schedule.events`."""

    at_s: float
    events: list[InboundEvent]
    tokens: int


class Placed(NamedTuple):
    start_s: float
    shape: Shape
    session: str

    @property
    def end_s(self) -> float:
        return self.start_s + self.shape.reads[-1].at_s


def place(rng: random.Random, model: Model, seed: int) -> list[Placed]:
    """The turns of a Poisson process that are in flight at some time in [0, seconds)."""
    rate = model.turns / mean_length_s(model, seed)
    free: list[tuple[float, str]] = []  # (free from, session)
    placed: list[Placed] = []
    start = -HORIZON_S
    while (start := start + rng.expovariate(rate)) < model.seconds:
        shape = draw_shape(rng, model)
        if start + shape.reads[-1].at_s < 0:
            continue
        if free and free[0][0] <= start:
            session = heapq.heappop(free)[1]
        else:
            session = f"real-{len(placed):05d}"
        placed.append(Placed(start, shape, session))
        heapq.heappush(free, (placed[-1].end_s, session))
    return placed


class Numbered:
    """Makes one turn's events with consecutive seqs, stamped at their publish time."""

    def __init__(self, turn: Placed, index: int) -> None:
        self.ids = {"session_id": turn.session, "turn_id": f"turn-{index:06d}"}
        self.start_s, self.seq = turn.start_s, 0

    def make(self, event_type: type[InboundEvent], at_s: float, **fields: object) -> InboundEvent:
        ts_ms = BASE_TS_MS + round((self.start_s + at_s + HORIZON_S) * 1000)
        pos = {"step": 1, "attempt": 1, "seq": self.seq, "ts_ms": ts_ms}
        self.seq += 1
        return event_type(**self.ids, **pos, **fields)  # type: ignore[arg-type]


def batches(turn: Placed, index: int, deltas_of: DeltasOf) -> Iterator[Batch]:
    """A turn's publishes: its start, its attempt's start, then one per network read."""
    n, provider = Numbered(turn, index), PROVIDERS[index % len(PROVIDERS)]
    yield Batch(turn.start_s, [n.make(TurnStarted, 0.0)], 0)
    attempt = {"provider": provider.name, "model": provider.model, "contract": provider.contract}
    yield Batch(turn.start_s, [n.make(AttemptStarted, 0.0, **attempt)], 0)
    reads = turn.shape.reads
    for k, read in enumerate(reads):
        events = [n.make(TextStart, read.at_s, part_id=PART)] if k == 0 else []
        events += [n.make(TextDelta, read.at_s, part_id=PART, delta=d) for d in deltas_of(read)]
        if k == len(reads) - 1:
            tokens = sum(len(r.tokens) for r in reads)
            events += closing(n, read.at_s, provider, tokens)
        yield Batch(turn.start_s + read.at_s, events, len(read.tokens))


def closing(n: Numbered, at_s: float, provider: Provider, tokens: int) -> list[InboundEvent]:
    """The end of the text part and of the step, and the provider's end marker if it has one."""
    usage = Usage(input_tokens=1000, output_tokens=tokens)
    events = [
        n.make(TextEnd, at_s, part_id=PART),
        n.make(FinishStep, at_s, finish_reason="stop", raw_finish_reason="stop", usage=usage),
    ]
    if provider.terminal is not None:
        events.append(n.make(ProviderTerminal, at_s, kind=provider.terminal))
    return events


def marked(events: list[InboundEvent], first: int) -> list[InboundEvent]:
    """The deltas with their marker `~n~`, n their index once appended at `first`."""
    return [
        msgspec.structs.replace(e, delta=f"{e.delta} ~{first + k}~")
        if isinstance(e, TextDelta)
        else e
        for k, e in enumerate(events)
    ]


def build(model: Model, seed: int, deltas_of: DeltasOf = one_delta_per_token) -> Schedule:
    """The schedule of `model`, the same for the same arguments."""
    placed = place(random.Random(seed), model, seed)
    prelude: list[InboundEvent] = []
    events: list[InboundEvent] = []
    turns: list[list[Publish]] = []
    reads = prelude_tokens = 0
    for index, turn in enumerate(placed):
        publishes: list[Publish] = []
        for batch in batches(turn, index, deltas_of):
            if batch.at_s < 0:
                prelude += batch.events
                prelude_tokens += batch.tokens
            elif batch.at_s < model.seconds:
                publishes.append(Publish(batch.at_s, len(events), len(batch.events), batch.tokens))
                events += marked(batch.events, len(events))
                reads += batch.tokens > 0
        turns.append(publishes)
    in_flight = sum(max(0.0, min(t.end_s, model.seconds) - max(t.start_s, 0.0)) for t in placed)
    return Schedule(
        model=model,
        prelude=prelude,
        events=events,
        turns=turns,
        sessions=sorted({t.session for t in placed}),
        tokens=sum(p.tokens for ps in turns for p in ps),
        prelude_tokens=prelude_tokens,
        reads=reads,
        concurrency=in_flight / model.seconds,
        started=sum(t.start_s >= 0 for t in placed),
    )
