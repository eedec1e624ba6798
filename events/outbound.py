"""What comes out of a turn (DESIGN section 4): session-update frames, commands and read models.

Frames are modelled on ACP `session/update` and tagged on `sessionUpdate`. `cursor` is the id of
the frame in its session stream; the core leaves it empty and the store fills it in on reading.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

from terminus.events.errors import LLMErrorPayload
from terminus.events.inbound import FinishReason, Usage

StopReason = Literal["end_turn", "max_tokens", "refusal", "cancelled", "error"]
TruncationReason = Literal[
    "missing_terminal", "empty_other", "empty_stop", "stalled", "unknown_finish"
]
ToolStatus = Literal["pending", "completed", "error"]


class Frame(msgspec.Struct, frozen=True, kw_only=True, tag_field="sessionUpdate"):
    """Identity shared by every session-update frame."""

    session_id: str
    turn_id: str
    cursor: str | None = None


class AgentMessageChunk(Frame, frozen=True, kw_only=True, tag="agent_message_chunk"):
    step: int
    attempt: int
    part_id: str
    delta: str


class AgentThoughtChunk(Frame, frozen=True, kw_only=True, tag="agent_thought_chunk"):
    step: int
    attempt: int
    part_id: str
    delta: str


class ToolCallFrame(Frame, frozen=True, kw_only=True, tag="tool_call"):
    step: int
    attempt: int
    tool_call_id: str
    tool_name: str
    input: dict[str, Any] | None = None
    status: ToolStatus = "pending"


class ToolCallUpdate(Frame, frozen=True, kw_only=True, tag="tool_call_update"):
    step: int
    attempt: int
    tool_call_id: str
    tool_name: str
    input: dict[str, Any] | None = None
    status: ToolStatus
    output: str | None = None
    error: str | None = None


class AttemptDiscarded(Frame, frozen=True, kw_only=True, tag="attempt_discarded"):
    step: int
    attempt: int
    part_ids: list[str]
    reason: str


class Retrying(Frame, frozen=True, kw_only=True, tag="retrying"):
    step: int
    attempt: int
    max_attempts: int
    delay_ms: int
    reason: str
    error: LLMErrorPayload | None = None


class CompactionRequiredFrame(Frame, frozen=True, kw_only=True, tag="compaction_required"):
    step: int
    attempt: int
    error: LLMErrorPayload


class MessageCommitted(Frame, frozen=True, kw_only=True, tag="message_committed"):
    message_id: str
    step: int


class AgentError(Frame, frozen=True, kw_only=True, tag="agent_error"):
    error: LLMErrorPayload
    stopReason: Literal["error"] = "error"


class TurnFinished(Frame, frozen=True, kw_only=True, tag="turn_finished"):
    stopReason: StopReason
    usage: Usage


# The frames that end a turn for its subscribers: a stream that follows one turn stops there.
TURN_ENDINGS: Final = (TurnFinished, AgentError)

SessionUpdate = (
    AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallFrame
    | ToolCallUpdate
    | AttemptDiscarded
    | Retrying
    | CompactionRequiredFrame
    | MessageCommitted
    | AgentError
    | TurnFinished
)

# What a frontend's live view (the `LiveSession` of both SDKs) says of a turn: its parts are
# streaming, a retry is coming, or how it ended. A `turn_finished` whose stopReason is
# `cancelled` is `cancelled`, never `finished`: a UI must not show a stopped answer as complete.
TurnStatus = Literal["streaming", "retrying", "finished", "cancelled", "failed"]


# Persisted message parts (read model).
class StepStartPart(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="step-start"):
    step: int


class TextPart(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="text"):
    part_id: str
    text: str


class ReasoningPart(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="reasoning"):
    part_id: str
    text: str
    signature: str | None = None


class ToolPart(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="tool"):
    tool_call_id: str
    name: str
    input: dict[str, Any] | None
    state: Literal["completed", "error", "incomplete"]
    output: str | None = None
    error: str | None = None


class StepFinishPart(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="step-finish"
):
    step: int
    finish_reason: FinishReason
    usage: Usage


MessagePart = StepStartPart | TextPart | ReasoningPart | ToolPart | StepFinishPart


class PersistedMessage(msgspec.Struct, frozen=True, kw_only=True):
    """An assistant message built only from attempts that ended with terminal proof."""

    message_id: str
    session_id: str
    turn_id: str
    role: Literal["assistant"] = "assistant"
    parts: list[MessagePart]
    finish_reason: FinishReason
    usage: Usage
    provider: str
    model: str

    def text(self) -> str:
        """The text of the answer: its text parts' text in order, joined with nothing between
        them, as `LiveSession.text` shows it; reasoning is left out (`reasoning()`), and so are
        tool calls and their results."""
        return "".join(part.text for part in self.parts if isinstance(part, TextPart))

    def reasoning(self) -> str:
        """The reasoning parts' text in order, joined the same way."""
        return "".join(part.text for part in self.parts if isinstance(part, ReasoningPart))


class PartialRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What a failed attempt produced, kept for inspection; never a committed message."""

    turn_id: str
    session_id: str
    step: int
    attempt: int
    parts: list[MessagePart]
    reason: str
    error: LLMErrorPayload


# Commands for producers (the commands stream).
class Command(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    session_id: str
    turn_id: str
    step: int
    attempt: int


class RetryScheduled(Command, frozen=True, kw_only=True, tag="retry_scheduled"):
    """Start `attempt` of `step` no earlier than `not_before_ms` (producer clock)."""

    delay_ms: int
    not_before_ms: int
    reason: str
    error: LLMErrorPayload | None = None


class CompactionRequired(Command, frozen=True, kw_only=True, tag="compaction_required"):
    """Compact the context, then start `attempt` of `step`."""

    error: LLMErrorPayload


class RequestedTool(msgspec.Struct, frozen=True, kw_only=True):
    """One complete tool call a step ended with, for the producer to run."""

    tool_call_id: str
    tool_name: str
    input: dict[str, Any]


class ToolsRequired(Command, frozen=True, kw_only=True, tag="tools_required"):
    """The step ended with proof and tool calls: run `tools`, publish their results, then start
    attempt 1 of `step` (the next one), or end the turn (`turn-ended`)."""

    tools: list[RequestedTool]


class ContinuationRequired(Command, frozen=True, kw_only=True, tag="continuation_required"):
    """The step ended with proof but the provider says the turn goes on (`reason`: the raw finish
    reason, e.g. Anthropic's `pause_turn`): send the step's content back as-is as attempt 1 of
    `step` (the next one), or end the turn (`turn-ended`)."""

    reason: str


TurnOutcome = Literal["finished", "failed", "cancelled"]


class TurnConcluded(Command, frozen=True, kw_only=True, tag="turn_concluded"):
    """The turn is final: produce nothing more for it, and abort a request still running (a
    cancelled turn). `step` and `attempt` are the turn's last; `message_id` names its persisted
    message if it has one (a proven step), `error` what failed it."""

    state: TurnOutcome
    stop_reason: StopReason
    message_id: str | None = None
    error: LLMErrorPayload | None = None


class TurnRefused(Command, frozen=True, kw_only=True, tag="turn_refused"):
    """The workers dead-lettered entry `entry_id`: it names a turn id that is no turn of this
    session (it never started, or another session's turn has that id). Nothing about this
    turn id will come for this session: stop, and start the turn under a new id. `step` and
    `attempt` are the refused event's; `reason` never names another session."""

    entry_id: str
    reason: str


ProducerCommand = (
    RetryScheduled
    | CompactionRequired
    | ToolsRequired
    | ContinuationRequired
    | TurnConcluded
    | TurnRefused
)
