"""The AI SDK UI message stream's chunks that terminus sends, as the `ai` package reads them.

Each class is one member of `uiMessageChunkSchema` (ai `src/ui-message-stream/ui-message-chunks.ts`,
checked in ai 6.0.326 and 7.0.173): the wire tag is its `type`, fields are camelCase. Every chunk
here but `reset-step` is in ai 6 and 7; `reset-step` exists only from ai 7.0.70, and ai 6 rejects
it (`RESET_ONLY`). `data-terminus-status` is a transient data part: it reaches `onData` and never
enters the message.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

from terminus.events.errors import LLMErrorPayload
from terminus.events.inbound import Usage
from terminus.events.outbound import StopReason

# ai 6's `finish.finishReason` enum; ai 7 adds "interrupted", which terminus does not send.
UiFinishReason = Literal["stop", "length", "content-filter", "tool-calls", "error", "other"]
StatusState = Literal["streaming", "retrying", "compacting"]


class Chunk(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", rename="camel", omit_defaults=True
):
    """One UI message chunk; sent as one SSE `data:` line."""


class Start(Chunk, frozen=True, kw_only=True, tag="start"):
    message_id: str
    message_metadata: dict[str, Any] | None = None


class StartStep(Chunk, frozen=True, kw_only=True, tag="start-step"):
    pass


class FinishStep(Chunk, frozen=True, kw_only=True, tag="finish-step"):
    pass


class ResetStep(Chunk, frozen=True, kw_only=True, tag="reset-step"):
    """Removes every part added since the last `start-step` (ai >= 7.0.70 only)."""


class TextStart(Chunk, frozen=True, kw_only=True, tag="text-start"):
    id: str


class TextDelta(Chunk, frozen=True, kw_only=True, tag="text-delta"):
    id: str
    delta: str


class TextEnd(Chunk, frozen=True, kw_only=True, tag="text-end"):
    id: str


class ReasoningStart(Chunk, frozen=True, kw_only=True, tag="reasoning-start"):
    id: str


class ReasoningDelta(Chunk, frozen=True, kw_only=True, tag="reasoning-delta"):
    id: str
    delta: str


class ReasoningEnd(Chunk, frozen=True, kw_only=True, tag="reasoning-end"):
    id: str


class ToolInputStart(Chunk, frozen=True, kw_only=True, tag="tool-input-start"):
    tool_call_id: str
    tool_name: str


class ToolInputAvailable(Chunk, frozen=True, kw_only=True, tag="tool-input-available"):
    tool_call_id: str
    tool_name: str
    input: dict[str, Any]


class ToolInputError(Chunk, frozen=True, kw_only=True, tag="tool-input-error"):
    """A call whose input never completed (the persisted part's state `incomplete`)."""

    tool_call_id: str
    tool_name: str
    input: dict[str, Any] | None
    error_text: str


class ToolOutputAvailable(Chunk, frozen=True, kw_only=True, tag="tool-output-available"):
    tool_call_id: str
    output: str


class ToolOutputError(Chunk, frozen=True, kw_only=True, tag="tool-output-error"):
    tool_call_id: str
    error_text: str


class TurnNote(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """What terminus says about the turn in `message.metadata.terminus`: counts always, the
    usage and stop reason once it ends, the typed error if it failed."""

    session_id: str
    turn_id: str
    steps: int = 0  # proven steps (each one `message_committed`)
    discarded: int = 0  # attempts withdrawn (each one `attempt_discarded`)
    retries: int = 0  # retries scheduled (`retrying`)
    compactions: int = 0  # compactions asked for (`compaction_required`)
    stop_reason: StopReason | None = None
    usage: Usage | None = None
    error: LLMErrorPayload | None = None


class Metadata(msgspec.Struct, frozen=True, kw_only=True):
    """`messageMetadata`: merged by the SDK into `message.metadata`."""

    terminus: TurnNote


class MessageMetadata(Chunk, frozen=True, kw_only=True, tag="message-metadata"):
    message_metadata: Metadata


class ErrorChunk(Chunk, frozen=True, kw_only=True, tag="error"):
    error_text: str


class Finish(Chunk, frozen=True, kw_only=True, tag="finish"):
    finish_reason: UiFinishReason
    message_metadata: Metadata | None = None


class Abort(Chunk, frozen=True, kw_only=True, tag="abort"):
    """No `reason`: ai 5.0.110 validates `abort` strictly and rejects one (the stop reason is
    in the metadata sent just before it)."""


class StatusData(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """Where the turn is while its parts are held: `streaming` an attempt, `retrying` after
    `delay_ms` (attempt is the next one), `compacting` before the next attempt."""

    state: StatusState
    step: int
    attempt: int
    max_attempts: int | None = None
    delay_ms: int | None = None
    reason: str | None = None


class Status(Chunk, frozen=True, kw_only=True, tag="data-terminus-status"):
    id: str
    data: StatusData
    transient: bool


STATUS_ID: Final = "terminus-status"
RESET_ONLY: Final[tuple[type[Chunk], ...]] = (ResetStep,)

UiChunk = (
    Start
    | StartStep
    | FinishStep
    | ResetStep
    | TextStart
    | TextDelta
    | TextEnd
    | ReasoningStart
    | ReasoningDelta
    | ReasoningEnd
    | ToolInputStart
    | ToolInputAvailable
    | ToolInputError
    | ToolOutputAvailable
    | ToolOutputError
    | MessageMetadata
    | ErrorChunk
    | Finish
    | Abort
    | Status
)


def status(data: StatusData) -> Status:
    """A transient status part: it reaches `onData` and never enters the message."""
    return Status(id=STATUS_ID, data=data, transient=True)


def encode(chunk: Chunk) -> bytes:
    """The chunk's JSON, as one `data:` line carries it."""
    return msgspec.json.encode(chunk)
