"""A span tree as plain data: what `project.py` builds and `otel.py` hands to the OTel SDK.

No OpenTelemetry type appears here, so the projection runs, and is tested, without the `otel`
extra. Times are the log's milliseconds; ids are lowercase hex, as W3C `traceparent` writes them.
"""

from __future__ import annotations

from typing import Literal

import msgspec

AttributeValue = str | int | bool | list[str]
Attributes = dict[str, AttributeValue]
SpanKind = Literal["internal", "client"]


class SpanEvent(msgspec.Struct, frozen=True, kw_only=True):
    """Something that happened at one instant inside a span (a retry scheduled, a compaction)."""

    name: str
    at_ms: int
    attributes: Attributes = msgspec.field(default_factory=dict)


class Span(msgspec.Struct, frozen=True, kw_only=True):
    """One operation: the turn (`invoke_agent`), an attempt (`chat {model}`), a tool call."""

    name: str
    kind: SpanKind
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_id: str | None  # None: a root span
    parent_remote: bool  # the parent came from a propagated traceparent
    sampled: bool
    start_ms: int
    end_ms: int
    attributes: Attributes
    events: list[SpanEvent] = msgspec.field(default_factory=list)
    error: str | None = None  # the status description of a span that ended in error


class TurnTrace(msgspec.Struct, frozen=True, kw_only=True):
    """The spans of one final turn, its own span first, then the others in the order they began."""

    session_id: str
    turn_id: str
    spans: list[Span]

    @property
    def root(self) -> Span:
        return self.spans[0]


def encode(trace: TurnTrace) -> bytes:
    """The tree as JSON: the same log gives the same bytes."""
    return msgspec.json.encode(trace)
