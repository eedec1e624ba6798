"""How the demo tells one turn: every line in the order the turn lived it, and the text of an
attempt that had no proof shown withdrawn, with the reason, before the retry's answer.

A worker's commit writes the turn's state changes and its frames to two streams in one Lua
script, and the watcher reads both with one XREAD, so a read holds whole commits. Inside a read,
`story_key` puts the entries back in the order of the story: an attempt starts, streams, ends,
is discarded, the retry is announced, the next attempt starts. Each stream is already in that
order, so sorting a read by the key (a stable sort) never reorders one stream's entries; printing
transitions first and frames after had put a later attempt's start before an earlier one's
discard whenever a read held both.
"""

from __future__ import annotations

import asyncio
from typing import Final, TextIO

from terminus.events.outbound import (
    AgentError,
    AgentMessageChunk,
    AgentThoughtChunk,
    AttemptDiscarded,
    CompactionRequiredFrame,
    Retrying,
    SessionUpdate,
    ToolCallFrame,
    ToolCallUpdate,
    TurnFinished,
)
from terminus.service.cli.render import one_line, printable
from terminus.statemachines.outputs import Transition

Entry = Transition | SessionUpdate
END: Final = 1 << 30  # after every attempt of every step
PREVIEW: Final = 100
# Why an attempt's parts were withdrawn, by the reason its `attempt_discarded` frame gives.
WHY: Final = {
    "missing_terminal": "the stream closed before the provider's own end-of-answer event, so "
    "nothing proves the text was the whole answer",
    "empty_other": "the stream ended with a finish the SDK made up (reason `other`, no output "
    "tokens), not one the provider sent",
    "empty_stop": "the provider said `stop` and sent no output",
    "stalled": "the stream went silent past the stall timeout",
    "unknown_finish": "the provider ended with a finish reason no table knows, which proves "
    "nothing",
    "context_overflow": "the prompt no longer fits the model's context; the producer compacts it",
}
ERROR_WHY: Final = "the provider answered with an error instead of an answer"


def story_key(entry: Entry) -> tuple[int, int, int]:
    """Where `entry` falls in its turn's story: (step, attempt, phase)."""
    match entry:
        case Transition(trigger="start_attempt"):
            return entry.step, entry.attempt, 0
        case AgentMessageChunk() | AgentThoughtChunk() | ToolCallFrame() | ToolCallUpdate():
            return entry.step, entry.attempt, 1
        case Transition():
            return entry.step, entry.attempt, 2
        case AttemptDiscarded() | CompactionRequiredFrame():
            return entry.step, entry.attempt, 3
        case Retrying():  # announces the next attempt: it ends the one before
            return entry.step, entry.attempt - 1, 4
        case _:
            return END, 0, 0


class Story:
    """One turn's lines on `stream`, and what the demo's producer waits for."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.texts: dict[str, str] = {}  # what each part streamed, by part id
        self.open_part: str | None = None  # whose streamed text the current line shows
        self.final_state = ""
        self.done = asyncio.Event()
        self.retry_shown = asyncio.Event()

    def tell(self, entries: list[Entry]) -> None:
        """Print `entries` (whole commits) in story order."""
        for entry in sorted(entries, key=story_key):
            if isinstance(entry, Transition):
                self._transition(entry)
            else:
                self._frame(entry)

    def line(self, text: str) -> None:
        """One line of the story, after the streamed text, if a line of it is open."""
        self._close_text()
        print(f"    {text}", file=self.stream, flush=True)

    def _transition(self, t: Transition) -> None:
        self.line(f"step {t.step} attempt {t.attempt}: {t.source} -> {t.dest}  ({t.trigger})")
        if t.dest in ("finished", "failed", "cancelled"):
            self.final_state = t.dest

    def _frame(self, frame: SessionUpdate) -> None:
        match frame:
            case AgentMessageChunk() | AgentThoughtChunk():
                self._stream_text(frame)
            case AttemptDiscarded():
                self._withdraw(frame)
            case Retrying():
                self.line(_retrying_text(frame))
                self.retry_shown.set()
            case AgentError():
                e = frame.error
                self.line(f"agent_error {e.type} (retryable={e.retryable}): {e.message}")
                self.done.set()
            case TurnFinished():
                self.line(f"turn_finished: {frame.stopReason}")
                self.done.set()

    def _stream_text(self, chunk: AgentMessageChunk | AgentThoughtChunk) -> None:
        if self.open_part != chunk.part_id:
            self._close_text()
            kind = "text" if isinstance(chunk, AgentMessageChunk) else "thinking"
            self.stream.write(f"    attempt {chunk.attempt} streams {kind}: ")
            self.open_part = chunk.part_id
        self.texts[chunk.part_id] = self.texts.get(chunk.part_id, "") + chunk.delta
        self.stream.write(one_line(printable(chunk.delta)))
        self.stream.flush()

    def _close_text(self) -> None:
        if self.open_part is not None:
            self.stream.write("\n")
            self.open_part = None

    def _withdraw(self, frame: AttemptDiscarded) -> None:
        head = f"attempt {frame.attempt} discarded ({frame.reason})"
        withdrawn = [self.texts[p] for p in frame.part_ids if p in self.texts]
        if withdrawn:
            text = "".join(withdrawn)
            self.line(f"{head}: its {len(text)} streamed characters leave every screen")
            self.line(f"    withdrawn: {_clip(text)!r}")
        else:
            self.line(f"{head}: nothing had streamed")
        self.line(f"    why: {WHY.get(frame.reason, ERROR_WHY)}")


def _retrying_text(frame: Retrying) -> str:
    text = f"retrying as attempt {frame.attempt} in {frame.delay_ms} ms: {frame.reason}"
    if frame.error is not None:
        text += f" ({one_line(printable(frame.error.message), PREVIEW)})"
    return text


def _clip(text: str, width: int = PREVIEW) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
