"""The rows a sink writes, read from the pure fold's outputs (service/sinks/rows.py): proven
text only, one message row per sealed step with a higher version each time, and each final turn
with its state, stop reason, typed error and partial."""

from __future__ import annotations

import json
from collections.abc import Callable

import msgspec

from terminus.events.inbound import InboundEvent
from terminus.service.sinks.rows import MessageRow, Row, TurnRow, Version, rows_of
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.turn import Turn
from tests.support.sink_turns import DISCARDED, cancelled, failed, finished, retried, with_tools

Make = Callable[[str, str], list[InboundEvent]]


def rows_for(make: Make) -> list[Row]:
    """Fold the turn event by event, as a sink does, numbering entries 1000-0, 1001-0, ..."""
    turn: Turn | None = None
    found: list[Row] = []
    for n, event in enumerate(make("s", "t")):
        out = Outputs()
        turn, _ = evolve(turn, event, out=out)
        found += rows_of(f"{1000 + n}-0", turn, out, (0,) * 6)  # a fresh `out` per event
    return found


def test_a_cut_and_retried_turn_writes_only_the_proven_text() -> None:
    message, end = rows_for(retried)

    assert isinstance(message, MessageRow)
    assert isinstance(end, TurnRow)
    assert DISCARDED not in message.body
    assert [p["text"] for p in json.loads(message.parts) if p["type"] == "text"] == ["kept"]
    assert (end.state, end.stop_reason, end.message_id) == ("finished", "end_turn", "msg-t")


def test_the_body_is_the_message_as_messages_json_prints_it() -> None:
    turn: Turn | None = None
    out = Outputs()
    for event in finished("s", "t"):
        turn, _ = evolve(turn, event, out=out)

    [message] = out.messages
    assert turn is not None
    row = rows_of("1-0", turn, out, (0,) * 6)[0]

    assert isinstance(row, MessageRow)
    assert row.body == msgspec.json.encode([message]).decode()[1:-1]
    assert json.loads(row.usage)["output_tokens"] == 2


def test_each_sealed_step_writes_the_message_again_with_a_higher_version() -> None:
    first, second, end = rows_for(with_tools)

    assert isinstance(first, MessageRow)
    assert isinstance(second, MessageRow)
    assert first.message_id == second.message_id == "msg-t"
    assert first.version < second.version
    assert [p["type"] for p in json.loads(first.parts)].count("step-finish") == 1
    assert [p["type"] for p in json.loads(second.parts)].count("step-finish") == 2
    assert isinstance(end, TurnRow)
    assert end.version == second.version


def test_a_failed_turn_is_a_row_with_its_typed_error_and_partial_and_no_message() -> None:
    [end] = rows_for(failed)

    assert isinstance(end, TurnRow)
    assert (end.state, end.stop_reason, end.error_type, end.message_id) == (
        "failed",
        "error",
        "auth",
        None,
    )
    assert end.error is not None
    assert json.loads(end.error)["status"] == 401
    assert end.partial is not None
    assert DISCARDED in end.partial


def test_a_cancelled_turn_is_a_row_and_writes_no_message() -> None:
    [end] = rows_for(cancelled)

    assert isinstance(end, TurnRow)
    assert (end.state, end.stop_reason, end.error, end.partial) == (
        "cancelled",
        "cancelled",
        None,
        None,
    )


def test_versions_order_by_turn_position_then_log_position() -> None:
    assert Version(1, 2, 0, 5, 0) > Version(1, 1, 9, 9, 9)
    assert Version(2, 1, 0, 1, 0) > Version(1, 3, 7, 9, 0)
    assert Version(1, 1, 3, 9, 1) > Version(1, 1, 3, 9, 0)
