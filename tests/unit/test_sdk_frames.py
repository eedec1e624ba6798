"""How the subscriber SDK reads a frame (docs/schema.md, "Frames"): a kind from the future is
passed over, counted and reported once, never raised; a field from the future is ignored; what
is no frame at all is still `UnreadableFrame`. And a turn stopped by its user is `cancelled` in
the live view, never `finished`."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from terminus.service.sdk.live import LiveSession
from terminus.service.sdk.updates import UnknownFrames, UnreadableFrame, Update, decoded

IDS = {"session_id": "s", "turn_id": "t"}
USAGE = {"input_tokens": 1, "output_tokens": 1}


def at(cursor: str, unknown: UnknownFrames | None = None, **frame: Any) -> Update | None:
    return decoded(cursor, json.dumps({**IDS, **frame}), unknown or UnknownFrames())


def known(cursor: str, **frame: Any) -> Update:
    update = at(cursor, **frame)
    assert update is not None
    return update


def chunk(cursor: str, delta: str, **extra: Any) -> Update:
    fields = {"step": 1, "attempt": 1, "part_id": "p", "delta": delta, **extra}
    return known(cursor, sessionUpdate="agent_message_chunk", **fields)


def ended(cursor: str, stop_reason: str) -> Update:
    return known(cursor, sessionUpdate="turn_finished", stopReason=stop_reason, usage=USAGE)


def test_a_kind_from_the_future_is_counted_and_reported_once_never_raised() -> None:
    reported: list[tuple[str, str]] = []
    unknown = UnknownFrames(report=lambda kind, cursor: reported.append((kind, cursor)))
    assert at("7-0", unknown, sessionUpdate="usage_forecast", tokens=12) is None
    assert at("7-1", unknown, sessionUpdate="usage_forecast", tokens=9) is None
    assert at("7-0", unknown, sessionUpdate="usage_forecast") is None  # again, after a resume
    assert at("7-2", unknown, sessionUpdate="plan") is None
    assert unknown.counts == {"usage_forecast": 2, "plan": 1}
    assert unknown.total == 3
    assert reported == [("usage_forecast", "7-0"), ("plan", "7-2")]


def test_by_default_each_unknown_kind_is_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    unknown = UnknownFrames()
    with caplog.at_level(logging.WARNING, logger="terminus.sdk"):
        for n in range(3):
            at(f"8-{n}", unknown, sessionUpdate="usage_forecast")
    assert [r.getMessage() for r in caplog.records] == [
        "passing over frames of kind 'usage_forecast' (first at 8-0): a newer server's; "
        "upgrade the SDK to read them"
    ]


def test_a_field_from_the_future_is_ignored() -> None:
    update = chunk("9-0", "Hi", confidence=0.5, tokens={"n": 1})
    assert (update.kind, update.frame.cursor) == ("agent_message_chunk", "9-0")
    view = LiveSession()
    view.apply(update)
    assert view.text("t") == "Hi"


@pytest.mark.parametrize(
    "raw",
    [
        "{not json",
        "[1]",
        json.dumps(IDS),  # no kind
        json.dumps({**IDS, "sessionUpdate": ""}),
        json.dumps({**IDS, "sessionUpdate": 3}),
        json.dumps({"sessionUpdate": "retrying"}),  # a known kind without its fields
    ],
)
def test_what_is_no_frame_is_still_unreadable(raw: str) -> None:
    unknown = UnknownFrames()
    with pytest.raises(UnreadableFrame, match="unreadable frame at 3-1"):
        decoded("3-1", raw, unknown)
    assert unknown.total == 0


def test_a_stopped_turn_is_cancelled_not_finished() -> None:
    view = LiveSession()
    view.apply(chunk("4-0", "Half an ans"))
    view.apply(ended("4-1", "cancelled"))
    turn = view.turns["t"]
    assert (turn.status, turn.stop_reason) == ("cancelled", "cancelled")
    view.apply(ended("4-2", "end_turn"))
    assert view.turns["t"].status == "finished"
