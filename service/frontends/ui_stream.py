"""One turn's session frames as the AI SDK UI message stream: a pure fold (DESIGN section 7).

    start (messageId: the persisted message's id, msg-<turn>)
    per proven step: start-step, its parts, finish-step
    end: finish (stop reason and metadata) | message-metadata, error, finish("error") | abort

`hold` sends an attempt's parts when `message_committed` proves its step, and only a transient
`data-terminus-status` before; `reset` sends them live, one `start-step` per step, and a
`reset-step` when `attempt_discarded` withdraws an attempt that showed something (the retry goes
on under the same `start-step`). A turn that fails or is cancelled withdraws what its unproven
attempt showed, so the message a client ends with is always the proven one.

A batch of frames is read as a whole (`apply_all`): an attempt it already discards is skipped,
not sent and withdrawn, so a stream that resumes or replays a turn never shows a discarded
attempt, in either mode. In `hold` the chunks do not depend on how the frames are batched.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, Literal, TypeGuard, assert_never

import msgspec

from terminus.events.outbound import (
    TURN_ENDINGS,
    AgentError,
    AgentMessageChunk,
    AgentThoughtChunk,
    AttemptDiscarded,
    CompactionRequiredFrame,
    MessageCommitted,
    Retrying,
    SessionUpdate,
    StopReason,
    ToolCallFrame,
    ToolCallUpdate,
    TurnFinished,
)
from terminus.service.frontends.attempts import AttemptContent, ContentFrame
from terminus.service.frontends.chunks import (
    Abort,
    Chunk,
    ErrorChunk,
    Finish,
    FinishStep,
    MessageMetadata,
    Metadata,
    ResetStep,
    Start,
    StartStep,
    StatusData,
    TurnNote,
    UiFinishReason,
    status,
)
from terminus.statemachines.projection import message_id_of

Mode = Literal["hold", "reset"]
MODES: Final[tuple[Mode, ...]] = ("hold", "reset")
FINISH_REASONS: Final[dict[StopReason, UiFinishReason]] = {
    "end_turn": "stop",
    "max_tokens": "length",
    "refusal": "content-filter",
    "error": "error",
    "cancelled": "other",
}
Key = tuple[int, int]  # (step, attempt)
CONTENT: Final = (AgentMessageChunk, AgentThoughtChunk, ToolCallFrame, ToolCallUpdate)


class UiStream:
    """The UI message chunks of one turn, frame by frame; the same frames give the same chunks."""

    def __init__(self, session_id: str, turn_id: str, mode: Mode = "hold") -> None:
        self.turn_id, self.mode = turn_id, mode
        self.note = TurnNote(session_id=session_id, turn_id=turn_id)
        self.attempts: dict[Key, AttemptContent] = {}  # unproven, not discarded
        self.proven: dict[Key, AttemptContent] = {}
        self.proven_calls: set[str] = set()
        self.skipped: set[Key] = set()
        self.opened_steps: set[int] = set()  # reset: steps whose start-step was sent
        self.ended = False

    def opening(self) -> list[Chunk]:
        """What the stream starts with, before any frame: the message id a reload will find."""
        meta = msgspec.to_builtins(Metadata(terminus=self.note))
        return [Start(message_id=message_id_of(self.turn_id), message_metadata=meta)]

    def apply_all(self, frames: Sequence[SessionUpdate]) -> list[Chunk]:
        """The chunks of a batch; an attempt the batch itself shows to be discarded, or left
        unproven by the turn's end, is not shown."""
        self.skipped |= self._unproven(frames)
        return [chunk for frame in frames for chunk in self.apply(frame)]

    def _unproven(self, frames: Sequence[SessionUpdate]) -> set[Key]:
        mine = [f for f in frames if f.turn_id == self.turn_id]
        gone = {(f.step, f.attempt) for f in mine if isinstance(f, AttemptDiscarded)}
        if not any(isinstance(f, TURN_ENDINGS) for f in mine):
            return gone
        # Once a step is proven its other attempts were all discarded: at the end, an attempt
        # of a step never proven is the one the turn failed or was cancelled in.
        proven = {step for step, _ in self.proven} | {
            f.step for f in mine if isinstance(f, MessageCommitted)
        }
        shown = {(f.step, f.attempt) for f in mine if isinstance(f, CONTENT)}
        return gone | {key for key in shown if key[0] not in proven}

    def apply(self, frame: SessionUpdate) -> list[Chunk]:
        """The chunks one frame adds; none for another turn's frame or after the end."""
        if frame.turn_id != self.turn_id or self.ended:
            return []
        match frame:
            case AgentMessageChunk() | AgentThoughtChunk() | ToolCallFrame() | ToolCallUpdate():
                return self._content(frame)
            case AttemptDiscarded():
                return self._discarded(frame)
            case Retrying():
                return self._retrying(frame)
            case CompactionRequiredFrame():
                self._count(compactions=self.note.compactions + 1)
                return [
                    status(StatusData(state="compacting", step=frame.step, attempt=frame.attempt))
                ]
            case MessageCommitted():
                return self._committed(frame.step)
            case AgentError():
                return self._failed(frame)
            case TurnFinished():
                return self._finished(frame)
            case _:
                assert_never(frame)

    def _content(self, frame: ContentFrame) -> list[Chunk]:
        key = (frame.step, frame.attempt)
        proven = self.proven.get(key)
        if proven is not None:  # an outcome that came after its step's proof
            proven.take(frame)
            return proven.live(frame)
        content, out = self._attempt(key)
        if key in self.skipped:  # its status stays: a held stream is the same however batched
            return out
        if _carried(frame, self.proven_calls, content):  # an earlier step's call: at the proof
            content.carried[frame.tool_call_id] = frame
            return out
        content.take(frame)
        if self.mode == "reset":
            out += self._open_step(frame.step)
            out += content.live(frame)
            content.sent = True
        return out

    def _attempt(self, key: Key) -> tuple[AttemptContent, list[Chunk]]:
        """The attempt's content, and the status that announces a new attempt."""
        content = self.attempts.get(key)
        if content is not None:
            return content, []
        content = self.attempts[key] = AttemptContent(step=key[0], attempt=key[1])
        return content, [status(StatusData(state="streaming", step=key[0], attempt=key[1]))]

    def _open_step(self, step: int) -> list[Chunk]:
        if step in self.opened_steps:
            return []
        self.opened_steps.add(step)
        return [StartStep()]

    def _discarded(self, frame: AttemptDiscarded) -> list[Chunk]:
        self._count(discarded=self.note.discarded + 1)
        content = self.attempts.pop((frame.step, frame.attempt), None)
        return [ResetStep()] if content is not None and content.sent else []

    def _retrying(self, frame: Retrying) -> list[Chunk]:
        self._count(retries=self.note.retries + 1)
        data = StatusData(
            state="retrying",
            step=frame.step,
            attempt=frame.attempt,
            max_attempts=frame.max_attempts,
            delay_ms=frame.delay_ms,
            reason=frame.reason,
        )
        return [status(data)]

    def _committed(self, step: int) -> list[Chunk]:
        """The step's surviving attempt is proven: show it (hold) or close it (reset)."""
        self._count(steps=self.note.steps + 1)
        out = self._open_step(step) if self.mode == "reset" else [StartStep()]
        for key in sorted(k for k in self.attempts if k[0] == step):
            content = self.proven[key] = self.attempts.pop(key)
            self.proven_calls |= set(content.tools)
            out += content.closing() if self.mode == "reset" else content.rendered()
        return [*out, FinishStep()]

    def _withdrawn(self) -> list[Chunk]:
        """Reset: take back what an attempt left unproven by the turn's end showed."""
        shown = any(content.sent for content in self.attempts.values())
        self.attempts.clear()
        return [ResetStep()] if shown else []

    def _failed(self, frame: AgentError) -> list[Chunk]:
        self.ended = True
        self._count(stop_reason="error", error=frame.error)
        return [
            *self._withdrawn(),
            MessageMetadata(message_metadata=Metadata(terminus=self.note)),
            ErrorChunk(error_text=frame.error.message),
            Finish(finish_reason="error"),
        ]

    def _finished(self, frame: TurnFinished) -> list[Chunk]:
        self.ended = True
        self._count(stop_reason=frame.stopReason, usage=frame.usage)
        metadata = Metadata(terminus=self.note)
        if frame.stopReason == "cancelled":
            return [
                *self._withdrawn(),
                MessageMetadata(message_metadata=metadata),
                Abort(),
            ]
        reason = FINISH_REASONS[frame.stopReason]
        return [*self._withdrawn(), Finish(finish_reason=reason, message_metadata=metadata)]

    def _count(self, **changes: object) -> None:
        self.note = msgspec.structs.replace(self.note, **changes)


def _carried(
    frame: ContentFrame, proven_calls: set[str], content: AttemptContent
) -> TypeGuard[ToolCallUpdate]:
    """An outcome for a call an earlier step made: it changes a part already shown as proven,
    so it waits for this attempt's proof, which a reset could not take back."""
    return (
        isinstance(frame, ToolCallUpdate)
        and frame.tool_call_id in proven_calls
        and frame.tool_call_id not in content.tools
    )


def project(
    session_id: str, turn_id: str, frames: Iterable[SessionUpdate], mode: Mode = "hold"
) -> list[Chunk]:
    """Every chunk of the turn's frames read as one batch: what a client that connects now
    receives, from `start`."""
    stream = UiStream(session_id, turn_id, mode)
    return stream.opening() + stream.apply_all(list(frames))
