"""The subscriber SDK's live view: what a UI should show of each turn now.

`LiveSession.apply(update)` folds the updates of one session, in order, into per-turn parts
(text, reasoning, tool calls) keyed by (step, attempt, part id). On `attempt_discarded` it drops
exactly the parts that frame lists, of that step and attempt only, so a retry that reuses a part
id, or an earlier step, keeps its text. `text(turn_id)` is then the text of the parts still kept,
in the order they started: once the turn is finished it equals the persisted message's text.
A turn's status ends `finished`, `cancelled` (a `turn_finished` whose stop reason is `cancelled`:
the producer or a user stopped it) or `failed`; `TurnStatus` is in the published contract
(docs/contract), which the TypeScript `LiveSession` takes its values from.
An update at or before the last applied cursor is skipped, so feeding one twice is harmless.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, assert_never

from terminus.events.errors import LLMErrorPayload
from terminus.events.outbound import (
    AgentError,
    AgentMessageChunk,
    AgentThoughtChunk,
    AttemptDiscarded,
    CompactionRequiredFrame,
    MessageCommitted,
    Retrying,
    SessionUpdate,
    ToolCallFrame,
    ToolCallUpdate,
    ToolStatus,
    TurnFinished,
    TurnStatus,
)
from terminus.service.sdk.updates import Update, cursor_after

PartKind = Literal["text", "reasoning", "tool"]
PartKey = tuple[int, int, str]  # step, attempt, part id (a tool call's id for a tool)


@dataclass
class LivePart:
    """One part as streamed so far; a tool part also carries the call's latest state."""

    step: int
    attempt: int
    part_id: str
    kind: PartKind
    chunks: list[str] = field(default_factory=list)
    tool_name: str | None = None
    input: dict[str, Any] | None = None
    status: ToolStatus | None = None
    output: str | None = None
    error: str | None = None

    @property
    def text(self) -> str:
        return "".join(self.chunks)


@dataclass
class LiveTurn:
    """A turn's kept parts in the order they started, its status and how it ended."""

    turn_id: str
    parts: dict[PartKey, LivePart] = field(default_factory=dict)
    status: TurnStatus = "streaming"
    stop_reason: str | None = None
    error: LLMErrorPayload | None = None
    messages: list[str] = field(default_factory=list)  # ids of the committed message

    def text(self) -> str:
        return "".join(p.text for p in self.parts.values() if p.kind == "text")

    def reasoning(self) -> str:
        return "".join(p.text for p in self.parts.values() if p.kind == "reasoning")

    def part(self, step: int, attempt: int, part_id: str, kind: PartKind) -> LivePart:
        self.status = "streaming"
        key = (step, attempt, part_id)
        if key not in self.parts:
            self.parts[key] = LivePart(step, attempt, part_id, kind)
        return self.parts[key]

    def discard(self, frame: AttemptDiscarded) -> None:
        for part_id in frame.part_ids:
            self.parts.pop((frame.step, frame.attempt, part_id), None)


class LiveSession:
    """The live view of one session's turns, fed with `apply` in cursor order."""

    def __init__(self) -> None:
        self.turns: dict[str, LiveTurn] = {}
        self.cursor: str | None = None

    def apply(self, update: Update) -> bool:
        """Fold `update` in; False (and nothing changes) if it is not after the last one."""
        if self.cursor is not None and not cursor_after(update.cursor, self.cursor):
            return False
        self.cursor = update.cursor
        turn = self.turns.setdefault(update.turn_id, LiveTurn(update.turn_id))
        _fold(turn, update.frame)
        return True

    def text(self, turn_id: str) -> str:
        """The turn's text a UI should show now ("" for a turn not seen)."""
        turn = self.turns.get(turn_id)
        return turn.text() if turn else ""

    def reasoning(self, turn_id: str) -> str:
        turn = self.turns.get(turn_id)
        return turn.reasoning() if turn else ""

    def forget(self, turn_id: str) -> None:
        """Drop a turn the UI no longer shows (its later frames would start it anew)."""
        self.turns.pop(turn_id, None)


def _fold(turn: LiveTurn, frame: SessionUpdate) -> None:
    match frame:
        case AgentMessageChunk():
            turn.part(frame.step, frame.attempt, frame.part_id, "text").chunks.append(frame.delta)
        case AgentThoughtChunk():
            part = turn.part(frame.step, frame.attempt, frame.part_id, "reasoning")
            part.chunks.append(frame.delta)
        case ToolCallFrame() | ToolCallUpdate():
            _tool(turn, frame)
        case AttemptDiscarded():
            turn.discard(frame)
        case Retrying() | CompactionRequiredFrame():
            turn.status = "retrying"
        case MessageCommitted():
            if frame.message_id not in turn.messages:
                turn.messages.append(frame.message_id)
        case AgentError():
            turn.status, turn.error = "failed", frame.error
        case TurnFinished():
            turn.status = "cancelled" if frame.stopReason == "cancelled" else "finished"
            turn.stop_reason = frame.stopReason
        case _:
            assert_never(frame)


def _tool(turn: LiveTurn, frame: ToolCallFrame | ToolCallUpdate) -> None:
    part = turn.part(frame.step, frame.attempt, frame.tool_call_id, "tool")
    part.tool_name, part.status = frame.tool_name, frame.status
    part.input = frame.input if frame.input is not None else part.input
    if isinstance(frame, ToolCallUpdate):
        part.output, part.error = frame.output, frame.error
