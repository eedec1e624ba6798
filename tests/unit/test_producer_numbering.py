"""An attempt's events are numbered once, as they are made: the producer publishes the adapter's
events as the adapter stamped them, and its own events take seqs from the same counter."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from terminus.events.inbound import InboundEvent, TextDelta
from terminus.service.sdk.producer import Producer, coalesce

CAPTURE = (
    Path(__file__).parents[1]
    / "fixtures/provider-streams/anthropic/thinking-tool-use-recorded-fantasy.sse"
)


class Recording(Producer):
    """A producer whose publish records the events it is handed (no Redis: numbering only)."""

    def __init__(self, coalesce_ms: int = 0, coalesce_reads: bool = False) -> None:
        super().__init__(None, coalesce_ms=coalesce_ms, coalesce_reads=coalesce_reads)  # type: ignore[arg-type]
        self.published: list[InboundEvent] = []

    async def publish(self, events: Iterable[InboundEvent]) -> list[bytes]:
        self.published.extend(events)
        return []


async def run_turn(producer: Recording, attempts: int) -> None:
    turn = producer.turn("s", "t")
    await turn.start()
    for attempt in range(1, attempts + 1):
        await turn.start_attempt(attempt=attempt, provider="anthropic")
        await turn.feed_bytes(CAPTURE.read_bytes())
        await turn.close_attempt()


def seqs_by_attempt(events: list[InboundEvent]) -> dict[tuple[int, int], list[int]]:
    found: dict[tuple[int, int], list[int]] = {}
    for event in events:
        found.setdefault((event.step, event.attempt), []).append(event.seq)
    return found


@pytest.mark.parametrize(("coalesce_ms", "coalesce_reads"), [(0, False), (50, False), (0, True)])
async def test_seqs_are_contiguous_in_every_attempt(coalesce_ms: int, coalesce_reads: bool) -> None:
    producer = Recording(coalesce_ms, coalesce_reads)
    await run_turn(producer, attempts=2)
    found = seqs_by_attempt(producer.published)
    assert set(found) == {(1, 1), (1, 2)}
    for seqs in found.values():
        assert seqs == list(range(len(seqs)))


async def test_the_adapters_events_are_published_as_it_made_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    producer = Recording()
    turn = producer.turn("s", "t")
    await turn.start()
    await turn.start_attempt(provider="anthropic")
    assert turn.adapter is not None
    made: list[InboundEvent] = []
    feed = turn.adapter.feed_bytes

    def recorded(data: bytes) -> list[InboundEvent]:
        made.extend(feed(data))
        return made

    monkeypatch.setattr(turn.adapter, "feed_bytes", recorded)
    await turn.feed_bytes(CAPTURE.read_bytes())
    assert made
    assert all(a is b for a, b in zip(made, producer.published[2:], strict=True))


async def test_events_made_elsewhere_are_numbered_as_the_attempts_next() -> None:
    producer = Recording()
    turn = producer.turn("s", "t")
    await turn.start()
    await turn.start_attempt(provider="p")
    await turn.close_attempt()
    await turn.start_attempt(provider="p")  # the retry: attempt 2
    foreign = TextDelta(session_id="x", turn_id="y", seq=-1, part_id="a", delta="hi")
    await turn.add([foreign, foreign])
    assert [(e.session_id, e.turn_id, e.attempt, e.seq) for e in producer.published[-2:]] == [
        ("s", "t", 2, 1),
        ("s", "t", 2, 2),
    ]


def test_coalescing_renumbers_only_from_the_first_merge() -> None:
    deltas: list[InboundEvent] = [
        TextDelta(session_id="s", turn_id="t", seq=seq, part_id=part, delta=part)
        for seq, part in enumerate("aabc", start=4)
    ]
    merged = coalesce(deltas)
    assert [(e.seq, e.delta) for e in merged if isinstance(e, TextDelta)] == [
        (4, "aa"),
        (5, "b"),
        (6, "c"),
    ]


async def test_coalescing_reads_merges_each_reads_deltas_of_a_part_and_no_more() -> None:
    """Each `feed_bytes` is one network read: its deltas of one part become one event, a later
    read's are another, and what the turn says comes to the same text."""
    text = CAPTURE.with_name("text-recorded-fantasy.sse").read_bytes()
    reads = [text[: len(text) // 2], text[len(text) // 2 :]]
    plain, merged = Recording(), Recording(coalesce_reads=True)
    for producer in (plain, merged):
        turn = producer.turn("s", "t")
        await turn.start()
        await turn.start_attempt(provider="anthropic")
        for read in reads:
            await turn.feed_bytes(read)
        await turn.close_attempt()

    def deltas(events: list[InboundEvent]) -> list[tuple[str, str]]:
        return [(e.part_id, e.delta) for e in events if isinstance(e, TextDelta)]

    assert len(deltas(merged.published)) < len(deltas(plain.published))
    joined: dict[str, str] = {}
    for part, delta in deltas(plain.published):
        joined[part] = joined.get(part, "") + delta
    assert {p: "".join(d for q, d in deltas(merged.published) if q == p) for p in joined} == joined
    # No delta spans two reads: merging is within a call, never across.
    parts = {part for part, _ in deltas(merged.published)}
    assert all(sum(q == p for q, _ in deltas(merged.published)) <= len(reads) for p in parts)
