"""What an HTTP producer publishes between attempts: tool outcomes and the turn's end.

    POST /v1/sessions/{id}/turns/{turn}/events
    {"events": [{"type": "tool-result", "tool_call_id": "c1", "output": "..."},
                {"type": "tool-error", "tool_call_id": "c2", "error": "..."},
                {"type": "turn-ended", "reason": "..."}],
     "next_seq": 17}

They belong to the attempt the workers' snapshot shows (the one whose `tools_required` they
answer), numbered after its last seq, or from `next_seq` (the `next_seq` of that attempt's
answer) if it is further: the snapshot may not yet hold the attempt's last events. A body is
read to at most `MAX_BODY_BYTES`; each event is held to the log's event size by the publisher.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Final

import msgspec

from terminus.events.inbound import ToolError, ToolResult, TurnEnded
from terminus.service import TerminusError
from terminus.service.sdk.publisher import TurnPublisher

MAX_BODY_BYTES: Final = 8 * 1024 * 1024
MAX_EVENTS: Final = 1_000


class BadEvents(TerminusError, ValueError):
    """A body that is not a list of events the route publishes; says why."""


class _Result(msgspec.Struct, frozen=True, tag="tool-result"):
    tool_call_id: str
    output: str


class _Error(msgspec.Struct, frozen=True, tag="tool-error"):
    tool_call_id: str
    error: str


class _Ended(msgspec.Struct, frozen=True, tag="turn-ended"):
    reason: str = ""


class TurnEvents(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The body of the events route."""

    events: list[_Result | _Error | _Ended]
    next_seq: int = 0


_decoder = msgspec.json.Decoder(TurnEvents)


async def read_events(body: AsyncIterable[bytes]) -> TurnEvents:
    """The events of a body, read to `MAX_BODY_BYTES` at most; `BadEvents` otherwise."""
    raw = bytearray()
    async for chunk in body:
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise BadEvents(f"the body is longer than {MAX_BODY_BYTES} bytes")
    try:
        events = _decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise BadEvents(f"not a list of events: {exc}") from None
    if not events.events or len(events.events) > MAX_EVENTS:
        raise BadEvents(f"give 1 to {MAX_EVENTS} events")
    return events


async def publish_events(publisher: TurnPublisher, events: TurnEvents) -> None:
    """Publish each event as the publisher's attempt's next; `EventTooLarge` for one that
    would not fit the log (those before it are published)."""
    for event in events.events:
        match event:
            case _Result():
                await publisher.emit(
                    ToolResult, tool_call_id=event.tool_call_id, output=event.output
                )
            case _Error():
                await publisher.emit(ToolError, tool_call_id=event.tool_call_id, error=event.error)
            case _Ended():
                await publisher.emit(TurnEnded, reason=event.reason)
