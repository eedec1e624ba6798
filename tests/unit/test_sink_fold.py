"""A sink's fold of a partition (service/sinks/folding.py): the workers' fold in memory, told of
each applied event, writing rows only past the stored position, judging late events on final
turns as the workers do, and folding as dead what the workers dead-lettered for its deliveries."""

from __future__ import annotations

from terminus.events.codec import encode_json
from terminus.events.inbound import InboundEvent
from terminus.service.fold.decoding import Entry
from terminus.service.keys import FIELD, Keys
from terminus.service.settings import Settings
from terminus.service.sinks.folding import SinkFold
from terminus.service.sinks.rows import MessageRow, TurnRow
from tests.support.sink_turns import finished, with_tools


def entries(events: list[InboundEvent], first_ms: int) -> list[Entry]:
    return [Entry(f"{first_ms + n}-0", {FIELD: encode_json(e)}) for n, e in enumerate(events)]


def fold(written: str = "0-0") -> SinkFold:
    return SinkFold(Keys(0, "unit"), Settings(partitions=1), written)


def test_a_turn_published_again_after_its_end_writes_nothing() -> None:
    """The workers ignore every event of a final turn (late); so must the sink, though the
    turn has left its memory: another text under the same ids is no new message."""
    sink = fold()
    [message, end] = sink.apply(entries(finished("s", "t", "Hello"), 1), {})
    assert isinstance(message, MessageRow)
    assert isinstance(end, TurnRow)
    assert sink.fold.turns == {}  # settled: final turns leave memory, as in the workers

    assert sink.apply(entries(finished("s", "t", "Changed"), 100), {}) == []


def test_only_the_events_after_the_stored_position_write_rows() -> None:
    events = entries(with_tools("s", "t"), 1)  # step 1 is sealed at entry 6-0, the end at 10-0
    sink = fold(written="6-0")

    rows = sink.apply(events[:7], {}) + sink.apply(events[7:], {})

    assert [type(r) for r in rows] == [MessageRow, TurnRow]
    assert all(r.version.log_ms == 10 for r in rows)


def test_an_entry_the_workers_dead_lettered_for_its_deliveries_is_dead_here_too() -> None:
    events = entries(finished("s", "t"), 1)
    proof = events[-1].id

    rows = fold().apply(events, {proof: "delivered 6 times (max 5)"})

    assert rows == []  # no proof was applied: no message, and the turn is not over
