"""Replay of generated turns: folding is deterministic, and duplicates inserted anywhere or any
events after the end change no output, only the ignore counters (DESIGN section 8, invariants 4
and 5)."""

from __future__ import annotations

from typing import Any

import msgspec
from factories import fold, snapshot
from hypothesis import given
from hypothesis import strategies as st
from turn_generator import PROPERTY, GeneratedTurn, turns

from terminus.events.inbound import EVENT_TYPES, InboundEvent
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.turn import Turn


def outputs_bytes(turn: Turn, out: Outputs) -> bytes:
    """Every output the shell would commit, plus the turn snapshot, leaving out ignore counters."""
    produced = msgspec.structs.replace(out, ignored=[])
    return msgspec.json.encode(produced) + b"\n" + snapshot(turn)


@PROPERTY
@given(turns())
def test_folding_is_deterministic(turn_spec: GeneratedTurn) -> None:
    first_turn, first_out = fold(turn_spec.events)
    again_turn, again_out = fold(list(turn_spec.events))
    assert msgspec.json.encode(first_out) == msgspec.json.encode(again_out)
    assert msgspec.json.encode(first_turn) == msgspec.json.encode(again_turn)


def any_event(step: int, attempt: int, seq: int) -> st.SearchStrategy[InboundEvent]:
    """An arbitrary event of any type at the given position, with every other field defaulted."""
    ids = {
        "session_id": "sess-1",
        "turn_id": "turn-1",
        "step": step,
        "attempt": attempt,
        "seq": seq,
    }
    raw = {
        "part_id": "x",
        "delta": "late",
        "tool_call_id": "c",
        "tool_name": "n",
        "input": {},
        "output": "o",
        "error": "e",
        "finish_reason": "stop",
        "kind": "message_stop",
    }

    def build(cls: type[Any]) -> InboundEvent:
        fields = {k: v for k, v in raw.items() if k in cls.__struct_fields__}
        event: InboundEvent = msgspec.convert({**ids, **fields}, cls)
        return event

    return st.sampled_from(EVENT_TYPES).map(build)


positions = st.tuples(st.integers(1, 4), st.integers(1, 5), st.integers(0, 60))
late_events = positions.flatmap(lambda p: any_event(*p))


@PROPERTY
@given(turns(), st.data())
def test_duplicates_and_events_after_the_end_change_no_output(
    turn_spec: GeneratedTurn, data: st.DataObject
) -> None:
    base_turn, base_out = fold(turn_spec.events)
    expected, base_ignored = outputs_bytes(base_turn, base_out), len(base_out.ignored)
    base_counted = sum(base_turn.ignored.values())
    events = list(turn_spec.events)
    for _ in range(data.draw(st.integers(1, 8), label="duplicates")):
        source = data.draw(st.integers(0, len(events) - 1))
        events.insert(data.draw(st.integers(source + 1, len(events))), events[source])
    events.extend(data.draw(st.lists(late_events, max_size=6), label="after the end"))
    turn, out = fold(events)
    assert outputs_bytes(turn, out) == expected
    added = len(events) - len(turn_spec.events)
    assert len(out.ignored) == base_ignored + added
    assert sum(turn.ignored.values()) == base_counted + added
