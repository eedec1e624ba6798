"""Inbound stream events: what producers publish for a turn (DESIGN section 2).

Every event is a frozen msgspec Struct in one tagged union on `type`. Tags and field names are a
persistent wire contract: never rename one; new fields get defaults. `v` is the contract version
the producer wrote (absent means 1); a breaking change bumps it and ships an upcaster from the
previous version, and a worker refuses versions newer than its own (events/versions.py,
docs/schema.md).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec

FinishReason = Literal[
    "stop", "length", "tool-calls", "content-filter", "error", "other", "unknown"
]
FINISH_REASONS: frozenset[str] = frozenset(
    ("stop", "length", "tool-calls", "content-filter", "error", "other", "unknown")
)

# Every integer a producer writes has bounds, so an out-of-range one is a decode error naming its
# field (a dead letter of its own) and never reaches a snapshot, a commit or a frame: beyond 2**64
# msgpack cannot encode it, and beyond 2**53 a JavaScript client cannot read it exactly.
MAX_SAFE_INT: Final = 2**53 - 1
MAX_ATTEMPTS_LIMIT: Final = 1000
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INT)]
Ordinal = Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INT)]
Attempts = Annotated[int, msgspec.Meta(ge=1, le=MAX_ATTEMPTS_LIMIT)]
HttpStatus = Annotated[int, msgspec.Meta(ge=100, le=999)]

Contract = Literal["anthropic-messages", "openai-responses", "openai-chat", "gemini", "ai-sdk"]


class Usage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=False):
    """Token counts of one step; every count defaults to 0."""

    input_tokens: Count = 0
    output_tokens: Count = 0
    reasoning_tokens: Count = 0
    cache_read_tokens: Count = 0
    cache_write_tokens: Count = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )


ZERO_USAGE = Usage()


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Identity and position shared by every inbound event."""

    v: Ordinal = 1
    session_id: str
    turn_id: str
    step: Ordinal = 1
    attempt: Ordinal = 1
    seq: Count
    ts_ms: Count = 0


# A W3C Trace Context `traceparent` is 55 characters: a value over the bound is no traceparent.
TraceParent = Annotated[str, msgspec.Meta(max_length=128)]


class TurnStarted(Event, frozen=True, kw_only=True, tag="turn-started"):
    max_attempts: Attempts | None = None
    # The producer's trace context (W3C `traceparent`), for the turn's spans (docs/traces.md);
    # one that does not parse is ignored there, never refused here.
    traceparent: TraceParent | None = None


class AttemptStarted(Event, frozen=True, kw_only=True, tag="attempt-started"):
    provider: str = ""
    model: str = ""
    contract: Contract = "ai-sdk"
    strict: bool = True


class TextStart(Event, frozen=True, kw_only=True, tag="text-start"):
    part_id: str


class TextDelta(Event, frozen=True, kw_only=True, tag="text-delta"):
    part_id: str
    delta: str


class TextEnd(Event, frozen=True, kw_only=True, tag="text-end"):
    part_id: str


class ReasoningStart(Event, frozen=True, kw_only=True, tag="reasoning-start"):
    part_id: str


class ReasoningDelta(Event, frozen=True, kw_only=True, tag="reasoning-delta"):
    part_id: str
    delta: str


class ReasoningEnd(Event, frozen=True, kw_only=True, tag="reasoning-end"):
    part_id: str
    signature: str | None = None


class ToolInputStart(Event, frozen=True, kw_only=True, tag="tool-input-start"):
    tool_call_id: str
    tool_name: str


class ToolInputDelta(Event, frozen=True, kw_only=True, tag="tool-input-delta"):
    tool_call_id: str
    tool_name: str = ""
    delta: str


class ToolCall(Event, frozen=True, kw_only=True, tag="tool-call"):
    tool_call_id: str
    tool_name: str
    input: dict[str, Any]


class ToolResult(Event, frozen=True, kw_only=True, tag="tool-result"):
    tool_call_id: str
    output: str


class ToolError(Event, frozen=True, kw_only=True, tag="tool-error"):
    tool_call_id: str
    error: str


class FinishStep(Event, frozen=True, kw_only=True, tag="finish-step"):
    finish_reason: FinishReason
    raw_finish_reason: str | None = None
    usage: Usage = ZERO_USAGE


class ProviderTerminal(Event, frozen=True, kw_only=True, tag="provider-terminal"):
    kind: str
    finish_reason: FinishReason | None = None


class StreamError(Event, frozen=True, kw_only=True, tag="stream-error"):
    status: HttpStatus | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    body: Any = None
    message: str = ""


class StreamClosed(Event, frozen=True, kw_only=True, tag="stream-closed"):
    pass


class AttemptStalled(Event, frozen=True, kw_only=True, tag="attempt-stalled"):
    silent_ms: Count = 0


class TurnCancelled(Event, frozen=True, kw_only=True, tag="turn-cancelled"):
    """The turn is to end now. `external`: sent from outside the producer's numbering (a user's
    Stop through the gateway, an operator's `terminus cancel`), so it applies at any position
    while the turn is live; its step, attempt and seq then mean nothing (1, 1 and 0)."""

    reason: str = ""
    external: bool = False


class TurnEnded(Event, frozen=True, kw_only=True, tag="turn-ended"):
    reason: str = ""


InboundEvent = (
    TurnStarted
    | AttemptStarted
    | TextStart
    | TextDelta
    | TextEnd
    | ReasoningStart
    | ReasoningDelta
    | ReasoningEnd
    | ToolInputStart
    | ToolInputDelta
    | ToolCall
    | ToolResult
    | ToolError
    | FinishStep
    | ProviderTerminal
    | StreamError
    | StreamClosed
    | AttemptStalled
    | TurnCancelled
    | TurnEnded
)

EVENT_TYPES: tuple[type[Event], ...] = (
    TurnStarted,
    AttemptStarted,
    TextStart,
    TextDelta,
    TextEnd,
    ReasoningStart,
    ReasoningDelta,
    ReasoningEnd,
    ToolInputStart,
    ToolInputDelta,
    ToolCall,
    ToolResult,
    ToolError,
    FinishStep,
    ProviderTerminal,
    StreamError,
    StreamClosed,
    AttemptStalled,
    TurnCancelled,
    TurnEnded,
)


def type_of(event: Event) -> str:
    """The wire tag of an event, e.g. `text-delta`."""
    return str(event.__struct_config__.tag)
