"""The realistic workload of `bench.e2e --realistic` (bench/e2e/arrivals.py, schedule.py): the
same seed gives the same schedule, a read's tokens are what its deltas carry, every turn is a
well-formed attempt, and the clock starts with the turns in flight already under way."""

from __future__ import annotations

import random
from collections import defaultdict
from functools import cache

import msgspec

from bench.e2e.arrivals import Model, draw_shape, one_delta_per_read
from bench.e2e.schedule import Schedule, build
from terminus.events.inbound import (
    AttemptStarted,
    FinishStep,
    InboundEvent,
    ProviderTerminal,
    TextDelta,
    TextStart,
    TurnStarted,
)

MODEL = Model(turns=20, seconds=6.0)


@cache
def schedule(seed: int = 1) -> Schedule:
    return build(MODEL, seed)


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    again = build(MODEL, 1)

    assert msgspec.json.encode(again.events) == msgspec.json.encode(schedule().events)
    assert msgspec.json.encode(again.prelude) == msgspec.json.encode(schedule().prelude)
    assert again.turns == schedule().turns
    assert build(MODEL, 2).turns != schedule().turns


def test_each_read_publishes_one_delta_per_token_and_counts_them() -> None:
    s = schedule()
    reads = 0
    for publishes in s.turns:
        for p in publishes:
            deltas = [e for e in s.events[p.first : p.first + p.size] if isinstance(e, TextDelta)]
            assert len(deltas) == p.tokens
            reads += p.tokens > 0
    assert s.tokens == sum(p.tokens for ps in s.turns for p in ps) > 0
    assert s.reads == reads


def test_a_turn_started_after_the_clock_is_one_attempt_numbered_without_a_gap() -> None:
    s = schedule()
    by_turn: dict[str, list[InboundEvent]] = defaultdict(list)
    for event in s.events:
        by_turn[event.turn_id].append(event)
    whole = [events for events in by_turn.values() if isinstance(events[0], TurnStarted)]
    assert whole, "some turns start after the clock"
    for events in whole:
        assert [e.seq for e in events] == list(range(len(events)))
        assert isinstance(events[1], AttemptStarted)
        assert len(events) == 2 or isinstance(events[2], TextStart)
        finish = [e for e in events if isinstance(e, FinishStep)]
        if finish:  # the turn ended before the clock stopped
            assert finish[0].usage.output_tokens == sum(isinstance(e, TextDelta) for e in events)
    assert any(isinstance(events[-1], FinishStep | ProviderTerminal) for events in whole)


def test_reads_carry_the_model_s_read_sizes_in_time_order() -> None:
    rng = random.Random(7)
    biggest = max(high for _, high, _ in MODEL.read_sizes)
    for _ in range(200):
        shape = draw_shape(rng, MODEL)
        tokens = sum(len(r.tokens) for r in shape.reads)
        assert MODEL.tokens_bounds[0] <= tokens <= MODEL.tokens_bounds[1]
        assert all(1 <= len(r.tokens) <= biggest for r in shape.reads)
        times = [r.at_s for r in shape.reads]
        assert times == sorted(times)
        assert times[0] >= shape.ttft_s


def test_the_clock_starts_with_about_n_turns_under_way() -> None:
    s = build(Model(turns=100, seconds=10.0), 3)

    under_way = {e.turn_id for e in s.prelude}
    assert 70 <= len(under_way) <= 130
    assert 70 <= s.concurrency <= 130


def test_a_coalescing_producer_publishes_fewer_entries_for_the_same_tokens() -> None:
    coalesced = build(MODEL, 1, one_delta_per_read)

    assert coalesced.tokens == schedule().tokens
    assert coalesced.reads == schedule().reads
    assert [[p.at_s for p in ps] for ps in coalesced.turns] == [
        [p.at_s for p in ps] for ps in schedule().turns
    ]
    assert len(coalesced.events) < len(schedule().events)


def test_the_prelude_s_tokens_are_counted_however_many_each_delta_carries() -> None:
    """Bytes per token divide by these: a read's tokens as one delta are still its tokens."""
    per_token, per_read = schedule(), build(MODEL, 1, one_delta_per_read)
    assert per_token.prelude_tokens == sum(isinstance(e, TextDelta) for e in per_token.prelude)
    assert per_read.prelude_tokens == per_token.prelude_tokens
    assert sum(isinstance(e, TextDelta) for e in per_read.prelude) < per_read.prelude_tokens
    assert per_read.tokens == per_token.tokens
