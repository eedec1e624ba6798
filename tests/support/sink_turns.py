"""Turns of every ending as inbound events, for the sink tests of every tier: finished, cut and
retried, failed, cancelled, and one with a tool step (its message committed twice)."""

from __future__ import annotations

from typing import Any, Final

from terminus.events.inbound import (
    AttemptStarted,
    FinishStep,
    InboundEvent,
    StreamClosed,
    StreamError,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolResult,
    TurnCancelled,
    TurnStarted,
    Usage,
)

DISCARDED: Final = "NEVER-PERSISTED"  # the text of every attempt that is cut or fails
USAGE: Final = Usage(output_tokens=2)


def _text(ids: dict[str, Any], seq: int, text: str, **at: Any) -> list[InboundEvent]:
    return [
        TextStart(**ids, **at, seq=seq, part_id="a"),
        TextDelta(**ids, **at, seq=seq + 1, part_id="a", delta=text),
        TextEnd(**ids, **at, seq=seq + 2, part_id="a"),
    ]


def _proven(ids: dict[str, Any], seq: int, reason: Any = "stop", **at: Any) -> FinishStep:
    raw = "tool_use" if reason == "tool-calls" else "end_turn"
    return FinishStep(
        **ids, **at, seq=seq, finish_reason=reason, raw_finish_reason=raw, usage=USAGE
    )


def finished(session: str, turn: str, text: str = "Hello") -> list[InboundEvent]:
    """One proven attempt."""
    ids: dict[str, Any] = {"session_id": session, "turn_id": turn}
    return [
        TurnStarted(**ids, seq=0),
        AttemptStarted(**ids, seq=1, provider="p", model="m"),
        *_text(ids, 2, text),
        _proven(ids, 5),
    ]


def retried(session: str, turn: str) -> list[InboundEvent]:
    """An attempt cut mid-text (its text discarded), then a proven one."""
    ids: dict[str, Any] = {"session_id": session, "turn_id": turn}
    second: dict[str, Any] = {"attempt": 2}
    return [
        TurnStarted(**ids, seq=0),
        AttemptStarted(**ids, seq=1, provider="p", model="m"),
        TextStart(**ids, seq=2, part_id="a"),
        TextDelta(**ids, seq=3, part_id="a", delta=DISCARDED),
        StreamClosed(**ids, seq=4),
        AttemptStarted(**ids, **second, seq=0, provider="p", model="m"),
        *_text(ids, 1, "kept", **second),
        _proven(ids, 4, **second),
    ]


def failed(session: str, turn: str) -> list[InboundEvent]:
    """An attempt refused for its key: no retry, the turn fails with an `auth` error."""
    ids: dict[str, Any] = {"session_id": session, "turn_id": turn}
    return [
        TurnStarted(**ids, seq=0),
        AttemptStarted(**ids, seq=1, provider="p", model="m"),
        TextStart(**ids, seq=2, part_id="a"),
        TextDelta(**ids, seq=3, part_id="a", delta=DISCARDED),
        StreamError(**ids, seq=4, status=401, message="invalid x-api-key"),
    ]


def cancelled(session: str, turn: str) -> list[InboundEvent]:
    """A user's Stop in the middle of the answer."""
    ids: dict[str, Any] = {"session_id": session, "turn_id": turn}
    return [
        TurnStarted(**ids, seq=0),
        AttemptStarted(**ids, seq=1, provider="p", model="m"),
        TextStart(**ids, seq=2, part_id="a"),
        TextDelta(**ids, seq=3, part_id="a", delta=DISCARDED),
        TurnCancelled(**ids, seq=4, reason="user"),
    ]


def with_tools(session: str, turn: str) -> list[InboundEvent]:
    """A tool step, then a text step: the message is committed twice, the second one whole."""
    ids: dict[str, Any] = {"session_id": session, "turn_id": turn}
    two: dict[str, Any] = {"step": 2}
    return [
        TurnStarted(**ids, seq=0),
        AttemptStarted(**ids, seq=1, provider="p", model="m"),
        ToolCall(**ids, seq=2, tool_call_id="c1", tool_name="add", input={"a": 1}),
        _proven(ids, 3, "tool-calls"),
        ToolResult(**ids, seq=4, tool_call_id="c1", output="2"),
        AttemptStarted(**ids, **two, seq=0, provider="p", model="m"),
        *_text(ids, 1, "It is 2.", **two),
        _proven(ids, 4, **two),
    ]
